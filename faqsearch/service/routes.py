"""The HTTP API's routes: each makes one library call and returns the JSON the CLI prints with
``--json`` (``Result.to_dict()``, ``EditReport.to_dict()``, the FAQ dict of ``show``)."""
from __future__ import annotations

from contextlib import nullcontext
from typing import Any, Optional

from fastapi import APIRouter, Depends, Header, Query, Request, Response
from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse

from ..corpus import FAQ, check_faq
from ..defaults import ASK_K, GAP_MARGIN, GAP_MIN_COUNT, GAP_SIMILARITY
from ..errors import CorpusError, InvalidOptionError, unknown_faq
from .. import manage
from ..text import check_query
from .models import (MAX_ID, MAX_K, MAX_OFFSET, MAX_QUERY, MODE_PATTERN, ApproveIn, AskIn, AskOptions, BatchIn,
                     FAQEditIn, FAQIn, FAQsIn, FeedbackIn, LearnIn, ParaphraseIn, RestoreIn, SuggestionsOut)

router = APIRouter()
RANKED = 500  # at most this many FAQs of a listing search are ranked by the index's search; the rest follow
FALLBACK = 50  # a listing search no FAQ contains: the FAQs the index answers it with among its first this many


def service(request: Request):
    return request.app.state.service


def _key(x_api_key: Optional[str], authorization: Optional[str]) -> Optional[str]:
    return x_api_key or (authorization[7:] if authorization and authorization.lower().startswith("bearer ") else None)


def write_key(request: Request, x_api_key: Optional[str] = Header(None),
              authorization: Optional[str] = Header(None)) -> None:
    """Writes: the API key."""
    service(request).check_access("write", _key(x_api_key, authorization))


def read_key(request: Request, x_api_key: Optional[str] = Header(None),
             authorization: Optional[str] = Header(None)) -> None:
    """Staff reads (queries, gaps, suggestions, FAQs, indexes): the read or API key, when the server has one."""
    service(request).check_access("read", _key(x_api_key, authorization))


def ask_key(request: Request, x_api_key: Optional[str] = Header(None),
            authorization: Optional[str] = Header(None)) -> bool:
    """Asking: open, unless the server is private (then the read or API key). Returns whether the caller
    may read the query log too: a caller who may not is shown no other user's query (``Result.public``)."""
    key = _key(x_api_key, authorization)
    service(request).check_access("ask", key)
    return service(request).may("read", key)


def _shown(result, reader: bool) -> dict[str, Any]:
    return (result if reader else result.public()).to_dict()


def _filters(body: AskOptions) -> dict[str, Any] | None:
    """``filters`` with ``category`` (a shorthand for filters.category) in it; both given must agree."""
    f = dict(body.filters or {})
    if body.category:
        given = f.get("category")
        if given is not None and body.category not in (given if isinstance(given, list) else [given]):
            raise InvalidOptionError(f"category {body.category!r} is not among filters.category {given!r}: give one "
                                     "of them, or the same category in both")
        f["category"] = body.category
    return f or None


def _faqs(items: list[FAQIn]) -> list[FAQ]:
    return [check_faq(FAQ(f.id, f.answer, list(f.questions), f.category, dict(f.metadata))) for f in items]


def _answer(request: Request, name: str, queries: list[str], body: AskOptions, channel: str, response: Response):
    """Answer from one snapshot, log the queries, return the results (their log ids in X-Query-Id, in
    the queries' order; a blank query of a batch is answered empty and not logged: its place is empty)."""
    s = service(request).served(name)
    searcher = s.engine.searcher()
    results = searcher.answer(queries, k=body.k, threshold=body.threshold, mode=body.mode, filters=_filters(body),
                              min_confidence=body.min_confidence)
    ids = s.traffic.record(results, body.mode or searcher.snap.mode, channel)  # [] without a log
    request.state.results = results  # counted in /metrics and the request log
    if ids:
        response.headers["X-Query-Id"] = ",".join("" if i is None else str(i) for i in ids)
    return results


