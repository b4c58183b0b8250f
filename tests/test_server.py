"""The HTTP service through FastAPI's TestClient (in-process), fake encoder."""
import json
import os
import threading

import pytest

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from faqsearch import FAQSearch  # noqa: E402
from faqsearch.corpus import FAQ  # noqa: E402
from faqsearch.service import Service, create_app  # noqa: E402

from .conftest import FakeEncoder, build_index, read_only  # noqa: E402

KEY = "s3cret-key"
STAFF = {"X-API-Key": KEY}  # a server with a key shows FAQs, queries and gaps to its keys only (#40.2)


@pytest.fixture
def ix(tmp_path, small_corpus):
    build_index(small_corpus, tmp_path / "shop", threshold=0.3).close()
    return str(tmp_path / "shop")


def make_client(paths, api_key=KEY, **kw):
    service = Service({os.path.basename(p): p for p in paths}, api_key=api_key, watch=False, **kw)
    return service, TestClient(create_app(service, max_body=4096), raise_server_exceptions=False)


@pytest.fixture
def client(fake_models, ix):
    service, c = make_client([ix])
    yield c
    service.close()


def test_ask_get_and_post_match_the_library_json(client, ix):
    r = client.get("/indexes/shop/ask", params={"q": "How do I reset my password?", "k": 2})
    assert r.status_code == 200
    with FAQSearch.open(ix, encoder=FakeEncoder()) as e:
        expected = e.ask("How do I reset my password?", k=2).to_dict()
    assert r.json() == json.loads(json.dumps(expected))
    assert r.json()["answers"][0]["faq_id"] == "1" and r.headers["X-Query-Id"].isdigit()
    r = client.post("/indexes/shop/ask", json={"query": "How long does shipping take?", "k": 1, "mode": "dense"})
    assert r.json()["answers"][0]["faq_id"] == "2"
    r = client.post("/indexes/shop/ask/batch", json={"queries": ["Can I return an item?", "zzz qqq"], "k": 1,
                                                     "threshold": 0.95})
    assert [len(x["answers"]) for x in r.json()["results"]] == [1, 0]
    # a blank query of a batch is answered empty and not logged; X-Query-Id keeps the queries' places
    before = client.get("/indexes/shop/queries", params={"limit": 1000}, headers=STAFF).json()["queries"]
    r = client.post("/indexes/shop/ask/batch", json={"queries": ["", "Can I return an item?", "  ", "\u200b"]})
    assert r.status_code == 200 and [x["answers"] for x in r.json()["results"]][0] == []
    ids = r.headers["X-Query-Id"].split(",")
    assert len(ids) == 4 and ids[0] == ids[2] == ids[3] == "" and ids[1].isdigit()
    after = client.get("/indexes/shop/queries", params={"limit": 1000}, headers=STAFF).json()["queries"]
    assert [q["query"] for q in after if q["id"] not in {b["id"] for b in before}] == ["Can I return an item?"]


def test_category_filter_is_applied_inside_the_search(client):
    r = client.post("/indexes/shop/ask", json={"query": "How do I reset my password?", "k": 3, "category": "shipping",
                                               "threshold": -1})
    ids = [a["faq_id"] for a in r.json()["answers"]]
    assert set(ids) == {"2", "4"}  # k results from the category even though better matches exist elsewhere
    # category is filters.category's shorthand: both given must agree (the shorthand silently won)
    r = client.post("/indexes/shop/ask", json={"query": "How do I reset my password?", "category": "shipping",
                                               "filters": {"category": "account"}})
    assert r.status_code == 422 and "is not among filters.category" in r.text
    r = client.post("/indexes/shop/ask", json={"query": "How do I reset my password?", "k": 3, "category": "shipping",
                                               "filters": {"category": ["account", "shipping"]}, "threshold": -1})
    assert {a["faq_id"] for a in r.json()["answers"]} == {"2", "4"}


def test_faq_listing_search_and_show(client):
    assert [f["id"] for f in client.get("/indexes/shop/faqs", headers=STAFF).json()["faqs"]] == ["1", "2", "3", "4"]
    assert [f["id"] for f in client.get("/indexes/shop/faqs", params={"q": "EU"},
                                        headers=STAFF).json()["faqs"]] == ["4"]
    assert client.get("/indexes/shop/faqs/3", headers=STAFF).json()["questions"][1]["text"] == \
        "What is the return policy?"
    r = client.get("/indexes/shop/faqs/nope", headers=STAFF)
    assert r.status_code == 404 and "unknown FAQ id" in r.json()["error"]
    assert client.get("/indexes/other/faqs", headers=STAFF).status_code == 404


def test_faq_listing_titles_and_search_ranked_by_the_index(client):
    """Each listed FAQ has its first question (the page's title); a search is ranked by the index's
    own search, not by position: "ship" matches FAQ 4's question word for word, FAQ 2 only "shipping"."""
    listed = client.get("/indexes/shop/faqs", headers=STAFF).json()["faqs"]
    assert [f["question"] for f in listed] == ["How do I reset my password?", "How long does shipping take?",
                                               "Can I return an item?", "Do you ship abroad?"]
    assert all("matched" not in f for f in listed)
    ranked = client.get("/indexes/shop/faqs", params={"q": "ship"}, headers=STAFF).json()["faqs"]
    assert [f["id"] for f in ranked] == ["4", "2"]
    assert ranked[0]["matched"] == "Do you ship abroad?" and ranked[0]["score"] > ranked[1]["score"]
    assert [f["id"] for f in client.get("/indexes/shop/faqs", params={"q": "ship", "order": "index"},
                                        headers=STAFF).json()["faqs"]] == ["2", "4"]
    page = client.get("/indexes/shop/faqs", params={"q": "ship", "offset": 1, "limit": 1}, headers=STAFF).json()
    assert [f["id"] for f in page["faqs"]] == ["2"] and page["total"] == 2  # a pager knows how many there are
    for params, total in (({"limit": 1}, 4), ({"limit": 1, "offset": 9}, 4), ({"category": "shipping", "limit": 1}, 2),
                          ({"q": "ship", "order": "index", "limit": 1}, 2)):
        assert client.get("/indexes/shop/faqs", params=params, headers=STAFF).json()["total"] == total, params
    # an id: that FAQ first
    assert client.get("/indexes/shop/faqs", params={"q": "4"}, headers=STAFF).json()["faqs"][0]["id"] == "4"
    r = client.get("/indexes/shop/faqs", params={"q": "return", "category": "shipping"}, headers=STAFF)
    assert r.json()["faqs"] == []  # the filter holds in ranked order too
    apart = client.get("/indexes/shop/faqs", params={"q": "shipping take long"}, headers=STAFF).json()
    assert apart["faqs"][0]["id"] == "2" and apart["faqs"][0]["confidence"] is not None  # words apart: as ask answers
    one = client.get("/indexes/shop/faqs", params={"q": "shipping take long", "limit": 1}, headers=STAFF).json()
    assert one["total"] == apart["total"]  # whatever the page (it was the page's size: a pager saw no more)
    assert client.get("/indexes/shop/faqs", params={"q": "ship", "order": "random"},
                      headers=STAFF).status_code == 422
    # ranking a listing is not a query: nothing is logged
    assert client.get("/indexes/shop/queries", headers=STAFF).json()["total"] == 0


