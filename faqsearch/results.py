"""What faqsearch returns: small dataclasses with a JSON form (the CLI's --json and the HTTP API
print exactly ``to_dict()``)."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any, Callable, Sequence

# where a stored question came from: users' own queries (feedback, approved suggestions) are never
# shown to people who cannot read the query log (:meth:`Result.public`)
USER_SOURCES = ("feedback", "approved")


@dataclass
class Answer:
    """One FAQ matched by a query: its answer and the best-matching stored question.

    ``score`` is the cosine similarity in dense and hybrid modes (a ``--threshold`` applies to it) and
    the BM25 score in lexical mode. ``confidence`` is the probability that this answer is the right
    FAQ for the query (:mod:`faqsearch.confidence`), never rising down a list; None in lexical mode
    and for indexes built before it existed."""

    faq_id: str
    answer: str
    score: float
    question: str
    question_id: int
    source: str = "corpus"
    category: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    dense: float | None = None  # cosine of the best question (dense and hybrid modes)
    lexical: float | None = None  # BM25 of the best lexical question match (lexical and hybrid modes)
    # hybrid ranking score: cosine + token weight * token match + weight * normalised BM25 + the prototype term
    fused: float | None = None
    token: float | None = None  # token match of query and question (hybrid mode; faqsearch.tokenmatch)
    prototype: float | None = None  # cosine to the FAQ's prototype where the ranking or confidence uses it (faqsearch.prototypes)
    confidence: float | None = None  # P(this answer is right), 0-1 (faqsearch.confidence)
    # what to show a user ("did you mean ...?"): the matched question where it was written for the FAQ, else
    # (a user's query that feedback or approve made a phrasing) the FAQ's first written question
    faq_question: str | None = None

    def public(self) -> "Answer":
        """This answer as a user who cannot read the query log sees it: a matched question that was
        another user's query (feedback, an approved suggestion) is shown as ``faq_question``, the FAQ's first
        written question (``source`` still says which kind matched)."""
        return replace(self, question=self.faq_question or "") if self.source in USER_SOURCES else self


@dataclass
class Result:
    """The answers to one query. A query is answered when its best-ranked answer's confidence reaches
    the index's operating point (``min_confidence``), or, given a cosine ``threshold`` (or on an index
    without a confidence model), when its cosine reaches it, whatever ``k`` is; ``answers`` then lists
    the top k that reach it (empty otherwise), and ``nearest`` is the best-ranked answer either way."""

    query: str
    answers: list[Answer]
    best_score: float | None  # the score of the best-ranked answer, even below the threshold
    threshold: float | None  # None in lexical mode: BM25 scores are no cosines, and no threshold applies
    nearest: Answer | None = field(default=None, repr=False, compare=False)  # best-ranked, even below the threshold
    below_threshold: int = field(default=0, compare=False)  # answers within the top k left out for their score
    min_confidence: float | None = None  # the confidence that decided (None: the cosine threshold did)
    ranked: list[Answer] = field(default_factory=list, repr=False, compare=False)  # the top k, answered or not

    @property
    def confident(self) -> bool:
        return bool(self.answers)

    answered = confident

    def public(self) -> "Result":
        """The result as a user who cannot read the query log may see it (:meth:`Answer.public`)."""
        return replace(self, answers=[a.public() for a in self.answers], ranked=[a.public() for a in self.ranked],
                       nearest=None if self.nearest is None else self.nearest.public())

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: ``answered``, and ``nearest`` (the best guess, with its confidence) when not
        answered, so a bot can offer "did you mean ...?"."""
        return {"query": self.query, "answered": self.answered, "answers": [asdict(a) for a in self.answers],
                "nearest": asdict(self.nearest) if self.nearest is not None and not self.answers else None,
                "best_score": self.best_score, "threshold": self.threshold, "min_confidence": self.min_confidence}


@dataclass
class EditReport:
    """What an edit (add / update / remove / upsert / feedback / unassign) changed."""

    added_faqs: list[str] = field(default_factory=list)
    updated_faqs: list[str] = field(default_factory=list)
    removed_faqs: list[str] = field(default_factory=list)
    added_questions: int = 0
    removed_questions: int = 0
    unchanged_faqs: int = 0
    previous_version: str | None = None  # kept when the edit dropped questions or rewrote several FAQs: `restore` it

    @property
    def changed(self) -> bool:
        return bool(self.added_faqs or self.updated_faqs or self.removed_faqs or self.added_questions
                    or self.removed_questions)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def with_faq_questions(results: list[Result], first_questions: Callable[[Sequence[str]], dict[str, str]]) -> list[Result]:
    """``results`` with each answer's ``faq_question`` filled: its question, or where that was a user's
    query, its FAQ's first written question (``first_questions``, one call for all such answers)."""
    answers = list({id(a): a for r in results for a in (*r.ranked, *r.answers, r.nearest) if a is not None}.values())
    users = sorted({a.faq_id for a in answers if a.source in USER_SOURCES})
    titles = first_questions(users) if users else {}
    for a in answers:
        a.faq_question = titles.get(a.faq_id) if a.source in USER_SOURCES else a.question
    return results