@router.get("/health", tags=["service"])
def health(request: Request):
    """Always open: the indexes served, and what needs a key (ask, read, write: open, key or off)."""
    return {"status": "ok", "indexes": service(request).names(), "access": service(request).access()}


@router.get("/metrics", tags=["service"], dependencies=[Depends(read_key)])
def metrics(request: Request):
    """Prometheus metrics (text format): requests, latency, answered and not answered queries, index
    sizes. A read: when the server has a key, the scraper sends it (X-API-Key or a bearer token)."""
    body, content_type = request.app.state.metrics.render()
    return Response(body, media_type=content_type)


@router.get("/indexes", tags=["service"], dependencies=[Depends(read_key)])
def indexes(request: Request):
    svc = service(request)
    out = []
    for name in svc.names():
        s = svc.served(name)
        snap = s.engine.snapshot
        out.append({"name": name, "faqs": snap.config.counts.faqs,
                    "questions": snap.config.counts.questions, "encoder": snap.config.encoder.name,
                    "mode": snap.mode, "threshold": snap.threshold, "writable": bool(svc.api_key) and not s.read_only,
                    "logging": s.traffic.logging})
    return {"indexes": out}


@router.get("/indexes/{name}", tags=["service"], dependencies=[Depends(read_key)])
def info(request: Request, name: str):
    """How the index was built (as `faqsearch info --json`), files named without the server's paths."""
    from ..manage import served_info

    return served_info(name, service(request).engine(name))


@router.get("/indexes/{name}/versions", tags=["service"], dependencies=[Depends(read_key)])
def versions(request: Request, name: str):
    """The versions the index keeps (as `faqsearch versions --json`)."""
    from ..index.versions import list_versions

    return {"versions": [v.to_dict() for v in list_versions(service(request).engine(name).path)]}


@router.post("/indexes/{name}/restore", tags=["service"], dependencies=[Depends(write_key)])
def restore(request: Request, name: str, body: RestoreIn):
    """Make a kept version live again as a new version (as `faqsearch restore`); it answers from it at once.
    ``left_behind``: the kept versions after it, what made them, and the version that brings them back."""
    from ..index.versions import restored

    def run(engine):
        report = restored(engine.path, body.version)
        engine.reload()
        return report

    return service(request).write(name, run)


@router.post("/indexes/{name}/learn", tags=["service"], dependencies=[Depends(write_key)])
def learn(request: Request, name: str, body: LearnIn):
    """Fine-tune the index's encoder on its own questions and keep it only where it wins held out (as
    `faqsearch learn --json`); the request lasts the run (up to ``minutes``). Needs the API key."""
    return service(request).write(name, lambda e: e.learn(minutes=body.minutes, epochs=body.epochs,
                                                          from_log=body.from_log)).to_dict()


@router.post("/indexes/{name}/ask", tags=["ask"])
def ask(request: Request, name: str, body: AskIn, response: Response,
        x_faqsearch_channel: Optional[str] = Header(None, max_length=40), reader: bool = Depends(ask_key)):
    """Answer one query: the same JSON as `faqsearch ask --json`. The logged query's id is in X-Query-Id.
    A blank query is a 422, as it is a usage error on the command line."""
    check_query(body.query)  # a blank one: BlankQueryError, as the library and the CLI refuse it
    return _shown(_answer(request, name, [body.query], body, x_faqsearch_channel or "api", response)[0], reader)


@router.get("/indexes/{name}/ask", tags=["ask"])
def ask_get(request: Request, name: str, response: Response, q: str = Query(..., min_length=1, max_length=MAX_QUERY),
            k: int = Query(ASK_K, ge=1, le=MAX_K), threshold: Optional[float] = Query(None, ge=-1, le=1),
            min_confidence: Optional[float] = Query(None, ge=0, le=1),
            mode: Optional[str] = Query(None, pattern=MODE_PATTERN),
            category: Optional[str] = Query(None, max_length=MAX_ID),
            x_faqsearch_channel: Optional[str] = Header(None, max_length=40), reader: bool = Depends(ask_key)):
    """The same as POST, for curl: /indexes/NAME/ask?q=...&k=3."""
    return ask(request, name, AskIn(query=q, k=k, threshold=threshold, min_confidence=min_confidence, mode=mode,
                                    category=category), response, x_faqsearch_channel, reader)


