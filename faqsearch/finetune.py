"""Fine-tune the sentence encoder itself on the corpus's question groups (``faqsearch train --encoder``).

The SimBERT contrastive objective without the generation half: each pair (two questions of one FAQ)
is a positive, the other questions in the batch are negatives (except those of the same FAQ, which
are masked), on L2-normalised mean-pooled vectors, scale 30, both directions. The result is a plain
Hugging Face directory (plus ``faqsearch_encoder.json``) that ``ingest --model DIR`` uses like any
encoder (mean pooling; ONNX Runtime like the bundled model).
"""
from __future__ import annotations

import json
import os
import random
from dataclasses import dataclass
from typing import Sequence

from .errors import FAQSearchError
from .progress import progress_bar, transformers_bars_off

SCALE = 30.0
META = "faqsearch_encoder.json"
PIECE = 32  # texts: a batch's 128 Banking77 questions padded to its longest are two thirds padding


@dataclass
class EncoderTrainConfig:
    epochs: int = 1
    batch_size: int = 32  # pairs per batch
    lr: float = 2e-5
    warmup: float = 0.1
    max_length: int = 64
    seed: int = 0
    distinct: bool = False  # one pair per FAQ in a batch: every in-batch negative is another FAQ
    deadline: float | None = None  # time.monotonic() at which training stops, whatever the epochs
    prefix: str = ""  # put before every text, as the index's encoder does (e5-style models)
    precision: str = "auto"  # "auto": bf16 matmuls on a CPU where its first steps run faster so; "fp32"; "bf16"
    piece: int | None = PIECE  # on a CPU, a step's texts run in pieces of this many, of similar lengths (None: one)


PROBE_STEPS = 4  # auto precision: steps 1-4 alternate fp32 and bf16; the 3rd and 4th are timed
BF16_FASTER = 0.8  # bf16 is kept where a token of its step takes at most this share of an fp32 step's


class Plan:
    """The learning rate's schedule: linear warm-up, then linear decay to zero at the last step. A
    deadline moves that last step to where the pace of the steps since the first ``MARK`` says the
    time runs out (re-estimated each step, never past the planned steps), so that training stopped
    by its time budget still ends annealed."""

    MARK = PROBE_STEPS  # the first steps are slower (lazy set-up) and may run at another precision

    def __init__(self, steps: int, warmup: float, deadline: float | None):
        self.planned = self.total = steps
        self.warm, self.deadline = max(1, int(warmup * steps)), deadline
        self.started: float | None = None
        self._mark: tuple[int, float] | None = None

    def factor(self, step: int) -> float:
        if step < self.warm:
            return (step + 1) / self.warm
        return max(0.0, (self.total - step) / max(1, self.total - self.warm))

    def update(self, done: int, now: float) -> None:
        if self.deadline is None or done < 1 or self.started is None:
            return
        if done == self.MARK:
            self._mark = (done, now)
        since, then = self._mark if self._mark is not None and done > self._mark[0] else (0, self.started)
        pace = (now - then) / (done - since)
        fits = done + int(max(0.0, self.deadline - now) / max(pace, 1e-9))
        self.total = max(done + 1, min(self.planned, fits))


def batches(pairs: Sequence[tuple[str, str, int]], size: int, distinct: bool, rng: random.Random
            ) -> list[list[tuple[str, str, int]]]:
    """One epoch's batches of ``size`` pairs, shuffled; ``distinct``: no two pairs of one FAQ in a
    batch (pairs left over once fewer than 8 FAQs remain are dropped for the epoch)."""
    order = list(pairs)
    rng.shuffle(order)
    if not distinct:
        return [order[i:i + size] for i in range(0, max(1, len(order) - size + 1), size)]
    out, pool = [], order
    while pool:
        seen: set[int] = set()
        batch, rest = [], []
        for p in pool:
            if p[2] not in seen and len(batch) < size:
                seen.add(p[2])
                batch.append(p)
            else:
                rest.append(p)
        if len(batch) < min(8, size):
            break
        out.append(batch)
        pool = rest
    return out


def pieces(texts: Sequence[str], tokenizer, max_length: int, size: int | None) -> list[list[int]]:
    """:func:`by_length` over the texts' token counts. The same vectors as one padded batch, at a
    fraction of the work where lengths vary: a step of 128 Banking77 questions took 2.8 s padded to the
    longest and 1.3 s in pieces of 32 with MiniLM in bf16 (5.0 and 2.0 s in fp32), 12 and 7 s with mpnet
    in bf16 (this 2-core CPU)."""
    from .simbert.train import by_length

    if not size or size < 1 or size >= len(texts):
        return by_length([0] * len(texts), None)  # one piece: no need to tokenize
    lengths = [len(ids) for ids in tokenizer(list(texts), truncation=True, max_length=max_length)["input_ids"]]
    return by_length(lengths, size)


def group_pairs(groups: Sequence[Sequence[str]], max_per_group: int = 20,
                seed: int = 0) -> list[tuple[str, str, int]]:
    """(a, b, group index) pairs of questions that share an FAQ."""
    from .simbert.train import pairs_from_groups

    out = []
    for gi, g in enumerate(groups):
        out += [(a, b, gi) for a, b in pairs_from_groups([g], max_per_group, seed)]
    return out


