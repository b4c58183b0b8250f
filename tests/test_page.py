"""The web page in a real browser: Debian's chromium driven by Playwright (no browser download),
against `faqsearch serve`'s app in uvicorn on 127.0.0.1, real bundled encoder, sample_data.

Needs `apt-get install chromium` (CI does it). Set FAQSEARCH_SCREENSHOT=FILE to save a screenshot."""
import os
import shutil
import socket
import threading
import time

import pytest

pytest.importorskip("fastapi")
uvicorn = pytest.importorskip("uvicorn")
playwright = pytest.importorskip("playwright.sync_api")

from faqsearch import FAQSearch  # noqa: E402
from faqsearch.service import Service, create_app  # noqa: E402

from .conftest import SAMPLE  # noqa: E402

CHROMIUM = os.environ.get("FAQSEARCH_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
KEY = "page-test-key"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]

if CHROMIUM is None and os.environ.get("CI"):
    raise RuntimeError("CI must install Debian's chromium for the page tests (apt-get install -y chromium)")
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (apt-get install -y chromium)")]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory, minilm):
    ix = str(tmp_path_factory.mktemp("serve") / "support")
    FAQSearch.build(os.path.join(SAMPLE, "faq.csv"), ix, encoder=minilm).close()
    service = Service({"support": ix}, api_key=KEY)
    port = _free_port()
    srv = uvicorn.Server(uvicorn.Config(create_app(service), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not srv.started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert srv.started, "uvicorn did not start"
    yield f"http://127.0.0.1:{port}"
    srv.should_exit = True
    thread.join(timeout=10)
    service.close()


@pytest.fixture(scope="module")
def browser():
    with playwright.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS, headless=True)
        yield b
        b.close()


@pytest.fixture
def page(browser, server):
    context = browser.new_context(viewport={"width": 1100, "height": 800})
    pg = context.new_page()
    errors = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    pg.goto(server + "/")
    pg.wait_for_selector("body[data-ready='1']", timeout=15000)
    yield pg
    context.close()
    assert not errors, errors


def ask(page, text):
    page.fill("#ask-input", text)
    page.click("#ask-button")
    page.wait_for_selector("#answers .answer, #answers .no-answer", timeout=15000)


def test_question_box_shows_the_answer(page):
    ask(page, "how do I get my money back for a return?")
    first = page.locator("#answers .answer").first
    assert first.locator(".faq-id").inner_text() == "ret-04"
    assert float(first.locator(".score").inner_text()) > 0.5
    assert "When will I get my money back?" in first.locator(".matched").inner_text()
    assert "refund" in first.locator(".answer-text").inner_text().lower()
    if os.environ.get("FAQSEARCH_SCREENSHOT"):
        page.screenshot(path=os.environ["FAQSEARCH_SCREENSHOT"], full_page=True)


def test_no_confident_answer_is_shown_as_such(page):
    ask(page, "what is the capital of australia")
    box = page.locator("#answers .no-answer")
    assert "No confident answer" in box.inner_text() and "below the threshold" in box.inner_text()
    assert page.locator("#answers .answer").count() == 0


def test_feedback_round_trip_from_the_page(page):
    query = "my cat keeps sneezing"
    ask(page, query)
    assert page.locator("#answers .no-answer").count() == 1
    page.click("#answers .assign-open")
    page.fill("#answers .assign-faq", "sto-01")
    page.click("#answers .assign-submit")  # no key yet: the page asks for it
    page.wait_for_selector("#answers .assign-status.error")
    assert "API key" in page.inner_text("#answers .assign-status")
    page.fill("#answers .assign-key", "wrong")
    page.click("#answers .assign-submit")
    page.wait_for_selector("#answers .assign-status.error:has-text('API key')")
    page.fill("#answers .assign-key", KEY)
    page.click("#answers .assign-submit")
    page.wait_for_selector("#answers .assign-status.ok", timeout=30000)
    # the same question is now answered by that FAQ, through its new question
    ask(page, query)
    first = page.locator("#answers .answer").first
    assert first.locator(".faq-id").inner_text() == "sto-01"
    assert query in first.locator(".matched").inner_text()
    # and the logged query shows where it went
    page.click("#tab-queries")
    page.uncheck("#only-unanswered")
    page.wait_for_selector("#query-list .query:has-text('assigned to sto-01')", timeout=15000)


def test_faq_browsing_and_search(page):
    page.click("#tab-faqs")
    page.wait_for_selector("#faq-list .faq")
    assert page.locator("#faq-list .faq").count() == 150
    page.fill("#faq-search", "recycl")
    page.click("#panel-faqs button[type=submit]")
    page.wait_for_function("document.querySelectorAll('#faq-list .faq').length < 150")
    assert "sto-10" in page.inner_text("#faq-list")
    page.locator("#faq-list .faq").first.click()
    page.wait_for_selector("#faq-list .faq li")


def test_gaps_tab_lists_groups_of_unanswered_queries(page):
    for q in ["do you sell concert tickets", "can I buy concert tickets here", "concert tickets on sale?"]:
        ask(page, q)
    page.click("#tab-gaps")
    page.wait_for_selector("#gap-list .gap", timeout=30000)
    assert "concert tickets" in page.inner_text("#gap-list .gap >> nth=0")