def test_unassign_takes_a_feedback_question_back_out(client):
    query = "are you open on sundays"
    assert client.post("/indexes/shop/ask", json={"query": query, "threshold": 0.99}).status_code == 200
    body = {"query": query, "faq_id": "2"}
    assert client.post("/indexes/shop/feedback", json=body, headers={"X-API-Key": KEY}).status_code == 200
    assert client.get("/indexes/shop/queries", headers=STAFF).json()["queries"][0]["feedback_faq"] == "2"
    assert client.post("/indexes/shop/unassign", json=body).status_code == 401
    r = client.post("/indexes/shop/unassign", json=body, headers={"X-API-Key": KEY})
    assert r.status_code == 200 and r.json()["removed_questions"] == 1
    assert query not in [q["text"] for q in client.get("/indexes/shop/faqs/2", headers=STAFF).json()["questions"]]
    assert client.get("/indexes/shop/queries", headers=STAFF).json()["queries"][0]["feedback_faq"] is None
    r = client.post("/indexes/shop/unassign", json={"query": "How long does shipping take?", "faq_id": "2"},
                    headers={"X-API-Key": KEY})
    assert r.status_code == 400 and "corpus" in r.json()["error"]  # questions of the corpus stay
    assert client.post("/indexes/shop/unassign", json={"query": query, "faq_id": "nope"},
                       headers={"X-API-Key": KEY}).status_code == 404


def test_writes_need_the_key_compared_exactly(client):
    assert client.get("/indexes", headers=STAFF).json()["indexes"][0]["writable"] is True
    body = {"faqs": [{"id": "5", "answer": "Open 9 to 5.", "questions": ["When are you open?"]}]}
    assert client.post("/indexes/shop/faqs", json=body).status_code == 401
    assert client.post("/indexes/shop/faqs", json=body, headers={"X-API-Key": KEY + "x"}).status_code == 401
    r = client.post("/indexes/shop/faqs", json=body, headers={"X-API-Key": KEY})
    assert r.status_code == 200 and r.json()["added_faqs"] == ["5"]
    assert client.get("/indexes/shop/ask", params={"q": "When are you open?"}).json()["answers"][0]["faq_id"] == "5"
    assert client.post("/indexes/shop/faqs", json=body, headers={"X-API-Key": KEY}).status_code == 409
    r = client.put("/indexes/shop/faqs/5", json={"id": "5", "answer": "Open 8 to 6.", "questions": ["When are you open?"]},
                   headers={"Authorization": f"Bearer {KEY}"})
    assert r.status_code == 200 and r.json()["updated_faqs"] == ["5"]
    assert client.put("/indexes/shop/faqs/9", json={"id": "9", "answer": "a", "questions": ["q"]},
                      headers={"X-API-Key": KEY}).status_code == 404
    r = client.post("/indexes/shop/faqs/upsert", headers={"X-API-Key": KEY},
                    json={"faqs": [{"id": "6", "answer": "Yes.", "questions": ["Do you have gift cards?"]}]})
    assert r.json()["added_faqs"] == ["6"]
    assert client.delete("/indexes/shop/faqs/6").status_code == 401
    assert client.delete("/indexes/shop/faqs/6", headers={"X-API-Key": KEY}).json()["removed_faqs"] == ["6"]
    # an id ending in /suggestions is shown (the suggestions route took it for FAQ 'bar': 404)
    r = client.post("/indexes/shop/faqs", headers={"X-API-Key": KEY},
                    json={"faqs": [{"id": "bar/suggestions", "answer": "Suggested.", "questions": ["a suffix question"]}]})
    assert r.status_code == 200
    assert client.get("/indexes/shop/faqs/bar/suggestions", headers=STAFF).json()["answer"] == "Suggested."
    # FAQ 1's suggestions still
    assert client.get("/indexes/shop/faqs/1/suggestions", headers=STAFF).json()["faq_id"] == "1"
    # metadata nested 40 levels was stored, then every answer carrying it was a 500 (RecursionError)
    deep = {"faqs": [{"id": "7", "answer": "a", "questions": ["q"], "metadata": {"x": json.loads("[" * 40 + "]" * 40)}}]}
    r = client.post("/indexes/shop/faqs", json=deep, headers={"X-API-Key": KEY})
    assert r.status_code == 422 and "nested more than 32 levels" in r.json()["error"]


def test_without_a_key_writes_are_off(fake_models, ix):
    service, c = make_client([ix], api_key=None)
    r = c.post("/indexes/shop/faqs", json={"faqs": [{"id": "5", "answer": "a", "questions": ["q"]}]},
               headers={"X-API-Key": "anything"})
    assert r.status_code == 403 and "--api-key" in r.json()["error"]
    assert c.get("/indexes").json()["indexes"][0]["writable"] is False  # the page hides its write buttons
    service.close()


@pytest.mark.parametrize("request_args, status, words", [
    (("post", "/indexes/shop/ask", {"json": {"query": ""}}), 422, "query"),
    (("post", "/indexes/shop/ask", {"json": {"query": "x" * 1001}}), 422, "query"),
    (("post", "/indexes/shop/ask", {"json": {"query": "ok", "k": 0}}), 422, "k"),
    (("post", "/indexes/shop/ask", {"json": {"query": "ok", "mode": "fuzzy"}}), 422, "mode"),
    (("post", "/indexes/shop/ask", {"content": b"{not json", "headers": {"Content-Type": "application/json"}}), 422, "JSON"),
    (("post", "/indexes/shop/ask/batch", {"json": {"queries": ["q"] * 101}}), 422, "queries"),
    (("post", "/indexes/shop/ask", {"content": b"x" * 5000, "headers": {"Content-Type": "application/json"}}), 413, "body"),
    (("get", "/indexes/shop/ask", {"params": {"q": "\x00\x01"}}), 422, "blank"),  # refused as by the CLI and library
    (("post", "/indexes/shop/ask", {"json": {"query": "ok", "filters": {"tier": 10 ** 23}}}), 422, "64-bit"),
    (("get", "/indexes/shop/gaps", {"params": {"since": "notadate"}, "headers": STAFF}), 422, "since must be a date"),
    (("post", "/indexes/shop/ask", {"content": b'{"query": "\xff\xfe"}', "headers": {"Content-Type": "application/json"}}),
     400, "could not be read as JSON: send a UTF-8 JSON object"),  # FastAPI said only "an error parsing the body"
    (("post", "/indexes/shop/feedback", {"json": {"query": "   ", "faq_id": "1"}, "headers": {"X-API-Key": KEY}}),
     422, "blank"),
])
def test_bad_input_is_a_json_4xx_never_a_traceback(client, request_args, status, words):
    method, url, kw = request_args
    r = getattr(client, method)(url, **kw)
    assert r.status_code == status, r.text
    body = r.json()
    assert "Traceback" not in r.text and words.lower() in json.dumps(body).lower()


