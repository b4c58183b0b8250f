"""The FastAPI application over a Service: the routes, the page, the API docs served from files
shipped with the package (no CDN: /docs works offline), bounded bodies, and one status per error."""
from __future__ import annotations

import json
import logging
import os
import signal
import sqlite3
import threading
import time
from contextlib import contextmanager
from typing import Any

from ..errors import (BusyError, ChangedMeanwhileError, CorpusError, DuplicateFAQError, FAQSearchError, IndexFormatError,
                      IndexNotFoundError, InvalidOptionError, MissingExtraError, StaleRevisionError, StorageError,
                      UnknownFAQError, VersionNotFoundError, WritesDisabledError)
from ..index.format import STORE
from .logs import log_request, uvicorn_logging
from .metrics import Metrics
from .models import MAX_BODY
from .openapi import document
from .service import Forbidden, Service, Unauthorized

log = logging.getLogger(__name__)

STATIC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "static")
STATUS = [(Unauthorized, 401), (Forbidden, 403), (UnknownFAQError, 404), (IndexNotFoundError, 404),
          (VersionNotFoundError, 404),
          (DuplicateFAQError, 409), (ChangedMeanwhileError, 409), (CorpusError, 422), (InvalidOptionError, 422),
          (WritesDisabledError, 403), (StaleRevisionError, 412), (BusyError, 429),
          (IndexFormatError, 503), (StorageError, 503), (FAQSearchError, 400)]


def status_for(exc: FAQSearchError) -> int:
    return next(code for cls, code in STATUS if isinstance(exc, cls))


