"""A Haystack retriever component over a faqsearch index (``pip install 'faqsearch[haystack]'``).

    from haystack import Pipeline
    from faqsearch.integrations.haystack import FAQSearchRetriever
    pipe = Pipeline()
    pipe.add_component("faq", FAQSearchRetriever(index="support"))
    pipe.run({"faq": {"query": "how do I reset my password?"}})["faq"]["documents"]

Each ``Document`` is one FAQ: ``content`` is its answer, ``id`` its faq_id, ``score`` the match's
score, and ``meta`` holds ``faq_id``, ``question`` (the stored question that matched),
``confidence``, ``score``, ``answered`` and ``category``. Haystack sends usage telemetry unless
``HAYSTACK_TELEMETRY_ENABLED=False`` is set (Haystack's setting, not faqsearch's)."""
from __future__ import annotations

import threading
from typing import Any

from ..engine import FAQSearch
from ..errors import InvalidOptionError
from ..index.address import shown
from ..results import Answer, Result
from . import blank, check_mode, metadata, retrieved

try:
    from haystack import Document, component, default_from_dict, default_to_dict
except ImportError as exc:  # pragma: no cover - exercised in a subprocess by the tests
    raise ImportError(f"the Haystack component needs haystack-ai: pip install 'faqsearch[haystack]' ({exc})") from exc

__all__ = ["FAQSearchRetriever", "to_document"]


def to_document(answer: Answer, answered: bool) -> Document:
    """One FAQ as a Haystack ``Document``: the answer as its content, the match in its meta."""
    return Document(id=answer.faq_id, content=answer.answer, score=answer.score, meta=metadata(answer, answered))


@component
class FAQSearchRetriever:
    """FAQs for a query, best first, as Haystack ``Document`` objects (output ``documents``).

    Give ``index`` (a name or path, opened on warm-up or first use; None: the default index) or
    ``engine`` (an open :class:`~faqsearch.FAQSearch`). ``top_k``, ``mode``, ``threshold``,
    ``min_confidence`` and ``filters`` are those of :meth:`FAQSearch.ask` (``top_k`` is its ``k``).

    By default (``only_answered=True``) only the answers the index stands behind come back: a query
    the index does not answer gets no documents, so a pipeline can say "I don't know" instead of
    passing a wrong FAQ to a model. ``only_answered=False`` returns, for such a query, the nearest
    guess alone, with ``meta["answered"]`` False."""

    def __init__(self, index: str | None = None, *, engine: FAQSearch | None = None, top_k: int = 3,
                 mode: str | None = None, threshold: float | None = None, min_confidence: float | None = None,
                 filters: dict[str, Any] | None = None, only_answered: bool = True):
        # an engine's index as a YAML on another machine finds it: its address where it lives in Milvus (the
        # path of an addressed index is this machine's cache of it)
        self.index = index if index is not None or engine is None else shown(str(engine.path))
        self.engine = engine
        self.top_k, self.mode, self.threshold, self.min_confidence = top_k, mode, threshold, min_confidence
        self.filters, self.only_answered = filters, only_answered
        self._lock = threading.Lock()

    def warm_up(self) -> None:
        """Open the index (Haystack calls this before a pipeline's first run)."""
        if self.engine is None:
            with self._lock:
                if self.engine is None:
                    self.engine = FAQSearch.open(self.index)

    def ask(self, query: str, top_k: int | None = None, filters: dict[str, Any] | None = None) -> Result:
        """The engine's whole :class:`~faqsearch.Result` for a query (answered, nearest, threshold)."""
        self.warm_up()
        return self.engine.ask(query, **self._options(top_k, filters))

    def _options(self, top_k: int | None, filters: dict[str, Any] | None) -> dict[str, Any]:
        check_mode(self.mode, self.only_answered)
        filters = self.filters if filters is None else filters
        if filters and ("operator" in filters or "conditions" in filters):  # read as metadata, it would match nothing
            raise InvalidOptionError("filters here are faqsearch's ({'category': 'returns'}: see docs/library.md), "
                                     "not Haystack's 'field'/'operator'/'value' syntax")
        return {"k": self.top_k if top_k is None else top_k, "threshold": self.threshold, "mode": self.mode,
                "filters": filters, "min_confidence": self.min_confidence}

    def documents(self, result: Result) -> list[Document]:
        """The documents this component returns for a result (see the class docstring)."""
        return [to_document(a, answered) for a, answered in retrieved(result, self.only_answered)]

    @component.output_types(documents=list[Document])
    def run(self, query: str, top_k: int | None = None, filters: dict[str, Any] | None = None) -> dict[str, Any]:
        """``{"documents": [...]}`` for the query; ``top_k`` and ``filters`` override the component's."""
        return {"documents": [] if blank(query) else self.documents(self.ask(query, top_k, filters))}

    @component.output_types(documents=list[Document])
    async def run_async(self, query: str, top_k: int | None = None,
                        filters: dict[str, Any] | None = None) -> dict[str, Any]:
        """The same as :meth:`run`, for ``AsyncPipeline``."""
        if blank(query):
            return {"documents": []}
        self.warm_up()
        # FAQSearch.aask: concurrent calls share one encoder pass on one worker thread
        result = await self.engine.aask(query, **self._options(top_k, filters))
        return {"documents": self.documents(result)}

    def to_dict(self) -> dict[str, Any]:
        """The component as a pipeline's YAML stores it: the index by name or path, not the engine."""
        return default_to_dict(self, index=self.index, top_k=self.top_k, mode=self.mode, threshold=self.threshold,
                               min_confidence=self.min_confidence, filters=self.filters,
                               only_answered=self.only_answered)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "FAQSearchRetriever":
        return default_from_dict(cls, data)