@router.post("/indexes/{name}/ask/batch", tags=["ask"])
def ask_batch(request: Request, name: str, body: BatchIn, response: Response,
              x_faqsearch_channel: Optional[str] = Header(None, max_length=40), reader: bool = Depends(ask_key)):
    """Answer up to 100 queries in one encoder pass: {"results": [Result, ...]} in order (a blank query
    gets an empty result)."""
    return {"results": [_shown(r, reader) for r in _answer(request, name, body.queries, body,
                                                           x_faqsearch_channel or "api", response)]}


@router.get("/indexes/{name}/faqs", tags=["faqs"], dependencies=[Depends(read_key)])
def list_faqs(request: Request, name: str, q: Optional[str] = Query(None, max_length=MAX_QUERY),
              category: Optional[str] = Query(None, max_length=MAX_ID), limit: int = Query(50, ge=1, le=1000),
              offset: int = Query(0, ge=0, le=MAX_OFFSET),
              order: Optional[str] = Query(None, pattern="^(relevance|index)$")):
    """FAQs (like `faqsearch list --json`), each with its first question, and ``total``: how many match
    (for paging with limit and offset). q: only those whose id,
    answer or a question contains it, best first by the index's own search (`order=index`: in index
    order); where none contains it ("reset password" for "How do I reset my password?"), the FAQs the
    index answers it with, as `ask` would. A ranked FAQ also has the question that matched, its score
    and its confidence (which never rises down the list)."""
    searcher = service(request).engine(name).searcher()  # one snapshot for the whole request
    store = searcher.snap.store
    if not q or not q.strip() or (order or "relevance") == "index":
        return manage.list_faqs(store, limit, offset, category, q or None)  # the same as `faqsearch list --json`
    found = store.list_faqs(None, 0, category, q)
    if found:
        found = _by_relevance(searcher, found, q, category)
    else:  # words apart, or other words: the FAQs the index answers it with (not every FAQ), ranked by that search
        ranked = searcher.answer([q], k=FALLBACK, filters={"category": category} if category else None)[0].answers
        found = [{"id": a.faq_id, "category": f["category"], "answer": f["answer"], "questions": len(f["questions"]),
                  "matched": a.question, "score": a.score, "confidence": a.confidence}
                 for a in ranked if (f := store.faq(a.faq_id)) is not None]
    return {"faqs": manage.with_first_question(store, found[offset:offset + limit]), "total": len(found)}


def _by_relevance(searcher, found: list[dict[str, Any]], q: str, category: Optional[str]) -> list[dict[str, Any]]:
    """The FAQs in the order the index's search ranks them for q, an FAQ whose id is q first (ids it does
    not rank keep their order, after)."""
    ranked = searcher.answer([q], k=min(RANKED, max(50, 2 * len(found))), threshold=-1,
                             filters={"category": category} if category else None)[0].answers if found else []
    rank = {a.faq_id: (i, a) for i, a in enumerate(ranked)}
    for f in found:
        if f["id"] in rank:
            a = rank[f["id"]][1]
            f["matched"], f["score"], f["confidence"] = a.question, a.score, a.confidence
    return sorted(found, key=lambda f: (f["id"] != q.strip(), rank[f["id"]][0] if f["id"] in rank else len(rank)))


@router.post("/indexes/{name}/faqs", tags=["faqs"], dependencies=[Depends(write_key)])
def add(request: Request, name: str, body: FAQsIn):
    """Add new FAQs (409 if an id exists, 422 if one is given twice). Needs the API key.

    Body: {"faqs": [{"id": "shp-99", "answer": "...", "questions": ["...", "..."], "category": "shipping",
    "metadata": {}}]}"""
    return service(request).write(name, lambda e: e.add(_faqs(body.faqs))).to_dict()


