"""BM25 of an index's questions scored in numpy, from postings written with its version.

FTS5 ranks a query by calling ``bm25()`` on every row that shares a term with it: about 0.7 us a
posting, so 240 ms a hybrid query and 72 s of threshold choice at ingest on a million questions, and
6 ms a Chinese query at 12k questions, where each character is a term (docs/speed.md). A version of
at least :data:`MIN_QUESTIONS` questions (every non-empty one; faster than FTS5 from 500 questions
up, the smallest size measured) therefore also holds its postings as arrays (``lexical/`` beside
``store.db``), read from FTS5's own tokens when the version is written: the rows of each term with
the term's count in the row, and each row's token count. A query
scores those rows with FTS5's formula and FTS5's statistics of the moment (rows, tokens, each term's
row count, read from the store), adding terms in the order of the MATCH expression, so each score is
the float FTS5 computes. Rows added since (in-place edits, ids above the arrays' last id) are scored
by FTS5 itself, restricted to those ids; rows removed since are left out by the store's generation
filter. Question rows never change their tokens (an edit adds rows and marks old ones), which is
what lets the arrays outlive edits; a store whose rows up to that id no longer match is not served
from them. Filtered queries use FTS5.
"""
from __future__ import annotations

import json
import math
import os
import secrets
import shutil
import sqlite3
from typing import Any, Sequence

import numpy as np

from ...defaults import LEXICAL_ARRAYS_MIN as MIN_QUESTIONS
from ...errors import IndexFormatError
from ...files import load_npy, preallocate, share_dir
from ...filters import filter_sql
from ...index.format import DIR_META, LEXICAL as DIR, LEXICAL_ARRAYS as _ARRAYS, NPY
from ...lexical import fts_query, query_terms, query_tokens

FORMAT = 1
K1, B = 1.2, 0.75  # FTS5's bm25() constants
_MEMO = 100_000  # term numbers a Postings remembers


def _varints(blob: bytes) -> list[int]:
    """SQLite's varints (FTS5's record format): 7 bits a byte, high bit = more, the 9th byte whole."""
    out, i = [], 0
    while i < len(blob):
        v = 0
        for j in range(9):
            c = blob[i]
            i += 1
            if j == 8:
                v = (v << 8) | c
                break
            v = (v << 7) | (c & 0x7F)
            if not c & 0x80:
                break
        out.append(v)
    return out


def fts_totals(conn: sqlite3.Connection) -> tuple[int, int]:
    """(rows, tokens) as FTS5's bm25() reads them: its averages record (id 1 of the data table)."""
    row = conn.execute("select block from questions_fts_data where id = 1").fetchone()
    if row is None or not row[0]:
        return 0, 0
    values = _varints(bytes(row[0]))
    return values[0], sum(values[1:])


