import json
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from faqsearch import FAQ, FAQSearch
from faqsearch.index.config import FILES
from faqsearch.errors import (CorpusError, EncoderMismatchError, IndexFormatError, IndexNotFoundError,
                              WouldDropError)

from .conftest import FakeEncoder, build_index, index_entries, index_files, version


def test_build_open_ask(tmp_path, small_corpus):
    e = build_index(small_corpus, tmp_path / "ix", threshold=0.0)
    cfg = e.config
    assert cfg["counts"] == {"faqs": 4, "questions": 6, "max_questions_per_faq": 2}
    assert cfg["format_version"] == 2 and cfg["versions"]["faiss-cpu"]  # 2: its store stems English words
    # 6 questions: rank <= 5, but a rotation keeps k as asked (32 dims of the fake encoder)
    assert cfg["whitening"]["rank"] <= 5 and cfg["whitening"]["k_effective"] == cfg["dim_out"] == 32
    r = e.ask("I forgot my password", k=3)
    assert r.answers[0].faq_id == "1" and r.answers[0].score == pytest.approx(1.0, abs=1e-5)
    assert len({a.faq_id for a in r.answers}) == len(r.answers)  # one entry per FAQ
    e.close()
    with FAQSearch.open(str(tmp_path / "ix"), encoder=FakeEncoder()) as e2:
        assert e2.ask("I forgot my password").answers[0].question == "I forgot my password"
        assert e2.info()["lexical"] == {"cjk": "unigram", "stem": "english"}  # as `faqsearch info` shows


def test_grouping_keeps_best_question_and_k_distinct_faqs(tmp_path):
    # FAQ "a" has many near-identical questions that would crowd the raw top-k
    rows = ["id,question,answer"] + [f"a,password reset help {i},A" for i in range(10)] + \
           ["b,password reset,B", "c,shipping time,C", "d,return policy,D"]
    p = tmp_path / "c.csv"
    p.write_text("\n".join(rows) + "\n")
    e = build_index(str(p), tmp_path / "ix", whiten=False, threshold=-1)
    r = e.ask("password reset", k=3)
    assert [a.faq_id for a in r.answers][:1] == ["b"]
    assert len(r.answers) == 3 and len({a.faq_id for a in r.answers}) == 3
    e.close()


def test_threshold_gives_no_answer(tmp_path, small_corpus):
    e = build_index(small_corpus, tmp_path / "ix", threshold=0.99)
    r = e.ask("completely unrelated words about volcanoes")
    assert r.answers == [] and not r.confident and r.best_score is not None and r.best_score < 0.99
    assert r.to_dict()["answers"] == []
    assert e.ask("completely unrelated words about volcanoes", threshold=-1).answers
    e.close()


def test_ask_many_equals_ask_and_is_thread_safe(tmp_path, small_corpus):
    e = build_index(small_corpus, tmp_path / "ix", threshold=-1)
    queries = ["reset password", "shipping abroad", "return an item", "how long shipping"] * 10
    expected = [(r.answers[0].faq_id, round(r.answers[0].score, 5)) for r in e.ask_many(queries)]
    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(lambda q: e.ask(q), queries))
    assert [(r.answers[0].faq_id, round(r.answers[0].score, 5)) for r in got] == expected
    e.close()


def test_failed_build_leaves_previous_index_untouched(tmp_path, small_corpus):
    ix = tmp_path / "ix"
    e = build_index(small_corpus, ix)
    e.close()
    before = index_files(ix)
    with pytest.raises(RuntimeError, match="encoder crashed"):
        build_index(small_corpus, ix, encoder=FakeEncoder(fail_after=0))
    bad = tmp_path / "bad.csv"
    bad.write_text("question,answer\nq,\n")
    with pytest.raises(CorpusError):
        build_index(str(bad), ix)
    assert index_files(ix) == before
    assert [d for d in index_entries(tmp_path) if not d.endswith(".csv")] == \
        ["ix", "ix/CURRENT", "ix/LOCK", "ix/v<generation>"]  # no temporary versions left
    with FAQSearch.open(str(ix), encoder=FakeEncoder()) as again:
        assert again.ask("reset password", threshold=-1).answers