@router.post("/indexes/{name}/faqs/upsert", tags=["faqs"], dependencies=[Depends(write_key)])
def upsert(request: Request, name: str, body: FAQsIn):
    """Add or update the listed FAQs by id (as `faqsearch update`): a listed FAQ gets the answer and
    the questions it lacks, and keeps those the body does not list; others are left alone. Needs the API key."""
    return service(request).write(name, lambda e: e.update(_faqs(body.faqs))).to_dict()


@router.get("/indexes/{name}/faqs/{faq_id:path}/suggestions", tags=["faqs"], response_model=SuggestionsOut,
            dependencies=[Depends(read_key)])
def suggestions(request: Request, name: str, faq_id: str, limit: int = Query(20, ge=1, le=200),
                generate: int = Query(0, ge=0, le=20)):
    """Phrasings to approve for an FAQ: logged queries the index answered with it (most asked first),
    then logged queries that ranked it in their top 3 at a confidence of 5% or more, then (generate=N) generated rewordings of its
    first question. Nothing is indexed until POST .../approve. 404 if unknown."""
    from ..generators import choose_generator

    s = service(request).served(name)
    searcher = s.engine.searcher()
    store = searcher.snap.store
    if store.faq(faq_id) is None:
        if (whole := store.faq(f"{faq_id}/suggestions")) is not None:
            return JSONResponse(jsonable_encoder(whole))  # GET of an FAQ whose own id ends in /suggestions
        raise unknown_faq(faq_id, lambda i: store.faq(i) is not None)  # a 404 before a busy generator's 429
    spec = searcher.snap.config.generator
    generators = request.app.state.generators
    with generators.slot() if generate else nullcontext():
        return s.traffic.suggest(searcher, faq_id, choose_generator(spec, cached=generators.get), limit=limit,
                                 generate=generate).to_dict()


@router.get("/indexes/{name}/faqs/{faq_id:path}", tags=["faqs"], dependencies=[Depends(read_key)])
def show(request: Request, name: str, faq_id: str, response: Response):
    """One FAQ with its questions and its revision (also the ETag, for PUT's If-Match)."""
    faq = service(request).engine(name).show(faq_id)
    response.headers["ETag"] = f'"{faq["revision"]}"'
    return faq


@router.put("/indexes/{name}/faqs/{faq_id:path}", tags=["faqs"], dependencies=[Depends(write_key)])
def replace(request: Request, name: str, faq_id: str, body: FAQIn,
            if_match: Optional[str] = Header(None, description="the ETag (revision) GET gave: 412 if it changed")):
    """Replace one FAQ: it then holds exactly this answer, category, metadata and these questions
    (feedback and generated questions not listed go too). 404 if unknown. Needs the API key. With
    If-Match (the ETag GET gave), a 412 and no change where the FAQ changed since: an edit form saved
    from an old read drops nothing added meanwhile."""
    if body.id != faq_id:
        raise CorpusError("<request>", None, f"the body's id {body.id!r} differs from the path's {faq_id!r}")
    tag = (if_match or "").strip().removeprefix("W/").strip('"')
    revisions = {faq_id: tag} if tag and tag != "*" else None

    def edit(e):
        e.show(faq_id)  # 404 when unknown
        return e.update(_faqs([body]), replace=True, revisions=revisions)

    return service(request).write(name, edit).to_dict()


@router.patch("/indexes/{name}/faqs/{faq_id:path}", tags=["faqs"], dependencies=[Depends(write_key)])
def edit_faq(request: Request, name: str, faq_id: str, body: FAQEditIn):
    """Change one FAQ without restating it: a new answer or category, questions added (source added);
    the rest stays (`faqsearch update ID --answer ...`). 404 if unknown. Needs the API key."""
    return service(request).write(name, lambda e: e.update_faq(faq_id, answer=body.answer, category=body.category,
                                                               questions=body.questions)).to_dict()