def test_internal_errors_are_json_500(client, monkeypatch, caplog):
    """Found by a hostile run: a 500 came without the security headers every response carries, and its
    traceback was logged twice (Starlette's handler raises again for the server)."""
    import logging

    import faqsearch.search as search_mod

    monkeypatch.setattr(search_mod.Searcher, "answer", lambda *a, **k: 1 / 0)
    with caplog.at_level(logging.ERROR):
        r = client.get("/indexes/shop/ask", params={"q": "x"})
    assert r.status_code == 500 and r.json() == {"error": "internal error; the server log has the details"}
    assert r.headers["X-Content-Type-Options"] == "nosniff" and r.headers["X-Frame-Options"] == "DENY"
    assert caplog.text.count("ZeroDivisionError") == 1


def test_query_log_feedback_and_gaps(client, ix):
    for q in ["opening hours on sunday", "are you open on sundays", "sunday opening hours",
              "do you sell gift vouchers", "gift vouchers available"]:
        client.get("/indexes/shop/ask", params={"q": q, "threshold": 0.8})
    client.get("/indexes/shop/ask", params={"q": "How do I reset my password?", "threshold": 0.8})
    logged = client.get("/indexes/shop/queries", params={"unanswered": True}, headers=STAFF).json()
    assert logged["queries"] and all(q["answered"] == 0 for q in logged["queries"])
    assert "How do I reset my password?" not in [q["query"] for q in logged["queries"]]
    gaps = client.get("/indexes/shop/gaps", params={"similarity": 0.2}, headers=STAFF).json()["gaps"]
    assert gaps and gaps[0]["count"] >= 2
    # feedback: the query becomes a question of FAQ 2 (source feedback) and now answers
    qid = next(q["id"] for q in logged["queries"] if q["query"] == "are you open on sundays")
    # a query_id that is not this text's, or not logged at all, is refused before anything changes
    for wrong, words in ((qid + 10 ** 6, "not a query in this index's log"), (qid, "not 'gift vouchers please'")):
        r = client.post("/indexes/shop/feedback", json={"query": "gift vouchers please", "faq_id": "2", "query_id": wrong},
                        headers={"X-API-Key": KEY})
        assert r.status_code == 422 and words in r.text, r.text
    assert "gift vouchers please" not in [q["text"] for q in client.get("/indexes/shop/faqs/2", headers=STAFF).json()["questions"]]
    r = client.post("/indexes/shop/feedback", json={"query": "are you open on sundays", "faq_id": "2", "query_id": qid},
                    headers={"X-API-Key": KEY})
    assert r.status_code == 200 and r.json()["added_questions"] == 1
    last = client.get("/indexes/shop/faqs/2", headers=STAFF).json()["questions"][-1]
    assert last == {"id": last["id"], "text": "are you open on sundays", "source": "feedback"}
    answered = client.get("/indexes/shop/ask", params={"q": "are you open on sundays", "threshold": 0.8}).json()
    assert answered["answers"][0]["faq_id"] == "2"
    again = client.get("/indexes/shop/queries", params={"unanswered": True}, headers=STAFF).json()["queries"]
    assert next(q for q in again if q["id"] == qid)["feedback_faq"] == "2"
    assert os.path.exists(os.path.join(ix, "queries.db"))  # inside the index directory: it travels with it


def test_put_with_if_match_refuses_a_faq_changed_since_it_was_read(client):
    """GET gives the FAQ's revision as its ETag; a PUT with If-Match of an older one is a 412 and
    writes nothing (a form saved from an old read dropped the feedback given meanwhile)."""
    write = {"X-API-Key": KEY}
    got = client.get("/indexes/shop/faqs/2", headers=STAFF)
    tag = got.headers["ETag"]
    assert tag == f'"{got.json()["revision"]}"'
    old = got.json()
    assert client.post("/indexes/shop/feedback", json={"query": "said meanwhile", "faq_id": "2"}, headers=write).status_code == 200
    body = {"id": "2", "answer": "replaced answer", "questions": [q["text"] for q in old["questions"]]}
    r = client.put("/indexes/shop/faqs/2", json=body, headers={**write, "If-Match": tag})
    assert r.status_code == 412 and "changed since it was read" in r.json()["error"]
    now = client.get("/indexes/shop/faqs/2", headers=STAFF)
    assert "said meanwhile" in [q["text"] for q in now.json()["questions"]] and now.json()["answer"] == old["answer"]
    r = client.put("/indexes/shop/faqs/2", json={**body, "questions": [q["text"] for q in now.json()["questions"]]},
                   headers={**write, "If-Match": now.headers["ETag"]})
    assert r.status_code == 200 and client.get("/indexes/shop/faqs/2", headers=STAFF).json()["answer"] == "replaced answer"
    assert client.post("/indexes/shop/faqs", json={"faqs": [{"id": "..", "answer": "a", "questions": ["q"]}]},
                       headers=write).status_code == 422  # dots alone: no URL can address it
    # an id ending in /suggestions beside the FAQ it names would be read as that FAQ's suggestions, and
    # the reverse (found by a hostile run): refused, either way round
    r = client.post("/indexes/shop/faqs", json={"faqs": [{"id": "2/suggestions", "answer": "a", "questions": ["q"]}]},
                    headers=write)
    assert r.status_code == 422 and "FAQ '2/suggestions' could not be shown" in r.json()["error"], r.text
    assert client.post("/indexes/shop/faqs", json={"faqs": [{"id": "9", "answer": "a", "questions": ["q9"]},
                                                            {"id": "9/suggestions", "answer": "b", "questions": ["q10"]}]},
                       headers=write).status_code == 422
    # an id typed in another Unicode form than the stored one is named in both (it looked identical in the 404)
    assert client.post("/indexes/shop/faqs", json={"faqs": [{"id": "cafe\u0301", "answer": "a", "questions": ["caf question"]}]},
                       headers=write).status_code == 200
    r = client.get("/indexes/shop/faqs/cafe%CC%81", headers=STAFF)
    assert r.status_code == 404 and "the index holds 'caf\\xe9'" in r.json()["error"], r.text
    # PATCH: a blank question to add is a 422; "category": "" takes the category away
    assert client.patch("/indexes/shop/faqs/2", json={"questions": ["  "]}, headers=write).status_code == 422
    assert client.patch("/indexes/shop/faqs/2", json={"category": "shipping"}, headers=write).status_code == 200
    assert client.patch("/indexes/shop/faqs/2", json={"category": ""}, headers=write).status_code == 200
    assert client.get("/indexes/shop/faqs/2", headers=STAFF).json()["category"] is None


