"""SimBERT: retrieval and paraphrase generation in one BERT (UniLM mask + in-batch contrastive loss)."""
from __future__ import annotations

from .generate import Paraphrase, paraphrase, sample
from .model import SimBert, unilm_mask
from .train import TrainConfig, mine_pairs, pairs_from_groups, train

__all__ = ["SimBert", "unilm_mask", "Paraphrase", "paraphrase", "sample", "TrainConfig", "train", "mine_pairs",
           "pairs_from_groups"]