@router.delete("/indexes/{name}/faqs/{faq_id:path}", tags=["faqs"], dependencies=[Depends(write_key)])
def remove(request: Request, name: str, faq_id: str):
    return service(request).write(name, lambda e: e.remove([faq_id])).to_dict()


@router.post("/indexes/{name}/feedback", tags=["traffic"], dependencies=[Depends(write_key)])
def feedback(request: Request, name: str, body: FeedbackIn):
    """"This query should have matched FAQ X": the query becomes a question of X (source feedback)."""
    traffic = service(request).served(name).traffic
    return service(request).write(name, lambda e: traffic.feedback(e, body.query, body.faq_id, body.query_id)).to_dict()


@router.post("/indexes/{name}/unassign", tags=["traffic"], dependencies=[Depends(write_key)])
def unassign(request: Request, name: str, body: FeedbackIn):
    """Undo feedback: the query is taken out of FAQ X again (404 if the FAQ is unknown)."""
    traffic = service(request).served(name).traffic
    return service(request).write(name, lambda e: traffic.unassign(e, body.query, body.faq_id)).to_dict()


@router.post("/indexes/{name}/faqs/{faq_id:path}/approve", tags=["faqs"], dependencies=[Depends(write_key)])
def approve(request: Request, name: str, faq_id: str, body: ApproveIn):
    """Phrasings a person approved become questions of the FAQ (source approved); logged queries among
    them show as assigned to it, as after feedback. Needs the API key."""
    traffic = service(request).served(name).traffic
    return service(request).write(name, lambda e: traffic.approve(e, faq_id, body.texts)).to_dict()


@router.get("/indexes/{name}/queries", tags=["traffic"], dependencies=[Depends(read_key)])
def queries(request: Request, name: str, limit: int = Query(50, ge=1, le=1000), offset: int = Query(0, ge=0, le=MAX_OFFSET),
            unanswered: bool = False, since: Optional[str] = Query(None, max_length=40)):
    """Logged queries, newest first (as `faqsearch log --json`)."""
    served = service(request).served(name)
    return served.traffic.queries(limit, offset, unanswered, since, store=served.engine.searcher().snap.store)


@router.get("/indexes/{name}/gaps", tags=["traffic"], dependencies=[Depends(read_key)])
def gaps(request: Request, name: str, similarity: float = Query(GAP_SIMILARITY, ge=0, le=1),
         min_count: int = Query(GAP_MIN_COUNT, ge=1, le=100_000), limit: int = Query(20, ge=1, le=200),
         since: Optional[str] = Query(None, max_length=40), margin: float = Query(GAP_MARGIN, ge=0, le=1)):
    """Unanswered and low-confidence queries (answered within ``margin`` of what decides) grouped by
    meaning: the FAQs you are missing, largest first."""
    s = service(request).served(name)
    found = s.traffic.gaps(s.engine, similarity=similarity, margin=margin, min_count=min_count, limit=limit,
                           since=since)
    return {"gaps": [g.to_dict() for g in found]}


@router.post("/indexes/{name}/paraphrase", tags=["ask"], dependencies=[Depends(ask_key)])
def paraphrase(request: Request, name: str, body: ParaphraseIn):
    """Rewordings of TEXT ('did you mean'), re-ranked by the index: from the generator the index was
    augmented with, else the bundled one for the text's language. The generator is loaded once, on first use."""
    from ..generators import choose_generator, paraphrase_queries

    searcher = service(request).engine(name).searcher()
    spec = searcher.snap.config.generator
    choice = choose_generator(spec, cached=request.app.state.generators.get)  # a language it does not write: 400
    with request.app.state.generators.slot():  # one at a time: a second is a 429, never a thread held minutes
        got, _ = paraphrase_queries(choice, [body.text], body.n, scorer=searcher.embed_full, strict=True,
                                    searcher=searcher)
    return {"text": body.text, "paraphrases": [{"text": p.text, "score": p.score} for p in got[0]]}
