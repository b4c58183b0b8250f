"""The questions' token states kept with a version (``tokens/`` beside ``store.db``), so token matching
(:mod:`faqsearch.tokenmatch`) reads a candidate question's states instead of running the encoder on
it at query time: that run was 63 of 75 ms of a hybrid query whose candidates were new to the
process (docs/speed.md).

They are written while ingest encodes the questions: the same encoder run gives the sentence
vectors and the token states (:func:`encode_with_tokens`), so ingest does not encode twice. Rows
are keyed by a 64-bit hash of the question's text, not by question id: a state belongs to a text
and an encoder, so the files stay right whatever edits do to ids and rows, and a new version built
on the same rows (a refit, a compaction) shares them by hard links. Questions added since (in-place
edits) are not in them; token matching encodes those as before. About 10 KB a question in float16
(14 tokens of 384 dimensions, Banking77): only versions of at most
:data:`faqsearch.defaults.TOKEN_STORE_MAX` questions keep them, and none whose hybrid mode does not
use token matching.

    tokens/keys.npy     (N,) int64, sorted: hash of each distinct question text
    tokens/spans.npy    (N, 2) int64: its rows in states.f16 (start, stop)
    tokens/states.f16   (T, d) float16, unit rows: every question's token states, in encoding order
    tokens/meta.json    format, encoder, counts and byte sizes (written last; what open() reads first)
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
from typing import Any, Sequence

import numpy as np

from ...encoders import IDENTITY_KEYS
from ...files import fsync_dir, fsync_file, load_npy, share_dir
from ...index.format import (DIR_META, TOKEN_KEYS as KEYS, TOKEN_SPANS as SPANS, TOKEN_STATES as STATES,
                              TOKENS as DIR, TOKENS_FILES as _FILES)

FORMAT = 1
# what makes two encoders' states equal: an index's encoder identity and the token limit (not the
# runtime: ONNX Runtime matches torch)
_IDENTITY = (*IDENTITY_KEYS, "max_length")


def key(text: str) -> int:
    """A text's 64-bit key (BLAKE2b)."""
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "little", signed=True)


def identity(encoder_spec: dict[str, Any] | None) -> dict[str, Any]:
    """What of an encoder's spec decides its token states."""
    return {k: (encoder_spec or {}).get(k) for k in _IDENTITY}


def encode_with_tokens(encoder, texts: Sequence[str], batch_size: int
                       ) -> tuple[np.ndarray, list[tuple[np.ndarray, np.ndarray]]]:
    """Sentence vectors and token states (with spans) of ``texts``: one encoder run where the
    encoder gives both (ONNX Runtime, torch on the CPU), else two."""
    both = getattr(encoder, "encode_with_tokens", None)
    if both is not None:
        return both(texts, batch_size=batch_size)
    return encoder.encode(texts, batch_size=batch_size), encoder.token_states(texts, batch_size=batch_size)


class TokenWriter:
    """Appends questions' token states to ``directory/tokens`` as they are encoded; :meth:`finish`
    writes the keys and the meta, :meth:`discard` removes everything."""

    def __init__(self, directory: str, encoder_spec: dict[str, Any], dim: int):
        self.path = os.path.join(directory, DIR)
        shutil.rmtree(self.path, ignore_errors=True)
        os.makedirs(self.path)
        self.encoder, self.dim = identity(encoder_spec), int(dim)
        self._fh = open(os.path.join(self.path, STATES), "wb")
        self._keys: dict[int, tuple[int, int]] = {}
        self._rows = 0

    def encode(self, encoder, texts: Sequence[str], batch_size: int) -> np.ndarray:
        """The sentence vectors of ``texts``, their token states kept from the same encoder run."""
        vecs, states = encode_with_tokens(encoder, texts, batch_size)
        self.write(texts, states)
        return vecs

    def write(self, texts: Sequence[str], states: Sequence[tuple[np.ndarray, np.ndarray]]) -> None:
        """Keep each text's token states (``states``: (states, spans) pairs, spans unused)."""
        for text, (s, _) in zip(texts, states):
            k = key(text)
            if k in self._keys:  # a question text twice (two FAQs, or a variant): one entry
                continue
            s = np.ascontiguousarray(s, dtype=np.float16).reshape(-1, self.dim)
            self._fh.write(s.tobytes())
            self._keys[k] = (self._rows, self._rows + len(s))
            self._rows += len(s)

    def finish(self) -> dict[str, Any]:
        """Write the keys and the meta (last); returns the meta."""
        self._fh.flush()
        os.fsync(self._fh.fileno())
        self._fh.close()
        keys = np.array(sorted(self._keys), dtype=np.int64)
        spans = np.array([self._keys[k] for k in keys.tolist()], dtype=np.int64).reshape(-1, 2)
        np.save(os.path.join(self.path, KEYS), keys)
        np.save(os.path.join(self.path, SPANS), spans)
        for name in (KEYS, SPANS):
            fsync_file(os.path.join(self.path, name))
        meta = {"format": FORMAT, "encoder": self.encoder, "dimension": self.dim, "texts": len(keys),
                "tokens": self._rows, "bytes": {n: os.path.getsize(os.path.join(self.path, n)) for n in _FILES}}
        with open(os.path.join(self.path, DIR_META), "w", encoding="utf-8") as f:
            json.dump(meta, f)
            f.flush()
            os.fsync(f.fileno())
        fsync_dir(self.path)
        return meta

    def discard(self) -> None:
        if not self._fh.closed:
            self._fh.close()
        shutil.rmtree(self.path, ignore_errors=True)


