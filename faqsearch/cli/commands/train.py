"""Training models: the `train` group (encoder, simbert; what each does is faqsearch.tuning.training), and
`learn` (an index's own encoder, faqsearch.tuning.learn)."""
from __future__ import annotations

import click

from ...defaults import LEARN_EPOCHS, LEARN_MIN_MINUTES, LEARN_MINUTES
from ..groups import FormerFlags
from ..options import Finite, encoding_options, index_option
from ..render import dump


def _former(args: list[str]) -> list[str]:
    """`train` before its sub-commands: --encoder, else SimBERT."""
    if "--encoder" in args:
        return ["encoder", *[a for a in args if a != "--encoder"]]
    return ["simbert", *args]


@click.group(cls=FormerFlags, former=_former, flags=("--encoder",))
def train():
    """Train a model on an FAQ's similar questions: the sentence encoder itself, or a SimBERT model
    (paraphrase generation + retrieval in one BERT).

    \b
    Example:
        faqsearch train encoder --corpus faq.csv --out models/encoder --epochs 1 --lr 2e-5
        faqsearch train simbert --corpus sample_data/faq.csv --out models/simbert --epochs 3
    """


def common_options(fn):
    """Where the model goes, what it starts from, how long and how fast it learns."""
    for option in reversed((
        click.option("--out", "-o", "out_dir", required=True, type=click.Path(file_okay=False),
                     help="Directory of the trained model (a Hugging Face directory; also the checkpoint)."),
        click.option("--base", default="minilm", show_default=True,
                     help="BERT checkpoint to start from: 'minilm' (bundled) or a directory / Hugging Face id."),
        click.option("--from-index", "from_index", help="Pairs from the question groups of this index."),
        click.option("--corpus", type=click.Path(dir_okay=False), help="Pairs from the question groups of this corpus."),
        click.option("--epochs", type=click.IntRange(1), default=3, show_default=True),
        click.option("--batch-size", type=click.IntRange(2), default=16, show_default=True, help="Pairs per batch."),
        click.option("--lr", type=float, default=5e-5, show_default=True, help="Learning rate."),
        click.option("--seed", type=int, default=0, show_default=True),
    )):
        fn = option(fn)
    return fn


@train.command("encoder")
@common_options
@encoding_options
def encoder(out_dir, base, from_index, corpus, epochs, batch_size, lr, seed, out, threads):
    """Fine-tune the sentence encoder only (contrastive, mean pooling) on the question groups of
    --corpus and/or --from-index; use the result with `ingest --model OUT`. Opt-in: see docs/quality.md.

    \b
    Example:
        faqsearch train encoder --corpus faq.csv --out models/encoder --epochs 1 --lr 2e-5
    """
    from ...encoders.device import configure_torch
    from ...tuning.training import train_encoder

    configure_torch(threads)
    if not (from_index or corpus):
        raise click.UsageError("the encoder learns from FAQ question groups: give --corpus or --from-index")
    got = train_encoder(out_dir, from_index=from_index, corpus=corpus, base=base, epochs=epochs,
                        batch_size=batch_size, lr=lr, seed=seed, progress=out.progress)
    if out.json:
        click.echo(dump(got.to_dict()))
    else:
        click.echo(f"Fine-tuned the encoder on {got.pairs} question pairs; model in {out_dir} "
                   f"(loss per epoch: {', '.join(f'{x:.4f}' for x in got.loss)}). Use: faqsearch ingest CORPUS "
                   f"--model {out_dir}")


@train.command("simbert")
@common_options
@click.option("--pairs", "pairs_file", type=click.Path(dir_okay=False),
              help="A file of similar pairs (sentence1, sentence2[, label]).")
@click.option("--mine", type=click.Path(dir_okay=False), help="Mine pairs from these questions by nearest neighbours.")
@click.option("--mine-threshold", type=Finite(-1, 1), default=0.8, show_default=True,
              help="The cosine at or above which two mined questions make a pair.")
@click.option("--teacher", metavar="NAME|DIR",
              help="Distillation: a generator ('smollm2' or any causal LM) writes N paraphrases of the first question "
                   "of every FAQ from --corpus/--from-index; the pairs are trained on and saved as OUT/teacher_pairs.csv.")