class NoQueryStrings(logging.Filter):
    """uvicorn's access log line without the query string: `GET /indexes/NAME/ask?q=...` put every
    customer question in the server's log. uvicorn logs (client, method, path with query, HTTP
    version, status); the path keeps its part before '?'."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) == 5 and isinstance(args[2], str) and "?" in args[2]:
            record.args = (*args[:2], args[2].split("?", 1)[0], *args[3:])
        return True


def hide_query_strings() -> None:
    """Filter uvicorn's access log (once per process): a filter on a logger stays when uvicorn
    configures its logging, whichever comes first."""
    access = logging.getLogger("uvicorn.access")
    if not any(isinstance(f, NoQueryStrings) for f in access.filters):
        access.addFilter(NoQueryStrings())


LOCAL_NAMES = ("localhost", "127.0.0.1", "[::1]")  # the Host names of requests addressed to this machine
GENERATING_AT_ONCE = 1  # paraphrase generations a server runs at once; more are a 429 (each takes seconds of CPU)
RETRY_AFTER_S = 5
# the page's own policy: its script and style are files of its own, its icon a data: URL; no page may frame it
PAGE_POLICY = ("default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; form-action 'self'; "
               "frame-ancestors 'none'")


class Generators:
    """Paraphrase generators by spec, loaded once on first use, and the slots generation runs in: a
    request finding none free is refused at once (BusyError, a 429), so slow generations never hold
    every request thread (about 45 of them took a server's health check and asks down)."""

    def __init__(self, at_once: int = GENERATING_AT_ONCE):
        self._loaded: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._slots, self._at_once = threading.BoundedSemaphore(at_once), at_once

    @contextmanager
    def slot(self):
        if not self._slots.acquire(blocking=False):
            raise BusyError(f"the server is generating paraphrases for another request (it runs {self._at_once} "
                            f"at a time, seconds each); try again in a few seconds")
        try:
            yield
        finally:
            self._slots.release()

    def get(self, spec: dict[str, Any] | None):
        from ..generators import generator_from_spec

        key = json.dumps(spec, sort_keys=True)
        with self._lock:
            if key not in self._loaded:
                self._loaded[key] = generator_from_spec(spec)
            return self._loaded[key]


def create_app(service: Service, max_body: int = MAX_BODY, local_only: bool = False):
    try:
        from fastapi import Request
        from fastapi.exceptions import RequestValidationError
        from fastapi.responses import FileResponse, JSONResponse
        from fastapi_offline import FastAPIOffline
        from starlette.exceptions import HTTPException as StarletteHTTPException
    except ImportError as exc:
        raise MissingExtraError(f"faqsearch serve needs the server extra: pip install 'faqsearch[server]' ({exc})")
    from .. import __version__
    from .routes import router

    app = FastAPIOffline(title="faqsearch", version=__version__,
                         description="Semantic FAQ retrieval. Writes need the API key in the X-API-Key header; when "
                                     "the server has a key, so do FAQ listings, the query log, gaps and /metrics (the "
                                     "read key too), and asking when it is private. GET /health says which.")
    hide_query_strings()
    app.state.service = service
    app.state.generators = Generators()
    app.state.metrics = Metrics(service)
    app.include_router(router)
    document(app)  # the OpenAPI document as the routes behave: error bodies, statuses, answer schemas

    @app.middleware("http")
    async def crash(request: Request, call_next):
        """A failure no handler knows is a 500 said once, in the log, and answered here, the innermost
        middleware: the response then carries the security headers and is counted (Starlette's own
        handler for Exception answers outside every middleware, bare, and raises again for the server
        to log a second time)."""
        try:
            return await call_next(request)
        except Exception:  # noqa: BLE001 - the domain's errors were answered by their handlers already
            log.exception("request %s %s failed", request.method, request.url.path)
            return JSONResponse({"error": "internal error; the server log has the details"}, status_code=500)

    @app.middleware("http")
    async def bounded_body(request: Request, call_next):
        too_big = JSONResponse({"error": f"request body over {max_body} bytes; send fewer or shorter items"},
                               status_code=413)
        length = request.headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > max_body):
            return too_big
        if request.method in ("POST", "PUT", "PATCH") and length is None:
            body = b""
            async for chunk in request.stream():
                body += chunk
                if len(body) > max_body:
                    return too_big
            request._body = body  # noqa: SLF001 - replay the bounded body to the route
        return await call_next(request)

    open_reads = not (service.api_key or service.read_key)

    @app.middleware("http")
    async def addressed(request: Request, call_next):
        """A server bound to this machine without a key (reads open) answers only requests addressed to
        this machine: a web page that points its own name at 127.0.0.1 (DNS rebinding) sends its name
        as the Host, and would otherwise read the query log from the browser of whoever runs it."""
        host = (request.headers.get("host") or "").lower()
        name = host.split("]")[0] + "]" if host.startswith("[") else host.rsplit(":", 1)[0]  # without the port
        if local_only and open_reads and name not in LOCAL_NAMES and request.url.path != "/health":  # (always open)
            return JSONResponse({"error": f"this server is bound to this machine without a key, so it answers only "
                                          f"requests addressed to it (Host: localhost or 127.0.0.1, not {name!r}); "
                                          "give it a key (--read-key, --api-key), or have a proxy send Host: "
                                          "localhost"}, status_code=403)
        return await call_next(request)

    @app.middleware("http")
    async def secured(request: Request, call_next):
        """Headers every response carries: no type sniffing, no referrer, never framed; the page and its
        files their own content policy (the API docs keep theirs: Swagger's page has inline script)."""
        response = await call_next(request)
        response.headers.update({"X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
                                 "X-Frame-Options": "DENY"})
        if request.url.path == "/" or request.url.path.startswith("/static/"):
            response.headers["Content-Security-Policy"] = PAGE_POLICY
        return response

    @app.middleware("http")
    async def observed(request: Request, call_next):
        """Count, time and log every request (the outermost middleware: a 413 counts too)."""
        start, status = time.perf_counter(), 500
        try:
            response = await call_next(request)
            status = response.status_code
            return response
        finally:
            seconds = time.perf_counter() - start
            route = getattr(request.scope.get("route"), "path", None)
            index = (request.scope.get("path_params") or {}).get("name")
            results = getattr(request.state, "results", None)  # set by the routes that answer queries
            app.state.metrics.request(request.method, route, status, seconds)
            if results is not None:
                app.state.metrics.answered(index, results)
            log_request(request.method, request.url.path, status, seconds, index,
                        None if results is None else [r.answered for r in results])

    @app.exception_handler(FAQSearchError)
    async def domain_error(request: Request, exc: FAQSearchError):
        headers = {"WWW-Authenticate": "ApiKey"} if isinstance(exc, Unauthorized) else \
            {"Retry-After": str(RETRY_AFTER_S)} if isinstance(exc, BusyError) else None
        status = status_for(exc)
        if status >= 500:  # a damaged file, a full disk, Milvus down: the operator's, not the client's (once logged
            log.error("request %s %s: %s", request.method, request.url.path, service.redact(str(exc)))  # as INFO)
        return JSONResponse({"error": service.redact(str(exc))}, status_code=status, headers=headers)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError):
        detail = [{"where": ".".join(str(p) for p in e.get("loc", ())), "problem": e.get("msg", "")}
                  for e in exc.errors()]
        fix = "; ".join(f"{d['where']}: {d['problem']}" for d in detail[:5])
        return JSONResponse({"error": f"invalid request ({fix})", "detail": detail}, status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException):
        if exc.status_code == 400 and exc.detail == "There was an error parsing the body":  # FastAPI's own words
            return JSONResponse({"error": "the request body could not be read as JSON: send a UTF-8 JSON object "
                                          "(Content-Type: application/json) as /docs shows for this route, nested "
                                          "less deeply"}, status_code=400)
        return JSONResponse({"error": str(exc.detail)}, status_code=exc.status_code)

    @app.exception_handler(sqlite3.DatabaseError)
    async def damaged_store(request: Request, exc: sqlite3.DatabaseError):
        log.error("request %s %s: the store cannot be read (%s)", request.method, request.url.path, exc)
        return JSONResponse({"error": f"the index's {STORE} cannot be read; the server log has the details"},
                            status_code=503)

    @app.get("/", include_in_schema=False)
    def page():
        return FileResponse(os.path.join(STATIC, "index.html"), media_type="text/html")

    @app.get("/static/{name}", include_in_schema=False)
    def static(name: str):
        full = os.path.join(STATIC, os.path.basename(name))
        if not os.path.isfile(full):
            raise StarletteHTTPException(404, f"no static file {name!r}")
        return FileResponse(full)

    return app


