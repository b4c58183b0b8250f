"""SimBERT: one BERT that retrieves (its [CLS] vector) and generates paraphrases (UniLM seq2seq).

Input ``[CLS] A [SEP] B [SEP]`` with segment ids 0 for A and 1 for B. The UniLM mask lets tokens
of A see all of A, and tokens of B see A and the B tokens before them. So the states of
``[CLS] A [SEP]`` do not depend on B: the [CLS] vector is a sentence vector of A, and B is decoded
left to right from A, reusing the keys and values of A and of earlier B tokens (KV cache).

The forward pass here is a plain re-statement of BERT over the weights of a transformers
``BertForMaskedLM`` (tested equal to transformers' own output), so that the mask and the cache are
ours and do not depend on transformers' internal attention plumbing.
"""
from __future__ import annotations

import json
import logging
import math
import os
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from ..progress import transformers_bars_off

log = logging.getLogger(__name__)

CONFIG_NAME = "faqsearch_simbert.json"


def unilm_mask(token_type_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Boolean (batch, query, key) mask: True where the query token may attend to the key token.

    With c = cumsum(segment ids), A tokens have c = 0 and the n-th B token c = n, so "key visible"
    is c[key] <= c[query]: A sees A only; B sees A and B up to itself. Padding keys are hidden.
    """
    c = torch.cumsum(token_type_ids, dim=1)
    allowed = c[:, None, :] <= c[:, :, None]
    return allowed & attention_mask[:, None, :].bool()


@dataclass
class LayerCache:
    key: torch.Tensor  # (batch, heads, length, head_dim)
    value: torch.Tensor


class SimBert(torch.nn.Module):
    """Wraps a transformers BertForMaskedLM and runs it with a UniLM mask and an optional KV cache."""

    def __init__(self, mlm, tokenizer, head_trained: bool = True):
        super().__init__()
        self.mlm = mlm
        self.tokenizer = tokenizer
        self.head_trained = head_trained
        cfg = mlm.config
        self.heads = cfg.num_attention_heads
        self.head_dim = cfg.hidden_size // cfg.num_attention_heads

    # ------------------------------------------------------------------ loading
    @classmethod
    def from_pretrained(cls, path: str) -> "SimBert":
        """Any BERT-family checkpoint; a missing masked-LM head is created (decoder tied to embeddings)."""
        import transformers
        from transformers import AutoTokenizer, BertForMaskedLM

        verbosity = transformers.logging.get_verbosity()
        transformers.logging.set_verbosity_error()  # the missing-head notice is ours to give
        try:
            with transformers_bars_off():
                mlm, info = BertForMaskedLM.from_pretrained(path, output_loading_info=True)
                tokenizer = AutoTokenizer.from_pretrained(path)
        finally:
            transformers.logging.set_verbosity(verbosity)
        missing = [k for k in info.get("missing_keys", []) if k.startswith("cls.")]
        trained = not missing
        if missing:
            log.warning("%s has no masked-LM head: created one (transform initialised fresh, decoder tied to the "
                        "word embeddings); it is untrained until `faqsearch train`", path)
        meta_path = os.path.join(path, CONFIG_NAME)
        if os.path.exists(meta_path):
            with open(meta_path) as fh:
                trained = bool(json.load(fh).get("head_trained", trained))
        mlm.tie_weights()
        return cls(mlm, tokenizer, trained)

    def save_pretrained(self, path: str, extra: dict[str, Any] | None = None) -> None:
        """A normal Hugging Face directory (usable as an ingest encoder with --pooling cls) + our config."""
        os.makedirs(path, exist_ok=True)
        with transformers_bars_off():
            self.mlm.save_pretrained(path)
            self.tokenizer.save_pretrained(path)
        with open(os.path.join(path, CONFIG_NAME), "w") as fh:
            json.dump({"format": 1, "head_trained": self.head_trained, "pooling": "cls", **(extra or {})}, fh, indent=2)

    # ------------------------------------------------------------------ forward
    def embed(self, input_ids, token_type_ids, position_offset: int = 0) -> torch.Tensor:
        e = self.mlm.bert.embeddings
        pos = torch.arange(position_offset, position_offset + input_ids.shape[1], device=input_ids.device)
        h = e.word_embeddings(input_ids) + e.position_embeddings(pos)[None] + e.token_type_embeddings(token_type_ids)
        return F.dropout(e.LayerNorm(h), e.dropout.p, self.training)

    def forward(self, input_ids, token_type_ids, mask, cache: list[LayerCache] | None = None,
                position_offset: int = 0, return_cache: bool = False):
        """Hidden states of the last layer. ``mask``: bool (batch, query, key) over cached + new keys."""
        h = self.embed(input_ids, token_type_ids, position_offset)
        bias = torch.zeros(mask.shape, dtype=h.dtype, device=h.device).masked_fill(~mask, torch.finfo(h.dtype).min)
        bias = bias[:, None]  # broadcast over heads
        new_cache = []
        for i, layer in enumerate(self.mlm.bert.encoder.layer):
            att = layer.attention.self
            b, n, _ = h.shape

            def split(x):
                return x.view(b, n, self.heads, self.head_dim).transpose(1, 2)

            q, k, v = split(att.query(h)), split(att.key(h)), split(att.value(h))
            if cache is not None:
                k = torch.cat([cache[i].key, k], dim=2)
                v = torch.cat([cache[i].value, v], dim=2)
            new_cache.append(LayerCache(k, v))
            scores = q @ k.transpose(-1, -2) / math.sqrt(self.head_dim) + bias
            probs = F.dropout(scores.softmax(-1), att.dropout.p, self.training)
            ctx = (probs @ v).transpose(1, 2).reshape(b, n, -1)
            out = layer.attention.output
            h = out.LayerNorm(F.dropout(out.dense(ctx), out.dropout.p, self.training) + h)
            inter = layer.intermediate.intermediate_act_fn(layer.intermediate.dense(h))
            o = layer.output
            h = o.LayerNorm(F.dropout(o.dense(inter), o.dropout.p, self.training) + h)
        return (h, new_cache) if return_cache else h

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.mlm.cls(hidden)

    def seq2seq(self, input_ids, token_type_ids, attention_mask) -> torch.Tensor:
        """Hidden states under the UniLM mask."""
        return self.forward(input_ids, token_type_ids, unilm_mask(token_type_ids, attention_mask))

    @property
    def device(self) -> torch.device:
        return next(self.mlm.parameters()).device

    @torch.inference_mode()
    def sentence_vectors(self, texts: list[str], batch_size: int = 64, max_length: int = 64) -> torch.Tensor:
        """L2-normalised [CLS] vectors of ``[CLS] text [SEP]`` (what retrieval uses)."""
        was = self.training
        self.eval()
        out = []
        for s in range(0, len(texts), batch_size):
            enc = self.tokenizer(texts[s:s + batch_size], padding=True, truncation=True, max_length=max_length,
                                 return_tensors="pt").to(self.device)
            tt = torch.zeros_like(enc["input_ids"])
            h = self.forward(enc["input_ids"], tt, unilm_mask(tt, enc["attention_mask"]))
            out.append(F.normalize(h[:, 0], dim=-1).cpu())
        self.train(was)
        return torch.cat(out) if out else torch.empty(0, self.mlm.config.hidden_size)
