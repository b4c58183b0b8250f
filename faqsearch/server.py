"""`faqsearch serve`: an HTTP API and a web page over one or more indexes (FastAPI + uvicorn).

Each route makes one library call and returns the same JSON as the CLI's ``--json``
(``Result.to_dict()``, ``EditReport.to_dict()``, the FAQ dict of ``show``). Reads are open; writes
(add, update, upsert, remove, feedback) need the API key given to the server, and are refused when
none was given. Engines are never changed in place while requests use them: an edit (from this
server or from another process) makes the server open the new version beside the old one and
swap a single reference, so every request sees one whole version.
"""

import hmac
import json
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from .errors import (CorpusError, DuplicateFAQError, FAQSearchError, IndexFormatError, IndexNotFoundError,
                     UnknownFAQError, WritesDisabledError)

log = logging.getLogger(__name__)

MAX_BODY = 1 << 20  # bytes per request body
MAX_QUERY = 1000  # characters per query
MAX_BATCH = 100  # queries per batch request
MAX_K = 50
WATCH_EVERY = 0.25  # seconds between checks for another process's edit
RETIRE_AFTER = 30.0  # seconds an engine that was swapped out stays open for requests still using it
STATIC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "static")
STATUS = [(UnknownFAQError, 404), (IndexNotFoundError, 404), (DuplicateFAQError, 409), (CorpusError, 422),
          (WritesDisabledError, 403), (IndexFormatError, 503), (FAQSearchError, 400)]


def status_for(exc: FAQSearchError) -> int:
    return next(code for cls, code in STATUS if isinstance(exc, cls))


@dataclass
class _Served:
    name: str
    path: str
    engine: Any
    stamp: Any
    write_lock: threading.Lock = field(default_factory=threading.Lock)
    querylog: Any = None


class Service:
    """The indexes one process serves, by name; each name holds its current engine."""

    def __init__(self, indexes: dict[str, str], api_key: str | None = None, log_queries: bool = True,
                 threads: int | None = None, watch: bool = True):
        from .engine import FAQSearch, _config_stamp
        from .querylog import QueryLog

        if not indexes:
            raise FAQSearchError("no index to serve; pass --index NAME (see faqsearch ingest)")
        self.api_key = api_key or None
        self.log_queries = log_queries
        self._served: dict[str, _Served] = {}
        self._retired: list[tuple[float, Any]] = []
        encoders: dict[str, Any] = {}
        for name, path in indexes.items():
            engine = FAQSearch.open(path, threads=threads)
            key = repr(sorted(engine.config["encoder"].items()))
            engine._encoder = encoders.get(key) or engine.encoder  # one model per distinct encoder
            encoders[key] = engine._encoder
            engine.auto_reload = False  # the service swaps whole engines instead
            engine.embed(["warm up"])
            self._served[name] = _Served(name, engine.path, engine, _config_stamp(engine.path),
                                         querylog=QueryLog.for_index(engine.path) if log_queries else None)
        self._stop = threading.Event()
        self._watcher = threading.Thread(target=self._watch, name="faqsearch-watch", daemon=True)
        if watch:
            self._watcher.start()

    # -- engines ------------------------------------------------------------------------------
    def names(self) -> list[str]:
        return list(self._served)

    def served(self, name: str) -> _Served:
        try:
            return self._served[name]
        except KeyError:
            raise IndexNotFoundError(f"no index named {name!r} is served here; served: "
                                     f"{', '.join(self._served)}") from None

    def engine(self, name: str):
        return self.served(name).engine

    def _swap(self, s: _Served) -> None:
        """Open the index's current version and make it the one requests get (one reference)."""
        from .engine import FAQSearch, _config_stamp

        stamp = _config_stamp(s.path)
        fresh = FAQSearch.open(s.path, encoder=s.engine._encoder)
        fresh.auto_reload = False
        old, s.engine, s.stamp = s.engine, fresh, stamp
        self._retired.append((time.monotonic(), old))

    def _watch(self) -> None:
        from .engine import _config_stamp

        while not self._stop.wait(WATCH_EVERY):
            for s in list(self._served.values()):
                try:
                    if _config_stamp(s.path) not in (None, s.stamp):
                        with s.write_lock:
                            if _config_stamp(s.path) not in (None, s.stamp):
                                self._swap(s)
                except Exception:  # noqa: BLE001 - a half-written version is retried on the next tick
                    log.exception("reloading index %s", s.name)
            now = time.monotonic()
            keep = []
            for t, old in self._retired:
                if now - t > RETIRE_AFTER:
                    old.close()
                else:
                    keep.append((t, old))
            self._retired = keep

    def write(self, name: str, edit: Callable[[Any], Any]) -> Any:
        """Run an edit on a separate engine of the index (the writer lock keeps it atomic), then swap."""
        from .engine import FAQSearch

        self._writes_enabled()
        s = self.served(name)
        with s.write_lock:
            writer = FAQSearch.open(s.path, encoder=s.engine._encoder)
            writer.auto_reload = False
            try:
                result = edit(writer)
            finally:
                writer.close()
            self._swap(s)
        return result

    def _writes_enabled(self) -> None:
        if not self.api_key:
            raise WritesDisabledError("writes are disabled: start the server with --api-key KEY or "
                                      "FAQSEARCH_API_KEY set")

    def check_key(self, given: str | None) -> None:
        self._writes_enabled()
        if not given or not hmac.compare_digest(given.encode("utf-8"), self.api_key.encode("utf-8")):
            raise _Unauthorized()

    def close(self) -> None:
        self._stop.set()
        if self._watcher.is_alive():
            self._watcher.join(timeout=2)
        for s in self._served.values():
            s.engine.close()
            if s.querylog is not None:
                s.querylog.close()
        for _, old in self._retired:
            old.close()


