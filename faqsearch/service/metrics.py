"""`GET /metrics`: the service's counters in the Prometheus text format (prometheus-client).

Each app holds its own registry (not the library's global one), so several apps in one process keep
apart counts. Requests are counted by route template (``/indexes/{name}/ask``, never the query), so a
scrape stays small whatever the traffic; the index sizes are read from each index's current snapshot
at scrape time."""
from __future__ import annotations

from typing import Any, Iterable

from ..errors import MissingExtraError

METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
# seconds: an answer from a warm index takes a few ms; a write or a generator up to seconds
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0)
UNMATCHED = "unmatched"  # the route label of a request no route took (an unknown path, a body over the limit)


class Metrics:
    """The counters one app exposes: requests by method, route and status, their latency, queries
    answered and not answered by index, and each served index's size and generation."""

    def __init__(self, service: Any):
        try:
            from prometheus_client import CollectorRegistry, Counter, Histogram
        except ImportError as exc:
            raise MissingExtraError(f"/metrics needs the server extra: pip install 'faqsearch[server]' ({exc})")
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter("faqsearch_requests", "HTTP requests by method, route and status",
                                ["method", "route", "status"], registry=self.registry)
        self.latency = Histogram("faqsearch_request_seconds", "Time to answer an HTTP request, by route",
                                 ["route"], buckets=BUCKETS, registry=self.registry)
        self.queries = Counter("faqsearch_queries", "Queries asked, by index and whether they got an answer",
                               ["index", "answered"], registry=self.registry)
        self.registry.register(IndexSizes(service))

    def request(self, method: str, route: str | None, status: int, seconds: float) -> None:
        route = route or UNMATCHED
        method = method if method in METHODS else "other"  # any token is a method to the server: a bounded label
        self.requests.labels(method, route, str(status)).inc()
        self.latency.labels(route).observe(seconds)

    def answered(self, index: str, results: Iterable[Any]) -> None:
        """Count each result (a blank query in a batch counts as not answered)."""
        for r in results:
            self.queries.labels(index, "true" if r.answered else "false").inc()

    def render(self) -> tuple[bytes, str]:
        """The text a scrape gets, and its content type."""
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return generate_latest(self.registry), CONTENT_TYPE_LATEST


class IndexSizes:
    """Gauges read at scrape time: FAQs, questions and generation of each served index."""

    def __init__(self, service: Any):
        self.service = service

    def describe(self):
        return []  # sizes depend on the indexes served; nothing to check at registration

    def collect(self):
        from prometheus_client.core import GaugeMetricFamily

        faqs = GaugeMetricFamily("faqsearch_index_faqs", "FAQs in the index's live version", labels=["index"])
        questions = GaugeMetricFamily("faqsearch_index_questions", "Questions (all phrasings) in the index's live "
                                      "version", labels=["index"])
        generation = GaugeMetricFamily("faqsearch_index_generation", "The live version's generation (it grows by "
                                       "one with each committed edit)", labels=["index"])
        for name in self.service.names():
            snap = self.service.engine(name).snapshot
            faqs.add_metric([name], snap.config.counts.faqs)
            questions.add_metric([name], snap.config.counts.questions)
            generation.add_metric([name], snap.generation)
        yield from (faqs, questions, generation)
