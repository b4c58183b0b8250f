"""What an edit changes, worked out from the rows an index holds before anything is written.

Each ``plan_*`` function reads a store (any backend's :class:`faqsearch.backends.base.StoreView`) and
returns an :class:`Edit`; it raises, naming the FAQ, for anything that would make the index
inconsistent (an id given twice in one batch, an unknown id), so a bad batch writes nothing.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

from ..corpus import FAQ, check_faq, faq_hash
from ..errors import (FAQS_LISTED, BlankQueryError, CorpusError, DuplicateFAQError, FAQSearchError, InvalidOptionError,
                      StaleRevisionError, UnknownFAQError, WouldDropError, unknown_faq)
from ..results import USER_SOURCES, EditReport
from ..text import as_items, clean_text, is_blank, read_alike

if TYPE_CHECKING:
    from ..backends.base import StoreView

log = logging.getLogger(__name__)
EDITABLE = ("corpus", "added")  # sources a corpus file speaks for: questions it no longer lists are removed


@dataclass
class Edit:
    """Planned changes, applied in one commit. New questions get the edit's ``source``."""

    source: str = "added"
    new_faqs: list[FAQ] = field(default_factory=list)
    changed_faqs: list[FAQ] = field(default_factory=list)  # answer/category/metadata/hash rewritten
    new_questions: list[tuple[str, str]] = field(default_factory=list)  # (faq_id, text)
    removed_questions: list[int] = field(default_factory=list)
    removed_faqs: list[str] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)  # merged into the committed config
    touched_faqs: list[str] = field(default_factory=list)  # FAQs that only lose questions (for the report)
    overwritten: list[str] = field(default_factory=list)  # FAQs whose answer, category or metadata it rewrites

    @property
    def rewrites_many(self) -> bool:
        """Whether it rewrites what two or more FAQs say (an upsert or update from a file): such an edit keeps
        the version before it, as one that drops questions does, so `restore` undoes a bad export's (every
        answer cut short had no undo). One FAQ's edit (the page's, `update ID --answer`) stays in place."""
        return len(self.overwritten) >= 2

    def texts(self) -> list[str]:
        """New question texts in the order a backend stores them (new FAQs first, then added questions)."""
        return [q for f in self.new_faqs for q in f.questions] + [t for _, t in self.new_questions]

    @property
    def empty(self) -> bool:
        return not (self.new_faqs or self.changed_faqs or self.new_questions or self.removed_questions
                    or self.removed_faqs or self.config)


def report_for(plan: Edit, faqs_before: int) -> EditReport:
    """What the edit changes, as it will be reported: every FAQ that gains or loses a question or is
    rewritten is updated; the FAQs it leaves alone are counted as unchanged."""
    added = [f.id for f in plan.new_faqs]
    others = {fid for fid, _ in plan.new_questions} | set(plan.touched_faqs)
    updated = list(dict.fromkeys([f.id for f in plan.changed_faqs] + sorted(others - set(added))))
    return EditReport(added_faqs=added, updated_faqs=updated, removed_faqs=list(plan.removed_faqs),
                      unchanged_faqs=max(faqs_before - len(updated) - len(plan.removed_faqs), 0))


def check_batch(faqs: Sequence[FAQ]) -> None:
    """One batch names each FAQ once: a repeated id would be stored twice (or updated twice in one
    generation) and leave the index inconsistent."""
    seen: dict[str, int] = {}
    for i, f in enumerate(faqs):
        if f.id in seen:
            raise CorpusError("<records>", None, f"FAQ id {f.id!r} is given twice in this batch (items {seen[f.id] + 1} "
                                                 f"and {i + 1}); give each FAQ once, with all its questions")
        seen[f.id] = i


def plan_add(store: StoreView, faqs: Sequence[FAQ]) -> Edit:
    check_batch(faqs)
    existing = store.faq_hashes()
    clash = [f.id for f in faqs if f.id in existing]
    if clash:
        raise DuplicateFAQError(f"FAQ id(s) already in the index: {', '.join(clash[:10])}"
                                f"{' ...' if len(clash) > 10 else ''}; update them instead (`faqsearch update`; over HTTP, PUT .../faqs/ID or "
                                "POST .../faqs/upsert)")
    check_addressable(existing, [f.id for f in faqs])
    return warn_shared(store, Edit("added", new_faqs=list(faqs)))


SUGGESTIONS = "/suggestions"  # GET .../faqs/ID/suggestions: the address of FAQ ID's suggestions


