"""The framework integrations, each with the real package: the LangChain retriever (langchain-core,
installed by the dev extra) through invoke, ainvoke and a chain, on a small index built with the
fake encoder; and the error that names the extra where the package is missing."""
from __future__ import annotations

import asyncio
import os
import subprocess
import sys

import pytest

from faqsearch import FAQSearch

from .conftest import ROOT, build_index

pytest.importorskip("langchain_core", reason="the dev extra installs langchain-core")  # noqa: E402
from langchain_core.documents import Document  # noqa: E402
from langchain_core.retrievers import BaseRetriever  # noqa: E402
from langchain_core.runnables import RunnableLambda  # noqa: E402

from faqsearch.integrations.langchain import FAQSearchRetriever  # noqa: E402

UNKNOWN = "zebra quantum xylophone"  # shares no word with the corpus: the index does not answer it


@pytest.fixture
def engine(tmp_path, small_corpus):
    with build_index(small_corpus, tmp_path / "ix") as e:
        yield e


def test_is_a_langchain_retriever_returning_the_answer_with_its_match(engine):
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


def test_a_query_the_index_does_not_answer_gives_no_documents_or_the_nearest_guess(engine):
    result = engine.ask(UNKNOWN)
    assert not result.answered and result.nearest is not None
    assert FAQSearchRetriever(engine=engine).invoke(UNKNOWN) == []
    guess = FAQSearchRetriever(engine=engine, only_answered=False).invoke(UNKNOWN)
    assert [d.metadata["faq_id"] for d in guess] == [result.nearest.faq_id]
    assert guess[0].metadata["answered"] is False
    assert FAQSearchRetriever(engine=engine).invoke("   ") == []  # blank input: no answer, no error


def test_options_are_those_of_ask(engine):
    one = FAQSearchRetriever(engine=engine, k=1, threshold=-1.0).invoke("Do you ship abroad?")
    assert [d.metadata["faq_id"] for d in one] == ["4"]
    shipping = FAQSearchRetriever(engine=engine, k=4, threshold=-1.0, filters={"category": "shipping"})
    assert {d.metadata["category"] for d in shipping.invoke("Do you ship abroad?")} == {"shipping"}


def test_ainvoke_gives_what_invoke_gives(engine):
    retriever = FAQSearchRetriever(engine=engine, k=2)

    async def both():
        return await asyncio.gather(retriever.ainvoke("How long does shipping take?"), retriever.ainvoke(UNKNOWN))

    shipping, unknown = asyncio.run(both())
    assert shipping == retriever.invoke("How long does shipping take?")
    assert shipping[0].metadata["faq_id"] == "2" and unknown == []


def test_in_a_chain_and_batched(engine):
    retriever = FAQSearchRetriever(engine=engine)

    def reply(docs: list[Document]) -> str:
        return docs[0].page_content if docs else "Sorry, I don't know that one."

    bot = retriever | RunnableLambda(reply)
    assert bot.invoke("What is the return policy?") == "Yes within 30 days."
    assert bot.batch(["How long does shipping take?", UNKNOWN]) == ["Two to four days.", "Sorry, I don't know that one."]
    assert asyncio.run(bot.ainvoke("Do you ship abroad?")) == "We ship to the EU."


def test_an_index_by_path_is_opened_on_first_use(tmp_path, small_corpus, fake_models):
    build_index(small_corpus, tmp_path / "ix").close()
    retriever = FAQSearchRetriever(index=str(tmp_path / "ix"))
    assert retriever.engine is None
    assert retriever.invoke("Do you ship abroad?")[0].metadata["faq_id"] == "4"
    assert isinstance(retriever.engine, FAQSearch)
    retriever.engine.close()


def test_without_langchain_core_the_import_error_names_the_extra():
    code = ("import sys; sys.modules['langchain_core'] = None\n"
            "import faqsearch.integrations\n"  # the package itself imports no framework
            "try:\n    import faqsearch.integrations.langchain\n"
            "except ImportError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": ROOT}, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "pip install 'faqsearch[langchain]'" in out.stdout
    assert "needs langchain-core" in out.stdout