def test_rebuild_replaces_index(tmp_path, small_corpus):
    """A rebuild from a corpus that lacks the index's FAQs is refused unless replace=True (#40.1: it
    replaced the index silently); force=True, as scripts written before `replace` pass it, still replaces."""
    ix = tmp_path / "ix"
    build_index(small_corpus, ix).close()
    before = index_files(ix)
    other = tmp_path / "o.csv"
    other.write_text("question,answer\nonly one question here,only answer\nsecond,two\n")
    with pytest.raises(WouldDropError, match=r"would drop 4 FAQs \(6 questions\).*`faqsearch add "):
        build_index(str(other), ix)  # no id in common: its FAQs can be added
    with pytest.raises(WouldDropError, match="would drop 4 FAQs"):
        build_index(str(other), ix, force=True, replace=False)
    assert index_files(ix) == before
    e = build_index(str(other), ix, replace=True)
    assert e.config["counts"]["faqs"] == 2
    e.close()
    e = build_index(small_corpus, ix, force=True)
    assert e.config["counts"]["faqs"] == 4
    e.close()


def test_open_errors(tmp_path, small_corpus):
    with pytest.raises(IndexNotFoundError, match="faqsearch ingest"):
        FAQSearch.open(str(tmp_path / "missing"), encoder=FakeEncoder())
    ix = tmp_path / "ix"
    build_index(small_corpus, ix).close()
    with pytest.raises(EncoderMismatchError, match="dimension"):
        FAQSearch.open(str(ix), encoder=FakeEncoder(dimension=16))
    cfg = json.loads((version(ix) / FILES["config"]).read_text())
    cfg["format_version"] = 99
    (version(ix) / FILES["config"]).write_text(json.dumps(cfg))
    with pytest.raises(IndexFormatError, match="Upgrade faqsearch"):
        FAQSearch.open(str(ix), encoder=FakeEncoder())


def test_one_string_where_a_list_is_taken_is_one_item(tmp_path, small_corpus):
    """approve("1", "a phrasing") adds that phrasing (it added one question per character),
    ask_many("text") answers one query, remove("4") removes FAQ 4 (it complained about ids '4')."""
    e = build_index(small_corpus, tmp_path / "ix", threshold=0.0)
    assert e.approve("1", "I cannot log in any more").to_dict()["added_questions"] == 1
    assert [q["text"] for q in e.show("1")["questions"]][-1] == "I cannot log in any more"
    assert [r.query for r in e.ask_many("how long does shipping take")] == ["how long does shipping take"]
    assert e.remove("4").to_dict()["removed_faqs"] == ["4"]
    e.close()


def test_what_an_embedding_chatbot_passes_is_taken_or_refused_as_a_faqsearch_error(tmp_path, small_corpus,
                                                                                    monkeypatch):
    """Found by a review of the library: numpy integers were refused as k and as filter values; a
    threshold of 1.5, "0.3" or True was taken; lexical results reported a threshold that did not
    apply; embed("text") encoded each character; ask(None) and remove(None) were bare TypeErrors; an
    engine sharing another's encoder failed once the lender was closed before the first query."""
    import faqsearch.encoders as encoders
    from faqsearch.errors import FAQSearchError, InvalidOptionError

    build_index(small_corpus, tmp_path / "a", threshold=0.0).close()
    monkeypatch.setattr(encoders, "load_encoder", lambda *a, **k: FakeEncoder())
    borrower, lender = FAQSearch.open(str(tmp_path / "a")), FAQSearch.open(str(tmp_path / "a"))
    borrower.share_encoder(lender)
    lender.close()  # closed before anything loaded the shared encoder
    assert borrower.ask("I forgot my password").answers[0].faq_id == "1"
    e = FAQSearch.open(str(tmp_path / "a"))
    r = e.ask("I forgot my password", k=np.int64(2), filters={"category": "account"})
    assert [a.faq_id for a in r.answers] == ["1"]
    for bad in (1.5, -5, "0.3", True, float("nan")):
        with pytest.raises(InvalidOptionError, match="between -1 and 1"):
            e.ask("I forgot my password", threshold=bad)
    lex = e.ask("password", mode="lexical")
    assert lex.answers and lex.threshold is None and lex.to_dict()["threshold"] is None
    assert lex.ranked == lex.answers and lex.nearest is lex.answers[0]  # "the top k, answered or not": it was []
    assert e.embed("one string").shape[0] == 1
    for call in (lambda: e.ask(None), lambda: e.remove(None), lambda: e.feedback(None, "1")):
        with pytest.raises(FAQSearchError) as err:
            call()
        assert isinstance(err.value, TypeError)
    e.close()
    borrower.close()