def test_no_log_means_no_log(fake_models, ix):
    service, c = make_client([ix], log_queries=False)
    c.get("/indexes/shop/ask", params={"q": "hello"})
    assert c.get("/indexes/shop/gaps", headers=STAFF).status_code == 400
    assert not os.path.exists(os.path.join(ix, "queries.db"))
    service.close()


def test_several_indexes_by_name_and_openapi(fake_models, ix, tmp_path):
    other = str(tmp_path / "othér")
    build_index([FAQ("x", "Other answer.", ["an other question"])], other).close()
    service, c = make_client([ix, other])
    assert [i["name"] for i in c.get("/indexes", headers=STAFF).json()["indexes"]] == ["shop", "othér"]
    assert c.get("/indexes/othér/ask", params={"q": "an other question"}).json()["answers"][0]["faq_id"] == "x"
    decomposed = "othe\u0301r"  # the same name as a macOS path or some clients compose it: it was a 404
    assert c.get(f"/indexes/{decomposed}/ask", params={"q": "an other question"}).json()["answers"][0]["faq_id"] == "x"
    doc = c.get("/openapi.json").json()
    paths = doc["paths"]
    assert {"/indexes/{name}/ask", "/indexes/{name}/faqs", "/indexes/{name}/gaps", "/health"} <= set(paths)
    # the document says what the routes send: the error body, each route's statuses, the answers' schemas
    from faqsearch.service.openapi import BatchOut, EditReportOut, ErrorOut, ResultOut

    ref = lambda op, code: op["responses"][code]["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
    add = paths["/indexes/{name}/faqs"]["post"]
    assert {"401", "403", "404", "409", "413", "422"} <= set(add["responses"]) and ref(add, "422") == "ErrorOut"
    assert ref(add, "200") == "EditReportOut" and ref(paths["/indexes/{name}/ask"]["get"], "200") == "ResultOut"
    assert ref(paths["/indexes/{name}/ask/batch"]["post"], "200") == "BatchOut"
    assert "409" not in paths["/indexes/{name}/ask"]["post"]["responses"] and "HTTPValidationError" not in doc["components"]["schemas"]
    assert set(paths["/health"]["get"]["responses"]) == {"200"}
    ResultOut.model_validate(c.get("/indexes/othér/ask", params={"q": "an other question"}).json())
    ResultOut.model_validate(c.get("/indexes/othér/ask", params={"q": "zzz", "threshold": 0.99}).json())
    BatchOut.model_validate(c.post("/indexes/othér/ask/batch", json={"queries": ["an other question", ""]}).json())
    bad = c.get("/indexes/othér/ask", params={"q": "x", "k": 0})
    assert bad.status_code == 422 and ErrorOut.model_validate(bad.json()).detail
    assert ErrorOut.model_validate(c.get("/indexes/nope/ask", params={"q": "x"}).json()).error
    assert EditReportOut.model_fields.keys() == c.get("/openapi.json").json()["components"]["schemas"]["EditReportOut"]["properties"].keys()
    assert c.get("/").status_code == 200 and "faqsearch" in c.get("/").text
    assert c.get("/static/app.js").status_code == 200 and c.get("/static/..%2Fserver.py").status_code == 404
    service.close()


def test_another_process_edit_is_swapped_in_whole(fake_models, ix):
    """Readers hammer the service while another writer edits the index: no request fails, each sees
    the old or the new version, and the watcher swaps the new one in."""
    service = Service({"shop": ix}, api_key=KEY, watch=True)
    c = TestClient(create_app(service))
    errors, seen = [], set()
    stop = threading.Event()

    def reader():
        while not stop.is_set():
            r = c.get("/indexes/shop/ask", params={"q": "brand new question words", "threshold": -1, "k": 1})
            if r.status_code != 200:
                errors.append(r.text)
            else:
                seen.add(r.json()["answers"][0]["faq_id"])

    threads = [threading.Thread(target=reader) for _ in range(4)]
    for t in threads:
        t.start()
    with FAQSearch.open(ix, encoder=FakeEncoder()) as other:  # like `faqsearch add` in another process
        other.add([FAQ("new", "New answer.", ["brand new question words"])])
    for _ in range(200):
        if "new" in seen:
            break
        threading.Event().wait(0.05)
    stop.set()
    for t in threads:
        t.join()
    service.close()
    assert not errors and "new" in seen


def test_cli_feedback_and_gaps(fake_models, ix):
    from click.testing import CliRunner

    from faqsearch.cli import cli

    service, c = make_client([ix])
    for q in ["sunday opening hours", "opening hours on sunday", "hours sunday opening"]:
        c.get("/indexes/shop/ask", params={"q": q, "threshold": 0.9})
    service.close()
    runner = CliRunner()
    r = runner.invoke(cli, ["gaps", "--index", ix, "--similarity", "0.5", "--json"])
    assert r.exit_code == 0, r.output
    gap = json.loads(r.output)["gaps"][0]
    assert gap["count"] == 3 and "sunday opening hours" in gap["examples"]
    r = runner.invoke(cli, ["feedback", "sunday opening hours", "2", "--index", ix])
    assert r.exit_code == 0 and "Added the query to 2" in r.output
    r = runner.invoke(cli, ["gaps", "--index", ix, "--similarity", "0.5", "--json"])
    assert json.loads(r.output)["gaps"] == [] or json.loads(r.output)["gaps"][0]["count"] == 2
    r = runner.invoke(cli, ["feedback", "x y", "nope", "--index", ix])
    assert r.exit_code == 1 and "unknown FAQ id" in r.output


@pytest.mark.slow
def test_faqsearch_serve_answers_curl_style_requests(tmp_path):
    """The real command in a subprocess, bound to 127.0.0.1, real bundled encoder."""
    import subprocess
    import sys

    import httpx

    from .conftest import SAMPLE, free_port, wait_healthy

    env = {**os.environ, "FAQSEARCH_HOME": str(tmp_path), "FAQSEARCH_API_KEY": KEY}
    subprocess.run([sys.executable, "-m", "faqsearch.cli", "ingest", os.path.join(SAMPLE, "faq.csv"), "-q"],
                   env=env, check=True, timeout=300)
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "faqsearch.cli", "serve", "--port", str(port), "-q"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        base = f"http://127.0.0.1:{port}"
        wait_healthy(base, proc)
        r = httpx.get(base + "/indexes/default/ask", params={"q": "how do I get my money back for a return?"})
        assert r.status_code == 200 and r.json()["answers"][0]["faq_id"] == "ret-04"
        r = httpx.delete(base + "/indexes/default/faqs/ret-04")
        assert r.status_code == 401
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def _log_password_queries(c):
    """Logged queries: two answered with FAQ 1 (one asked twice), one answered with FAQ 2."""
    for q in ["reset my password please", "password reset how", "reset my password please", "how long is shipping"]:
        assert c.get("/indexes/shop/ask", params={"q": q}).status_code == 200


def test_suggestions_from_the_log_are_approved_into_the_faq(client, monkeypatch):
    """#26: an FAQ author gets logged queries as suggestions, approves two, they become questions
    (source approved); nothing is indexed before."""
    _log_password_queries(client)
    before = client.get("/indexes/shop/faqs/1", headers=STAFF).json()["questions"]
    r = client.get("/indexes/shop/faqs/1/suggestions", headers=STAFF)
    assert r.status_code == 200, r.text
    got = r.json()["suggestions"]
    assert [(s["text"], s["source"], s["count"]) for s in got[:2]] == [
        ("reset my password please", "answered", 2), ("password reset how", "answered", 1)]
    assert all(s["source"] in ("answered", "near") for s in got)
    # suggesting indexes nothing
    assert client.get("/indexes/shop/faqs/1", headers=STAFF).json()["questions"] == before
    assert client.get("/indexes/shop/faqs/nope/suggestions", headers=STAFF).status_code == 404
    texts = [s["text"] for s in got[:2]]
    assert client.post("/indexes/shop/faqs/1/approve", json={"texts": texts}).status_code == 401
    r = client.post("/indexes/shop/faqs/1/approve", json={"texts": texts}, headers={"X-API-Key": KEY})
    assert r.status_code == 200 and r.json()["added_questions"] == 2
    questions = client.get("/indexes/shop/faqs/1", headers=STAFF).json()["questions"]
    assert [q["source"] for q in questions if q["text"] in texts] == ["approved", "approved"]
    suggested = client.get("/indexes/shop/faqs/1/suggestions", headers=STAFF).json()["suggestions"]
    assert not set(texts) & {s["text"] for s in suggested}
    # generate=N adds generated rewordings of the first question (a stand-in generator here)
    from faqsearch.generators import Candidate
    from faqsearch.service.app import Generators

    class Fixed:
        name, languages = "fixed", ("en",)

        def sample(self, text, n, seed=None):
            return [Candidate("How do I reset my password now?", True)] * n

        def similarity(self, text, candidates):
            return None

        def spec(self):
            return {"kind": "fixed"}

    monkeypatch.setattr(Generators, "get", lambda self, spec: Fixed())
    r = client.get("/indexes/shop/faqs/1/suggestions", params={"generate": 2, "limit": 1}, headers=STAFF)
    got = r.json()["suggestions"]
    assert len(got) <= 2 and got[-1] == {**got[-1], "source": "generated", "text": "How do I reset my password now?"}



def test_approve_through_the_api_marks_the_log_as_the_cli_does(client):
    """An approved logged query shows as assigned in the query log (as `faqsearch approve` and feedback
    leave it), so another FAQ no longer gets it as a suggestion; the text is matched as it was logged."""
    _log_password_queries(client)
    before = client.get("/indexes/shop/faqs/1/suggestions", headers=STAFF).json()["suggestions"]
    assert "password reset how" in [s["text"] for s in before]  # answered with FAQ 1 until approved into it
    # #44: a query the index answers with another FAQ is never offered (it ranks FAQ 3 in its top 3)
    third = client.get("/indexes/shop/faqs/3/suggestions", headers=STAFF).json()["suggestions"]
    assert "password reset how" not in [s["text"] for s in third]
    r = client.post("/indexes/shop/faqs/1/approve", json={"texts": ["password  reset how\t", "reset my password please"]},
                    headers={"X-API-Key": KEY})
    assert r.status_code == 200 and r.json()["added_questions"] == 2
    logged = client.get("/indexes/shop/queries", headers=STAFF).json()["queries"]
    assert {(q["query"], q["feedback_faq"]) for q in logged} == {
        ("reset my password please", "1"), ("password reset how", "1"), ("how long is shipping", None)}
    after = client.get("/indexes/shop/faqs/1/suggestions", headers=STAFF).json()["suggestions"]
    assert not {"password reset how", "reset my password please"} & {s["text"] for s in after}
    r = client.post("/indexes/shop/unassign", json={"query": "password reset how", "faq_id": "1"},
                    headers={"X-API-Key": KEY})
    assert r.status_code == 200
    logged = client.get("/indexes/shop/queries", headers=STAFF).json()["queries"]
    assert {q["query"]: q["feedback_faq"] for q in logged}["password reset how"] is None

def test_cli_suggest_and_approve(fake_models, ix):
    from click.testing import CliRunner

    from faqsearch.cli import cli

    service, c = make_client([ix])
    _log_password_queries(c)
    service.close()
    runner = CliRunner()
    r = runner.invoke(cli, ["suggest", "1", "--index", ix, "--json"])
    assert r.exit_code == 0, r.output
    got = json.loads(r.output)["suggestions"]
    assert [s["text"] for s in got[:2]] == ["reset my password please", "password reset how"]
    r = runner.invoke(cli, ["suggest", "1", "--index", ix])
    assert r.exit_code == 0 and "answered" in r.output and "2x  reset my password please" in r.output
    r = runner.invoke(cli, ["approve", "1", "reset my password please", "password reset how", "--index", ix, "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["added_questions"] == 2
    with FAQSearch.open(ix) as e:
        sources = {q["text"]: q["source"] for q in e.show("1")["questions"]}
    assert sources["reset my password please"] == sources["password reset how"] == "approved"
    from faqsearch.querylog import QueryLog

    qlog = QueryLog.for_index(ix)
    assert {(q["query"], q["feedback_faq"]) for q in qlog.recent()} == {
        ("reset my password please", "1"), ("password reset how", "1"), ("how long is shipping", None)}
    qlog.close()
    r = runner.invoke(cli, ["suggest", "1", "--index", ix, "--json"])
    assert "reset my password please" not in [s["text"] for s in json.loads(r.output)["suggestions"]]
    r = runner.invoke(cli, ["approve", "nope", "x", "--index", ix])
    assert r.exit_code == 1 and "unknown FAQ id" in r.output


def test_one_field_of_an_faq_is_edited_over_http_and_upsert_keeps_questions(client):
    """#40.3: PATCH .../faqs/ID changes an answer or category, or adds questions, keeping the rest;
    POST .../faqs/upsert (add or update) keeps the questions a body does not list, as `update` does."""
    r = client.patch("/indexes/shop/faqs/3", json={"answer": "Yes, within 60 days."})
    assert r.status_code == 401
    r = client.patch("/indexes/shop/faqs/3", json={"answer": "Yes, within 60 days."}, headers={"X-API-Key": KEY})
    assert r.status_code == 200 and r.json()["updated_faqs"] == ["3"] and r.json()["removed_questions"] == 0
    faq = client.get("/indexes/shop/faqs/3", headers=STAFF).json()
    assert faq["answer"] == "Yes, within 60 days." and faq["category"] == "returns" and len(faq["questions"]) == 2
    r = client.patch("/indexes/shop/faqs/3", json={"category": "policy", "questions": ["send it back?"]},
                     headers={"X-API-Key": KEY})
    assert r.status_code == 200 and r.json()["added_questions"] == 1
    faq = client.get("/indexes/shop/faqs/3", headers=STAFF).json()
    assert faq["category"] == "policy" and [q["text"] for q in faq["questions"]][-1] == "send it back?"
    assert client.patch("/indexes/shop/faqs/nope", json={"answer": "x"}, headers={"X-API-Key": KEY}).status_code == 404
    r = client.patch("/indexes/shop/faqs/3", json={}, headers={"X-API-Key": KEY})
    assert r.status_code == 422 and "nothing to change" in r.json()["error"]
    r = client.post("/indexes/shop/faqs/upsert", headers={"X-API-Key": KEY},
                    json={"faqs": [{"id": "1", "answer": "Use the reset link.", "questions": ["How do I reset my password?"]}]})
    assert r.status_code == 200 and r.json()["removed_questions"] == 0
    assert len(client.get("/indexes/shop/faqs/1", headers=STAFF).json()["questions"]) == 2


READ = "staff-read-key"


def test_staff_reads_need_a_key_when_the_server_has_one(fake_models, ix):
    """#40.2: with --api-key, anyone who reached the port read every customer question (/queries),
    the gaps, suggestions, FAQ listing and /indexes. Now those need the API key or the read key
    (--read-key: staff who read but never write); asking stays open, and so does /health, which says
    what needs a key (the page reads it)."""
    service, c = make_client([ix], read_key=READ)
    assert c.get("/indexes/shop/ask", params={"q": "a customer's private question"}).status_code == 200
    assert c.post("/indexes/shop/ask", json={"query": "another one"}).status_code == 200
    assert c.post("/indexes/shop/ask/batch", json={"queries": ["and a third"]}).status_code == 200
    staff = ["/indexes", "/indexes/shop", "/indexes/shop/queries", "/indexes/shop/gaps", "/indexes/shop/faqs",
             "/indexes/shop/faqs/1", "/indexes/shop/faqs/1/suggestions"]
    for url in staff:
        r = c.get(url)
        assert r.status_code == 401 and "X-API-Key" in r.json()["error"], url
        assert "private question" not in r.text
        assert c.get(url, headers={"X-API-Key": "wrong"}).status_code == 401, url
        for key in (READ, KEY):
            assert c.get(url, headers={"X-API-Key": key}).status_code == 200, (url, key)
    logged = c.get("/indexes/shop/queries", headers={"Authorization": f"Bearer {READ}"}).json()
    assert "a customer's private question" in [q["query"] for q in logged["queries"]]
    r = c.post("/indexes/shop/faqs", json={"faqs": [{"id": "5", "answer": "a", "questions": ["q"]}]},
               headers={"X-API-Key": READ})
    assert r.status_code == 403 and "read key" in r.json()["error"] and "API key" in r.json()["error"]
    assert c.get("/health").json() == {"status": "ok", "indexes": ["shop"],
                                       "access": {"ask": "open", "read": "key", "write": "key"}}
    service.close()
    service, c = make_client([ix], api_key=None, read_key=READ)  # a read-only server for staff
    assert c.get("/indexes/shop/queries").status_code == 401
    assert c.get("/indexes/shop/queries", headers={"X-API-Key": READ}).status_code == 200
    assert c.get("/indexes", headers={"X-API-Key": READ}).json()["indexes"][0]["writable"] is False
    assert c.get("/health").json()["access"] == {"ask": "open", "read": "key", "write": "off"}
    service.close()
    service, c = make_client([ix], api_key=None)  # no key at all: reads open, as before
    assert c.get("/indexes/shop/queries").status_code == 200
    assert c.get("/health").json()["access"] == {"ask": "open", "read": "open", "write": "off"}
    service.close()


def test_a_private_server_answers_only_with_a_key(fake_models, ix):
    from faqsearch.errors import InvalidOptionError

    service, c = make_client([ix], read_key=READ, private=True)
    calls = [("get", "/indexes/shop/ask", {"params": {"q": "where is my parcel"}}),
             ("post", "/indexes/shop/ask", {"json": {"query": "where is my parcel"}}),
             ("post", "/indexes/shop/ask/batch", {"json": {"queries": ["where is my parcel"]}})]
    for method, url, kw in calls:
        assert getattr(c, method)(url, **kw).status_code == 401, url
        for key in (READ, KEY):
            assert getattr(c, method)(url, headers={"X-API-Key": key}, **kw).status_code == 200, (url, key)
    assert c.post("/indexes/shop/paraphrase", json={"text": "where is my parcel"}).status_code == 401
    assert c.get("/health").json()["access"] == {"ask": "key", "read": "key", "write": "key"}
    service.close()
    with pytest.raises(InvalidOptionError, match="--private needs a key"):
        Service({"shop": ix}, private=True, watch=False)
    # a key no client can send alike is refused at start: a space (trimmed from headers), non-ASCII
    for option, keys in (("--read-key", {"read_key": " "}), ("--api-key", {"api_key": "sécret"}),
                         ("--api-key", {"api_key": "two words"})):
        with pytest.raises(InvalidOptionError, match=f"{option} holds"):
            Service({"shop": ix}, watch=False, **keys)


def test_users_queries_made_phrasings_are_shown_only_to_readers_of_the_query_log(fake_models, ix):
    """A phrasing that came from a user's query (feedback, approve) came back whole to anyone who asked:
    another customer's email, shown to a stranger (GET /queries needed a key; an ask did not). A caller
    who may not read the query log sees the FAQ's own first question in its place; the keys see it."""
    fed, approved = "my email is alice@example.com, how long does shipping take", "call 0700 900123 re my return"
    with FAQSearch.open(ix, encoder=FakeEncoder()) as e:
        e.feedback(fed, "2")
        e.approve("3", [approved])
        mine = e.ask(fed, k=1).answers[0]
        assert (mine.question, mine.source, mine.faq_question) == (fed, "feedback", "How long does shipping take?")
        assert e.ask(approved, k=1, mode="lexical").answers[0].faq_question == "Can I return an item?"
    service, c = make_client([ix], read_key=READ)
    asks = [("get", "/indexes/shop/ask", {"params": {"q": fed, "k": 4, "threshold": -1}}),
            ("get", "/indexes/shop/ask", {"params": {"q": "call re my return", "k": 4, "mode": "lexical"}}),
            ("post", "/indexes/shop/ask", {"json": {"query": "alice example", "k": 4, "min_confidence": 0}}),
            ("post", "/indexes/shop/ask/batch", {"json": {"queries": [fed, approved], "k": 4, "threshold": 1}})]

    def shown(r):  # every question a response shows (the query itself is the caller's own)
        results = r.json().get("results", [r.json()])
        return {a["question"] for x in results for a in x["answers"] + [x["nearest"] or x["answers"][0]]}

    for method, url, kw in asks:
        r = getattr(c, method)(url, **kw)
        assert r.status_code == 200 and {fed, approved}.isdisjoint(shown(r)), (url, kw)
        assert {"How long does shipping take?", "Can I return an item?"} & shown(r), (url, kw)
        for key in (READ, KEY):
            assert {fed, approved} & shown(getattr(c, method)(url, headers={"X-API-Key": key}, **kw)), (url, key)
    service.close()
    service, c = make_client([ix], api_key=None)  # no key: anyone reads the log, and the phrasings
    assert fed in shown(c.get("/indexes/shop/ask", params={"q": fed, "k": 1}))
    service.close()


def test_responses_name_indexes_never_server_paths(fake_models, ix, tmp_path):
    """#40.2: /indexes showed each index's absolute path (and /indexes/NAME the corpus file's); an
    error about an index named its directory. Responses give the index's name instead."""
    service, c = make_client([ix])
    staff = {"X-API-Key": KEY}
    listed = c.get("/indexes", headers=staff)
    assert listed.json()["indexes"][0]["name"] == "shop" and "path" not in listed.json()["indexes"][0]
    info = c.get("/indexes/shop", headers=staff)
    assert info.json()["name"] == "shop" and info.json()["corpus"] == "faq.csv" and "path" not in info.json()
    for r in (listed, info):
        assert str(tmp_path) not in r.text
    os.rename(ix, ix + "-moved")  # renamed away under the server: a write cannot find it
    r = c.post("/indexes/shop/feedback", json={"query": "hello there", "faq_id": "1"}, headers=staff)
    assert r.status_code == 404 and "index" in r.json()["error"] and "shop" in r.json()["error"]
    assert str(tmp_path) not in r.text
    service.close()


def test_the_access_log_leaves_the_query_text_out(fake_models, ix):
    """#40.2: uvicorn's access log printed `GET /indexes/NAME/ask?q=...`: every customer question in
    the server's log. The line keeps the path and the status, never the query string."""
    import logging
    import socket
    import time

    import httpx
    import uvicorn

    service = Service({"shop": ix}, api_key=KEY, watch=False)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app(service), host="127.0.0.1", port=port, log_level="info"))
    records: list[logging.LogRecord] = []
    collect = logging.Handler()
    collect.emit = records.append
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.05)
        logging.getLogger("uvicorn.access").addHandler(collect)  # after uvicorn configured its logging
        r = httpx.get(f"http://127.0.0.1:{port}/indexes/shop/ask", params={"q": "my secret medical question"})
        assert r.status_code == 200
        deadline = time.monotonic() + 10
        while not records and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        logging.getLogger("uvicorn.access").removeHandler(collect)
        server.should_exit = True
        thread.join(timeout=10)
        service.close()
    lines = [rec.getMessage() for rec in records]
    assert any("GET /indexes/shop/ask HTTP/1.1" in line and "200" in line for line in lines), lines
    assert not any("secret" in line or "?q=" in line for line in lines), lines


