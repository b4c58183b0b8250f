"""Paraphrase generation with SimBERT: sample many, re-encode, keep the most similar."""
from __future__ import annotations

import re
from dataclasses import dataclass

import torch

from .model import SimBert, unilm_mask


@dataclass
class Paraphrase:
    text: str
    score: float  # cosine of [CLS] vectors (the SimBERT model's own) with the input


def _normal(text: str) -> str:
    return re.sub(r"[\W_]+", " ", text.lower()).strip()


def _filter(logits: torch.Tensor, top_k: int, top_p: float) -> torch.Tensor:
    if top_k > 0:
        kth = torch.topk(logits, min(top_k, logits.shape[-1])).values[..., -1, None]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if 0 < top_p < 1:
        logits = logits.masked_fill(~_nucleus(logits, top_p), float("-inf"))
    return logits


def _nucleus(logits: torch.Tensor, top_p: float) -> torch.Tensor:
    """Where each row keeps its smallest set of tokens whose probability mass reaches ``top_p``.

    The set a sort of the whole vocabulary gives, looked for among the 64, then the 1,024 most
    likely tokens first (a trained model's mass mostly sits in a few dozen); a sort of 32 x 30k logits
    took 34 ms a step here (2 ms for the 64). A flat distribution falls back to the sort.
    """
    probs = logits.softmax(-1)
    for k in (64, 1024, probs.shape[-1]):
        k = min(k, probs.shape[-1])
        top, idx = torch.topk(probs, k) if k < probs.shape[-1] else torch.sort(probs, descending=True)
        before = top.cumsum(-1) - top  # mass of the more likely tokens
        if k == probs.shape[-1] or bool((before[..., -1] > top_p).all()):  # every row's set ended inside these k
            break
    return torch.zeros_like(probs, dtype=torch.bool).scatter(-1, idx, before <= top_p)


def _banned(model: SimBert) -> list[int]:
    tok = model.tokenizer
    return [i for i in (tok.cls_token_id, tok.pad_token_id, tok.mask_token_id, tok.unk_token_id) if i is not None]


@torch.inference_mode()
def prefix(model: SimBert, text: str, max_length: int = 64):
    """Encode ``[CLS] text [SEP]`` once: its ids, last-token logits and the per-layer KV cache."""
    enc = model.tokenizer(text, truncation=True, max_length=max_length, return_tensors="pt")
    ids = enc["input_ids"].to(model.device)
    tt = torch.zeros_like(ids)
    h, cache = model.forward(ids, tt, unilm_mask(tt, torch.ones_like(ids)), return_cache=True)
    return ids, model.logits(h[:, -1]), cache


@torch.inference_mode()
def next_logits_uncached(model: SimBert, a_ids: torch.Tensor, b_ids: torch.Tensor) -> torch.Tensor:
    """Logits for the next B token, recomputing the whole sequence (the reference for the cache)."""
    ids = torch.cat([a_ids.expand(len(b_ids), -1), b_ids], dim=1)
    tt = torch.cat([torch.zeros_like(a_ids).expand(len(b_ids), -1), torch.ones_like(b_ids)], dim=1)
    h = model.forward(ids, tt, unilm_mask(tt, torch.ones_like(ids)))
    return model.logits(h[:, -1])


@torch.inference_mode()
def sample(model: SimBert, text: str, n: int = 32, max_new_tokens: int = 32, top_k: int = 0, top_p: float = 0.95,
           temperature: float = 1.0, seed: int | None = None, use_cache: bool = True,
           return_steps: bool = False, return_ended: bool = False):
    """Sample ``n`` continuations B of ``[CLS] text [SEP]``, batched, stopping at [SEP].

    With ``use_cache`` the prefix and earlier B tokens are encoded once and each step runs only
    the new token; without it every step re-runs the whole sequence (same result, slower).
    """
    model.eval()
    device = model.device
    gen = torch.Generator(device=device).manual_seed(seed) if seed is not None else None
    sep = model.tokenizer.sep_token_id
    banned = _banned(model)
    a_ids, logits, cache = prefix(model, text)
    la = a_ids.shape[1]
    logits = logits.expand(n, -1)
    cache = [type(c)(c.key.expand(n, -1, -1, -1), c.value.expand(n, -1, -1, -1)) for c in cache]
    out = torch.empty((n, 0), dtype=torch.long, device=device)
    done = torch.zeros(n, dtype=torch.bool, device=device)
    steps = []
    for t in range(max_new_tokens):
        if return_steps:
            steps.append(logits.detach().cpu().clone())
        scores = logits.clone()
        scores[:, banned] = float("-inf")
        scores = _filter(scores / max(temperature, 1e-5), top_k, top_p)
        nxt = torch.multinomial(scores.softmax(-1), 1, generator=gen).squeeze(1)
        nxt = torch.where(done, torch.full_like(nxt, sep), nxt)
        out = torch.cat([out, nxt[:, None]], dim=1)
        done |= nxt == sep
        if bool(done.all()):
            break
        if use_cache:
            new = nxt[:, None]
            mask = torch.ones((n, 1, la + t + 1), dtype=torch.bool, device=device)
            h, cache = model.forward(new, torch.ones_like(new), mask, cache=cache, position_offset=la + t,
                                     return_cache=True)
            logits = model.logits(h[:, -1])
        else:
            logits = next_logits_uncached(model, a_ids, out)
    texts, ended = [], []
    for row in out.cpu().tolist():
        ended.append(sep in row)
        if sep in row:
            row = row[:row.index(sep)]
        texts.append(model.tokenizer.decode(row, skip_special_tokens=True).strip())
    if return_ended:
        return texts, ended
    return (texts, steps) if return_steps else texts


def paraphrase(model: SimBert, text: str, n: int = 5, candidates: int = 32, seed: int | None = None,
               top_p: float = 0.95, top_k: int = 0, temperature: float = 1.0) -> list[Paraphrase]:
    """The gen_synonyms recipe: sample many, drop duplicates and copies of the input, re-encode
    with the model's [CLS] vector and return the ``n`` most similar to the input."""
    seen = {_normal(text)}
    cands = []
    for c in sample(model, text, candidates, top_k=top_k, top_p=top_p, temperature=temperature, seed=seed):
        key = _normal(c)
        if key and key not in seen:
            seen.add(key)
            cands.append(c)
    if not cands:
        return []
    vecs = model.sentence_vectors([text] + cands)
    sims = (vecs[1:] @ vecs[0]).tolist()
    ranked = sorted(zip(cands, sims), key=lambda x: -x[1])[:n]
    return [Paraphrase(t, float(s)) for t, s in ranked]
