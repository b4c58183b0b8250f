"""An index that lives entirely in Milvus: its small files in a metadata collection, one writer at a
time by a lease, and commits that every replica reads.

Beside the data collections (``<base>__g<G>_<random>``, :mod:`.collection`) an index opened as
``milvus://HOST:PORT/NAME`` keeps two more:

- ``<base>__meta``: the versions' small files (config.json, whitening.npz), content-addressed in
  chunks (``blob/<sha256>/<n>``), one ``commit/<G>`` row per committed generation naming its files
  (the head is the highest one), the writers' leases (``lease/<token>``) and when each data
  collection stopped being current (``retired/<name>``);
- ``<base>__lk_f<random>`` (free) or ``<base>__lk_h<token>`` (held): the writers' lock, an empty
  collection whose name says who holds it. Milvus renames a collection atomically and refuses a
  rename of a name that no longer exists, so taking the lock (renaming the free name to one's own
  token), taking over a holder whose lease ran out (renaming its token to one's own) and giving it
  back (to a new free name: milvus-lite fails to rename to a name it used before) are each won by
  exactly one machine. The holder renews its lease every :data:`BEAT_S` seconds; a holder that could not renew
  for half the lease, or whose lock another took over, commits nothing (:meth:`Lease.check`).
"""
from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
import re
import secrets
import socket
import threading
import time
from typing import Any

from ...errors import ChangedMeanwhileError, FAQSearchError, said
from .collection import client, collections, create_loaded, expected

log = logging.getLogger(__name__)

LEASE_S = 30.0  # a writer's lease: another may take the lock over once it has not been renewed for this long
BEAT_S = 5.0  # how often the holder renews it
WAIT_S = 300.0  # how long a writer waits for the lock before it gives up
GRACE_S = 60.0  # a data collection that stopped being current is dropped this long after (readers swap within 1 s)
KEEP_COMMITS = 10  # commit rows kept (older generations' files are removed with them)
CHUNK = 45000  # bytes per blob row (base64 of it stays under Milvus' 65,535-byte VARCHAR)
_FREE = "f"  # a free lock's name: <base>__lk_f<16 hex>


def meta_name(base: str) -> str:
    return f"{base}__meta"


def _lock_prefix(base: str) -> str:
    return f"{base}__lk_"


def _is_lock(base: str, name: str) -> bool:
    return re.fullmatch(re.escape(_lock_prefix(base)) + r"[fh][0-9a-f]{16}", name) is not None


def _free(base: str, name: str) -> bool:
    return name.startswith(_lock_prefix(base) + _FREE)


def _generation_of(collection: str) -> int | None:
    found = re.search(r"__g(\d+)_[0-9a-f]+$", collection)
    return int(found.group(1)) if found else None


