"""The HTTP API's request bodies, with every bound a client can hit: a request outside them is a
422 naming the field, checked before anything is read or written."""
from __future__ import annotations

from typing import Any, Optional

from pydantic import BaseModel, Field, field_validator

from ..defaults import ASK_K, LEARN_EPOCHS, LEARN_MIN_MINUTES, LEARN_MINUTES, MAX_COUNT, MODES
from ..errors import InvalidOptionError
from ..filters import check_filters

MAX_BODY = 1 << 20  # bytes per request body
MAX_QUERY = 1000  # characters per query
MAX_PARAPHRASE = 300  # characters of a text to paraphrase: its rewordings' token budget grows with it
MAX_BATCH = 100  # queries per batch request
MAX_K = 50
MAX_ID = 200  # characters of an FAQ id or a category
MAX_FILTER_KEYS = 20
MAX_FILTER_VALUES = 100
MAX_OFFSET = MAX_COUNT
MAX_QUERY_ID = (1 << 63) - 1
MODE_PATTERN = "^(" + "|".join(MODES) + ")$"


def _check_filters(value: Optional[dict[str, Any]]) -> Optional[dict[str, Any]]:
    if value is None:
        return None
    if len(value) > MAX_FILTER_KEYS:
        raise ValueError(f"at most {MAX_FILTER_KEYS} filter fields")
    for key, v in value.items():
        if len(key) > MAX_ID:
            raise ValueError(f"a filter field name is over {MAX_ID} characters")
        values = v if isinstance(v, list) else [v]
        if len(values) > MAX_FILTER_VALUES:
            raise ValueError(f"filter {key!r}: at most {MAX_FILTER_VALUES} accepted values")
        for x in values:
            if not isinstance(x, (str, int, float, bool)) or (isinstance(x, str) and len(x) > MAX_ID):
                raise ValueError(f"filter {key!r}: values are strings of at most {MAX_ID} characters or numbers")
    try:
        check_filters(value)  # the library's own rules (64-bit integers, finite numbers, ...)
    except InvalidOptionError as exc:
        raise ValueError(str(exc)) from None
    return value


def _not_boolean(v: Any) -> Any:
    """JSON true is no number (pydantic would read it as 1; the library refuses it too)."""
    if isinstance(v, bool):
        raise ValueError("a number, not true or false")
    return v


def _short_questions(v: list[str]) -> list[str]:
    for q in v:
        if len(q) > 10_000:
            raise ValueError("a question is over 10,000 characters")
    return v


class AskOptions(BaseModel):
    k: int = Field(ASK_K, ge=1, le=MAX_K)
    threshold: Optional[float] = Field(None, ge=-1, le=1, allow_inf_nan=False)
    min_confidence: Optional[float] = Field(None, ge=0, le=1, allow_inf_nan=False)
    mode: Optional[str] = Field(None, pattern=MODE_PATTERN)
    category: Optional[str] = Field(None, max_length=MAX_ID)
    filters: Optional[dict[str, Any]] = None

    @field_validator("filters")
    @classmethod
    def _bounded(cls, v: Optional[dict[str, Any]]) -> Optional[dict[str, Any]]:
        return _check_filters(v)

    @field_validator("k", "threshold", "min_confidence", mode="before")
    @classmethod
    def _no_booleans(cls, v: Any) -> Any:
        return _not_boolean(v)


class AskIn(AskOptions):
    query: str = Field(..., min_length=1, max_length=MAX_QUERY)


class BatchIn(AskOptions):
    queries: list[str] = Field(..., min_length=1, max_length=MAX_BATCH)

    @field_validator("queries")
    @classmethod
    def _short(cls, v: list[str]) -> list[str]:
        for q in v:
            if len(q) > MAX_QUERY:
                raise ValueError(f"a query is over {MAX_QUERY} characters")
        return v


class FAQIn(BaseModel):
    id: str = Field(..., min_length=1, max_length=MAX_ID)
    answer: str = Field(..., min_length=1, max_length=100_000)
    questions: list[str] = Field(..., min_length=1, max_length=500)
    category: Optional[str] = Field(None, max_length=MAX_ID)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("questions")
    @classmethod
    def _question_length(cls, v: list[str]) -> list[str]:
        return _short_questions(v)


class FAQEditIn(BaseModel):
    """The fields of one FAQ to change (PATCH): what is left out stays."""

    answer: Optional[str] = Field(None, min_length=1, max_length=100_000)
    category: Optional[str] = Field(None, max_length=MAX_ID, description='the new category; "" takes it away')
    questions: list[str] = Field(default_factory=list, max_length=500, description="questions to add")

    @field_validator("questions")
    @classmethod
    def _question_length(cls, v: list[str]) -> list[str]:
        return _short_questions(v)


class FAQsIn(BaseModel):
    faqs: list[FAQIn] = Field(..., min_length=1, max_length=1000)


class RestoreIn(BaseModel):
    version: str = Field(..., min_length=1, max_length=40, description="a kept version, as GET .../versions lists")


class LearnIn(BaseModel):
    minutes: float = Field(LEARN_MINUTES, ge=LEARN_MIN_MINUTES, le=120, allow_inf_nan=False,
                           description="the run's time budget (the request lasts about as long)")
    epochs: int = Field(LEARN_EPOCHS, ge=1, le=50, description="passes over the question pairs, at most")
    from_log: bool = Field(True, description="also train on logged queries the index answers confidently")

    @field_validator("minutes", "epochs", mode="before")
    @classmethod
    def _no_booleans(cls, v: Any) -> Any:
        return _not_boolean(v)


class FeedbackIn(BaseModel):
    query: str = Field(..., min_length=1, max_length=MAX_QUERY)
    faq_id: str = Field(..., min_length=1, max_length=MAX_ID)
    query_id: Optional[int] = Field(None, ge=1, le=MAX_QUERY_ID, description="the X-Query-Id of the logged query")


class ApproveIn(BaseModel):
    texts: list[str] = Field(..., min_length=1, max_length=50)

    @field_validator("texts")
    @classmethod
    def _short(cls, v: list[str]) -> list[str]:
        for q in v:
            if not q.strip() or len(q) > MAX_QUERY:
                raise ValueError(f"each text needs visible characters, at most {MAX_QUERY}")
        return v


class SuggestionOut(BaseModel):
    text: str
    source: str = Field(..., description="answered (a logged query the index now answers with this FAQ), near (a "
                                         "logged query it leaves unanswered with this FAQ in its top 3 at 5% or more) or generated")
    score: Optional[float] = None
    count: int = 1
    confidence: Optional[float] = None


class SuggestionsOut(BaseModel):
    faq_id: str
    suggestions: list[SuggestionOut]
    notes: list[str] = []


class ParaphraseIn(BaseModel):
    text: str = Field(..., min_length=1, max_length=MAX_PARAPHRASE)
    n: int = Field(5, ge=1, le=20)