def serve(indexes: dict[str, str], host: str = "127.0.0.1", port: int = 8000, api_key: str | None = None,
          log_queries: bool = True, threads: int | None = None, max_body: int = MAX_BODY, read_key: str | None = None,
          private: bool = False, log_format: str = "text") -> None:
    """Run the service until interrupted (see :class:`Service` for the keys; ``log_format`` 'text' or
    'json', see :mod:`.logs`)."""
    try:
        import uvicorn
    except ImportError as exc:
        raise MissingExtraError(f"faqsearch serve needs the server extra: pip install 'faqsearch[server]' ({exc})")
    logging_args = uvicorn_logging(log_format)
    if logging_args:
        import logging.config

        logging.config.dictConfig(logging_args["log_config"])  # JSON already while the indexes open
    local = host in ("127.0.0.1", "localhost", "::1")
    if not local:
        log.warning("binding %s: the service is reachable from other machines", host)
    try:
        service = Service(indexes, api_key=api_key, log_queries=log_queries, threads=threads, read_key=read_key,
                          private=private)
    except FAQSearchError as exc:
        if not logging_args:
            raise
        log.error("%s", exc)  # a JSON line as every other of this server: a log shipper reads why it stopped
        raise SystemExit(1) from None
    main = threading.current_thread() is threading.main_thread()  # uvicorn shuts down gracefully, then raises
    previous = signal.signal(signal.SIGTERM, _terminated) if main else None  # the signal again: it killed us first
    hangup = signal.signal(signal.SIGHUP, _hangup) if main and hasattr(signal, "SIGHUP") else None
    try:
        try:
            uvicorn.run(create_app(service, max_body, local_only=local), host=host, port=port, log_level="info",
                        **logging_args)
        finally:
            service.close()
    except _Terminated:  # closed: now end by the signal, as before (systemd counts that a clean stop)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.raise_signal(signal.SIGTERM)
    finally:
        if main and signal.getsignal(signal.SIGTERM) in (_terminated, signal.SIG_IGN):
            signal.signal(signal.SIGTERM, previous)  # a caller's own, after a return (SIGINT)
        if hangup is not None:
            signal.signal(signal.SIGHUP, hangup)


def _hangup(signum, frame) -> None:
    """SIGHUP killed the server at once, a request in flight cut off: what an operator sends to reload, and a
    closed terminal sends too. The indexes reload by themselves as they change; SIGTERM stops it."""
    log.warning("SIGHUP: nothing to reload (faqsearch serve reloads each index as it changes); SIGTERM stops it")


class _Terminated(BaseException):
    """SIGTERM after uvicorn's graceful shutdown (the query log's WAL was left behind when it killed us)."""


def _terminated(signum, frame) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second one during the clean-up waits for it
    raise _Terminated()
