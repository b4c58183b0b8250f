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

from ..errors import UnknownFAQError
from ..text import is_blank
from .languages import writes
from .recipe import normal

WINDOW = 2000  # the most recent distinct logged queries looked at
NEAR_WINDOW = 300  # of those answered with another FAQ or none, this many are searched again for 'near'
NEAR_K = 3  # a logged query is near an FAQ that its search ranks in the top 3 (even below the threshold)


@dataclass
class Suggestion:
    text: str
    source: str  # 'answered' (logged, answered with this FAQ), 'near' (logged, ranked it near the top), 'generated'
    score: float | None = None  # similarity with the FAQ (a logged query: its best question's cosine)
    count: int = 1  # times it was asked (logged suggestions)


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
    return querylog._rows(  # noqa: SLF001 (the log's own locked reader)
        "select query, count(*) as count, max(id) as last, max(score) as score, "
        "(select top_faq from queries q2 where q2.query = q.query order by id desc limit 1) as top_faq, "
        "max(answered) as answered, max(feedback_faq) as feedback_faq "
        "from queries q group by query order by last desc limit ?", [WINDOW])


def suggest(searcher, faq_id: str, querylog=None, *, limit: int = 20, generate: int = 0,
            load_generator: Callable[[], Any] | None = None, languages: Sequence[str] | None = None,
            seed: int | None = 0) -> Suggestions:
    """Up to ``limit`` logged queries for ``faq_id`` (those answered with it first, most asked first,
    then those whose search ranked it in the top :data:`NEAR_K`) and up to ``generate`` generated
    rewordings of its first question (``load_generator()`` is called only then, and only when the
    generator writes the question's language: ``languages``). Texts the FAQ already has, and queries a
    person assigned to another FAQ, are left out."""
    store = searcher.snap.store
    faq = store.faq(faq_id)
    if faq is None:
        raise UnknownFAQError(f"unknown FAQ id {faq_id!r}; see `faqsearch list`")
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
        rows = [r for r in _logged(querylog) if not is_blank(r["query"])
                and r["feedback_faq"] in (None, faq_id)]
        answered = sorted((r for r in rows if r["top_faq"] == faq_id and r["answered"]),
                          key=lambda r: (-r["count"], -(r["score"] or 0.0)))
        for r in answered[:limit]:
            take(Suggestion(r["query"], "answered", r["score"], r["count"]))
        others = [r for r in rows if not (r["top_faq"] == faq_id and r["answered"])][:NEAR_WINDOW]
        if others and len(out) < limit:
            near = []
            for r, res in zip(others, searcher.answer([r["query"] for r in others], k=NEAR_K, threshold=-1)):
                hit = next((a for a in res.answers if a.faq_id == faq_id), None)
                if hit is not None:
                    near.append((hit.score, r))
            for score, r in sorted(near, key=lambda x: -x[0]):
                if len(out) >= limit:
                    break
                take(Suggestion(r["query"], "near", float(score), r["count"]))
    if generate > 0 and questions:
        if not writes(languages, questions[:1]):
            notes.append("the generator does not write this FAQ's language: no generated suggestions "
                         "(serve or run with a multilingual --generator)")
        elif load_generator is not None:
            from .recipe import paraphrase

            for p in paraphrase(load_generator(), questions[0], n=generate, scorer=searcher.embed_full, seed=seed):
                take(Suggestion(p.text, "generated", p.score))
    return Suggestions(faq_id, out, notes)