def test_a_closed_engine_refuses_every_call_with_one_error(tmp_path, small_corpus):
    """After close(), reads and edits are a ClosedError (a FAQSearchError): reads used to fail with
    sqlite3's own ProgrammingError, and an edit reopened the engine and committed."""
    from faqsearch import ClosedError

    e = build_index(small_corpus, tmp_path / "ix")
    e.ask("I forgot my password")
    e.close()
    calls = [lambda: e.ask("I forgot my password"), e.info, e.list, lambda: e.show("1"), e.reload,
             lambda: e.add([FAQ("9", "New answer.", ["a brand new question"])]), lambda: e.remove(["2"])]
    for call in calls:
        with pytest.raises(ClosedError, match="was closed; open the index again"):
            call()
    e.close()  # twice is fine
    with FAQSearch.open(str(tmp_path / "ix"), encoder=FakeEncoder()) as again:
        assert again.info()["counts"]["faqs"] == 4  # nothing was added or removed


def test_format_version_says_whether_the_store_stems(tmp_path, small_corpus):
    """An index whose store stems its words is format 2, so a faqsearch that reads only format 1
    refuses it (asking for an upgrade) instead of searching it with unstemmed query words; an index
    that does not stem stays format 1, and both open here."""
    fr = tmp_path / "fr.csv"
    fr.write_text("id,question,answer\na,Où est ma commande ?,Dans le suivi.\nb,Puis-je annuler ?,Oui.\n",
                  encoding="utf-8")
    for corpus, name, want in ((small_corpus, "en", 2), (str(fr), "fr", 1)):
        build_index(corpus, tmp_path / name).close()
        assert json.loads((version(tmp_path / name) / FILES["config"]).read_text())["format_version"] == want
        with FAQSearch.open(str(tmp_path / name), encoder=FakeEncoder()) as e:
            assert e.info()["lexical"]["stem"] == ("english" if want == 2 else "none")
    cfg = json.loads((version(tmp_path / "en") / FILES["config"]).read_text())
    cfg["format_version"] = True  # JSON true is not format 1
    (version(tmp_path / "en") / FILES["config"]).write_text(json.dumps(cfg))
    with pytest.raises(IndexFormatError, match="format version True"):
        FAQSearch.open(str(tmp_path / "en"), encoder=FakeEncoder())


def test_fit_on_other_texts(tmp_path, small_corpus):
    texts = [f"user query number {i} about password shipping returns {i % 7}" for i in range(60)]
    e = build_index(small_corpus, tmp_path / "ix", fit_on=texts, k=8)
    assert e.config["whitening"]["fit_count"] == 60 and e.config["dim_out"] == 8
    e.close()


def test_transform_matches_stored_vectors(tmp_path, small_corpus):
    """The FAISS vectors are exactly whitening(encoder(question)), normalised."""
    enc = FakeEncoder()
    e = build_index(small_corpus, tmp_path / "ix", encoder=enc, beta=1, gamma=1)
    qs = e.store.all_questions()
    ids = np.array([q[0] for q in qs])
    expected = e.whitening.transform(enc.encode([q[2] for q in qs]))
    np.testing.assert_allclose(e.index.reconstruct(ids), expected, atol=1e-5)
    raw = np.load(version(tmp_path / "ix") / FILES["vectors"])
    np.testing.assert_allclose(raw, enc.encode([q[2] for q in qs]), atol=1e-6)
    e.close()


def test_open_with_a_model_loads_it_with_the_index_encoders_settings(tmp_path, small_corpus, monkeypatch):
    """``open(model=...)`` loads that model through ``faqsearch.encoders.load_encoder`` (the one name the
    tests patch) with the pooling, length and prefix the index was built with, then checks it."""
    import faqsearch.encoders as encoders

    build_index(small_corpus, tmp_path / "ix").close()
    calls = []

    def load(model, **options):
        calls.append((model, options))
        return FakeEncoder()

    monkeypatch.setattr(encoders, "load_encoder", load)
    with FAQSearch.open(str(tmp_path / "ix"), model="some-model", threads=2) as e:
        assert e.ask("How long does shipping take?").answers[0].faq_id == "2"
    assert calls == [("some-model", {"pooling": None, "max_length": 256, "prefix": "", "threads": 2, "gguf_file": None,
                                     "quantize": False, "device": None})]


