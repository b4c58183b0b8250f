"""Training SimBERT on pairs of similar questions.

Loss = seq2seq cross-entropy on B (each pair in both directions, A->B and B->A, in one batch)
     + in-batch contrastive loss on the L2-normalised [CLS] vectors: similarity x 30, the diagonal
       masked, target = the row's pair partner.
"""
from __future__ import annotations

import itertools
import json
import logging
import os
import random
from dataclasses import asdict, dataclass, field
from typing import Sequence

import numpy as np
import torch
import torch.nn.functional as F

from ..errors import FAQSearchError
from .model import SimBert

log = logging.getLogger(__name__)

SCALE = 30.0
STATE_NAME = "trainer_state.pt"
PIECE = 16  # sequences: Banking77's pairs padded to a batch's longest are nearly half padding; pieces of 8
# were quicker there but slower than one batch on shorter, more even questions (sample_data)


# ---------------------------------------------------------------------- pairs
def pairs_from_groups(groups: Sequence[Sequence[str]], max_per_group: int = 20, seed: int = 0) -> list[tuple[str, str]]:
    """Pairs of questions that share an answer (at most ``max_per_group`` per FAQ)."""
    rng = random.Random(seed)
    out = []
    for g in groups:
        g = list(dict.fromkeys(q for q in g if q.strip()))
        combos = list(itertools.combinations(g, 2))
        rng.shuffle(combos)
        out += combos[:max_per_group]
    return out


def mine_pairs(texts: Sequence[str], encoder, threshold: float = 0.8, max_per_text: int = 2,
               batch_size: int = 64) -> list[tuple[str, str]]:
    """Pairs found by retrieval: each text with its nearest neighbours whose cosine >= threshold
    (for people with many questions but no pairs)."""
    texts = list(dict.fromkeys(t for t in texts if t.strip()))
    v = np.asarray(encoder.encode(texts, batch_size=batch_size), dtype=np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True) + 1e-12
    seen, out = set(), []
    for s in range(0, len(texts), 1024):
        sims = v[s:s + 1024] @ v.T
        for r, row in enumerate(sims):
            i = s + r
            row[i] = -1
            for j in np.argsort(-row)[:max_per_text]:
                if row[j] < threshold:
                    break
                key = (min(i, j), max(i, j))
                if key not in seen:
                    seen.add(key)
                    out.append((texts[i], texts[j]))
    return out


def question_groups(store=None, corpus: str | None = None) -> list[list[str]]:
    """The questions of each FAQ, from an index's store (any backend) and/or a corpus file."""
    from ..corpus import read_corpus

    out: list[list[str]] = []
    if store is not None:
        groups: dict[str, list[str]] = {}
        for _, fid, text in store.all_questions():
            groups.setdefault(fid, []).append(text)
        out += list(groups.values())
    if corpus:
        out += [list(f.questions) for f in read_corpus(corpus)]
    return out


def teacher_pairs(generator, questions: Sequence[str], n: int = 3, scorer=None, candidates: int = 24,
                  min_similarity: float | None = None, seed: int | None = 0, progress: bool = False) -> list[tuple[str, str]]:
    """(question, paraphrase) pairs written by a generator (distillation: a causal LM teaches the
    UniLM model in-domain rewording); each paraphrase passed the recipe's screen."""
    from ..progress import progress_bar
    from ..generators import paraphrase
    from ..generators.recipe import DEFAULT_MIN_SIMILARITY

    min_similarity = DEFAULT_MIN_SIMILARITY if min_similarity is None else min_similarity
    out = []
    with progress_bar(len(questions), progress, "teacher paraphrases") as bar:
        for q in questions:
            out += [(q, p.text) for p in paraphrase(generator, q, n=n, candidates=candidates, scorer=scorer,
                                                    min_similarity=min_similarity, seed=seed)]
            bar.update(1)
    return out


def write_pairs(path: str, pairs: Sequence[tuple[str, str]]) -> None:
    """A pairs file that ``--pairs`` reads back (CSV: sentence1, sentence2)."""
    import csv

    tmp = path + ".tmp"
    with open(tmp, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["sentence1", "sentence2"])
        w.writerows(pairs)
    os.replace(tmp, path)