def test_serve_takes_the_read_key_and_private_from_its_options(fake_models, ix, monkeypatch):
    from click.testing import CliRunner

    import faqsearch.service as service_mod
    from faqsearch.cli import cli

    seen = {}
    monkeypatch.setattr(service_mod, "serve", lambda *a, **k: seen.update(k))
    monkeypatch.delenv("FAQSEARCH_API_KEY", raising=False)
    monkeypatch.setenv("FAQSEARCH_READ_KEY", READ)
    assert CliRunner().invoke(cli, ["serve", "--index", ix, "--private", "-q"]).exit_code == 0
    assert (seen["read_key"], seen["api_key"], seen["private"]) == (READ, None, True)


@pytest.mark.parametrize("how", ["rename", "drop"])
def test_writes_to_an_index_renamed_or_dropped_under_the_server_say_so(fake_models, ix, how):
    from faqsearch.manage import drop_index, rename_index

    service, c = make_client([ix])
    if how == "rename":
        rename_index(ix, ix + "-new")
    else:
        drop_index(ix)
    r = c.post("/indexes/shop/faqs", json={"faqs": [{"id": "5", "answer": "a", "questions": ["q"]}]}, headers=STAFF)
    assert r.status_code == 404 and "renamed or dropped" in r.json()["error"], r.json()
    assert "did not finish" not in r.json()["error"] and not os.path.exists(ix)  # and nothing made at the old name
    service.close()


