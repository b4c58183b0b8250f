"""A LangChain retriever over a faqsearch index (``pip install 'faqsearch[langchain]'``).

    from faqsearch.integrations.langchain import FAQSearchRetriever
    retriever = FAQSearchRetriever(index="support")          # or engine=FAQSearch.open(...)
    docs = retriever.invoke("how do I reset my password?")  # [] when the index does not know

Each ``Document`` is one FAQ: ``page_content`` is its answer, ``metadata`` holds ``faq_id``,
``question`` (the stored question that matched), ``confidence``, ``score``, ``answered`` and
``category``."""
from __future__ import annotations

import threading
from typing import Any

from ..engine import FAQSearch
from ..results import Answer, Result
from . import blank, check_mode, metadata, retrieved

try:
    from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
    from pydantic import ConfigDict, PrivateAttr
except ImportError as exc:  # pragma: no cover - exercised in a subprocess by the tests
    raise ImportError(f"the LangChain retriever needs langchain-core: pip install 'faqsearch[langchain]' ({exc})") from exc

__all__ = ["FAQSearchRetriever", "to_document"]


def to_document(answer: Answer, answered: bool) -> Document:
    """One FAQ as a LangChain ``Document``: the answer as its text, the match in its metadata."""
    return Document(page_content=answer.answer, id=answer.faq_id, metadata=metadata(answer, answered))


class FAQSearchRetriever(BaseRetriever):
    """FAQs for a query, best first, as LangChain ``Document`` objects.

    Give ``engine`` (an open :class:`~faqsearch.FAQSearch`, shared with the rest of the bot) or
    ``index`` (a name or path, opened on first use; None: the default index). ``k``, ``mode``,
    ``threshold``, ``min_confidence`` and ``filters`` are those of :meth:`FAQSearch.ask`.

    By default (``only_answered=True``) only the answers the index stands behind come back: a query
    the index does not answer gets ``[]``, so a chain can say "I don't know" instead of passing a
    wrong FAQ to a model. ``only_answered=False`` returns, for such a query, the nearest guess alone,
    with ``metadata["answered"]`` False (for "did you mean ...?")."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    engine: Any = None  # a FAQSearch; Any keeps pydantic from inspecting it
    index: str | None = None
    k: int = 3
    mode: str | None = None
    threshold: float | None = None
    min_confidence: float | None = None
    filters: dict[str, Any] | None = None
    only_answered: bool = True

    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    def _engine(self) -> FAQSearch:
        if self.engine is None:
            with self._lock:
                if self.engine is None:
                    self.engine = FAQSearch.open(self.index)
        return self.engine

    def ask(self, query: str) -> Result:
        """The engine's whole :class:`~faqsearch.Result` for a query (answered, nearest, threshold)."""
        return self._engine().ask(query, **self._options())

    def _options(self) -> dict[str, Any]:
        check_mode(self.mode, self.only_answered)
        return {"k": self.k, "threshold": self.threshold, "mode": self.mode, "filters": self.filters,
                "min_confidence": self.min_confidence}

    def documents(self, result: Result) -> list[Document]:
        """The documents this retriever returns for a result (see the class docstring)."""
        return [to_document(a, answered) for a, answered in retrieved(result, self.only_answered)]

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        return [] if blank(query) else self.documents(self.ask(query))

    async def _aget_relevant_documents(self, query: str, *,
                                       run_manager: AsyncCallbackManagerForRetrieverRun) -> list[Document]:
        if blank(query):
            return []
        # FAQSearch.aask: concurrent calls share one encoder pass on one worker thread
        return self.documents(await self._engine().aask(query, **self._options()))