def collect_pairs(store=None, corpus: str | None = None, pairs_file: str | None = None,
                  mine: str | None = None, mine_threshold: float = 0.8, encoder=None) -> list[tuple[str, str]]:
    """Training pairs from (a) an index's or a corpus's FAQ question groups, (b) a pairs file,
    (c) retrieval over a question list (nearest neighbours above ``mine_threshold``)."""
    from ..corpus import read_rows, read_texts

    out: list[tuple[str, str]] = []
    if store is not None or corpus:
        out += pairs_from_groups(question_groups(store, corpus))
    if pairs_file:
        for line, row in read_rows(pairs_file):
            a = row.get("sentence1", row.get("text1", row.get("question1")))
            b = row.get("sentence2", row.get("text2", row.get("question2")))
            if a is None or b is None:
                from ..errors import CorpusError

                raise CorpusError(pairs_file, line, "expected columns sentence1 and sentence2 (or text1/text2)")
            label = row.get("label")
            if label not in (None, "") and float(label) <= 0:
                continue  # a 0/1 labelled file: keep the similar pairs only
            out.append((str(a).strip(), str(b).strip()))
    if mine:
        if encoder is None:
            from ..encoders import load_encoder

            encoder = load_encoder("minilm")
        out += mine_pairs(read_texts(mine), encoder, threshold=mine_threshold)
    return [(a, b) for a, b in out if a and b and a != b]


# ---------------------------------------------------------------------- batches
def encode_pairs(tokenizer, pairs: Sequence[tuple[str, str]], max_length: int = 64) -> dict[str, torch.Tensor]:
    """Both directions of every pair: rows 2i (a->b) and 2i+1 (b->a) are partners."""
    firsts, seconds = [], []
    for a, b in pairs:
        firsts += [a, b]
        seconds += [b, a]
    return tokenizer(firsts, seconds, padding=True, truncation=True, max_length=max_length, return_tensors="pt",
                     return_token_type_ids=True)


def by_length(lengths: Sequence[int], size: int | None) -> list[list[int]]:
    """Positions ``0..len(lengths)-1`` in pieces of ``size`` (the last one shorter), shortest first, ties
    in order, so that each piece pads to a length near its own; ``None`` (or a size that splits nothing):
    one piece, in order. Shared by both trainers (:func:`losses`; :func:`faqsearch.finetune.pieces`)."""
    if not size or size < 1 or size >= len(lengths):
        return [list(range(len(lengths)))]
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    return [order[i:i + size] for i in range(0, len(order), size)]


def in_order(rows: list, parts: list[list[int]]):
    """The tensors computed piece by piece (one per part of :func:`by_length`) as one tensor in the
    original order."""
    order = torch.tensor([i for part in parts for i in part], device=rows[0].device)
    return torch.cat(rows)[torch.argsort(order)]


def losses(model: SimBert, batch: dict[str, torch.Tensor], piece: int | None = None
           ) -> tuple[torch.Tensor, torch.Tensor]:
    """(seq2seq cross-entropy on B, contrastive loss on [CLS]). ``piece``: run the sequences in
    length-sorted pieces of this many (:func:`by_length`, as the encoder trainer does), each cut to its
    own longest (a right-padded batch only): without dropout, the same losses as one padded batch (the
    cross-entropy is the mean over every B token of the batch, the [CLS] vectors are put back in order;
    with dropout, alike in distribution), with less padding to run through."""
    ids, tt, am = batch["input_ids"], batch["token_type_ids"], batch["attention_mask"]
    lengths = am.sum(1).tolist()
    parts = by_length(lengths, piece if bool(am[:, 0].all()) else None)  # right padding (tokens first) only
    ce_sum, n_b, cls = 0.0, 0, []
    for part in parts:
        rows = torch.tensor(part, device=ids.device)
        cut = max(lengths[i] for i in part) if len(parts) > 1 else ids.shape[1]
        p_ids, p_tt, p_am = ids[rows, :cut], tt[rows, :cut], am[rows, :cut]
        h = model.seq2seq(p_ids, p_tt, p_am)
        logits = model.logits(h[:, :-1])
        target = p_ids[:, 1:]
        in_b = (p_tt[:, 1:] == 1) & (p_am[:, 1:] == 1)  # predict every B token (and its [SEP]) from the one before
        ce_sum = ce_sum + F.cross_entropy(logits[in_b], target[in_b], reduction="sum")
        n_b += int(in_b.sum())
        cls.append(h[:, 0])
    cls = F.normalize(in_order(cls, parts), dim=-1)  # back in the batch's order
    ce = ce_sum / max(1, n_b)
    sims = cls @ cls.T * SCALE
    sims = sims.masked_fill(torch.eye(len(sims), dtype=torch.bool, device=sims.device), -1e4)
    partner = torch.arange(len(sims), device=sims.device) ^ 1
    return ce, F.cross_entropy(sims, partner)


