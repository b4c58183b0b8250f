"""The service's OpenAPI document as the routes behave, so a client generated from it reads what comes
back: every error is ``{"error": message}`` (a request that does not fit its schema adds ``detail``,
each field's ``where`` and ``problem``), the statuses each route can give are listed, and the answers
and edit reports have their schemas (the routes return plain objects, which FastAPI would describe as
any object)."""
from __future__ import annotations

from typing import Any, Optional

from pydantic import BaseModel

from ..results import Answer, EditReport


class ErrorDetail(BaseModel):
    where: str  # the field, as body.k or query.q
    problem: str


class ErrorOut(BaseModel):
    """Every error response."""
    error: str
    detail: Optional[list[ErrorDetail]] = None  # a 422 of a request that does not fit its schema


class ResultOut(BaseModel):
    """The answers to one query (``Result.to_dict()``): ``answers`` is empty when not answered, and
    ``nearest`` is then the best guess with its confidence."""
    query: str
    answered: bool
    answers: list[Answer]
    nearest: Optional[Answer] = None
    best_score: Optional[float] = None
    threshold: Optional[float] = None
    min_confidence: Optional[float] = None


class BatchOut(BaseModel):
    results: list[ResultOut]


class EditReportOut(BaseModel):
    """What an edit changed (``EditReport.to_dict()``)."""
    added_faqs: list[str]
    updated_faqs: list[str]
    removed_faqs: list[str]
    added_questions: int
    removed_questions: int
    unchanged_faqs: int
    previous_version: Optional[str] = None


assert set(EditReportOut.model_fields) == set(EditReport.__dataclass_fields__)  # one shape, said twice

WRITES = ("post", "put", "patch", "delete")
OPEN = ("/health",)
ASKS = ("/ask", "/ask/batch", "/paraphrase")  # POST routes that only read
GENERATES = ("/paraphrase", "/suggestions")  # routes that may generate paraphrases: one at a time
EDITS = {"/indexes/{name}/faqs": ("post",), "/indexes/{name}/faqs/upsert": ("post",),
         "/indexes/{name}/faqs/{faq_id}": ("put", "patch", "delete"), "/indexes/{name}/feedback": ("post",),
         "/indexes/{name}/unassign": ("post",), "/indexes/{name}/faqs/{faq_id}/approve": ("post",)}
ANSWERS = {"/indexes/{name}/ask": ResultOut, "/indexes/{name}/ask/batch": BatchOut}
ERRORS = {
    400: "the request cannot be done as asked (the error says why and what to do)",
    401: "a key is needed and was missing or wrong: X-API-Key, or Authorization: Bearer",
    403: "writes are off (the server has no API key, or the index is read-only), or the read key was sent",
    404: "no such index, FAQ or version",
    409: "the FAQ id exists already, or the index changed meanwhile",
    412: "If-Match: the FAQ changed since that revision was read; nothing was written",
    413: "the request body is over the server's limit",
    422: "invalid request: the error names the field (detail lists each)",
    429: "the server is generating paraphrases for another request (one at a time): retry after Retry-After seconds",
    503: "the index cannot be read or written: damaged, a full disk, or Milvus down (the error says which)",
}


def codes(path: str, method: str) -> list[int]:
    """The error statuses a route can give."""
    if path in OPEN:
        return []
    write = method in WRITES and not path.endswith(ASKS)
    out = [401, 422]
    if "{name}" in path:
        out += [404, 503]
    if method in ("post", "put", "patch"):
        out.append(413)
    if write:
        out += [400, 403, 409]
    if method == "put":
        out.append(412)
    if path.endswith(GENERATES):
        out.append(429)
    return sorted(out)


def document(app) -> None:
    """Give ``app`` the OpenAPI document above (built once, on the first request for it)."""
    from fastapi.openapi.utils import get_openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        schema = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
        models = schema.setdefault("components", {}).setdefault("schemas", {})
        models.pop("HTTPValidationError", None)  # FastAPI's 422, which this service does not send
        models.pop("ValidationError", None)
        for model in (ErrorOut, ResultOut, BatchOut, EditReportOut):
            body = model.model_json_schema(ref_template="#/components/schemas/{model}")
            models.update(body.pop("$defs", {}))
            models[model.__name__] = body
        for path, operations in schema.get("paths", {}).items():
            plain = path.replace("{faq_id:path}", "{faq_id}")
            for method, op in operations.items():
                responses = op.setdefault("responses", {})
                for code in codes(plain, method):
                    responses[str(code)] = _json(ERRORS[code], "ErrorOut")
                model = ANSWERS.get(plain) if method in ("get", "post") else None
                if model is None and method in EDITS.get(plain, ()):
                    model = EditReportOut
                if model is not None:
                    responses["200"] = _json("OK", model.__name__)
        app.openapi_schema = schema
        return schema

    app.openapi = openapi


def _json(description: str, model: str) -> dict[str, Any]:
    return {"description": description,
            "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{model}"}}}}