def write(conn: sqlite3.Connection, directory: str, min_questions: int | None = None) -> bool:
    """Write the postings of every row of the store into ``directory/lexical`` (replacing any), when
    it holds at least ``min_questions`` questions. Reads FTS5's own tokens (fts5vocab 'row' for the
    terms in order, 'instance' for every token) in blocks, straight into memory-mapped files: memory
    stays a few arrays of one number per question. Returns whether arrays were written."""
    limit = MIN_QUESTIONS if min_questions is None else min_questions
    target = os.path.join(directory, DIR)
    if os.path.isdir(target):
        shutil.rmtree(target)
    n_questions = int(conn.execute("select count(*) from questions").fetchone()[0])
    if n_questions < max(limit, 1):
        return False
    from numpy.lib.format import open_memmap

    tmp = os.path.join(directory, f".lexical-{secrets.token_hex(4)}")
    os.mkdir(tmp)  # the umask's mode, as the version's other files (mkdtemp would give 0700)
    try:
        ids = np.fromiter((r[0] for r in conn.execute("select id from questions order by id")), dtype=np.int64,
                          count=n_questions)
        n_terms, n_post, n_bytes = conn.execute(
            "select count(*), coalesce(sum(doc), 0), coalesce(sum(length(cast(term as blob))), 0) "
            "from questions_fts_vocab").fetchone()

        def out(name, shape, dtype):
            path = os.path.join(tmp, name + NPY)
            arr = open_memmap(path, mode="w+", dtype=dtype, shape=(shape,))
            preallocate(path)  # a full disk fails here, not with SIGBUS on a page of the map
            return arr

        terms, term_start, starts = out("terms", n_bytes, np.uint8), out("term_start", n_terms + 1, np.int64), \
            out("starts", n_terms + 1, np.int64)
        rows, tf = out("rows", n_post, np.int32), out("tf", n_post, np.int32)
        first_token = np.zeros(n_terms + 1, dtype=np.int64)  # where each term's tokens begin in the 'instance' order
        i = b_at = p_at = t_at = 0
        for term, doc, cnt in conn.execute("select term, doc, cnt from questions_fts_vocab"):  # in term order
            raw = term.encode("utf-8")
            terms[b_at:b_at + len(raw)] = np.frombuffer(raw, dtype=np.uint8)
            term_start[i], starts[i], first_token[i] = b_at, p_at, t_at
            b_at, p_at, t_at, i = b_at + len(raw), p_at + int(doc), t_at + int(cnt), i + 1
        term_start[i], starts[i], first_token[i] = b_at, p_at, t_at
        if i != n_terms or p_at != n_post:
            raise RuntimeError("FTS5's vocabulary changed while it was read")
        doclen = np.zeros(len(ids), dtype=np.int64)
        conn.execute("create virtual table if not exists temp.faqsearch_instances "
                     "using fts5vocab(main, questions_fts, 'instance')")
        cur = conn.execute("select term, doc from temp.faqsearch_instances")  # by term, then row, then offset
        seen, at, last = 0, 0, None  # tokens read, postings written, (term number, row) of the last token
        while True:
            block = cur.fetchmany(200_000)
            if not block:
                break
            docs = np.fromiter((d for _, d in block), dtype=np.int64, count=len(block))
            pos = np.searchsorted(ids, docs)
            if np.any(pos >= len(ids)) or np.any(ids[np.minimum(pos, len(ids) - 1)] != docs):
                raise RuntimeError("FTS5 holds rows that the questions table does not")
            np.add.at(doclen, pos, 1)
            tid = np.searchsorted(first_token, np.arange(seen, seen + len(block)), side="right") - 1
            for k in np.flatnonzero(np.r_[True, tid[1:] != tid[:-1]]):  # each term's text, once a block
                if block[k][0].encode("utf-8") != bytes(terms[term_start[tid[k]]:term_start[tid[k] + 1]]):
                    raise RuntimeError("FTS5's tokens do not match its vocabulary")
            # a run = one (term, row); its length is the term's count in that row
            run = np.ones(len(block), dtype=bool)
            run[1:] = (tid[1:] != tid[:-1]) | (pos[1:] != pos[:-1])
            if last is not None and (tid[0], pos[0]) == last:
                run[0] = False
            first = np.flatnonzero(run)
            stop = first[0] if len(first) else len(block)
            if stop:  # the block begins inside the last block's last run
                tf[at - 1] += stop
            rows[at:at + len(first)] = pos[first]
            tf[at:at + len(first)] = np.diff(np.append(first, len(block)))
            at += len(first)
            seen += len(block)
            last = (tid[-1], pos[-1])
        if at != n_post or seen != t_at:
            raise RuntimeError(f"FTS5 gave {at} postings and {seen} tokens, its vocabulary {n_post} and {t_at}")
        np.save(os.path.join(tmp, "ids" + NPY), ids)
        np.save(os.path.join(tmp, "doclen" + NPY), doclen.astype(np.int32))
        for arr in (terms, term_start, starts, rows, tf):
            arr.flush()
        del terms, term_start, starts, rows, tf
        meta = {"format": FORMAT, "max_id": int(ids.max()), "rows": int(len(ids)), "terms": int(n_terms),
                "postings": int(n_post), "bytes": {n: os.path.getsize(os.path.join(tmp, n + NPY)) for n in _ARRAYS}}
        with open(os.path.join(tmp, DIR_META), "w", encoding="utf-8") as f:
            json.dump(meta, f)
        os.rename(tmp, target)
        return True
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        conn.execute("drop table if exists temp.faqsearch_instances")