@dataclass
class TrainConfig:
    epochs: int = 3
    batch_size: int = 16  # pairs per batch (32 sequences)
    lr: float = 5e-5
    warmup: float = 0.1  # share of steps
    max_length: int = 64
    clip: float = 1.0
    seed: int = 0
    contrastive_weight: float = 1.0
    piece: int | None = PIECE  # on a CPU, a step's sequences run in pieces of this many, of similar lengths (None: one)


@dataclass
class TrainLog:
    steps: list[dict[str, float]] = field(default_factory=list)
    epochs: list[dict[str, float]] = field(default_factory=list)


def train(model: SimBert, pairs: Sequence[tuple[str, str]], out_dir: str, config: TrainConfig | None = None,
          resume: bool = False, progress: bool = False, device: str | None = None) -> TrainLog:
    """Train in place; save a checkpoint (HF directory + optimiser state) at the end of each epoch.

    With ``resume``, continue from the last checkpoint in ``out_dir``. ``device``: 'auto' (CUDA
    when torch sees a GPU), 'cpu' or 'cuda'; None: the process's choice (the CLI's --device).
    """
    from tqdm.auto import tqdm
    from transformers import get_linear_schedule_with_warmup

    from ..encoders.device import resolve_device

    cfg = config or TrainConfig()
    if len(pairs) < 2:
        raise FAQSearchError("need at least 2 pairs of similar questions to train")
    torch.manual_seed(cfg.seed)
    rng = random.Random(cfg.seed)
    device = resolve_device(device)
    model.to(device)
    piece = cfg.piece if torch.device(device).type == "cpu" else None  # a GPU runs a padded batch at once
    steps_per_epoch = max(1, len(pairs) // cfg.batch_size)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.01)
    sched = get_linear_schedule_with_warmup(opt, int(cfg.warmup * steps_per_epoch * cfg.epochs),
                                            steps_per_epoch * cfg.epochs)
    start_epoch, history = 0, TrainLog()
    state_path = os.path.join(out_dir, STATE_NAME)
    if resume:
        if not os.path.exists(state_path):
            raise FAQSearchError(f"nothing to resume in {out_dir} (no {STATE_NAME}); train without --resume")
        state = torch.load(state_path, map_location=device, weights_only=False)
        opt.load_state_dict(state["optimizer"])
        sched.load_state_dict(state["scheduler"])
        start_epoch = state["epoch"]
        history = TrainLog(**state["log"])
        rng.setstate(state["rng"])
        torch.set_rng_state(state["torch_rng"])
    model.head_trained = True
    for epoch in range(start_epoch, cfg.epochs):
        model.train()
        order = list(pairs)
        rng.shuffle(order)
        sums = {"seq2seq": 0.0, "contrastive": 0.0}
        bar = tqdm(range(steps_per_epoch), disable=not progress, desc=f"epoch {epoch + 1}/{cfg.epochs}", leave=False)
        for step in bar:
            chunk = order[step * cfg.batch_size:(step + 1) * cfg.batch_size]
            batch = {k: v.to(device) for k, v in encode_pairs(model.tokenizer, chunk, cfg.max_length).items()}
            ce, con = losses(model, batch, piece)
            loss = ce + cfg.contrastive_weight * con
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.clip)
            opt.step()
            sched.step()
            sums["seq2seq"] += ce.item()
            sums["contrastive"] += con.item()
            history.steps.append({"epoch": epoch, "seq2seq": ce.item(), "contrastive": con.item()})
            bar.set_postfix(seq2seq=f"{ce.item():.3f}", contrastive=f"{con.item():.3f}")
        history.epochs.append({k: v / steps_per_epoch for k, v in sums.items()})
        log.info("epoch %d: seq2seq %.4f, contrastive %.4f", epoch + 1, *history.epochs[-1].values())
        model.save_pretrained(out_dir, {"train": asdict(cfg), "pairs": len(pairs), "epochs_done": epoch + 1})
        torch.save({"optimizer": opt.state_dict(), "scheduler": sched.state_dict(), "epoch": epoch + 1,
                    "log": asdict(history), "rng": rng.getstate(), "torch_rng": torch.get_rng_state()}, state_path)
        with open(os.path.join(out_dir, "train_log.json"), "w") as fh:
            json.dump(asdict(history), fh)
    model.eval()
    return history
