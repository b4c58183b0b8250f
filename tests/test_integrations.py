"""The framework integrations, each with the real package installed by the dev extra, on a small
index built with the fake encoder: the LangChain retriever (langchain-core) through invoke, ainvoke
and a chain; the Haystack component (haystack-ai) through run, run_async, a pipeline and its YAML;
and the ImportError that names the extra where the package is missing."""
from __future__ import annotations

import asyncio
import os
import subprocess
import sys

import pytest

from faqsearch import FAQSearch

from .conftest import ROOT, build_index

os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")  # Haystack's own usage telemetry, off in tests

UNKNOWN = "zebra quantum xylophone"  # shares no word with the corpus: the index does not answer it


@pytest.fixture
def engine(tmp_path, small_corpus):
    with build_index(small_corpus, tmp_path / "ix") as e:
        yield e


@pytest.fixture
def lc():
    """langchain-core and the retriever, as a namespace."""
    pytest.importorskip("langchain_core", reason="the dev extra installs langchain-core")
    from types import SimpleNamespace

    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
    from langchain_core.runnables import RunnableLambda

    from faqsearch.integrations.langchain import FAQSearchRetriever

    return SimpleNamespace(Document=Document, BaseRetriever=BaseRetriever, RunnableLambda=RunnableLambda,
                           FAQSearchRetriever=FAQSearchRetriever)


def test_is_a_langchain_retriever_returning_the_answer_with_its_match(engine, lc):
    FAQSearchRetriever, BaseRetriever, Document = lc.FAQSearchRetriever, lc.BaseRetriever, lc.Document
    retriever = FAQSearchRetriever(engine=engine, k=3)
    assert isinstance(retriever, BaseRetriever)
    docs = retriever.invoke("How do I reset my password?")
    result = engine.ask("How do I reset my password?", k=3)
    assert result.answered and docs and all(isinstance(d, Document) for d in docs)
    assert [d.metadata["faq_id"] for d in docs] == [a.faq_id for a in result.answers]
    first, best = docs[0], result.answers[0]
    assert first.page_content == "Use the forgot password link." == best.answer
    assert first.metadata["faq_id"] == "1" and first.id == "1"
    assert first.metadata["question"] == best.question == "How do I reset my password?"
    assert first.metadata["confidence"] == pytest.approx(best.confidence)
    assert first.metadata["score"] == pytest.approx(best.score)
    assert first.metadata["answered"] is True and first.metadata["category"] == "account"
    # another user's query that feedback made a phrasing never reaches a chain (its prompt, its reply)
    engine.feedback("jane.doe@example.com cannot log in, password gone", "1")
    leaked = retriever.invoke("jane.doe@example.com cannot log in, password gone")[0].metadata
    assert leaked["source"] == "feedback" and "jane" not in leaked["question"] + leaked["faq_question"]
    assert leaked["question"] == leaked["faq_question"] == "How do I reset my password?"


def test_a_query_the_index_does_not_answer_gives_no_documents_or_the_nearest_guess(engine, lc):
    FAQSearchRetriever = lc.FAQSearchRetriever
    result = engine.ask(UNKNOWN)
    assert not result.answered and result.nearest is not None
    assert FAQSearchRetriever(engine=engine).invoke(UNKNOWN) == []
    guess = FAQSearchRetriever(engine=engine, only_answered=False).invoke(UNKNOWN)
    assert [d.metadata["faq_id"] for d in guess] == [result.nearest.faq_id]
    assert guess[0].metadata["answered"] is False
    assert FAQSearchRetriever(engine=engine).invoke("   ") == []  # blank input: no answer, no error
    from faqsearch.errors import InvalidOptionError

    with pytest.raises(InvalidOptionError, match="mode='lexical' answers every query"):  # it handed a model any FAQ
        FAQSearchRetriever(engine=engine, mode="lexical").invoke(UNKNOWN)  # sharing a word, as answered
    assert FAQSearchRetriever(engine=engine, mode="lexical", only_answered=False).invoke("password reset")


def test_options_are_those_of_ask(engine, lc):
    FAQSearchRetriever = lc.FAQSearchRetriever
    one = FAQSearchRetriever(engine=engine, k=1, threshold=-1.0).invoke("Do you ship abroad?")
    assert [d.metadata["faq_id"] for d in one] == ["4"]
    shipping = FAQSearchRetriever(engine=engine, k=4, threshold=-1.0, filters={"category": "shipping"})
    assert {d.metadata["category"] for d in shipping.invoke("Do you ship abroad?")} == {"shipping"}


def test_ainvoke_gives_what_invoke_gives(engine, lc):
    FAQSearchRetriever = lc.FAQSearchRetriever
    retriever = FAQSearchRetriever(engine=engine, k=2)

    async def both():
        return await asyncio.gather(retriever.ainvoke("How long does shipping take?"), retriever.ainvoke(UNKNOWN))

    shipping, unknown = asyncio.run(both())
    alone = retriever.invoke("How long does shipping take?")
    # the same documents; scores equal up to float32 rounding (concurrent calls share one encoder batch,
    # and a batch of two may round the last bit differently: 1.0 against 0.99999994 in a fresh install, 2026-11-27)
    assert [(d.id, d.page_content) for d in shipping] == [(d.id, d.page_content) for d in alone]
    for got, want in zip(shipping, alone):
        assert got.metadata.keys() == want.metadata.keys()
        for key, value in want.metadata.items():
            assert got.metadata[key] == (pytest.approx(value, abs=1e-6) if isinstance(value, float) else value)
    assert shipping[0].metadata["faq_id"] == "2" and unknown == []