class Postings:
    """A version's postings, memory-mapped."""

    def __init__(self, path: str, meta: dict):
        self.meta, self.path = meta, path
        self.index: str | None = None  # the index, for messages (its store's)
        self.max_id = int(meta["max_id"])
        for name in _ARRAYS:  # plain views of the maps: a memmap's own slicing costs microseconds a call
            setattr(self, name, load_npy(os.path.join(path, name + NPY), mmap_mode="r").view(np.ndarray))
        self._blob = memoryview(self.terms)
        self._numbers: dict[str, int] = {}  # term -> number, for the terms asked so far (bounded below)

    @classmethod
    def open(cls, directory: str) -> "Postings | None":
        """The postings beside a store, or None where there are none or they do not match their meta."""
        path = os.path.join(directory, DIR)
        try:
            with open(os.path.join(path, DIR_META), encoding="utf-8") as f:
                meta = json.load(f)
            if meta.get("format") != FORMAT or any(
                    os.path.getsize(os.path.join(path, n + NPY)) != meta["bytes"][n] for n in _ARRAYS):
                return None
            return cls(path, meta)
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def damaged(self, name: str, why: str):
        """The IndexFormatError for a damaged array (a damage the open's sampled fingerprint missed),
        naming the file and the fix."""
        from ...index.config import damaged

        return IndexFormatError(damaged(self.index or os.path.dirname(self.path), f"{DIR}/{name}", why))

    def term(self, text: str) -> int:
        """The number of a term (binary search over the sorted UTF-8 terms), -1 if absent; the terms
        asked so far are remembered (up to :data:`_MEMO` of them), as queries repeat their words."""
        j = self._numbers.get(text)
        if j is not None:
            return j
        key, blob, start = text.encode("utf-8"), self._blob, self.term_start
        lo, hi = 0, len(start) - 1
        while lo < hi:
            mid = (lo + hi) // 2
            if bytes(blob[start[mid]:start[mid + 1]]) < key:
                lo = mid + 1
            else:
                hi = mid
        j = lo if lo < len(start) - 1 and bytes(blob[start[lo]:start[lo + 1]]) == key else -1
        if len(self._numbers) >= _MEMO:
            self._numbers.clear()
        self._numbers[text] = j
        return j

    def doc_freq(self, text: str) -> int:
        """Rows of the arrays that hold the term."""
        j = self.term(text)
        return 0 if j < 0 else int(self.starts[j + 1] - self.starts[j])

    def scores(self, terms: Sequence[str], doc_freq: dict[str, int], n_rows: int, n_tokens: int) -> np.ndarray:
        """FTS5's bm25 (negated: higher is better) of every row of the arrays for an OR of ``terms``
        (in the MATCH expression's order), 0 where no term occurs."""
        out = np.zeros(len(self.ids), dtype=np.float64)
        if n_rows <= 0:
            return out
        avgdl = float(n_tokens) / float(n_rows)
        for t in terms:
            j = self.term(t)
            if j < 0:
                continue
            idf = math.log((n_rows - doc_freq[t] + 0.5) / (doc_freq[t] + 0.5))  # the C library's log, as SQLite's
            if idf <= 0.0:
                idf = 1e-6
            first, stop = int(self.starts[j]), int(self.starts[j + 1])
            if not 0 <= first <= stop <= len(self.rows):
                raise self.damaged("starts" + NPY, f"term {j} has postings {first} to {stop} of {len(self.rows)}")
            rows = np.asarray(self.rows[first:stop])
            if len(rows) and (rows.min() < 0 or rows.max() >= len(self.ids)):
                wrong = int(rows[(rows < 0) | (rows >= len(self.ids))][0])
                raise self.damaged("rows" + NPY, f"a posting names row {wrong} of {len(self.ids)}")
            f = np.asarray(self.tf[first:stop], dtype=np.float64)
            d = self.doclen[rows].astype(np.float64)
            out[rows] += idf * ((f * (K1 + 1.0)) / (f + K1 * (1 - B + B * d / avgdl)))
        return out

    def top(self, terms: Sequence[str], doc_freq: dict[str, int], n_rows: int, n_tokens: int, n: int,
            hidden: np.ndarray) -> list[tuple[int, float]]:
        """The ``n`` best (question id, score) of the arrays' rows, best first (ties by id); rows at
        positions ``hidden`` are left out."""
        s = self.scores(terms, doc_freq, n_rows, n_tokens)
        if len(hidden):
            s[hidden] = 0.0
        hit = np.flatnonzero(s > 0.0)
        if len(hit) > n:
            cut = np.partition(s[hit], len(hit) - n)[len(hit) - n]
            hit = hit[s[hit] >= cut]  # ties at the cut all kept, then cut by id below
        best = hit[np.lexsort((self.ids[hit], -s[hit]))[:n]]
        return list(zip(self.ids[best].tolist(), s[best].tolist()))


