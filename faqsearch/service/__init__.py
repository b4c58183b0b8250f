"""`faqsearch serve`: an HTTP API and a web page over one or more indexes (FastAPI + uvicorn).

:mod:`.service` holds the indexes (one engine each, snapshots swapped whole), :mod:`.models` the
request bodies and their bounds, :mod:`.routes` one library call per route, :mod:`.app` the
application (errors, bodies, the page, offline API docs)."""
from __future__ import annotations

from .service import Service

__all__ = ["Service", "create_app", "serve"]


def create_app(service, max_body=None, local_only=False):
    from .app import MAX_BODY, create_app as _create

    return _create(service, MAX_BODY if max_body is None else max_body, local_only)


def serve(*args, **kwargs):
    from .app import serve as _serve

    return _serve(*args, **kwargs)