def train_encoder(base: str, pairs: Sequence[tuple[str, str, int]], out_dir: str,
                  config: EncoderTrainConfig | None = None, progress: bool = False) -> list[float]:
    """Train ``base`` (a local directory or Hugging Face id) on grouped pairs; save to ``out_dir``.
    Returns the mean loss of each epoch (the last one cut short where the deadline came first)."""
    import time

    import torch
    import torch.nn.functional as F
    from transformers import AutoModel

    from .hub import load_pretrained
    from .simbert.train import in_order

    cfg = config or EncoderTrainConfig()
    if cfg.precision not in ("auto", "fp32", "bf16"):  # before the model loads
        raise FAQSearchError(f"precision must be auto, fp32 or bf16; got {cfg.precision!r}")
    if len(pairs) < 2:
        raise FAQSearchError("need at least 2 pairs of questions from the same FAQ to fine-tune the encoder "
                             "(the corpus needs FAQs with several questions)")
    torch.manual_seed(cfg.seed)
    rng = random.Random(cfg.seed)
    tokenizer, model = load_pretrained(base, AutoModel, what="encoder")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model.to(device)
    epochs = [batches(pairs, cfg.batch_size, cfg.distinct, rng) for _ in range(cfg.epochs)]
    steps = sum(len(e) for e in epochs)
    if not steps:
        raise FAQSearchError("too few FAQs with two or more questions to make a training batch")
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.01)
    plan = Plan(steps, cfg.warmup, cfg.deadline)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, plan.factor)
    # bf16 autocast (weights and optimizer stay fp32) where the CPU runs it natively; on CUDA fp32 as before
    precision = "fp32" if device == "cuda" and cfg.precision == "auto" else cfg.precision
    pace: dict[str, float] = {}
    piece = cfg.piece if device == "cpu" else None  # a GPU runs a padded batch at once

    def embed(texts, bf16: bool):
        """The texts' vectors, and the tokens the model ran on (padding included)."""
        texts = [cfg.prefix + t for t in texts]
        parts, out, padded = pieces(texts, tokenizer, cfg.max_length, piece), [], 0
        for part in parts:
            enc = tokenizer([texts[i] for i in part], padding=True, truncation=True, max_length=cfg.max_length,
                            return_tensors="pt").to(device)
            padded += enc["input_ids"].numel()
            with torch.autocast(device, dtype=torch.bfloat16, enabled=bf16):
                h = model(**enc).last_hidden_state
            h = h.float()
            m = enc["attention_mask"].unsqueeze(-1).to(h.dtype)
            out.append(F.normalize((h * m).sum(1) / m.sum(1).clamp(min=1e-9), dim=-1))
        return in_order(out, parts), padded  # back in the texts' order

    history: list[float] = []
    bar = progress_bar(steps, progress, "learning", unit="step")  # no tqdm (its thread, its lock) when it draws none
    step = 0
    plan.started = time.monotonic()
    try:
        for epoch, chunks in enumerate(epochs):
            if cfg.deadline is not None and time.monotonic() >= cfg.deadline:
                break
            model.train()
            total, done = 0.0, 0
            for chunk in chunks:
                if cfg.deadline is not None and time.monotonic() >= cfg.deadline:
                    break
                bf16 = precision == "bf16" or (precision == "auto" and step < PROBE_STEPS and step % 2 == 1)
                t0 = time.monotonic()
                both, padded = embed([p[0] for p in chunk] + [p[1] for p in chunk], bf16)  # one call: shorter pieces
                a, b = both[:len(chunk)], both[len(chunk):]
                groups = torch.tensor([p[2] for p in chunk], device=device)
                same = (groups[:, None] == groups[None, :]) & ~torch.eye(len(chunk), dtype=torch.bool, device=device)
                sims = (a @ b.T * SCALE).masked_fill(same, -1e4)  # another pair of the same FAQ is no negative
                target = torch.arange(len(chunk), device=device)
                loss = (F.cross_entropy(sims, target) + F.cross_entropy(sims.T, target)) / 2
                opt.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
                sched.step()
                step += 1
                if precision == "auto" and step in (PROBE_STEPS - 1, PROBE_STEPS):
                    pace["bf16" if bf16 else "fp32"] = (time.monotonic() - t0) / max(1, padded)  # a token's time:
                    # the two steps' texts differ in length
                    if step == PROBE_STEPS:
                        precision = "bf16" if pace["bf16"] <= BF16_FASTER * pace["fp32"] else "fp32"
                plan.update(step, time.monotonic())
                total, done = total + loss.item(), done + 1
                bar.update(1)
                bar.set_postfix(epoch=f"{epoch + 1}/{cfg.epochs}", loss=f"{loss.item():.3f}")
            if done:
                history.append(total / done)
    finally:
        bar.close()
    os.makedirs(out_dir, exist_ok=True)
    with transformers_bars_off():  # its "Writing model shards" bar: faqsearch draws its own
        model.save_pretrained(out_dir)
        tokenizer.save_pretrained(out_dir)
    with open(os.path.join(out_dir, META), "w", encoding="utf-8") as f:
        json.dump({"base": base, "pooling": "mean", "pairs": len(pairs), "epochs": cfg.epochs, "lr": cfg.lr,
                   "distinct": cfg.distinct, "loss": history, "precision": precision,
                   "steps": step, "piece": piece}, f, indent=1)
    return history
