"""What a paraphrase generator is: something that samples candidate rewordings of a text in one batch."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, Sequence, runtime_checkable

import numpy as np


@dataclass
class Candidate:
    text: str
    finished: bool  # stopped by itself (end of sequence / line), not by the token budget


@runtime_checkable
class Generator(Protocol):
    name: str

    def sample(self, text: str, n: int, seed: int | None = None) -> list[Candidate]:
        """``n`` sampled rewordings of ``text``, raw (the recipe screens them)."""
        ...

    def similarity(self, text: str, candidates: Sequence[str]) -> np.ndarray | None:
        """The generator's own similarity of each candidate with ``text`` (SimBERT's [CLS]), or None."""
        ...

    def spec(self) -> dict[str, Any]:
        ...