class TokenStates:
    """A version's kept token states, memory-mapped (only the candidates' rows are read)."""

    def __init__(self, path: str, meta: dict[str, Any]):
        self.meta = meta
        self.keys = load_npy(os.path.join(path, KEYS))
        self.spans = load_npy(os.path.join(path, SPANS))
        rows = int(meta["tokens"])
        self.states = (np.memmap(os.path.join(path, STATES), dtype=np.float16, mode="r",
                                 shape=(rows, int(meta["dimension"]))) if rows else
                       np.empty((0, int(meta["dimension"])), np.float16))

    @classmethod
    def open(cls, directory: str, encoder_spec: dict[str, Any] | None) -> "TokenStates | None":
        """The token states kept in the version ``directory``, or None where it keeps none, they do
        not match their meta (a damaged or half-copied file) or another encoder made them."""
        path = os.path.join(directory, DIR)
        want = identity(encoder_spec)
        try:
            with open(os.path.join(path, DIR_META), encoding="utf-8") as f:
                meta = json.load(f)
            if (not isinstance(meta, dict) or meta.get("format") != FORMAT or meta.get("encoder") != want
                    or meta.get("dimension") != want["dimension"] or not isinstance(meta.get("tokens"), int)
                    or not isinstance(meta.get("texts"), int) or not isinstance(meta.get("bytes"), dict)
                    or any(os.path.getsize(os.path.join(path, n)) != meta["bytes"].get(n) for n in _FILES)
                    or meta["bytes"][STATES] != 2 * meta["tokens"] * meta["dimension"]):
                return None
            out = cls(path, meta)
            keys, spans = out.keys, out.spans
            if (keys.dtype != np.int64 or keys.shape != (meta["texts"],) or spans.dtype != np.int64
                    or spans.shape != (len(keys), 2) or np.any(keys[1:] <= keys[:-1])
                    or (len(spans) and (spans.min() < 0 or spans.max() > meta["tokens"]
                                        or np.any(spans[:, 1] < spans[:, 0])))):
                return None  # damaged: every query would fail on them, or read the wrong rows
            return out
        except Exception:  # noqa: BLE001 - a damaged optional file is ignored (the states are computed instead)
            return None

    def __len__(self) -> int:
        return len(self.keys)

    def summary(self) -> dict[str, int]:
        """What `info` shows: how many question texts are kept, in how many bytes."""
        return {"texts": int(self.meta["texts"]), "bytes": int(sum(self.meta["bytes"].values()))}

    def get(self, texts: Sequence[str]) -> dict[str, np.ndarray]:
        """The token states of those ``texts`` that are kept (float16, unit rows)."""
        texts = list(dict.fromkeys(texts))
        if not texts or not len(self.keys):
            return {}
        ks = np.array([key(t) for t in texts], dtype=np.int64)
        pos = np.minimum(np.searchsorted(self.keys, ks), len(self.keys) - 1)
        out = {}
        for t, p, hit in zip(texts, pos.tolist(), (self.keys[pos] == ks).tolist()):
            if hit:
                start, stop = self.spans[p]
                out[t] = np.asarray(self.states[start:stop])
        return out


def share(src_dir: str, dst_dir: str) -> bool:
    """Put the token states of ``src_dir`` into the new version ``dst_dir`` as hard links (copies
    where the filesystem has none): they are keyed by text, so any version of the same index and
    encoder may use them."""
    return share_dir(os.path.join(src_dir, DIR), os.path.join(dst_dir, DIR), _FILES)


def summary(directory: str, encoder_spec: dict[str, Any] | None) -> dict[str, int] | None:
    """:meth:`TokenStates.summary` of the version ``directory``, None where it keeps none it may use."""
    kept = TokenStates.open(directory, encoder_spec)
    return None if kept is None else kept.summary()


def remove(directory: str) -> None:
    """Drop a version's token states (a version whose hybrid mode does not use token matching)."""
    shutil.rmtree(os.path.join(directory, DIR), ignore_errors=True)
