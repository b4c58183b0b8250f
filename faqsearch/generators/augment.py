"""Augmentation as an edit plan: generated rewordings of each FAQ's first question, screened and
re-ranked by the index's own query vectors, kept only when the index answers them with their own
FAQ (round-trip consistency). The engine applies the plan in one commit."""
from __future__ import annotations

import logging

from ..defaults import PARAPHRASE_MIN_SIMILARITY, PARAPHRASE_ROUNDS
from ..edits.plan import Edit
from ..progress import progress_bar
from ..text import check_whole
from .languages import checked, writes
from .meaning import answers_alike
from .recipe import diverse_top, normal, screen_rounds


def plan_augment(searcher, generator=None, n: int = 3, candidates: int = 24, seed: int | None = 0,
                 min_similarity: float | None = None, progress: bool = False, rounds: int | None = None) -> Edit:
    """Up to ``n`` paraphrases per FAQ (source 'generated'). ``generator``: a
    :class:`faqsearch.generators.Generator` or a name for :func:`faqsearch.generators.load_generator`
    (default: the bundled one for the index's language); while fewer than ``n`` pass, more batches are drawn, ``rounds`` at most. An
    index mostly in a script the generator does not write is refused; single FAQs in one are skipped."""
    from . import Generator, load_generator

    n, candidates = check_whole(n, "n", 1, 100), check_whole(candidates, "candidates", 1, 1000)  # n=0 added every one
    store = searcher.snap.store
    faqs = store.list_faqs()
    questions_of = {f["id"]: [q["text"] for q in store.faq(f["id"])["questions"]] for f in faqs}
    firsts = [qs[0] for qs in questions_of.values() if qs]
    if not isinstance(generator, Generator):  # unnamed: the bundled generator for the index's language
        generator = load_generator(generator, texts=firsts if generator is None and firsts else None)
    min_similarity = PARAPHRASE_MIN_SIMILARITY if min_similarity is None else min_similarity
    rounds = PARAPHRASE_ROUNDS if rounds is None else rounds
    languages = getattr(generator, "languages", None)
    plan = Edit("generated", config={"generator": {**generator.spec(), **({"languages": list(languages)}
                                                                          if languages else {})}})
    # a mostly Chinese index and an English generator: refused before sampling
    checked(generator, firsts)
    skipped = []
    with progress_bar(len(faqs), progress, "paraphrasing", unit="FAQ") as bar:
        for f in faqs:
            questions = questions_of[f["id"]]
            if not writes(languages, questions[:1]):  # an FAQ in a language the generator does not write
                skipped.append(f["id"])
                bar.update(1)
                continue

            # a rewording that this index answers with another FAQ would pull that FAQ's queries here; one
            # that repeats another stored question is no new wording
            screened = screen_rounds(generator, questions[0], n, candidates, searcher.embed_full, min_similarity, seed,
                                     rounds, exclude={normal(q) for q in questions},
                                     same_intent=answers_alike(searcher, questions[0], f["id"]))
            plan.new_questions += [(f["id"], p.text) for p in diverse_top(screened, n)]
            bar.update(1)
    if skipped:
        logging.getLogger(__name__).warning(
            "%d FAQs left as they are: their first question is in a language %s does not write (%s%s)", len(skipped),
            getattr(generator, "name", "the generator"), ", ".join(skipped[:5]), ", ..." if len(skipped) > 5 else "")
    return plan