class Meta:
    """The metadata collection of one index (created on first use)."""

    def __init__(self, uri: str, base: str):
        self.uri, self.base, self.name = uri, base, meta_name(base)
        self.client = client(uri)
        self._ready = False

    def close(self) -> None:
        try:
            self.client.close()
        except Exception:  # noqa: BLE001
            pass

    def exists(self) -> bool:
        return bool(self.client.has_collection(self.name))

    def ensure(self) -> None:
        if self._ready:
            return
        if not self.exists():
            from pymilvus import DataType

            schema = self.client.create_schema(auto_id=False, enable_dynamic_field=False)
            schema.add_field("key", DataType.VARCHAR, is_primary=True, max_length=512)
            schema.add_field("gen", DataType.INT64)
            schema.add_field("data", DataType.VARCHAR, max_length=65535)
            schema.add_field("v", DataType.FLOAT_VECTOR, dim=2)  # Milvus wants a vector field; unused
            ix = self.client.prepare_index_params()
            ix.add_index("v", index_type="FLAT", metric_type="L2")
            try:
                with expected():
                    create_loaded(self.client, self.name, schema, ix, consistency_level="Strong")
            except Exception:  # noqa: BLE001 - another machine created it meanwhile
                if not self.exists():
                    raise
        self.client.load_collection(self.name)
        self._ready = True

    def _rows(self, expr: str, fields: list[str], limit: int = 16384) -> list[dict[str, Any]]:
        return self.client.query(self.name, filter=expr, output_fields=fields, limit=limit)

    def _put(self, key: str, gen: int, data: str) -> None:
        self.client.upsert(self.name, [{"key": key, "gen": int(gen), "data": data, "v": [0.0, 0.0]}])

    # -- commits
    def head(self) -> tuple[int, dict[str, Any]] | None:
        """(generation, manifest) of the newest commit; None for an index with none (or no metadata)."""
        if not self._ready and not self.exists():
            return None
        self.ensure()
        try:
            with expected():
                rows = self._rows('key like "commit/%"', ["gen", "data"])
        except Exception:  # noqa: BLE001 - dropped meanwhile (faqsearch drop on another machine)?
            self._ready = False
            if not self.exists():
                return None
            raise
        if not rows:
            return None
        top = max(rows, key=lambda r: r["gen"])
        return int(top["gen"]), json.loads(top["data"])

    def files(self, manifest: dict[str, Any]) -> dict[str, bytes]:
        """The files a commit names, checked against their SHA-256."""
        out = {}
        for name, (sha, chunks) in manifest["files"].items():
            keys = [f"blob/{sha}/{i:05d}" for i in range(chunks)]
            rows = {r["key"]: r["data"] for r in self._rows(f"key in {json.dumps(keys)}", ["data"], max(1, chunks))}
            if len(rows) != chunks:
                raise FAQSearchError(f"Milvus index {self.base}: {name} of generation {manifest.get('generation')} "
                                     "is incomplete in its metadata collection; rebuild the index with ingest --force")
            data = b"".join(base64.b64decode(rows[k]) for k in keys)
            if hashlib.sha256(data).hexdigest() != sha:
                raise FAQSearchError(f"Milvus index {self.base}: {name} does not match its hash; rebuild the index")
            out[name] = data
        return out

    def publish(self, generation: int, version: str, files: dict[str, bytes]) -> None:
        """Store the files (those not stored yet), then the commit row that makes them the head."""
        self.ensure()
        manifest: dict[str, Any] = {"generation": int(generation), "version": version, "at": time.time(), "files": {}}
        for name, data in files.items():
            sha = hashlib.sha256(data).hexdigest()
            chunks = max(1, -(-len(data) // CHUNK))
            manifest["files"][name] = [sha, chunks]
            if self._rows(f'key == "blob/{sha}/{chunks - 1:05d}"', ["gen"], 1):
                continue  # written by an earlier commit (the last chunk is written last)
            for i in range(chunks):
                self._put(f"blob/{sha}/{i:05d}", chunks, base64.b64encode(data[i * CHUNK:(i + 1) * CHUNK]).decode())
        self._put(f"commit/{int(generation):012d}", generation, json.dumps(manifest))

    def prune(self) -> None:
        """Drop commit rows beyond the newest :data:`KEEP_COMMITS` and the blobs no kept commit names."""
        if not self.exists():  # dropped (faqsearch drop)
            return
        rows = self._rows('key like "commit/%"', ["gen", "data"])
        rows.sort(key=lambda r: r["gen"])
        old, kept = rows[:-KEEP_COMMITS], rows[-KEEP_COMMITS:]
        if not old:
            return
        named = {sha for r in kept for sha, _ in json.loads(r["data"])["files"].values()}
        self.client.delete(self.name, filter=f"key in {json.dumps(['commit/%012d' % r['gen'] for r in old])}")
        for sha in {sha for r in old for sha, _ in json.loads(r["data"])["files"].values()} - named:
            self.client.delete(self.name, filter=f'key like "blob/{sha}/%"')

    # -- data collections that stopped being current
    def retire(self, current: str, names: list[str]) -> list[str]:
        """Record when each of ``names`` older than ``current`` (by generation) stopped being current;
        return those retired more than :data:`GRACE_S` ago (safe to drop: every reader has moved on).
        A newer one is a rebuild still being written, left alone."""
        self.ensure()
        known = {r["key"][len("retired/"):]: float(r["data"]) for r in self._rows('key like "retired/%"', ["data"])}
        if current in known:  # current again (a restore of the alias): its clock starts when it is replaced
            self.forget([current])
        now, due, top = time.time(), [], _generation_of(current)
        for n in names:
            g = _generation_of(n)
            if n == current or g is None or (top is not None and g >= top):
                continue
            if n not in known:
                self._put(f"retired/{n}", 0, repr(now))
            elif now - known[n] > GRACE_S:
                due.append(n)
        return due

    def forget(self, names: list[str]) -> None:
        if names:
            self.client.delete(self.name, filter=f"key in {json.dumps(['retired/' + n for n in names])}")

    # -- leases
    def lease(self, token: str) -> dict[str, Any] | None:
        rows = self._rows(f'key == "lease/{token}"', ["data"], 1)
        return json.loads(rows[0]["data"]) if rows else None

    def renew(self, token: str, holder: str) -> None:
        self._put(f"lease/{token}", 0, json.dumps({"holder": holder, "expires": time.time() + LEASE_S}))

    def end_lease(self, token: str) -> None:
        self.client.delete(self.name, filter=f'key == "lease/{token}"')


class Lease:
    """The writers' lock of one index, held from :meth:`acquire` to :meth:`release`, renewed meanwhile."""

    def __init__(self, uri: str, base: str, label: str | None = None):
        self.meta = Meta(uri, base)
        self.base = base
        self.label = label or f"Milvus index {base}"  # how errors name the index (its address)
        self.token = secrets.token_hex(8)
        self.holder = f"{socket.gethostname()}:{os.getpid()}"
        self.name = f"{_lock_prefix(base)}h{self.token}"
        self._renewed = 0.0
        self._lost: str | None = None
        self._why = ""  # the last refusal from Milvus, for the error when it keeps refusing
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None

    def _locks(self) -> list[str]:
        return sorted(n for n in collections(self.meta.client) if _is_lock(self.base, n))

    def _attempt(self, step) -> bool:
        """Run one step of taking the lock; False (and why, for the error if it keeps failing) where
        Milvus refuses it: another machine took that step first, or Milvus refuses it outright."""
        try:
            with expected():
                step()
            return True
        except Exception as exc:  # noqa: BLE001 - a lost race, said by the caller if it keeps happening
            self._why = said(exc)
            return False

    def _create_lock(self) -> bool:
        from pymilvus import DataType

        schema = self.meta.client.create_schema(auto_id=False, enable_dynamic_field=False)
        schema.add_field("id", DataType.INT64, is_primary=True)
        schema.add_field("v", DataType.FLOAT_VECTOR, dim=2)
        return self._attempt(lambda: self.meta.client.create_collection(self.name, schema=schema))

    def _rename(self, old: str) -> bool:
        return self._attempt(lambda: self.meta.client.rename_collection(old, self.name))

    def acquire(self, wait: float = WAIT_S) -> "Lease":
        """Take the lock: wait while a live writer holds it, take it over from one whose lease ran out.
        Gives up after ``wait`` seconds (:class:`ChangedMeanwhileError`, naming the holder), or at once
        when Milvus refuses the same step again and again (no privilege, a quota)."""
        try:
            self._acquire(wait)
        except BaseException:
            self.meta.close()
            raise
        self.meta.renew(self.token, self.holder)
        self._renewed = time.monotonic()
        self._beat = threading.Thread(target=self._renewing, name=f"lease-{self.base}", daemon=True)
        self._beat.start()
        return self

    def _acquire(self, wait: float) -> None:
        self.meta.ensure()
        deadline, pause, seen, failures, holder = time.monotonic() + wait, 0.05, {}, 0, "starting"
        while True:
            if time.monotonic() > deadline:
                raise ChangedMeanwhileError(f"{self.label} is being changed by another writer ({holder}) for over "
                                            f"{wait:.0f} s; retry later")
            if failures >= 20:  # every step lost a race 20 times over: Milvus refuses it
                raise FAQSearchError(f"{self.label}: Milvus refuses to create or rename the index's lock collection "
                                     f"{self.name} ({self._why}); check the user's privileges (CreateCollection, "
                                     "RenameCollection, DropCollection) and the collection quota")
            locks = self._locks()
            if not locks:  # a new index: its lock is made held
                if self._create_lock():
                    if self._locks() == [self.name]:
                        return
                    self.meta.client.drop_collection(self.name)  # two first writers: both step back, retry
                failures += 1
            elif not (held := [n for n in locks if not _free(self.base, n)]):
                if self._rename(locks[0]):
                    return
                failures += 1
            else:
                name = held[0]
                token = name[len(_lock_prefix(self.base)) + 1:]
                lease = self.meta.lease(token)
                holder = (lease or {}).get("holder", "starting")
                first = seen.setdefault(token, time.time())  # a holder that has not written its lease yet
                if time.time() > (float(lease["expires"]) if lease else first + LEASE_S):
                    if self._rename(name):
                        log.warning("took over the lock of %s from %s, whose lease ran out", self.label, holder)
                        self.meta.end_lease(token)
                        return
                    failures += 1
                else:
                    failures = 0
            time.sleep(pause * (0.5 + secrets.randbelow(100) / 100))
            pause = min(1.0, pause * 1.5)

    def _renewing(self) -> None:
        while not self._stop.wait(BEAT_S):
            try:
                if not self.meta.client.has_collection(self.name):
                    self._lost = "another writer took the lock over"
                    return
                self.meta.renew(self.token, self.holder)
                self._renewed = time.monotonic()
            except Exception as exc:  # noqa: BLE001 - a missed renewal; check() decides
                log.warning("could not renew the lease on Milvus index %s: %s", self.base, exc)

    @property
    def lost(self) -> bool:
        return self._lost is not None

    def check(self) -> None:
        """Before a commit: the lock is still this writer's and its lease was renewed in time."""
        if self._lost is None and time.monotonic() - self._renewed > LEASE_S / 2:
            self._lost = f"its lease was not renewed for {time.monotonic() - self._renewed:.0f} s"
        if self._lost is None and not self.meta.client.has_collection(self.name):
            self._lost = "another writer took the lock over"
        if self._lost is not None:
            raise ChangedMeanwhileError(f"{self.label}: this writer lost its lock ({self._lost}); nothing "
                                        "was committed. Retry")

    def release(self) -> None:
        self._stop.set()
        if self._beat is not None:
            self._beat.join(timeout=BEAT_S + 5)
        free = f"{_lock_prefix(self.base)}{_FREE}{secrets.token_hex(8)}"
        for step in (lambda: self.meta.client.rename_collection(self.name, free),
                     lambda: self.meta.end_lease(self.token)):
            try:
                with expected():
                    step()
            except Exception as exc:  # noqa: BLE001 - taken over, or the index was dropped meanwhile
                log.debug("lock of %s not given back: %s", self.base, exc)
        self.meta.close()


def drop_shared(uri: str, base: str) -> None:
    """Drop an index's metadata and lock collections (its data collections go with the backend's drop)."""
    meta = Meta(uri, base)
    try:
        for n in collections(meta.client):
            if n == meta.name or _is_lock(base, n):
                meta.client.drop_collection(n)
    finally:
        meta.close()
