"""A SimBERT (UniLM) model made by ``faqsearch train`` as paraphrase generator; its [CLS] vector
is a second opinion in the re-ranking."""
from __future__ import annotations

import os
from typing import Any, Sequence

import numpy as np

from ..errors import FAQSearchError
from .base import Candidate


def is_simbert_dir(path: str) -> bool:
    from ..simbert.model import CONFIG_NAME

    return os.path.isdir(path) and os.path.exists(os.path.join(path, CONFIG_NAME))


def load_simbert(path: str):
    from ..simbert.model import SimBert

    if not is_simbert_dir(path):
        raise FAQSearchError(f"{path} is not a trained SimBERT model; make one with: faqsearch train simbert --corpus FAQ.csv --out {path}")
    return SimBert.from_pretrained(path)


class UniLMGenerator:
    def __init__(self, path: str, *, threads: int | None = None, top_p: float = 0.95, top_k: int = 0,
                 temperature: float = 1.0):
        if threads:
            import torch

            torch.set_num_threads(threads)
        self.path = path
        self.name = "simbert"
        self.model = load_simbert(path)
        self.top_p, self.top_k, self.temperature = top_p, top_k, temperature

    def spec(self) -> dict[str, Any]:
        return {"kind": "simbert", "name": self.name, "source": os.path.abspath(self.path), "top_p": self.top_p,
                "top_k": self.top_k, "temperature": self.temperature}

    def sample(self, text: str, n: int, seed: int | None = None) -> list[Candidate]:
        from ..simbert.generate import sample

        texts, ended = sample(self.model, text, n, top_k=self.top_k, top_p=self.top_p,
                              temperature=self.temperature, seed=seed, return_ended=True)
        return [Candidate(t, e) for t, e in zip(texts, ended)]

    def similarity(self, text: str, candidates: Sequence[str]) -> np.ndarray | None:
        vecs = self.model.sentence_vectors([text, *candidates])
        return (vecs[1:] @ vecs[0]).cpu().numpy()
