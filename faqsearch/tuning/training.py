"""What `faqsearch train encoder` and `faqsearch train simbert` do beyond parsing: gather the pairs
(an index's or a corpus's question groups, a pairs file, pairs mined from questions, a teacher's
paraphrases), pick the base model, and run the trainer (:mod:`faqsearch.finetune` for the sentence
encoder, :mod:`faqsearch.simbert.train` for SimBERT). torch is imported only when a call trains."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from ..errors import InvalidOptionError

BASE = "minilm"  # the bundled MiniLM


@dataclass
class EncoderTrained:
    """A fine-tuned sentence encoder: where it is, how many pairs it saw, the loss of each epoch."""

    out: str
    pairs: int
    loss: list[float]

    def to_dict(self) -> dict[str, Any]:
        return {"out": self.out, "pairs": self.pairs, "loss": self.loss}


@dataclass
class SimBertTrained:
    """A trained SimBERT model: where it is, how many pairs it saw, each epoch's two losses."""

    out: str
    pairs: int
    epochs: list[dict[str, float]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"out": self.out, "pairs": self.pairs, "epochs": self.epochs}


def base_model(base: str) -> str:
    """A checkpoint to start from: 'minilm' (the bundled one), 'mpnet' (from its weights packages) or a
    directory / Hugging Face id."""
    if base.lower() == BASE:
        from ..encoders import _minilm_path

        return _minilm_path()
    if base.lower() == "mpnet":
        from ..encoders.packaged import mpnet_path

        return mpnet_path()
    return base


def _store(from_index: str | None):
    if not from_index:
        return None
    from ..index.config import resolve_index_path
    from ..index.snapshot import open_store

    return open_store(resolve_index_path(from_index))


def check_out(out_dir: str, resume: bool = False) -> None:
    """Refuse a model folder that would overwrite an index, or someone else's files, and one this
    process cannot write, before any training: a model written into an index's folder replaced its
    live config.json (the index stopped opening), and a read-only folder failed after the training."""
    from ..index.format import CONFIG, CURRENT, read_json

    out = os.path.abspath(out_dir)
    folders = [out]
    while os.path.dirname(folders[-1]) != folders[-1]:  # the folder and every one above it: no index among them
        folders.append(os.path.dirname(folders[-1]))
    for folder in folders:
        try:
            config = read_json(folder)
        except (OSError, ValueError):  # none, or not JSON: not an index's version
            config = None
        if (isinstance(config, dict) and "format_version" in config) or os.path.exists(os.path.join(folder, CURRENT)):
            raise InvalidOptionError(f"--out {out_dir} is {'inside ' if folder != out else ''}a faqsearch index; train "
                                     "into a folder of its own (a model there would replace the index's files)")
    if os.path.isdir(out) and os.listdir(out) and not resume and not os.path.exists(os.path.join(out, CONFIG)):
        shown = ", ".join(sorted(os.listdir(out))[:5])
        raise InvalidOptionError(f"--out {out_dir} holds files that are not a model ({shown}); give an empty or new "
                                 "folder (a model trained there before is replaced)")
    try:
        os.makedirs(out, exist_ok=True)
        probe = os.path.join(out, ".faqsearch-write-check")
        with open(probe, "w", encoding="utf-8"):
            pass
        os.remove(probe)
    except OSError as exc:
        raise InvalidOptionError(f"cannot write the model to --out {out_dir} ({exc.strerror or exc}); choose a folder "
                                 "this user can write (nothing was trained)") from None


def train_encoder(out_dir: str, *, from_index: str | None = None, corpus: str | None = None, base: str = BASE,
                  epochs: int = 3, batch_size: int = 16, lr: float = 5e-5, seed: int = 0,
                  progress: bool = False) -> EncoderTrained:
    """Fine-tune the sentence encoder (contrastive, mean pooling) on the question groups of an index
    (``from_index``) and/or a corpus; the result is used with ``ingest --model OUT``."""
    if not (from_index or corpus):
        raise InvalidOptionError("the encoder learns from FAQ question groups: give a corpus or an index")
    check_out(out_dir)
    from ..finetune import EncoderTrainConfig, group_pairs
    from ..finetune import train_encoder as run
    from ..simbert.train import question_groups

    pairs = group_pairs(question_groups(_store(from_index), corpus), seed=seed)
    losses = run(base_model(base), pairs, out_dir, EncoderTrainConfig(epochs=epochs, batch_size=batch_size, lr=lr,
                                                                      seed=seed), progress=progress)
    return EncoderTrained(out_dir, len(pairs), losses)


def train_simbert(out_dir: str, *, from_index: str | None = None, corpus: str | None = None,
                  pairs_file: str | None = None, mine: str | None = None, mine_threshold: float = 0.8,
                  teacher: str | None = None, teacher_n: int = 3, base: str = BASE, epochs: int = 3,
                  batch_size: int = 16, lr: float = 5e-5, seed: int = 0, resume: bool = False,
                  threads: int | None = None, progress: bool = False) -> SimBertTrained:
    """Train SimBERT (paraphrase generation + retrieval in one BERT) on similar pairs from the question
    groups of an index or corpus, a pairs file and/or pairs mined from a question list; a ``teacher``
    generator adds ``teacher_n`` paraphrases of each FAQ's first question (saved as
    OUT/teacher_pairs.csv, and read back from there on ``resume``)."""
    if not any((from_index, corpus, pairs_file, mine)):
        raise InvalidOptionError("give at least one source of pairs: an index, a corpus, a pairs file or "
                                 "questions to mine")
    if teacher and not (from_index or corpus):
        raise InvalidOptionError("the teacher paraphrases the FAQs of a corpus or an index: give one")
    check_out(out_dir, resume=resume)
    from ..simbert.model import SimBert
    from ..simbert.train import TrainConfig, collect_pairs, question_groups, teacher_pairs, train, write_pairs

    store = _store(from_index)
    pairs = collect_pairs(store, corpus, pairs_file, mine, mine_threshold)
    taught_file = os.path.join(out_dir, "teacher_pairs.csv")
    if teacher and not resume:
        from ..encoders import load_encoder
        from ..generators import load_generator
        from ..generators.recipe import encoder_scorer

        firsts = [g[0] for g in question_groups(store, corpus) if g]
        taught = teacher_pairs(load_generator(teacher, threads=threads), firsts, n=teacher_n,
                               scorer=encoder_scorer(load_encoder(threads=threads)), seed=seed, progress=progress)
        os.makedirs(out_dir, exist_ok=True)
        write_pairs(taught_file, taught)
        pairs += taught
    elif teacher:  # the teacher already wrote its pairs before the first epoch
        pairs += collect_pairs(pairs_file=taught_file)
    model = SimBert.from_pretrained(out_dir if resume else base_model(base))
    log = train(model, pairs, out_dir, TrainConfig(epochs=epochs, batch_size=batch_size, lr=lr, seed=seed),
                resume=resume, progress=progress)
    return SimBertTrained(out_dir, len(pairs), log.epochs)