def test_a_read_only_index_is_served_read_only(fake_models, ix):
    """#40 N6: `serve` refused an index it could not write ("store.db cannot be read ... ingest --force")
    while `ask` answered there. It serves it read-only: answers, no query log, writes refused saying why."""
    with read_only(ix):
        service, c = make_client([ix])
        try:
            r = c.get("/indexes/shop/ask", params={"q": "How long does shipping take?"})
            assert r.status_code == 200 and r.json()["answers"][0]["faq_id"] == "2"
            info = c.get("/indexes", headers=STAFF).json()["indexes"][0]
            assert info["writable"] is False and info["logging"] is False
            r = c.post("/indexes/shop/faqs", json={"faqs": [{"id": "5", "answer": "a", "questions": ["q"]}]},
                       headers=STAFF)
            assert r.status_code == 403 and "read-only" in r.json()["error"], r.json()
            assert "ingest" not in r.json()["error"]
        finally:
            service.close()
        assert not os.path.exists(os.path.join(ix, "queries.db"))


def test_versions_behind_the_read_key_and_restore_behind_the_write_key(fake_models, ix):
    """#40 "Versions a user can restore": GET .../versions lists what the index keeps (staff only where
    the server has keys), POST .../restore makes one live again as a new version; it answers from it."""
    service, c = make_client([ix], read_key=READ)
    assert c.get("/indexes/shop/versions").status_code == 401
    first = c.get("/indexes/shop/versions", headers={"X-API-Key": READ}).json()["versions"]
    assert [(v["made_by"], v["faqs"], v["live"]) for v in first] == [("ingest", 4, True)]
    r = c.delete("/indexes/shop/faqs/1", headers=STAFF)
    assert r.status_code == 200 and r.json()["previous_version"] == first[0]["version"]
    body = {"version": first[0]["version"]}
    assert c.post("/indexes/shop/restore", json=body, headers={"X-API-Key": READ}).status_code == 403
    bad = c.post("/indexes/shop/restore", json={"version": "v00000099"}, headers=STAFF)
    assert bad.status_code == 404 and first[0]["version"] in bad.json()["error"] and ix not in bad.json()["error"]
    r = c.post("/indexes/shop/restore", json=body, headers=STAFF)
    assert r.status_code == 200 and r.json()["restored"] == first[0]["version"]
    assert c.get("/indexes/shop/faqs/1", headers=STAFF).status_code == 200
    listed = c.get("/indexes/shop/versions", headers=STAFF).json()["versions"]
    assert [v["made_by"] for v in listed] == ["ingest", "remove", f"restore {first[0]['version']}"]
    assert [v["live"] for v in listed] == [False, False, True] and listed[-1]["version"] == r.json()["version"]
    service.close()