class _Unauthorized(FAQSearchError):
    pass


def create_app(service: Service, max_body: int = MAX_BODY):
    """The FastAPI application over a Service."""
    try:
        from fastapi import Depends, FastAPI, Header, Query, Request, Response
        from fastapi.exceptions import RequestValidationError
        from fastapi.responses import FileResponse, JSONResponse
        from pydantic import BaseModel, Field
        from starlette.exceptions import HTTPException as StarletteHTTPException
    except ImportError as exc:
        from .errors import MissingExtraError

        raise MissingExtraError(f"faqsearch serve needs the server extra: pip install 'faqsearch[server]' ({exc})")
    from . import __version__
    from .engine import MODES

    app = FastAPI(title="faqsearch", version=__version__,
                  description="Semantic FAQ retrieval. Reads are open; writes need the X-API-Key header.")

    # ---- bounds and errors ------------------------------------------------------------------
    @app.middleware("http")
    async def bounded_body(request: Request, call_next):
        length = request.headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > max_body):
            return JSONResponse({"error": f"request body over {max_body} bytes; send fewer or shorter items"},
                                status_code=413)
        if request.method in ("POST", "PUT", "PATCH") and length is None:
            body = b""
            async for chunk in request.stream():
                body += chunk
                if len(body) > max_body:
                    return JSONResponse({"error": f"request body over {max_body} bytes; send fewer or shorter "
                                                  "items"}, status_code=413)
            request._body = body  # noqa: SLF001 - replay the bounded body to the route
        return await call_next(request)

    @app.exception_handler(_Unauthorized)
    async def unauthorized(request: Request, exc: _Unauthorized):
        return JSONResponse({"error": "missing or wrong API key: send it in the X-API-Key header"}, status_code=401,
                            headers={"WWW-Authenticate": "ApiKey"})

    @app.exception_handler(FAQSearchError)
    async def domain_error(request: Request, exc: FAQSearchError):
        return JSONResponse({"error": str(exc)}, status_code=status_for(exc))

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError):
        detail = [{"where": ".".join(str(p) for p in e.get("loc", ())), "problem": e.get("msg", "")}
                  for e in exc.errors()]
        fix = "; ".join(f"{d['where']}: {d['problem']}" for d in detail[:5])
        return JSONResponse({"error": f"invalid request ({fix})", "detail": detail}, status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException):
        return JSONResponse({"error": str(exc.detail)}, status_code=exc.status_code)

    @app.exception_handler(Exception)
    async def crash(request: Request, exc: Exception):
        log.exception("request %s %s failed", request.method, request.url.path)
        return JSONResponse({"error": "internal error; the server log has the details"}, status_code=500)

    def write_key(x_api_key: Optional[str] = Header(None), authorization: Optional[str] = Header(None)) -> None:
        given = x_api_key or (authorization[7:] if authorization and authorization.lower().startswith("bearer ")
                              else None)
        service.check_key(given)

    # ---- models -----------------------------------------------------------------------------
    Text = Field(..., min_length=1, max_length=MAX_QUERY)

    class AskOptions(BaseModel):
        k: int = Field(3, ge=1, le=MAX_K)
        threshold: Optional[float] = Field(None, ge=-1, le=1)
        mode: Optional[str] = Field(None, pattern="^(" + "|".join(MODES) + ")$")
        category: Optional[str] = Field(None, max_length=200)
        filters: Optional[dict[str, Any]] = None

    class AskIn(AskOptions):
        query: str = Text

    class BatchIn(AskOptions):
        queries: list[str] = Field(..., min_length=1, max_length=MAX_BATCH)

    class FAQIn(BaseModel):
        id: str = Field(..., min_length=1, max_length=200)
        answer: str = Field(..., min_length=1, max_length=100_000)
        questions: list[str] = Field(..., min_length=1, max_length=500)
        category: Optional[str] = Field(None, max_length=200)
        metadata: dict[str, Any] = Field(default_factory=dict)

    class FAQsIn(BaseModel):
        faqs: list[FAQIn] = Field(..., min_length=1, max_length=1000)

    class FeedbackIn(BaseModel):
        query: str = Text
        faq_id: str = Field(..., min_length=1, max_length=200)
        query_id: Optional[int] = Field(None, description="the X-Query-Id of the logged query, if any")

    class ParaphraseIn(BaseModel):
        text: str = Text
        n: int = Field(5, ge=1, le=20)

    def filters_of(body) -> dict[str, Any] | None:
        f = dict(body.filters or {})
        if body.category:
            f["category"] = body.category
        return f or None

    def to_faqs(items) -> list:
        from .corpus import FAQ

        return [FAQ(f.id, f.answer, list(f.questions), f.category, dict(f.metadata)) for f in items]

    def answer(name: str, queries: list[str], body, channel: str) -> tuple[list, list[int]]:
        for q in queries:
            if len(q) > MAX_QUERY:
                raise CorpusError("<request>", None, f"a query is over {MAX_QUERY} characters")
        s = service.served(name)
        results = s.engine.ask_many(queries, k=body.k, threshold=body.threshold, mode=body.mode,
                                    filters=filters_of(body))
        ids = s.querylog.record(results, body.mode or s.engine.mode, channel) if s.querylog is not None else []
        return results, ids

    # ---- routes -----------------------------------------------------------------------------
    @app.get("/", include_in_schema=False)
    def page():
        return FileResponse(os.path.join(STATIC, "index.html"), media_type="text/html")

    @app.get("/static/{name}", include_in_schema=False)
    def static(name: str):
        full = os.path.join(STATIC, os.path.basename(name))
        if not os.path.isfile(full):
            raise StarletteHTTPException(404, f"no static file {name!r}")
        return FileResponse(full)

    @app.get("/health", tags=["service"])
    def health():
        return {"status": "ok", "indexes": service.names()}

    @app.get("/indexes", tags=["service"])
    def indexes():
        out = []
        for name in service.names():
            e = service.engine(name)
            out.append({"name": name, "path": e.path, "faqs": e.config["counts"]["faqs"],
                        "questions": e.config["counts"]["questions"], "encoder": e.config["encoder"]["name"],
                        "mode": e.mode, "threshold": e.threshold, "writable": bool(service.api_key),
                        "logging": service.served(name).querylog is not None})
        return {"indexes": out}

    @app.get("/indexes/{name}", tags=["service"])
    def info(name: str):
        e = service.engine(name)
        return {"name": name, **e.info()}

    @app.post("/indexes/{name}/ask", tags=["ask"])
    def ask(name: str, body: AskIn, response: Response,
            x_faqsearch_channel: Optional[str] = Header(None, max_length=40)):
        """Answer one query: the same JSON as `faqsearch ask --json`. The logged query's id is in X-Query-Id."""
        results, ids = answer(name, [body.query], body, x_faqsearch_channel or "api")
        if ids:
            response.headers["X-Query-Id"] = str(ids[0])
        return results[0].to_dict()

    @app.get("/indexes/{name}/ask", tags=["ask"])
    def ask_get(name: str, response: Response, q: str = Query(..., min_length=1, max_length=MAX_QUERY),
                k: int = Query(3, ge=1, le=MAX_K), threshold: Optional[float] = Query(None, ge=-1, le=1),
                mode: Optional[str] = Query(None, pattern="^(" + "|".join(MODES) + ")$"),
                category: Optional[str] = Query(None, max_length=200)):
        """The same as POST, for curl: /indexes/NAME/ask?q=...&k=3."""
        return ask(name, AskIn(query=q, k=k, threshold=threshold, mode=mode, category=category), response, None)

    @app.post("/indexes/{name}/ask/batch", tags=["ask"])
    def ask_batch(name: str, body: BatchIn, response: Response):
        """Answer up to 100 queries in one encoder pass: {"results": [Result, ...]} in order."""
        results, ids = answer(name, body.queries, body, "api")
        if ids:
            response.headers["X-Query-Id"] = ",".join(map(str, ids))
        return {"results": [r.to_dict() for r in results]}

    @app.get("/indexes/{name}/faqs", tags=["faqs"])
    def list_faqs(name: str, q: Optional[str] = Query(None, max_length=MAX_QUERY),
                  category: Optional[str] = Query(None, max_length=200),
                  limit: int = Query(50, ge=1, le=1000), offset: int = Query(0, ge=0)):
        """FAQs in order (like `faqsearch list --json`); q: only those whose id, answer or a question contains it."""
        return {"faqs": service.engine(name).list(limit, offset, category, q)}

    @app.get("/indexes/{name}/faqs/{faq_id}", tags=["faqs"])
    def show(name: str, faq_id: str):
        return service.engine(name).show(faq_id)

    @app.post("/indexes/{name}/faqs", tags=["faqs"], dependencies=[Depends(write_key)])
    def add(name: str, body: FAQsIn):
        """Add new FAQs (409 if an id exists). Needs the API key."""
        return service.write(name, lambda e: e.add(to_faqs(body.faqs))).to_dict()

    @app.post("/indexes/{name}/faqs/upsert", tags=["faqs"], dependencies=[Depends(write_key)])
    def upsert(name: str, body: FAQsIn):
        """Add or update the listed FAQs by id; others are left alone. Needs the API key."""
        return service.write(name, lambda e: e.update(to_faqs(body.faqs))).to_dict()

    @app.put("/indexes/{name}/faqs/{faq_id}", tags=["faqs"], dependencies=[Depends(write_key)])
    def update(name: str, faq_id: str, body: FAQIn):
        """Replace one FAQ's answer, questions, category and metadata (404 if unknown). Needs the API key."""
        if body.id != faq_id:
            raise CorpusError("<request>", None, f"the body's id {body.id!r} differs from the path's {faq_id!r}")

        def edit(e):
            if e.store.faq(faq_id) is None:
                raise UnknownFAQError(f"unknown FAQ id {faq_id!r}; add it with POST /indexes/{name}/faqs")
            return e.update(to_faqs([body]))

        return service.write(name, edit).to_dict()

    @app.delete("/indexes/{name}/faqs/{faq_id}", tags=["faqs"], dependencies=[Depends(write_key)])
    def remove(name: str, faq_id: str):
        return service.write(name, lambda e: e.remove([faq_id])).to_dict()

    @app.post("/indexes/{name}/feedback", tags=["traffic"], dependencies=[Depends(write_key)])
    def feedback(name: str, body: FeedbackIn):
        """"This query should have matched FAQ X": the query becomes a question of X (source feedback)."""
        report = service.write(name, lambda e: e.feedback(body.query, body.faq_id))
        s = service.served(name)
        if s.querylog is not None:
            s.querylog.mark_feedback(body.query_id, body.query, body.faq_id)
        return report.to_dict()

    @app.get("/indexes/{name}/queries", tags=["traffic"])
    def queries(name: str, limit: int = Query(50, ge=1, le=1000), offset: int = Query(0, ge=0),
                unanswered: bool = False):
        """Logged queries, newest first."""
        s = service.served(name)
        if s.querylog is None:
            raise FAQSearchError("query logging is off for this server (started with --no-log)")
        return {"queries": s.querylog.recent(limit, offset, unanswered), **s.querylog.count()}

    @app.get("/indexes/{name}/gaps", tags=["traffic"])
    def gaps(name: str, similarity: float = Query(None, ge=0, le=1), min_count: int = Query(None, ge=1),
             limit: int = Query(20, ge=1, le=200), since: Optional[str] = Query(None, max_length=40)):
        """Unanswered and low-confidence queries grouped by meaning: the FAQs you are missing, largest first."""
        from .gaps import DEFAULT_MIN_COUNT, DEFAULT_SIMILARITY, find_gaps

        s = service.served(name)
        if s.querylog is None:
            raise FAQSearchError("query logging is off for this server (started with --no-log)")
        found = find_gaps(s.engine, s.querylog, similarity=DEFAULT_SIMILARITY if similarity is None else similarity,
                          min_count=DEFAULT_MIN_COUNT if min_count is None else min_count, limit=limit, since=since)
        return {"gaps": [g.to_dict() for g in found]}

    @app.post("/indexes/{name}/paraphrase", tags=["ask"])
    def paraphrase(name: str, body: ParaphraseIn):
        """Rewordings of TEXT ('did you mean'), re-ranked by the index: from the generator the index was
        augmented with, else the default (SmolLM2). The generator is loaded once, on first use."""
        from .generators import paraphrase as run

        e = service.engine(name)
        spec = e.config.get("generator") or ({"kind": "simbert", "source": e.config["simbert"]}
                                             if e.config.get("simbert") else None)
        gen = _cached_generator(spec)
        return {"text": body.text, "paraphrases": [{"text": p.text, "score": p.score}
                                                   for p in run(gen, body.text, n=body.n, scorer=e.embed)]}

    return app


_GENERATORS: dict[str, Any] = {}
_GENERATORS_LOCK = threading.Lock()


def _cached_generator(spec: dict[str, Any] | None):
    from .generators import generator_from_spec

    key = json.dumps(spec, sort_keys=True)
    with _GENERATORS_LOCK:
        if key not in _GENERATORS:
            _GENERATORS[key] = generator_from_spec(spec)
        return _GENERATORS[key]


def serve(indexes: dict[str, str], host: str = "127.0.0.1", port: int = 8000, api_key: str | None = None,
          log_queries: bool = True, threads: int | None = None, max_body: int = MAX_BODY) -> None:
    """Run the service until interrupted."""
    try:
        import uvicorn
    except ImportError as exc:
        from .errors import MissingExtraError

        raise MissingExtraError(f"faqsearch serve needs the server extra: pip install 'faqsearch[server]' ({exc})")
    service = Service(indexes, api_key=api_key, log_queries=log_queries, threads=threads)
    try:
        uvicorn.run(create_app(service, max_body), host=host, port=port, log_level="info")
    finally:
        service.close()