def check_addressable(held, new_ids: Sequence[str]) -> None:
    """Refuse a new id that HTTP could not tell from another FAQ's suggestions: "X/suggestions" beside an
    FAQ "X" (GET .../faqs/X/suggestions is X's suggestions). Alone, such an id is shown as the FAQ."""
    ids = set(held) | set(new_ids)
    for n in new_ids:
        base = n[:-len(SUGGESTIONS)] if n.endswith(SUGGESTIONS) else None
        pair = (n, base) if base is not None and base in ids else (n + SUGGESTIONS, n) if n + SUGGESTIONS in ids else None
        if pair is not None:
            raise InvalidOptionError(f"FAQ {pair[0]!r} could not be shown over HTTP beside FAQ {pair[1]!r}: GET "
                                     f".../faqs/{pair[0]} is the address of the suggestions for FAQ {pair[1]!r}; give one of them another id")


SHARED_PROBES = 200  # new questions an edit checks against the other FAQs' (one lexical search of the store each)
SHARED_NEAR = 20  # questions the lexical search returns per new one: a question that reads alike shares every word


def warn_shared(store: StoreView, plan: Edit) -> Edit:
    """Warn where a question the edit gives an FAQ reads as one another FAQ keeps (as ingest warns within a
    corpus): either may answer it, a tie the index cannot break (`add` and `update` made it in silence).
    The store's own lexical search finds the candidates: a question that reads alike shares every word."""
    every = [(f.id, q) for f in plan.new_faqs for q in f.questions] + list(plan.new_questions)
    new = every[:SHARED_PROBES]
    if not new:
        return plan
    hits = store.lexical([t for _, t in new], SHARED_NEAR)
    rows = store.questions(sorted({i for h in hits for i, _ in h}))
    gone, dropped = set(plan.removed_questions), set(plan.removed_faqs)
    shared = []
    for (fid, t), h in zip(new, hits):
        key = read_alike(t)
        for qid, _ in h:
            row = rows.get(qid)
            if row is not None and qid not in gone and row["faq_id"] not in dropped | {fid} \
                    and read_alike(row["question"]) == key:
                shared.append((t, fid, row["question"], row["faq_id"]))
                break
    if shared:
        t, fid, held, other = shared[0]
        log.warning("%s question(s) this edit gives read as one another FAQ keeps (first: %r of FAQ %s, and %r of FAQ %s): "
                    "either may answer it; give each question to one FAQ",
                    f"{len(shared)} of the first {len(new)} of its {len(every)}" if len(every) > len(new) else len(shared),
                    t, fid, held, other)
    return plan


