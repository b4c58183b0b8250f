"""faqsearch inside the frameworks bots are built with, each behind its own extra:
``faqsearch.integrations.langchain.FAQSearchRetriever`` (``pip install 'faqsearch[langchain]'``) and
``faqsearch.integrations.haystack.FAQSearchRetriever`` (``pip install 'faqsearch[haystack]'``).
This module imports no framework: it holds what the adapters share, which FAQs a result gives and
the metadata each carries."""
from __future__ import annotations

from typing import Any

from ..results import Answer, Result
from ..text import clean_text, is_blank


def blank(query: str) -> bool:
    """A query with nothing to answer: the adapters give no documents for it (the engine itself
    refuses it with a BlankQueryError, as the CLI and the API do)."""
    return is_blank(clean_text(query))


def retrieved(result: Result, only_answered: bool = True) -> list[tuple[Answer, bool]]:
    """(answer, answered) pairs a retriever returns for a result: the answers the index stands
    behind; when it answers nothing, none, or with ``only_answered=False`` the nearest guess alone."""
    if result.answered:
        return [(a, True) for a in result.answers]
    if only_answered or result.nearest is None:
        return []
    return [(result.nearest, False)]


def metadata(answer: Answer, answered: bool) -> dict[str, Any]:
    """A retrieved FAQ's metadata: faq_id, the stored question that matched, confidence, score,
    answered, category and source, and the FAQ's own metadata (when it has any) under ``metadata``."""
    return {"faq_id": answer.faq_id, "question": answer.question, "confidence": answer.confidence,
            "score": answer.score, "answered": answered, "category": answer.category, "source": answer.source,
            **({"metadata": answer.metadata} if answer.metadata else {})}