def test_paraphrases_are_generated_one_request_at_a_time_and_responses_carry_security_headers(client):
    """45 slow paraphrase requests held every request thread: /health and asks timed out until the
    server was killed. A second generation while one runs is a 429 at once, with Retry-After."""
    generators = client.app.state.generators
    with generators.slot():  # another request's generation under way
        r = client.post("/indexes/shop/paraphrase", json={"text": "where is my parcel", "n": 2})
        assert r.status_code == 429 and r.headers["Retry-After"] == "5" and "try again" in r.json()["error"]
        r = client.get("/indexes/shop/faqs/1/suggestions", params={"generate": 2}, headers={"X-API-Key": KEY})
        assert r.status_code == 429
        assert client.get("/indexes/shop/faqs/1/suggestions", headers={"X-API-Key": KEY}).status_code == 200
        assert client.get("/health").status_code == 200 and client.get("/indexes/shop/ask?q=hi").status_code == 200
    r = client.post("/indexes/shop/paraphrase", json={"text": "x" * 301})
    assert r.status_code == 422 and "text" in r.json()["error"]
    paths = client.get("/openapi.json").json()["paths"]
    assert "429" in paths["/indexes/{name}/paraphrase"]["post"]["responses"]
    for url in ("/", "/static/app.js", "/health", "/indexes/shop/ask?q=hi"):
        headers = client.get(url).headers
        assert headers["X-Content-Type-Options"] == "nosniff" and headers["X-Frame-Options"] == "DENY"
        assert ("frame-ancestors 'none'" in headers.get("Content-Security-Policy", "")) == (url in ("/", "/static/app.js"))


