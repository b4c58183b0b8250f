"""Phrasings an FAQ author may approve: real queries from the query log that the index answered with
the FAQ or ranked near it, and (on request) generated rewordings of its first question.

Nothing here writes. A suggestion becomes a question of the FAQ only when a person approves it
(``FAQSearch.approve``: source 'approved', removable like feedback); the rest are never indexed.
Real queries come first: on Banking77 the real phrasings people confirm moved MRR@10 far more than
generated ones (issue #26).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Sequence

from ..errors import unknown_faq
from ..querylog import unassigned
from ..text import is_blank
from .languages import writes
from .recipe import normal

WINDOW = 2000  # the most recent distinct logged queries looked at
NEAR_WINDOW = 300  # of those answered with another FAQ or none, this many are searched again for 'near'
NEAR_K = 3  # a logged query is near an FAQ that its search ranks in the top 3 (even below the threshold)
# ... at a confidence of 5% or more: off-topic queries were offered to three FAQs each at 0.4%
# (benchmarks/results/quality.md, "Near suggestions": 2026-11-28, sample_data and Banking77 faqs_5 keep
# 15 of 16 and 102 of 108 near offers to the right FAQ, and 21 of 90 and 71 of 894 to off-topic queries)
NEAR_MIN_CONFIDENCE = 0.05


@dataclass
class Suggestion:
    text: str
    source: str  # 'answered' (the index answers it with this FAQ now), 'near' (ranks it near the top), 'generated'
    score: float | None = None  # similarity with the FAQ (a logged query: its best question's cosine)
    count: int = 1  # times it was asked (logged suggestions)
    confidence: float | None = None  # the confidence of this FAQ as the query's answer now (logged queries)


@dataclass
class Suggestions:
    faq_id: str
    suggestions: list[Suggestion]
    notes: list[str] = field(default_factory=list)  # why something was left out (no log, a language)

    def to_dict(self) -> dict[str, Any]:
        return {"faq_id": self.faq_id, "suggestions": [asdict(s) for s in self.suggestions], "notes": self.notes}


def _logged(querylog) -> list[dict[str, Any]]:
    """Distinct logged queries, newest first: text, the FAQ that answered it last, best score, count,
    and the FAQ a person assigned it to (if any)."""
    # grouped first, then the last row of each query read by its id: a subquery per query over the whole
    # log took 41 s at 200k rows, holding the log's lock (every logged ask waited for it)
    return querylog._rows(  # noqa: SLF001 (the log's own locked reader)
        "select g.query, g.count, g.last, g.score, (select top_faq from queries where id = g.last) as top_faq, "
        "g.answered, g.feedback_faq from (select query, count(*) as count, max(id) as last, max(score) as score, "
        "max(answered) as answered, max(feedback_faq) as feedback_faq from queries group by query "
        "order by last desc limit ?) g order by g.last desc", [WINDOW])


def suggest(searcher, faq_id: str, querylog=None, *, limit: int = 20, generate: int = 0,
            load_generator: Callable[[], Any] | None = None, languages: Sequence[str] | None = None,
            seed: int | None = 0, refusal: str | None = None) -> Suggestions:
    """Up to ``limit`` logged queries for ``faq_id`` (those answered with it first, most asked first,
    then those whose search ranked it in the top :data:`NEAR_K`) and up to ``generate`` generated
    rewordings of its first question (``load_generator()`` is called only then, and only when the
    generator writes the question's language: ``languages``; ``refusal``: why none does, for the note).
    Texts the FAQ already has, and queries a person assigned to another FAQ, are left out."""
    store = searcher.snap.store
    faq = store.faq(faq_id)
    if faq is None:
        raise unknown_faq(faq_id, lambda i: store.faq(i) is not None)
    questions = [q["text"] for q in faq["questions"]]
    seen = {normal(q) for q in questions}
    out: list[Suggestion] = []
    notes: list[str] = []

    def take(s: Suggestion) -> None:
        key = normal(s.text)
        if key and key not in seen:
            seen.add(key)
            out.append(s)

    if querylog is None:
        notes.append("no query log (nothing was asked through the service or `faqsearch ask --log` yet, or the service runs with --no-log)")
    else:
        # not those a person assigned to another FAQ that still holds them
        rows = [r for r in unassigned(_logged(querylog), store, keep=faq_id) if not is_blank(r["query"])]
        # every candidate is asked again of the index as it is now: the log holds what it answered then
        logged_here = [r for r in rows if r["top_faq"] == faq_id]
        others = [r for r in rows if r["top_faq"] != faq_id][:NEAR_WINDOW]
        candidates = logged_here + others
        asked: dict[str, int] = {}  # times asked, its case and punctuation variants together (as gaps counts)
        for r in rows:
            asked[normal(r["query"])] = asked.get(normal(r["query"]), 0) + r["count"]
        answered, near = [], []
        for r, res in zip(candidates, searcher.answer([r["query"] for r in candidates], k=NEAR_K) if candidates else []):
            hit = next((a for a in _listed(res) if a.faq_id == faq_id), None)
            if hit is None:
                continue
            if res.answers and res.answers[0].faq_id == faq_id:
                answered.append((hit, r))
            elif not res.answers and (hit.confidence is None or hit.confidence >= NEAR_MIN_CONFIDENCE):
                near.append((hit, r))  # unanswered, this FAQ among the nearest; one answered with another FAQ is not
        count = lambda r: asked.get(normal(r["query"]), r["count"])  # noqa: E731
        for hit, r in sorted(answered, key=lambda x: (-count(x[1]), -_rank_value(x[0]))):
            if len(out) >= limit:
                break
            take(Suggestion(r["query"], "answered", float(hit.score), count(r), hit.confidence))
        for hit, r in sorted(near, key=lambda x: -_rank_value(x[0])):
            if len(out) >= limit:
                break
            take(Suggestion(r["query"], "near", float(hit.score), count(r), hit.confidence))
    if generate > 0 and questions:
        if refusal is not None or not writes(languages, questions[:1]):
            notes.append(f"no generated suggestions: {refusal}" if refusal is not None else
                         "the generator does not write this FAQ's language: no generated suggestions "
                         "(serve or run with a multilingual --generator)")
        elif load_generator is not None:
            from .meaning import answers_alike
            from .recipe import paraphrase

            for p in paraphrase(load_generator(), questions[0], n=generate, scorer=searcher.embed_full, seed=seed,
                                same_intent=answers_alike(searcher, questions[0], faq_id)):
                take(Suggestion(p.text, "generated", p.score))
    return Suggestions(faq_id, out, notes)


def _listed(res) -> list:
    """A result's ranked answers (its top k), answered or not."""
    return res.ranked or res.answers or ([res.nearest] if res.nearest is not None else [])


def _rank_value(a) -> float:
    return a.confidence if a.confidence is not None else a.score