def search(store, conn: sqlite3.Connection, texts: Sequence[str], n: int,
           filters: dict[str, Any] | None = None) -> list[list[tuple[int, float]]]:
    """:meth:`faqsearch.backends.embedded.store.Store.lexical` (called under the store's lock): for each text the top-n
    (question id, FTS5 bm25 negated), best first. Rows above the arrays' last id (or every row, where
    a version has no arrays) and filtered queries are ranked by FTS5; the arrays' rows by numpy. Each
    text is read in one read transaction, so its counts, totals and rows come from one state of the
    file, whatever other processes commit meanwhile."""
    if n <= 0:
        return [[] for _ in texts]
    where = filter_sql(filters)
    out = []
    for text in texts:
        own = not conn.in_transaction  # inside a writer's transaction its reads are consistent already
        if own:
            conn.execute("begin")
        try:
            out.append(_one(store, conn, text, n, where))
        finally:
            if own:
                conn.execute("commit")  # nothing was written: this ends the read
    return out


def _one(store, conn: sqlite3.Connection, text: str, n: int, filter_sql: tuple[str, list]) -> list[tuple[int, float]]:
    where, fargs = filter_sql
    g = int(store._g)
    arrays = None if where else _arrays(store, conn)
    tokens = query_tokens(text, store.cjk, store.stem)
    if arrays is not None:  # fts5vocab counts a term's rows by reading its postings: 19 ms a query at 1M
        df = {t: c for t in tokens if (c := _doc_freq(conn, arrays, t))}
    else:
        df = dict(conn.execute(f"select term, doc from questions_fts_vocab where term in ({','.join('?' * len(tokens))})",
                               tokens).fetchall()) if tokens else {}
    terms = query_terms(text, df, store._n_docs(), store.cjk, store.stem)
    q = fts_query(terms)
    if q is None:
        return []
    if where:
        rows = conn.execute(
            "select questions_fts.rowid, -bm25(questions_fts) from questions_fts "
            f"join questions q on q.id = questions_fts.rowid and {store._vis('q')} "
            f"join faqs f on f.id = q.faq_id and {store._vis('f')} "
            f"where questions_fts match ? and {where} order by bm25(questions_fts) limit ?", [q, *fargs, n]).fetchall()
        return [(int(r[0]), float(r[1])) for r in rows]
    # rows this generation does not see (removed since, or not committed yet) are left out by id
    above = 0 if arrays is None else arrays[0].max_id
    rows = [] if arrays is not None and not arrays[2] else conn.execute(
        "select rowid, -bm25(questions_fts) from questions_fts where questions_fts match ? and rowid not in "
        f"(select id from questions where gen > {g} or dead <= {g}) and rowid > {above} "
        "order by bm25(questions_fts) limit ?", [q, n]).fetchall()
    hits = [(int(r[0]), float(r[1])) for r in rows]
    if arrays is not None:
        hits = sorted(hits + arrays[0].top(terms, df, *fts_totals(conn), n, arrays[1]), key=lambda h: (-h[1], h[0]))[:n]
    return hits


def doc_freqs(store, conn: sqlite3.Connection, tokens: Sequence[str]) -> tuple[dict[str, int], int]:
    """(visible rows holding each token, visible rows), in one read. FTS5 counts every row it holds,
    the rows committed edits removed too (kept for readers of older versions until a compaction), so
    a feedback undone left its words counted; those rows are taken off here (token matching's IDF,
    which must match the visible row count beside it)."""
    own = not conn.in_transaction
    if own:
        conn.execute("begin")
    try:
        arrays = _arrays(store, conn)
        if arrays is not None:
            df = {t: _doc_freq(conn, arrays, t) for t in tokens}
        else:
            df = dict(conn.execute(f"select term, doc from questions_fts_vocab where term in ({','.join('?' * len(tokens))})",
                                   list(tokens)).fetchall()) if tokens else {}
        above = arrays[0].max_id if arrays is not None else -1  # the arrays' own hidden rows are counted off by them
        hidden = ",".join(str(r[0]) for r in conn.execute(
            f"select id from questions where id > {above} and not {store._vis('questions')}"))
        postings, mask = (arrays[0], None) if arrays is not None else (None, None)
        if postings is not None and len(arrays[1]):
            mask = np.zeros(len(postings.ids), dtype=bool)
            mask[arrays[1]] = True
        for t in [t for t in dict.fromkeys(tokens) if df.get(t)]:  # each once: a token asked twice is one count
            if mask is not None and (j := postings.term(t)) >= 0:
                df[t] -= int(mask[np.asarray(postings.rows[int(postings.starts[j]):int(postings.starts[j + 1])])].sum())
            if hidden:
                df[t] -= int(conn.execute(f"select count(*) from questions_fts where questions_fts match ? and rowid > {above} "
                                          f"and rowid in ({hidden})", ['"' + t.replace('"', '""') + '"']).fetchone()[0])
        return df, store._n_docs()
    finally:
        if own:
            conn.execute("commit")


