"""Does running a training step's texts in length-sorted pieces pay on this CPU, and at what size?

Both trainers, on the same pairs, in the same run: `finetune.train_encoder` (learn, `train encoder`;
texts in pieces of EncoderTrainConfig.piece) and the SimBERT trainer (`train simbert`; [CLS] A [SEP] B
[SEP] sequences in pieces of TrainConfig.piece), each with one padded batch per step (piece None) and
with pieces of several sizes, from the bundled MiniLM, once each in turn (one trainer's sizes, then the
other's). The pairs are a set's question groups; the seconds are the training with what the trainer saves
(the encoder rows also load the model, about a second; the SimBERT rows save a checkpoint each epoch and
start after loading), on the CPU: the SimBERT trainer is pinned to it, and the encoder trainer uses a
GPU where torch sees one (the script refuses then). The last epoch's mean loss says the runs trained
alike (the same batches in the same order: dropout and rounding differ).

    python benchmarks/experiments/training_pieces.py [--set "Banking77 faqs_5"] [--epochs 1] [--sizes 8,16]
        [--trainers encoder,simbert] [--precision fp32|bf16|auto]   (the encoder's; SimBERT trains in fp32)
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from common import DATA, SAMPLE, emit, machine  # noqa: E402

from faqsearch.corpus import read_corpus  # noqa: E402
from faqsearch.encoders import _minilm_path  # noqa: E402

SETS = {"sample_data en": os.path.join(SAMPLE, "faq.csv"),
        "Banking77 faqs_5": os.path.join(DATA, "Banking77", "faqs_5.csv")}


def encoder_run(pairs, piece, epochs: int, work: str, precision: str) -> tuple[float, float]:
    from faqsearch.finetune import EncoderTrainConfig, train_encoder

    start = time.perf_counter()  # the model loads inside: its load is in every row alike
    loss = train_encoder(_minilm_path(), pairs, os.path.join(work, f"enc{piece}"), EncoderTrainConfig(
        epochs=epochs, batch_size=64, lr=3e-5, distinct=True, precision=precision, piece=piece))
    return time.perf_counter() - start, loss[-1]  # the last epoch's mean


def simbert_run(pairs, piece, epochs: int, work: str, precision: str) -> tuple[float, float]:
    from faqsearch.simbert import SimBert, TrainConfig, train

    import torch

    torch.manual_seed(0)  # the masked-LM head is created afresh: the same one for every row
    model = SimBert.from_pretrained(_minilm_path())
    start = time.perf_counter()
    log = train(model, pairs, os.path.join(work, f"sim{piece}"), TrainConfig(epochs=epochs, piece=piece), device="cpu")
    last = log.epochs[-1]
    return time.perf_counter() - start, last["seq2seq"] + last["contrastive"]  # the last epoch's means


def main() -> None:
    import torch

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--set", default="Banking77 faqs_5", choices=sorted(SETS))
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--sizes", default="8,16,32", help="piece sizes to time beside one padded batch")
    ap.add_argument("--trainers", default="encoder,simbert")
    ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16", "auto"], help="the encoder trainer's")
    ap.add_argument("--out")
    args = ap.parse_args()
    if torch.cuda.is_available():
        sys.exit("a GPU runs one padded batch whatever the piece size: run this on a machine without one")
    logging.basicConfig(level=logging.ERROR)
    torch.set_num_threads(os.cpu_count() or 1)
    from faqsearch.finetune import group_pairs
    from faqsearch.simbert import pairs_from_groups

    groups = [f.questions for f in read_corpus(SETS[args.set])]
    enc_pairs, sim_pairs = group_pairs(groups), pairs_from_groups(groups)
    sizes = [None, *(int(s) for s in args.sizes.split(",") if s.strip())]
    lines = [f"Measured {machine()} with `python benchmarks/experiments/training_pieces.py --set \"{args.set}\" "
             f"--epochs {args.epochs} --sizes {args.sizes} --trainers {args.trainers} --precision {args.precision}`", "",
             "| trainer | pairs | pieces of | training s | last epoch's mean loss |", "|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as work:
        trainers = {"encoder": ("encoder (learn, train encoder): 64 pairs, 128 texts a step", encoder_run, enc_pairs),
                    "simbert": ("SimBERT (train simbert, fp32): 16 pairs, 32 sequences a step", simbert_run, sim_pairs)}
        for key in args.trainers.split(","):
            name, run, pairs = trainers[key.strip()]
            for piece in sizes:
                took, loss = run(pairs, piece, args.epochs, work, args.precision)
                lines.append(f"| {name} | {len(pairs)} | {piece or 'one padded batch'} | {took:.1f} | {loss:.4f} |")
                print(lines[-1], flush=True)
    emit(lines, args.out)


if __name__ == "__main__":
    main()
