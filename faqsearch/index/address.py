"""Where an index that lives in Milvus is: its address ``milvus://HOST:PORT/NAME`` (``milvus+https://``
for TLS), and the local directory that caches it on this machine (faqsearch/index/remote.py keeps
that cache up to date)."""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from ..errors import InvalidOptionError
from ..files import atomic_write
from .format import REMOTE

SCHEMES = {"milvus": "http", "milvus+http": "http", "milvus+https": "https"}


@dataclass(frozen=True)
class Remote:
    """Where an index lives: the Milvus server's URI and the index's name (its collections' base)."""
    uri: str  # http(s)://host:port
    name: str

    @property
    def address(self) -> str:
        scheme, rest = self.uri.split("://", 1)
        return f"milvus{'+https' if scheme == 'https' else ''}://{rest}/{self.name}"

    @property
    def base(self) -> str:
        return f"faqsearch_{self.name}"  # the name's characters are Milvus' own (parse checks them)


def parse(text: str) -> Remote | None:
    """The Milvus address in ``text`` (None when it is not one); a malformed one is an error."""
    scheme = text.split("://", 1)[0].lower() if "://" in text else ""
    if scheme not in SCHEMES:
        return None
    parts = urlsplit(text)
    name = parts.path.strip("/")
    if (not parts.hostname or not re.fullmatch(r"[A-Za-z0-9_]{1,180}", name) or "__" in name
            or name.startswith("_") or name.endswith("_")):
        raise InvalidOptionError(f"{text!r} is not an index address; write milvus://HOST:PORT/NAME (NAME: letters, "
                                 "digits and single '_' inside, as Milvus names collections), e.g. "
                                 "milvus://127.0.0.1:19530/support_de")
    try:
        port = parts.port or 19530
    except ValueError:
        raise InvalidOptionError(f"{text!r}: the port is not a number from 1 to 65535; write "
                                 "milvus://HOST:PORT/NAME") from None
    return Remote(f"{SCHEMES[scheme]}://{parts.hostname}:{port}", name)


CACHES = ".milvus"  # under a home: SCHEME_HOST_PORT/NAME, the cache of each index in Milvus used from there


def local_path(remote: Remote, home: str) -> str:
    """The cache directory of ``remote`` under ``home`` (made, with its REMOTE file, on first use)."""
    host = urlsplit(remote.uri)
    path = os.path.join(home, CACHES, f"{host.scheme}_{host.hostname}_{host.port}", remote.name)
    marker = os.path.join(path, REMOTE)
    if not os.path.isfile(marker):
        os.makedirs(path, exist_ok=True)
        atomic_write(marker, json.dumps({"uri": remote.uri, "name": remote.name}).encode())
    return path


def cached(home: str) -> list[str]:
    """The cache directories under ``home`` that :func:`local_path` made (those with their REMOTE file),
    by server, then name."""
    root = os.path.join(home, CACHES)
    servers = [os.path.join(root, s) for s in sorted(os.listdir(root))] if os.path.isdir(root) else []
    paths = [os.path.join(s, n) for s in servers if os.path.isdir(s) for n in sorted(os.listdir(s))]
    return [p for p in paths if os.path.isfile(os.path.join(p, REMOTE))]


def remote_of(path: str) -> Remote | None:
    """The Milvus index a local directory caches, None for an ordinary index."""
    try:
        with open(os.path.join(path, REMOTE), encoding="utf-8") as fh:
            d = json.load(fh)
    except (OSError, ValueError):
        return None
    return Remote(d["uri"], d["name"])


def shown(path: str) -> str:
    """How to name the index at ``path`` to a person: its address when it lives in Milvus."""
    remote = remote_of(path)
    return remote.address if remote is not None else path
