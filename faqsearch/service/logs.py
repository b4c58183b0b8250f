"""The server's log as text (uvicorn's own lines, the default) or as JSON, one object per line, for a
log shipper (`faqsearch serve --log-format json`, or FAQSEARCH_LOG_FORMAT=json).

In JSON every line has time (UTC, ISO 8601), level, logger and message; a request's line (logger
``faqsearch.requests``, in place of uvicorn's access log) adds method, path (never the query string:
it would put customers' questions in the log), status, ms, and for a route of one index its index and
whether the query was answered (a list for a batch)."""
from __future__ import annotations

import json
import logging
from datetime import datetime, timezone
from typing import Any

from ..errors import InvalidOptionError

LOG_FORMATS = ("text", "json")
REQUEST_FIELDS = ("method", "path", "status", "ms", "index", "answered")
requests_log = logging.getLogger("faqsearch.requests")


class JSONFormatter(logging.Formatter):
    """One JSON object per record, on one line."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, timezone.utc).isoformat(timespec="milliseconds"),
            "level": record.levelname, "logger": record.name, "message": record.getMessage()}
        for field in REQUEST_FIELDS:
            if hasattr(record, field):
                out[field] = getattr(record, field)
        if record.exc_info:
            out["error"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False, default=str)


def check_format(log_format: str) -> str:
    if log_format not in LOG_FORMATS:
        raise InvalidOptionError(f"unknown log format {log_format!r}; one of {', '.join(LOG_FORMATS)}")
    return log_format


def uvicorn_logging(log_format: str) -> dict[str, Any]:
    """uvicorn.run's logging arguments: nothing for text (its own format, as always); for JSON a
    logging config that writes every logger (uvicorn's, faqsearch's, the root) through
    :class:`JSONFormatter` to stderr, with the request lines in place of uvicorn's access log."""
    if check_format(log_format) == "text":
        return {}
    handler = {"class": "logging.StreamHandler", "formatter": "json", "stream": "ext://sys.stderr"}
    config = {
        "version": 1, "disable_existing_loggers": False,
        "formatters": {"json": {"()": f"{__name__}.JSONFormatter"}},
        "handlers": {"json": handler},
        "root": {"handlers": ["json"], "level": logging.getLevelName(logging.getLogger().level or logging.WARNING)},
        "loggers": {name: {"handlers": [], "level": "INFO", "propagate": True}
                    for name in ("uvicorn", "uvicorn.error", requests_log.name)},
    }
    config["loggers"]["uvicorn.access"] = {"handlers": [], "level": "WARNING", "propagate": False}
    return {"log_config": config, "access_log": False}


def log_request(method: str, path: str, status: int, seconds: float, index: str | None = None,
                answered: list[bool] | None = None) -> None:
    """One line per request (INFO on ``faqsearch.requests``: shown with the JSON log format)."""
    if not requests_log.isEnabledFor(logging.INFO):
        return
    fields: dict[str, Any] = {"method": method, "path": path, "status": status, "ms": round(seconds * 1000, 1)}
    if index is not None:
        fields["index"] = index
    if answered is not None:
        fields["answered"] = answered[0] if len(answered) == 1 else answered
    requests_log.info("%s %s %d", method, path, status, extra=fields)