def test_a_keyless_server_on_this_machine_answers_only_requests_addressed_to_it(fake_models, ix):
    """A web page that points its own name at 127.0.0.1 (DNS rebinding) could read a keyless local
    server's query log from the browser of whoever runs it: the Host header was not checked."""
    service = Service({"shop": ix}, watch=False)
    try:
        c = TestClient(create_app(service, local_only=True))
        for host in ("localhost:8000", "127.0.0.1:8000", "[::1]:8000", "LOCALHOST"):
            assert c.get("/indexes/shop/queries", headers={"Host": host}).status_code == 200, host
        r = c.get("/indexes/shop/queries", headers={"Host": "attacker.example:8000"})
        assert r.status_code == 403 and "give it a key" in r.json()["error"] and "attacker.example" in r.json()["error"]
        assert c.get("/health", headers={"Host": "faq.internal:8000"}).status_code == 200  # always open (a proxy's check)
    finally:
        service.close()
    keyed = Service({"shop": ix}, api_key=KEY, watch=False)  # with a key the key decides, whatever the name
    try:
        c = TestClient(create_app(keyed, local_only=True))
        assert c.get("/indexes/shop/queries", headers={"Host": "faq.example.com", "X-API-Key": KEY}).status_code == 200
    finally:
        keyed.close()


def test_a_server_error_is_logged_with_its_reason_and_a_read_only_index_says_why_it_has_no_log(fake_models, ix,
                                                                                               monkeypatch, caplog):
    """A 503 (a damaged store, a full disk) was logged as its request line alone, at INFO: an operator
    alerting on errors never saw one. A read-only index's query log reads said it was off "started with
    --no-log"."""
    import faqsearch.service.service as served
    from faqsearch.errors import StorageError

    def full(*a, **k):
        raise StorageError("no space left on the device holding shop; free some space")

    service, c = make_client([ix])
    try:
        monkeypatch.setattr(FAQSearch, "add", full)
        with caplog.at_level("ERROR"):
            r = c.post("/indexes/shop/faqs", headers={"X-API-Key": KEY}, json={"faqs": [
                {"id": "n", "answer": "a", "questions": ["q?"]}]})
        assert r.status_code == 503
        assert [m for m in caplog.messages if "POST /indexes/shop/faqs: no space left on the device" in m], caplog.messages
    finally:
        service.close()
    monkeypatch.setattr(served.os, "access", lambda path, mode: mode != os.W_OK)
    service, c = make_client([ix], api_key=None)
    try:
        r = c.get("/indexes/shop/queries")
        assert r.status_code == 400 and "is served read-only" in r.json()["error"] and "--no-log" not in r.json()["error"]
    finally:
        service.close()


def test_serve_without_the_server_extra_names_it(fake_models, ix):
    """Installed without the server extra, `faqsearch serve` printed a traceback (the application
    imports pydantic first): it names the extra now, as the CLI's other missing extras do."""
    import subprocess
    import sys

    script = ("import sys; sys.modules['pydantic'] = sys.modules['fastapi'] = None\n"
              "from faqsearch.cli import cli\n"
              f"cli(['serve', '--index', {ix!r}, '--port', '8999'])")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
    assert "pip install 'faqsearch[server]'" in out.stderr