def test_in_a_chain_and_batched(engine, lc):
    retriever = lc.FAQSearchRetriever(engine=engine)

    def reply(docs) -> str:
        return docs[0].page_content if docs else "Sorry, I don't know that one."

    bot = retriever | lc.RunnableLambda(reply)
    assert bot.invoke("What is the return policy?") == "Yes within 30 days."
    assert bot.batch(["How long does shipping take?", UNKNOWN]) == ["Two to four days.", "Sorry, I don't know that one."]
    assert asyncio.run(bot.ainvoke("Do you ship abroad?")) == "We ship to the EU."


def test_an_index_by_path_is_opened_on_first_use(tmp_path, small_corpus, fake_models, lc):
    build_index(small_corpus, tmp_path / "ix").close()
    retriever = lc.FAQSearchRetriever(index=str(tmp_path / "ix"))
    assert retriever.engine is None
    assert retriever.invoke("Do you ship abroad?")[0].metadata["faq_id"] == "4"
    assert isinstance(retriever.engine, FAQSearch)
    retriever.engine.close()


@pytest.fixture
def hs():
    """haystack-ai and the component, as a namespace."""
    pytest.importorskip("haystack", reason="the dev extra installs haystack-ai")
    from types import SimpleNamespace

    from haystack import Document, Pipeline

    from faqsearch.integrations.haystack import FAQSearchRetriever

    return SimpleNamespace(Document=Document, Pipeline=Pipeline,
                           FAQSearchRetriever=FAQSearchRetriever)


def test_haystack_component_returns_the_answers_the_index_stands_behind(engine, hs):
    faq = hs.FAQSearchRetriever(engine=engine)
    docs = faq.run("How do I reset my password?")["documents"]
    best = engine.ask("How do I reset my password?").answers[0]
    assert docs and all(isinstance(d, hs.Document) for d in docs)
    assert (docs[0].id, docs[0].content, docs[0].score) == ("1", best.answer, pytest.approx(best.score))
    assert docs[0].meta["question"] == best.question and docs[0].meta["confidence"] == pytest.approx(best.confidence)
    assert docs[0].meta["answered"] is True and docs[0].meta["category"] == "account"
    assert faq.run(UNKNOWN) == {"documents": []}
    guess = hs.FAQSearchRetriever(engine=engine, only_answered=False).run(UNKNOWN)["documents"]
    assert [(d.id, d.meta["answered"]) for d in guess] == [(engine.ask(UNKNOWN).nearest.faq_id, False)]
    shipping = hs.FAQSearchRetriever(engine=engine, threshold=-1.0).run("Do you ship abroad?", top_k=4,
                                                                        filters={"category": "shipping"})
    assert {d.meta["category"] for d in shipping["documents"]} == {"shipping"}
    assert len(faq.run("Do you ship abroad?", top_k=1)["documents"]) == 1
    from faqsearch.errors import InvalidOptionError

    with pytest.raises(InvalidOptionError, match="mode='lexical' answers every query"):
        hs.FAQSearchRetriever(engine=engine, mode="lexical").run(UNKNOWN)
    with pytest.raises(InvalidOptionError, match="not Haystack's"):  # read as metadata they would match nothing
        faq.run("Do you ship abroad?", filters={"field": "meta.category", "operator": "==", "value": "shipping"})


def test_haystack_pipelines_sync_async_and_yaml(tmp_path, small_corpus, fake_models, hs):
    build_index(small_corpus, tmp_path / "ix").close()
    pipe = hs.Pipeline()
    pipe.add_component("faq", hs.FAQSearchRetriever(index=str(tmp_path / "ix"), top_k=2))
    out = pipe.run({"faq": {"query": "How long does shipping take?"}})
    assert out["faq"]["documents"][0].id == "2"
    yaml = pipe.dumps()  # the YAML names the index, not an open engine
    assert str(tmp_path / "ix") in yaml
    again = hs.Pipeline.loads(yaml, allowed_modules=["faqsearch.integrations.haystack"])
    assert again.run({"faq": {"query": "Do you ship abroad?"}})["faq"]["documents"][0].id == "4"
    found = asyncio.run(pipe.run_async({"faq": {"query": "What is the return policy?"}}))  # through run_async
    assert found["faq"]["documents"][0].content == "Yes within 30 days."
    for p in (pipe, again):
        p.get_component("faq").engine.close()


@pytest.mark.parametrize("module, package, extra", [("langchain", "langchain_core", "langchain-core"),
                                                    ("haystack", "haystack", "haystack-ai")])
def test_without_the_framework_the_import_error_names_the_extra(module, package, extra):
    code = (f"import sys; sys.modules[{package!r}] = None\n"
            "import faqsearch.integrations\n"  # the package itself imports no framework
            f"try:\n    import faqsearch.integrations.{module}\n"
            "except ImportError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": ROOT}, timeout=120)
    assert out.returncode == 0, out.stderr
    assert f"pip install 'faqsearch[{module}]'" in out.stdout
    assert f"needs {extra}" in out.stdout