def _doc_freq(conn: sqlite3.Connection, arrays: "tuple[Postings, np.ndarray, bool]", token: str) -> int:
    """Rows that hold ``token`` as an FTS5 term, as fts5vocab would count them. A token the arrays
    do not know (absent, or not in the form FTS5 stores: FTS5 folds accents, so 'café' is no term of
    its vocabulary, while MATCH '"café"' finds 'cafe') is looked up in fts5vocab itself: its rows
    are all above the arrays, so that lookup reads only their postings."""
    postings, _, newer = arrays
    if postings.term(token) < 0:
        if not newer:
            return 0
        row = conn.execute("select doc from questions_fts_vocab where term = ?", [token]).fetchone()
        return int(row[0]) if row else 0
    return postings.doc_freq(token) + (_count_above(conn, token, postings.max_id) if newer else 0)


def _count_above(conn: sqlite3.Connection, term: str, max_id: int) -> int:
    """Rows above ``max_id`` that hold ``term`` (FTS5 seeks to the id: no scan of the others)."""
    return int(conn.execute(f"select count(*) from questions_fts where questions_fts match ? and rowid > {int(max_id)}",
                            ['"' + term.replace('"', '""') + '"']).fetchone()[0])


def _arrays(store, conn: sqlite3.Connection) -> "tuple[Postings, np.ndarray, bool] | None":
    """(the postings beside the store, positions of their rows the store's generation does not see,
    whether the store has rows above the arrays' last id), remembered until a connection changes
    rows; None without arrays, or where the store's rows up to the arrays' last id are not the rows
    they were made of."""
    if not getattr(store, "read_arrays", True):
        return None
    key = (conn.total_changes, conn.execute("pragma data_version").fetchone()[0])
    memo = getattr(store, "_postings_memo", None)
    if memo is None or memo[0] != key:
        arrays = Postings.open(os.path.dirname(os.path.abspath(store.path)))
        value = None
        if arrays is not None:
            arrays.index = getattr(store, "index", None)
            same, above = _rows_beside(conn, arrays)
            if same:
                unseen = np.array([r[0] for r in conn.execute(
                    f"select id from questions where id <= {arrays.max_id} and not {store._vis('questions')}")],
                    dtype=np.int64)
                value = (arrays, np.searchsorted(arrays.ids, unseen), above > 0)
        memo = store._postings_memo = (key, value)
    return memo[1]


def still_valid(conn: sqlite3.Connection, directory: str, newer_share: float = 0.1) -> bool:
    """Whether a new version may share the arrays of the version ``directory``: they describe this
    store's rows up to their last id (ids are never reused: the same count means the same rows), and
    the rows above it, which FTS5 ranks, are at most ``newer_share`` of theirs."""
    arrays = Postings.open(directory)
    if arrays is None:
        return False
    same, above = _rows_beside(conn, arrays)
    return same and above <= newer_share * arrays.meta["rows"]


def _rows_beside(conn: sqlite3.Connection, arrays: Postings) -> tuple[bool, int]:
    """(whether the store's rows up to the arrays' last id are the rows they were made of, which the
    count tells as ids are never reused; how many rows lie above that id)."""
    m = arrays.max_id
    below = conn.execute(f"select count(*) from questions where id <= {m}").fetchone()[0]
    above = conn.execute(f"select count(*) from questions where id > {m}").fetchone()[0]
    return below == arrays.meta["rows"], int(above)


def share(src_dir: str, dst_dir: str) -> bool:
    """Put the arrays of ``src_dir`` into the new version ``dst_dir`` as hard links (copies where the
    filesystem has none): for a version whose store holds the same rows up to their last id."""
    return share_dir(os.path.join(src_dir, DIR), os.path.join(dst_dir, DIR), [n + NPY for n in _ARRAYS])
