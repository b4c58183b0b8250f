"""Encoding many texts in one streaming pass (ingest, and learn's second encoding): chunk by chunk,
the transform's moments accumulated, raw vectors appended to a file and token states kept as it goes,
so memory does not grow with the corpus."""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Iterable, Sequence

from ..defaults import CHUNK, PROGRESS_STEP
from ..files import NpyWriter
from ..progress import progress_bar
from ..whitening import Moments
from .base import Encoder

if TYPE_CHECKING:
    from ..backends import TokenSink


def encode_stream(encoder: Encoder, texts: Sequence[str] | Callable[[int], Iterable[list[str]]], batch_size: int,
                  progress: bool, out: NpyWriter | None = None, total: int | None = None,
                  tokens: "TokenSink | None" = None, desc: str = "encoding") -> Moments:
    """Encode texts chunk by chunk, accumulating moments (and appending raw vectors to ``out``, anything
    with a ``write(vectors)``, and their token states, from the same encoder run, to ``tokens``).
    ``texts``: the texts, or a function giving them in chunks of a size it is passed (a store's rows,
    read as they are encoded: then ``total`` is their number); ``desc``: the progress bar's label."""
    moments = Moments(encoder.dimension)
    # a bar that moves from the first texts; a GPU encoder gets whole chunks (its tokenising overlaps
    # the GPU within one call) and is fast enough for the bar to move anyway
    on_gpu = getattr(encoder, "device", "cpu") == "cuda"
    step = CHUNK if not progress or on_gpu else max(batch_size, PROGRESS_STEP)
    if callable(texts):
        chunks = texts(step)
    else:
        total, chunks = len(texts), (texts[i:i + step] for i in range(0, len(texts), step))
    with progress_bar(total, progress, desc) as bar:
        for chunk in chunks:
            if tokens is not None:
                vecs = tokens.encode(encoder, chunk, batch_size)
            else:
                vecs = encoder.encode(chunk, batch_size=batch_size)
            moments.update(vecs)
            if out is not None:
                out.write(vecs)
            bar.update(len(chunk))
    return moments


def encode_to_file(encoder: Encoder, texts: Callable[[int], Iterable[list[str]]], path: str, n: int, batch_size: int,
                   progress: bool, tokens: "TokenSink | None" = None, desc: str = "encoding") -> Moments:
    """:func:`encode_stream` of ``n`` texts into a new ``vectors.npy`` at ``path`` (its blocks reserved
    first: a full disk fails at once) and, given ``tokens``, their token states, finished once every
    vector is written or discarded on any failure."""
    try:
        with NpyWriter(path, n, encoder.dimension) as out:
            moments = encode_stream(encoder, texts, batch_size, progress, out=out, total=n, tokens=tokens, desc=desc)
        if tokens is not None:
            tokens.finish()
    except BaseException:
        if tokens is not None:
            tokens.discard()
        raise
    return moments
