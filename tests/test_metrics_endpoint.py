"""GET /metrics through the real FastAPI app: the Prometheus text a scraper reads, parsed with
prometheus_client's own parser (tests/test_metrics.py is about retrieval metrics)."""
import os

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("prometheus_client")
from fastapi.testclient import TestClient  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from faqsearch.service import Service, create_app  # noqa: E402

from .conftest import build_index  # noqa: E402

KEY = "s3cret-key"


@pytest.fixture
def ix(tmp_path, small_corpus):
    build_index(small_corpus, tmp_path / "shop", threshold=0.3).close()
    return str(tmp_path / "shop")


def serve(paths, **keys):
    service = Service({os.path.basename(p): p for p in paths}, watch=False, **keys)
    return service, TestClient(create_app(service), raise_server_exceptions=False)


def scrape(client, **headers) -> dict:
    r = client.get("/metrics", headers=headers)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(r.text) for s in family.samples}


def value(samples, name, **labels):
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def test_metrics_count_requests_latency_answers_and_index_size(fake_models, ix):
    service, client = serve([ix])
    try:
        assert client.get("/indexes/shop/ask", params={"q": "How do I reset my password?"}).status_code == 200
        assert client.post("/indexes/shop/ask", json={"query": "How long does shipping take?"}).status_code == 200
        r = client.post("/indexes/shop/ask", json={"query": "zzz qqq", "threshold": 0.95})
        assert r.json()["answered"] is False
        r = client.post("/indexes/shop/ask/batch", json={"queries": ["Can I return an item?", "zzz qqq"], "k": 1,
                                                          "threshold": 0.95})
        assert [x["answered"] for x in r.json()["results"]] == [True, False]
        assert client.get("/indexes/nope/ask", params={"q": "hi"}).status_code == 404
        assert client.get("/no/such/path").status_code == 404
        too_big = client.post("/indexes/shop/ask", content=b"x" * (2 << 20), headers={"content-type": "application/json"})
        assert too_big.status_code == 413
        m = scrape(client)
    finally:
        service.close()
    ask = "/indexes/{name}/ask"
    assert value(m, "faqsearch_requests_total", method="GET", route=ask, status="200") == 1
    assert value(m, "faqsearch_requests_total", method="POST", route=ask, status="200") == 2
    assert value(m, "faqsearch_requests_total", method="POST", route=ask + "/batch", status="200") == 1
    assert value(m, "faqsearch_requests_total", method="GET", route=ask, status="404") == 1
    assert value(m, "faqsearch_requests_total", method="GET", route="unmatched", status="404") == 1
    assert value(m, "faqsearch_requests_total", method="POST", route="unmatched", status="413") == 1  # refused first
    # the histogram: every ask timed, its buckets cumulative up to +Inf
    assert value(m, "faqsearch_request_seconds_count", route=ask) == 4
    assert value(m, "faqsearch_request_seconds_bucket", route=ask, le="+Inf") == 4
    assert 0 < value(m, "faqsearch_request_seconds_sum", route=ask) < 60
    buckets = sorted((float(dict(k[1])["le"]), v) for k, v in m.items()
                     if k[0] == "faqsearch_request_seconds_bucket" and dict(k[1])["route"] == ask)
    assert [le for le, _ in buckets][:2] == [0.005, 0.01] and all(a[1] <= b[1] for a, b in zip(buckets, buckets[1:]))
    assert value(m, "faqsearch_queries_total", index="shop", answered="true") == 3
    assert value(m, "faqsearch_queries_total", index="shop", answered="false") == 2
    assert value(m, "faqsearch_index_faqs", index="shop") == 4
    assert value(m, "faqsearch_index_questions", index="shop") >= 4
    assert value(m, "faqsearch_index_generation", index="shop") >= 1


def test_two_apps_keep_apart_counts_and_sizes_follow_an_edit(fake_models, ix):
    service, client = serve([ix], api_key=KEY)
    other, other_client = serve([ix])
    try:
        client.get("/indexes/shop/ask", params={"q": "Can I return an item?"})
        before = scrape(client, **{"X-API-Key": KEY})
        assert value(before, "faqsearch_queries_total", index="shop", answered="true") == 1
        assert value(scrape(other_client), "faqsearch_queries_total", index="shop", answered="true") == 0
        r = client.post("/indexes/shop/faqs", headers={"X-API-Key": KEY},
                        json={"faqs": [{"id": "9", "answer": "Yes.", "questions": ["Do you sell gift cards?"]}]})
        assert r.status_code == 200
        after = scrape(client, **{"X-API-Key": KEY})
        assert value(after, "faqsearch_index_faqs", index="shop") == 5
        # the edit's commit, then the confidence learned again (the index grew by a tenth): two commits
        assert value(after, "faqsearch_index_generation", index="shop") == \
            value(before, "faqsearch_index_generation", index="shop") + 2
    finally:
        service.close()
        other.close()


def test_metrics_is_a_read_it_needs_a_key_when_the_server_has_one(fake_models, ix):
    service, client = serve([ix], api_key=KEY, read_key="staff")
    try:
        assert client.get("/metrics").status_code == 401
        assert client.get("/metrics", headers={"X-API-Key": "wrong"}).status_code == 401
        assert client.get("/metrics", headers={"Authorization": "Bearer staff"}).status_code == 200
        assert client.get("/metrics", headers={"X-API-Key": KEY}).status_code == 200
    finally:
        service.close()


def test_a_made_up_http_method_is_counted_as_other(fake_models, ix):
    """The server takes any token as a method; the label keeps a fixed set, so a client cannot grow
    the series a scraper stores."""
    _, client = serve([ix])
    with client:
        for method in ("FOOBAR1", "ZZTOP"):
            client.request(method, "/health")
        samples = scrape(client)
    methods = {dict(labels).get("method") for (name, labels) in samples if name == "faqsearch_requests_total"}
    assert "other" in methods and not methods & {"FOOBAR1", "ZZTOP"}
