"""`faqsearch serve`: an HTTP API and a web page over one or more indexes (FastAPI + uvicorn).

:mod:`.service` holds the indexes (one engine each, snapshots swapped whole), :mod:`.models` the
request bodies and their bounds, :mod:`.routes` one library call per route, :mod:`.app` the
application (errors, bodies, the page, offline API docs)."""
from __future__ import annotations

from .service import Service

__all__ = ["Service", "create_app", "serve"]


# the modules of the server extra (pip install 'faqsearch[server]') and those they bring
_EXTRA = {"fastapi", "fastapi_offline", "uvicorn", "starlette", "pydantic", "pydantic_core", "prometheus_client"}


def _app():
    """:mod:`.app`, or the error naming the extra where the server extra is not installed (the
    application imports FastAPI and pydantic: without them `faqsearch serve` was a traceback)."""
    try:
        from . import app
    except ImportError as exc:
        if (exc.name or "").split(".")[0] not in _EXTRA:
            raise
        from ..errors import MissingExtraError

        raise MissingExtraError(f"faqsearch serve needs the server extra: pip install 'faqsearch[server]' ({exc})") from None
    return app


def create_app(service, max_body=None, local_only=False):
    app = _app()
    return app.create_app(service, app.MAX_BODY if max_body is None else max_body, local_only)


def serve(*args, **kwargs):
    return _app().serve(*args, **kwargs)