def revision(faq: dict[str, Any]) -> str:
    """A stored FAQ's revision (as the store shows it: answer, category, metadata, every question and
    its source): an edit made from what a person read can check that nothing changed since."""
    seen = [faq["answer"], faq.get("category"), faq.get("metadata") or {},
            [[q["text"], q["source"]] for q in faq["questions"]]]
    return hashlib.sha1(json.dumps(seen, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()[:16]


def shown(store: StoreView, faq_id: str) -> dict[str, Any]:
    """An FAQ as ``show`` gives it: its stored fields and questions, and its ``revision``."""
    faq = _known(store, faq_id)
    return {**faq, "revision": revision(faq)}


def check_revisions(store: StoreView, revisions: dict[str, str] | None) -> None:
    """StaleRevisionError where an FAQ is no longer at the revision the edit was made from."""
    for faq_id, expected in (revisions or {}).items():
        now = revision(_known(store, faq_id))
        if now != expected:
            raise StaleRevisionError(f"FAQ {faq_id!r} changed since it was read (revision {expected}, now {now}: "
                                     "another edit added, removed or changed something); nothing was written. "
                                     "Read it again and redo the edit")


def plan_update(store: StoreView, faqs: Sequence[FAQ], remove_missing: bool = False, replace: bool = False,
                source: str = "added", clear_category: bool = False,
                revisions: dict[str, str] | None = None) -> Edit:
    """New FAQs are added; listed FAQs get their answer, category and metadata (an update that gives
    no category keeps the stored one, and a metadata key it does not give keeps its stored value;
    ``replace`` and upsert take them as given)
    and the listed questions they lack. What happens to the stored questions a batch does not list:

    - an update keeps them: one row for an FAQ changes its answer without dropping its other
      questions (a stored question is then removed only with ``replace``, or by `faqsearch remove`);
    - ``remove_missing`` (upsert: the batch is a whole export) removes the corpus and added
      questions it no longer lists (feedback, approved and generated ones stay), and the ingested
      FAQs it does not list;
    - ``replace``: each listed FAQ holds exactly the listed questions.

    A changed FAQ's content hash is of the corpus and added questions it holds after the edit, so a
    later upsert sees what really differs."""
    check_batch(faqs)
    check_revisions(store, revisions)  # under the writer's lock: what the edit was made from is what is there
    hashes = store.faq_hashes()
    # an id an older faqsearch stored as written ("\u200fret-01" from a right-to-left sheet) is the FAQ of the id
    # as read today: an upsert of the same file re-created it and dropped its feedback (a second reading)
    older = {clean_text(i): i for i in hashes if clean_text(i) != i}
    faqs = [dataclasses.replace(f, id=older[f.id]) if f.id not in hashes and f.id in older else f for f in faqs]
    check_addressable(hashes, [f.id for f in faqs if f.id not in hashes])
    plan = Edit(source)
    merge = not (replace or remove_missing)
    for f in faqs:
        if f.id not in hashes:
            plan.new_faqs.append(f)
            continue
        listed = f.questions
        stored = store.faq(f.id) if merge else None
        if merge:  # what the batch does not give stays: category, metadata, questions
            own = [q["text"] for q in stored["questions"] if q["source"] in EDITABLE]
            f = dataclasses.replace(f, category=stored["category"] if f.category is None and not clear_category
                                    else f.category,
                                    metadata={**(stored["metadata"] or {}), **(f.metadata or {})},
                                    questions=own + [q for q in listed if q not in own])
        if hashes[f.id] == faq_hash(f):
            if not replace:
                continue
            stored = stored or store.faq(f.id)
            if sorted(q["text"] for q in stored["questions"]) == sorted(f.questions):
                continue
        stored = stored or store.faq(f.id)
        if not merge:
            keep = None if replace else EDITABLE
            plan.removed_questions += [q["id"] for q in stored["questions"]
                                       if (keep is None or q["source"] in keep) and q["text"] not in listed]
        present = {q["text"] for q in stored["questions"]}
        plan.new_questions += [(f.id, q) for q in listed if q not in present]
        plan.changed_faqs.append(f)
        if (f.answer, f.category or None, f.metadata or {}) != (stored["answer"], stored["category"] or None,
                                                                stored["metadata"] or {}):
            plan.overwritten.append(f.id)
    if remove_missing:
        listed_ids = {f.id for f in faqs}
        ingested = store.faq_ids(source="corpus")
        plan.removed_faqs = sorted(i for i in hashes if i not in listed_ids and i in ingested)
        _refuse_replacing_all(plan, faqs, ingested)
        _warn_judged(store, plan.removed_faqs)
    return warn_shared(store, plan)


def _refuse_replacing_all(plan: Edit, faqs: Sequence[FAQ], ingested) -> None:
    """An upsert that shares no FAQ id with the index would remove every FAQ an export gave it and add
    all of the file's as new ones: what a file whose ids changed does (an id column under another name
    read as a field, ids made from answers), not a sync. Refused; ``ingest --replace`` replaces all."""
    if plan.removed_faqs and len(plan.removed_faqs) == len(ingested) and len(plan.new_faqs) == len(faqs):
        raise WouldDropError(
            f"this file shares no FAQ id with the index: an upsert would remove all {len(plan.removed_faqs)} FAQs "
            f"the index holds from its corpus (first: {plan.removed_faqs[0]!r}) and add {len(faqs)} new ones "
            f"(first: {faqs[0].id!r}). Check the file's id column (its header must read id or faq_id, in any case; "
            "without one, an FAQ's id is made from its answer: an index built before 2026-11-28 from a file headed ID "
            "read that column as a field, so rename it, e.g. to ext_id, to keep the ids it has); to replace the whole "
            "index with the file, run `faqsearch ingest FILE --replace` (questions from feedback and approvals go with it)")


def warn_unread(spec: dict[str, Any] | None, questions: Sequence[str], fix: str) -> None:
    """Warn where questions are written mostly in a script the index's encoder does not read (Chinese on
    the English MiniLM): ingest chose the encoder by the corpus's main script, and an edit keeps it."""
    from ..encoders import reads_latin_only, unread_questions
    from ..generators.languages import main_script
    from ..lexical import latin_language

    if reads_latin_only(spec) and latin_language(questions) == "other":  # Spanish, German... on MiniLM
        log.warning("the new questions read as a language other than English (Spanish, French, German...), which the "
                    "encoder %s reads as English words: an unrelated question in that language may get a confident "
                    "answer; an index of such FAQs is better built with --model use-multilingual", (spec or {}).get("name"))
    unread = unread_questions(spec, questions)
    if unread:
        script = main_script(unread)
        log.warning("%d of %d questions are written mostly in %s, which the encoder %s does not read (first: "
                    "%r): to it they are alike whatever they say, and a question in that script on a topic no FAQ "
                    "covers gets a confident answer; %s", len(unread), len(questions),
                    f"{script} script" if script else "symbols alone (emoji)", (spec or {}).get("name"), unread[0],
                    fix if script else "give those FAQs a question in words (every emoji is one unknown token to it)")


def _warn_judged(store: StoreView, removed: Sequence[str]) -> None:
    """Warn where FAQs an upsert removes hold questions people assigned (feedback, approvals): in a corpus
    without ids an FAQ's id is its answer's hash, so an edited answer is a new FAQ, and the old one went
    with those questions, said only as "1 removed"."""
    judged = [f for f in removed[:1000] for q in (store.faq(f) or {"questions": []})["questions"]
              if q["source"] in USER_SOURCES]  # users' queries: counted, never quoted into logs
    if judged:
        log.warning("the FAQs this edit removes hold %d question(s) people assigned by feedback or approval (the first "
                    "in FAQ %s); they go with them (the undo below brings them back). A corpus with an id column keeps "
                    "an FAQ whose answer changes: without one, the id is the answer's hash", len(judged), judged[0])


def plan_update_faq(store: StoreView, faq_id: str, answer: str | None = None, category: str | None = None,
                    questions: Sequence[str] | str = ()) -> Edit:
    """One FAQ changed by id without restating it: a new answer or category (a blank one takes the
    category away), questions added (source 'added'); what is not given stays. Planned as an update of
    that FAQ alone (:func:`plan_update`). A blank question to add is an error (it was dropped: "no changes")."""
    stored = _known(store, faq_id)
    added = as_items(questions)
    if answer is None and category is None and not added:
        raise InvalidOptionError(f"nothing to change in FAQ {faq_id!r}: give a new answer, a category or questions "
                                 "to add")
    blank = [i + 1 for i, q in enumerate(added) if not isinstance(q, str) or is_blank(clean_text(q))]
    if blank:
        raise InvalidOptionError(f"question {blank[0]} to add to FAQ {faq_id!r} is blank (no visible characters); "
                                 "give its text")
    own = [q["text"] for q in stored["questions"] if q["source"] in EDITABLE] or \
        [q["text"] for q in stored["questions"]]
    clear = isinstance(category, str) and is_blank(clean_text(category))
    faq = check_faq(FAQ(faq_id, stored["answer"] if answer is None else answer, own + added,
                        None if clear else category, stored["metadata"] or {}))
    faq = dataclasses.replace(faq, id=stored["id"])  # as stored (an older faqsearch kept ids it would clean now:
    return plan_update(store, [faq], clear_category=clear)  # cleaned, it added a second FAQ)


def plan_remove(store: StoreView, faq_ids: Sequence[str]) -> Edit:
    ids = list(dict.fromkeys(as_items(faq_ids)))
    existing = store.faq_hashes()
    unknown = [i for i in ids if i not in existing]
    if len(unknown) == 1:
        raise unknown_faq(unknown[0], lambda i: i in existing)
    if unknown:
        raise UnknownFAQError(f"unknown FAQ id(s): {', '.join(unknown[:10])}; {FAQS_LISTED}")
    return Edit(removed_faqs=ids)


def _known(store: StoreView, faq_id: str) -> dict[str, Any]:
    faq = store.faq(faq_id)
    if faq is None:
        raise unknown_faq(faq_id, lambda i: store.faq(i) is not None)
    return faq


MOVABLE = ("feedback", "approved", "generated")  # questions a person's feedback may move to another FAQ


def plan_feedback(store: StoreView, query: str, faq_id: str, source: str = "feedback",
                  alike: dict[str, set[str]] | None = None, faq: dict[str, Any] | None = None) -> Edit:
    """"This query should have matched FAQ X": the query becomes a question of X. A text the FAQ
    already has (up to case, width, spacing and punctuation) is left alone (an empty plan), unless only a generator put it
    there: a person's judgement then makes it theirs (source feedback or approved), so that `augment
    --remove` keeps it. Where the text is a question of another FAQ, it would tie with itself there:
    one that feedback, an approval or a generator put there moves to X (the latest judgement wins);
    one of that FAQ's own (corpus, added) is refused, naming it. ``alike`` (:func:`_alike`) and ``faq``:
    what several texts of one call share (an approval of 50 scanned the whole index 50 times)."""
    text = clean_text(query)
    if is_blank(text):
        raise BlankQueryError("the query is blank (no visible characters); nothing to add")
    faq = faq or _known(store, faq_id)
    key = read_alike(text)  # "HOW DO I PAY ?" ties with "How do I pay?" as exactly as the same text does
    holders = None if alike is None else alike.get(key, set())
    own = [] if holders is not None and faq_id not in holders else \
        [q for q in faq["questions"] if read_alike(q["text"]) == key]
    if own:
        generated = [q for q in own if q["source"] == "generated"]
        if source == "generated" or len(generated) < len(own):
            return Edit(source)
        return Edit(source, new_questions=[(faq_id, text)], removed_questions=[q["id"] for q in generated],
                    touched_faqs=[faq_id])  # the person's words: `unassign` of them finds it
    if holders is not None:
        near = sorted(holders - {faq_id})
    elif text.isascii():  # a listing's search finds it whatever its case
        probe = max(re.findall(r"\w+", text), key=len, default=text)
        near = [f["id"] for f in store.list_faqs(contains=probe) if f["id"] != faq_id]
    else:  # "КАК ОПЛАТИТЬ?" for "как оплатить?": LIKE compares other letters as they are
        near = sorted({fid for _, fid, q in store.all_questions() if fid != faq_id and read_alike(q) == key})
    elsewhere = [(fid, q) for fid in near for q in (store.faq(fid) or {"questions": []})["questions"]
                 if read_alike(q["text"]) == key]
    fixed = [(fid, q["source"], q["text"]) for fid, q in elsewhere if q["source"] not in MOVABLE]
    if fixed:
        fid, kind, held = fixed[0]
        said = f"{text!r}" if held == text else f"{text!r} reads as {held!r}, which"
        raise FAQSearchError(f"{said} is {'an' if kind[0] in 'aeiou' else 'a'} {kind} question of FAQ {fid}, so it "
                             f"would still match {fid} as well as "
                             f"{faq_id}; edit {fid} to take it out first (`faqsearch update {fid} --replace` with its other "
                             f"questions; over HTTP, PUT .../faqs/{fid})")
    return Edit(source, new_questions=[(faq_id, text)], removed_questions=[q["id"] for _, q in elsewhere],
                touched_faqs=sorted({fid for fid, _ in elsewhere}))


def plan_approve(store: StoreView, faq_id: str, texts: Sequence[str]) -> Edit:
    """Phrasings a person approved become questions of an FAQ (source 'approved'); texts it has, and
    the second of two that read alike (up to case, width, spacing and punctuation), are skipped."""
    texts = as_items(texts)
    faq = _known(store, faq_id)
    alike = _alike(store) if len(texts) > 1 else None
    edits = [plan_feedback(store, t, faq_id, source="approved", alike=alike, faq=faq) for t in texts]
    new, seen = [], set()
    for q in (q for e in edits for q in e.new_questions):
        if (key := read_alike(q[1])) not in seen:
            seen.add(key)
            new.append(q)
    return Edit("approved", new_questions=new,
                removed_questions=list(dict.fromkeys(q for e in edits for q in e.removed_questions)),
                touched_faqs=sorted({f for e in edits for f in e.touched_faqs}))


def _alike(store: StoreView) -> dict[str, set[str]]:
    """The FAQs holding a question of each reading (:func:`read_alike`), read once for several texts."""
    out: dict[str, set[str]] = {}
    for _, fid, q in store.all_questions():
        out.setdefault(read_alike(q), set()).add(fid)
    return out


def plan_unassign(store: StoreView, query: str, faq_id: str) -> Edit:
    """Undo feedback: remove the question ``query`` from FAQ X where feedback or an approval put it."""
    text = clean_text(query)
    if is_blank(text):
        raise BlankQueryError("the query is blank (no visible characters); nothing to take out")
    faq = _known(store, faq_id)
    key = read_alike(text)  # as feedback and approve compare: "外汇额度是多少？" undoes "外汇额度是多少"
    gone = [q["id"] for q in faq["questions"] if read_alike(q["text"]) == key and q["source"] in USER_SOURCES]
    if not gone:
        kinds = {q["source"] for q in faq["questions"] if read_alike(q["text"]) == key}
        why = (f"it is one of its {', '.join(sorted(kinds))} questions; edit the FAQ to change those" if kinds
               else "the FAQ has no such question")
        raise FAQSearchError(f"{text!r} was not assigned to {faq_id} by feedback: {why}")
    return Edit(removed_questions=gone, touched_faqs=[faq_id])


def plan_remove_source(store: StoreView, source: str) -> Edit:
    """Every question of one source (``generated``: undo augment)."""
    found = [(f["id"], q["id"]) for f in store.list_faqs() for q in store.faq(f["id"])["questions"]
             if q["source"] == source]
    return Edit(removed_questions=[q for _, q in found], touched_faqs=sorted({f for f, _ in found}))