def test_building_and_asking_leave_the_host_process_alone(tmp_path):
    """An application embedding faqsearch (a hostile run of the installed wheel): its first ask fixed the
    process's multiprocessing start method (a later set_start_method("spawn") failed) and left a tqdm
    monitor thread, from bars that drew nothing; each search left the thread's OpenMP count at 1; the
    Milvus backend left a file ':memory:' in the working directory."""
    import os
    import subprocess
    import sys

    script = f"""
import multiprocessing, os, threading
from faqsearch import FAQSearch
from faqsearch.backends.embedded.store import Store
from tests.conftest import FakeEncoder
os.chdir({str(tmp_path)!r})
with FAQSearch.build([__import__("faqsearch").FAQ("1", "a", ["where is my parcel"])], "ix", encoder=FakeEncoder()) as e:
    import faiss
    faiss.omp_set_num_threads(2)
    e.ask("parcel")
    e.ask_many(["parcel"] * 3)
    threads = faiss.omp_get_max_threads()  # this thread's OpenMP setting, torch's too: FAISS set 1 for good
Store(":memory:").close()
print(multiprocessing.get_start_method(allow_none=True), sorted(t.name for t in threading.enumerate()),
      sorted(os.listdir(".")), threads)
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                         cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[0] == "None ['MainThread'] ['indexes'] 2", out.stdout  # the index, nothing else


def test_listing_search_folds_case_in_every_script(tmp_path):
    """A hostile run: `list --contains ВОЗВРАТ` (and the page's search) found no "возврат", "RÜCKSENDUNG" no
    "Rücksendung", and a decomposed ü nothing (SQLite's LIKE folds ASCII only). % and _ stay literal."""
    faqs = [FAQ("ru-1", "Возврат в течение 14 дней.", ["Как вернуть товар?"]),
            FAQ("de-1", "Die Rücksendung ist kostenlos.", ["Wie funktioniert die Rücksendung?"]),
            FAQ("x", "100% done", ["a_b c"]), FAQ("STRASSE", "Straße", ["where"])]
    with build_index(faqs, tmp_path / "ix") as e:
        found = {q: [f["id"] for f in e.list(contains=q)] for q in
                 ["ВОЗВРАТ", "как ВЕРНУТЬ", "RÜCKSENDUNG", "ru\u0308cksendung", "100%", "a_b", "%", "_", "strasse"]}
    assert found == {"ВОЗВРАТ": ["ru-1"], "как ВЕРНУТЬ": ["ru-1"], "RÜCKSENDUNG": ["de-1"], "ru\u0308cksendung": ["de-1"],
                     "100%": ["x"], "a_b": ["x"], "%": ["x"], "_": ["x"], "strasse": ["STRASSE"]}


def test_a_vowelled_arabic_query_is_searched_as_the_plain_text_faqs_are_written_in(tmp_path):
    """A hostile run: "كَيْفَ أَحْذِفُ حِسَابِي؟" (formal text, with its vowel marks) was answered with another FAQ
    than its own stored question "كيف أحذف حسابي؟", and "كيـــف" (tatweel) lost the match; the marks are
    dropped from the query as it is searched, and the Result keeps the query as written."""
    faqs = [FAQ("acc-02", "من الإعدادات", ["كيف أحذف حسابي؟"]), FAQ("ord-01", "قبل الشحن", ["هل يمكنني إلغاء الطلب؟"])]
    with build_index(faqs, tmp_path / "ix") as e:
        for query in ("كَيْفَ أَحْذِفُ حِسَابِي؟", "كيـــف أحذف حسابي؟"):
            for mode in ("dense", "lexical", "hybrid"):
                result = e.ask(query, k=1, mode=mode)
                assert result.query == query and result.ranked[0].faq_id == "acc-02", (query, mode)
            assert e.ask(query, k=1, mode="dense").ranked[0].score == pytest.approx(1.0, abs=1e-5)


@pytest.mark.slow
def test_loading_a_model_leaves_the_applications_download_bars_on(tmp_path, monkeypatch):
    """An application embedding faqsearch lost the progress bars of its own Hugging Face downloads: loading
    a model switched transformers' and the hub's bars off for the whole process (a hostile run)."""
    import huggingface_hub.utils as hub_utils
    import transformers

    from faqsearch.encoders.transformer import TransformerEncoder

    monkeypatch.setenv("FAQSEARCH_CACHE", str(tmp_path / "cache"))
    transformers.utils.logging.enable_progress_bar()
    from faqsearch.encoders import _minilm_path

    TransformerEncoder(_minilm_path()).encode(["where is my parcel"])
    assert transformers.utils.logging.is_progress_bar_enabled() and not hub_utils.are_progress_bars_disabled()