@click.option("--teacher-n", type=click.IntRange(1), default=3, show_default=True, help="Teacher paraphrases per FAQ.")
@click.option("--resume", is_flag=True, help="Continue from the last epoch checkpoint in --out.")
@encoding_options
def simbert(out_dir, base, from_index, corpus, epochs, batch_size, lr, seed, pairs_file, mine, mine_threshold, teacher,
            teacher_n, resume, out, threads):
    """Train a SimBERT model (paraphrase generation + retrieval in one BERT) on similar questions.

    Pairs come from FAQ question groups (--from-index, --corpus), a pairs file (--pairs) and/or
    pairs mined by retrieval from a question list (--mine). Loss: seq2seq cross-entropy (both
    directions) + in-batch contrastive loss on [CLS]; each epoch ends with a checkpoint.

    \b
    Example:
        faqsearch train simbert --corpus sample_data/faq.csv --out models/simbert --epochs 3
        faqsearch train simbert --mine questions.txt --out models/simbert --resume
        faqsearch train simbert --corpus faq.csv --teacher smollm2 --out models/distilled
    """
    from ...encoders.device import configure_torch
    from ...tuning.training import train_simbert

    configure_torch(threads)
    if not any((from_index, corpus, pairs_file, mine)):
        raise click.UsageError("give at least one source of pairs: --from-index, --corpus, --pairs or --mine")
    if teacher and not (from_index or corpus):
        raise click.UsageError("--teacher paraphrases the FAQs of --corpus or --from-index: give one")
    got = train_simbert(out_dir, from_index=from_index, corpus=corpus, pairs_file=pairs_file, mine=mine,
                        mine_threshold=mine_threshold, teacher=teacher, teacher_n=teacher_n, base=base, epochs=epochs,
                        batch_size=batch_size, lr=lr, seed=seed, resume=resume, threads=threads,
                        progress=out.progress)
    if out.json:
        click.echo(dump(got.to_dict()))
        return
    click.echo(f"Trained on {got.pairs} pairs; model in {out_dir}")
    for i, e in enumerate(got.epochs, 1):
        click.echo(f"  epoch {i}: seq2seq {e['seq2seq']:.4f}  contrastive {e['contrastive']:.4f}")


@click.command()
@index_option
@click.option("--minutes", type=Finite(LEARN_MIN_MINUTES, 24 * 60), default=LEARN_MINUTES, show_default=True,
              help="Time budget of the whole run; training stops early to keep it (on a GPU it rarely needs to).")
@click.option("--epochs", type=click.IntRange(1), default=LEARN_EPOCHS, show_default=True,
              help="Passes over the question pairs, at most.")
@click.option("--no-log", "no_log", is_flag=True,
              help="Train on the FAQ's questions only, not also on logged queries the index answers confidently.")
@encoding_options
def learn(index, minutes, epochs, no_log, out, threads):
    """Fine-tune the index's encoder on its own questions (each FAQ's phrasings, and those assigned by
    approve and feedback) and on its traffic (logged queries it answers at 80% or more, each joining
    the FAQ it got), encode the index again, and keep the result only if it ranks the held-out
    questions (one per FAQ, never trained on) better than the index does now. The previous version is
    kept (`faqsearch versions`, `restore`). Needs 10 or more FAQs with three or more questions. Edits
    go on while it trains; the index is locked only to encode it again and commit.

    \b
    Example:
        faqsearch learn --index support
        faqsearch learn --index support --minutes 5 --json
    """
    from ...encoders.device import configure_torch
    from ...engine import FAQSearch
    from ...tuning.learn import gain

    configure_torch(threads)
    with FAQSearch.open(index, threads=threads) as engine:
        report = engine.learn(minutes=minutes, epochs=epochs, progress=out.progress, from_log=not no_log)
        path, kind = engine.path, engine.config.backend_kind
    if out.json:
        click.echo(dump({"index": path, **report.to_dict()}))
        return
    click.echo(f"{'Kept' if report.kept else 'Not kept'}: {gain(report.before, report.after)} (trained on "
               f"{report.pairs} pairs{f' ({report.logged} of them logged queries)' if report.logged else ''}, "
               f"{len(report.loss)} epochs, {report.seconds.get('total', 0):.0f} s).")
    undo = "; `faqsearch restore` undoes it" if kind == "embedded" else \
        " (Milvus keeps no versions to restore: `faqsearch learn` again, or ingest, to change it)"
    click.echo(f"The index now answers with {report.encoder} (version {report.version}){undo}."
               if report.kept else "The index keeps its encoder; nothing changed.")
    for note in report.notes if report.kept else ():
        click.echo(f"Note: {note}.")
