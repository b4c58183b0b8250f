"""faqsearch inside the frameworks bots are built with, each behind its own extra:
``faqsearch.integrations.langchain.FAQSearchRetriever`` (``pip install 'faqsearch[langchain]'``) and
``faqsearch.integrations.haystack.FAQSearchRetriever`` (``pip install 'faqsearch[haystack]'``).
This module imports no framework: it holds what the adapters share, which FAQs a result gives and
the metadata each carries."""
from __future__ import annotations

from typing import Any

from ..errors import InvalidOptionError
from ..results import Answer, Result
from ..text import clean_text, is_blank


def blank(query: str) -> bool:
    """A query with nothing to answer: the adapters give no documents for it (the engine itself
    refuses it with a BlankQueryError, as the CLI and the API do)."""
    return is_blank(clean_text(query))


def check_mode(mode: str | None, only_answered: bool) -> None:
    """Lexical mode decides nothing (BM25 scores are no confidences: every query sharing a word with an
    FAQ is "answered"), so a retriever that promises only the answers the index stands behind refuses it."""
    if mode == "lexical" and only_answered:
        raise InvalidOptionError("mode='lexical' answers every query that shares a word with an FAQ (BM25 scores "
                                 "are no confidences), so only_answered cannot hold: use mode 'hybrid' (the default) "
                                 "or 'dense', or pass only_answered=False to take the lexical matches as they are")


def retrieved(result: Result, only_answered: bool = True) -> list[tuple[Answer, bool]]:
    """(answer, answered) pairs a retriever returns for a result: the answers the index stands
    behind; when it answers nothing, none, or with ``only_answered=False`` the nearest guess alone."""
    if result.answered:
        return [(a, True) for a in result.answers]
    if only_answered or result.nearest is None:
        return []
    return [(result.nearest, False)]


def metadata(answer: Answer, answered: bool) -> dict[str, Any]:
    """A retrieved FAQ's metadata: faq_id, the stored question that matched as the public sees it (a
    user's query that feedback made a phrasing never goes into a chain's prompt or reply: its FAQ's
    written question stands in), ``faq_question``, confidence, score, answered, category and source, and
    the FAQ's own metadata (when it has any) under ``metadata``."""
    return {"faq_id": answer.faq_id, "question": answer.public().question, "faq_question": answer.faq_question,
            "confidence": answer.confidence,
            "score": answer.score, "answered": answered, "category": answer.category, "source": answer.source,
            **({"metadata": answer.metadata} if answer.metadata else {})}
