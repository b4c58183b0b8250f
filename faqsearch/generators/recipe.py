"""The SimBERT recipe around any generator: sample many candidates in one batch, screen out what is
not a rewording of the input, re-rank by retrieval similarity and keep a diverse top N."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from ..defaults import PARAPHRASE_MAX_CHARS, PARAPHRASE_MIN_SIMILARITY, PARAPHRASE_ROUNDS
from ..errors import InvalidOptionError
from ..lexical import CJK_RANGES
from ..text import check_whole, folded
from .base import Candidate, Generator

# words whose change alone does not make a new wording ("How can I..." vs "How do I...")
FUNCTION_WORDS = frozenset(
    "a an the my your our their his her its this that these those i you we me us it is are am was were be "
    "do does did can could may might will would should shall to of for on in at by with please".split()
    # Chinese: a CJK character is a word; these change no meaning alone (particles, pronouns, "please")
    + list("的地得了吗呢吧啊呀嘛请我你您是能会嗎請會"))  # Simplified and Traditional

# a prompt or list marker the model echoed before its text ("Paraphrase: ...", "1. ...", "- ...")
_LEAD = re.compile(r"^\s*(?:(?:[A-Za-z][A-Za-z ]{0,24}|问题|改写)\s*[:：]\s*|\d+[.)]\s+|[-*•]\s+)")
_QUOTES = "\"'“”‘’«»「」"


# candidates less similar than this to the input (re-ranking encoder's cosine) are dropped (chosen on
# benchmarks/experiments/paraphrase_dev.py's split: see faqsearch.defaults)
DEFAULT_MIN_SIMILARITY = PARAPHRASE_MIN_SIMILARITY


@dataclass
class Paraphrase:
    text: str
    score: float  # similarity with the input under the re-ranking encoder (cosine of unit vectors)


@dataclass
class Screened:
    """One candidate and what the screen decided (``reason`` is 'kept' or why it was dropped)."""
    text: str
    reason: str
    score: float | None = None
    scores: dict[str, float] = field(default_factory=dict)


def encoder_scorer(encoder) -> Callable[[Sequence[str]], np.ndarray]:
    """A re-ranking scorer from any encoder: its vectors, L2-normalised (an index's ``embed`` is one too)."""
    def embed(texts: Sequence[str]) -> np.ndarray:
        v = encoder.encode(list(texts))
        return v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)

    return embed


def normal(text: str) -> str:
    """Case- and punctuation-insensitive form: what 'a copy' means (:func:`faqsearch.text.folded`)."""
    return folded(text)


_CJK = CJK_RANGES
_WORD = re.compile(f"[{_CJK}]|[^\\W{_CJK}_]+")  # a CJK character is a word; so is a run of other letters/digits


def _words(text: str) -> list[str]:
    return _WORD.findall(normal(text))


def content(text: str) -> tuple[str, ...]:
    return tuple(w for w in _words(re.sub("[请請]问|[请請]問|一下", "", text)) if w not in FUNCTION_WORDS)  # "may I ask", "a bit"


_HAS_CJK = re.compile(f"[{_CJK}]")
# a Chinese question without a question mark: a final particle, or a question word in a sentence that
# does not end with a full stop ("忘记密码怎么办", "可以退款吗")
_ZH_PARTICLE = re.compile(r"[吗嗎呢][\s。.!！~～]*$")  # Simplified and Traditional forms, here and below
_ZH_ASKS = re.compile("什[么麼]|怎[么麼样樣]|如何|[为為]什[么麼]|[为為]何|哪|[谁誰]|[几幾]|多少|多久|多[长長]|是否|能否|可否|"
                      "有[没沒]有|是不是|能不能|可不可以|[会會]不[会會]|要不要|行不行|好不好")


def is_question(text: str) -> bool:
    """Ends with ? or ？; in Chinese also a final 吗/呢, or a question word (什么, 怎么, 如何, 为什么,
    哪, 是否, 能不能, ...) in a sentence without a full stop."""
    t = text.rstrip()
    if t.endswith(("?", "？")):
        return True
    if not _HAS_CJK.search(t):
        return False
    if _ZH_PARTICLE.search(t):
        return True
    return not t.endswith(("。", ".", "!", "！")) and bool(_ZH_ASKS.search(t))


def clean(text: str) -> str:
    """First line, without an echoed label, list marker or surrounding quotes."""
    line = next((ln for ln in text.strip().splitlines() if ln.strip()), "")
    for _ in range(2):
        line = _LEAD.sub("", line, count=1).strip()
    if len(line) >= 2 and line[0] in _QUOTES and line[-1] in _QUOTES:
        line = line[1:-1].strip()
    return line


_FIRST = frozenset({"i", "my", "me", "mine", "myself"})
_ANSWER = re.compile(r"^\W*(yes|no|sure|sorry|i'?m sorry|unfortunately|certainly|of course|absolutely)\b|"
                     r"\byou (can|will|should|need to|may|must)\b|\byou'(ll|d)\b", re.IGNORECASE)
_SECOND = frozenset({"your", "yours", "yourself"})
_YOU = _SECOND | {"you"}
# the service's voice: "I"/"we" acting on "you" ("How can I help you ...", "Can I walk you through ...")
_SERVICE = re.compile(r"\b(i|we)\b.*\b(you|your|yours)\b", re.IGNORECASE)


# a clause that asks something more: ", what's the problem?", ", and how much is it?", "，还有多少钱？"
_TAIL = re.compile(r",\s*(?:(?:and|or|but|so)\s+)?(?:what|what's|where|how|why|when|who|which|is|are|can|could|do|does|"
                   r"did|will|would|should)\b|[，,、]\s*(?:那[么麼]?|[还還]有|而且|[并並]且|或者|以及|另外)?\s*"
                   r"(?:什[么麼]|怎[么麼]|如何|[为為]什[么麼]|哪|多少|多久|是否|能否|能不能|可不可以|有[没沒]有)", re.IGNORECASE)
_END = re.compile(r"[?!？。！；;]+|\.(?=\s|$)")

# Chinese pronouns as the English words the point-of-view rules know ("我的" is "my", "您" is "you")
_ZH_PRONOUNS = [(re.compile(p), w) for p, w in (("我[们們]的", " our "), ("[你您][们們]?的", " your "), ("我的", " my "),
                                                  ("我[们們]", " we "), ("[你您][们們]?", " you "), ("我", " i "))]
# how a Chinese reply starts ("是的", "抱歉", "当然"); "您可以 ..." too, unless it asks ("你可以帮我吗？")
_ZH_ANSWER = re.compile(r"^\W*(?:是的|不是的|[对對]的|好的|抱歉|[对對]不起|很抱歉|不好意思|[当當]然|[没沒]问题|[没沒]問題)")
_ZH_YOU_CAN = re.compile(r"[你您](?:可以|需要|[应應][该該]|必[须須]|得|只[需須])")


def _pov(text: str) -> str:
    for p, w in _ZH_PRONOUNS:
        text = p.sub(w, text)
    return text


def _answers(text: str) -> bool:
    return bool(_ANSWER.search(text) or _ZH_ANSWER.search(text)
                or (_ZH_YOU_CAN.search(text) and not is_question(text)))


def clauses(text: str) -> int:
    """Sentences plus question tails after a comma: "Can I pay later, how much is it?" is two."""
    return sum(1 for part in _END.split(text) if part.strip()) + len(_TAIL.findall(text))


# a quoted span: "...", “...”, «...», 「...」, 『...』, or '...' opened after a space (not "what's")
_QUOTED = re.compile(r'"([^"]+)"|“([^”]+)”|«([^»]+)»|「([^」]+)」|『([^』]+)』|(?:^|(?<=\s))[\'‘]([^\'‘’]+)[\'’]')


def quotes_input(source: str, cand: str) -> bool:
    """The candidate asks about the input's words instead of rewording them ('What do you mean by
    "stop sending me sales emails"?', '"buy without signing up" 是什么意思？'): a quoted span holding at
    least half of the input's content words, where the input quotes nothing."""
    src = set(content(source))
    if not src or _QUOTED.search(source):
        return False
    for m in _QUOTED.finditer(cand):
        span = set(content(next(g for g in m.groups() if g)))
        if len(src & span) * 2 >= len(src):
            return True
    return False


def shape_ok(source: str, cand: str) -> bool:
    """A question stays a question; the writer's point of view stays (a question about "my order"
    that comes back about "your order" asks something else, and is how answers start; "I" acting
    on "you" is the service speaking); a request without a full stop does not come back as a
    statement that is not about the writer; the length
    stays within 0.4x-2.5x the input's (in words or CJK characters), which drops truncated fragments
    and answers that run on; no more sentences or question tails than the input ("..., what's the
    problem?" asks something the user did not); the writer does not disappear behind "you" ("can i
    pay cash" is not "are you able to pay cash"); nor does it quote the input to ask what it means
    (:func:`quotes_input`). The same rules read Chinese: 吗/呢 and question
    words make a question, 我/我的 are "I"/"my", 你/您 "you", 。 a full stop."""
    if is_question(source) and not is_question(cand):
        return False
    if quotes_input(source, cand):
        return False
    if _answers(cand) and not _answers(source):  # how replies start, not requests
        return False
    src, out = set(_words(_pov(source))), set(_words(_pov(cand)))
    if src & _FIRST and not src & _SECOND and out & _SECOND:
        return False
    if src & _FIRST and not src & _YOU and out & _YOU and not out & _FIRST:  # "you" took the writer's place
        return False
    if clauses(cand) > clauses(source):
        return False
    if not src & _YOU and _SERVICE.search(_pov(cand)):  # the reply's point of view, not the writer's
        return False
    if cand.rstrip().endswith((".", "。")) and not source.rstrip().endswith((".", "。")) and not out & _FIRST:
        return False  # a statement about the world ("A warranty can vary ...") where the user asked
    a, b = len(_words(source)), len(_words(cand))
    return 0.4 * a - 1 <= b <= 2.5 * a + 3


def screen(text: str, cands: Sequence[Candidate], scorer: Callable[[Sequence[str]], np.ndarray] | None,
           generator: Generator | None = None, min_similarity: float = DEFAULT_MIN_SIMILARITY,
           meaning: Callable[[str, str], str | None] | None = None) -> list[Screened]:
    """Decide about every candidate: copies, near-copies (only function words differ), unfinished
    (hit the token budget), wrong shape, a changed meaning (:func:`faqsearch.generators.meaning.changes`,
    or ``meaning``), an echo of the prompt's examples, duplicates and those below ``min_similarity`` are
    dropped."""
    from .meaning import changes, echoes

    meaning = meaning or changes
    # a base model's few-shot examples leak into what it writes (an instruct model's rarely do)
    examples = generator.prompt_examples(text) if getattr(generator, "prompts", None) else ()
    src_norm, src_content = normal(text), content(text)
    seen: set[str] = set()
    out: list[Screened] = []
    for c in cands:
        t = clean(c.text)
        key = normal(t)
        if not key:
            reason = "empty"
        elif key == src_norm:
            reason = "copy"
        elif src_content and content(t) == src_content:
            reason = "near-copy"
        elif not c.finished:
            reason = "unfinished"
        elif not shape_ok(text, t):
            reason = "shape"
        elif changed := meaning(text, t):
            reason = changed
        elif echoes(t, text, examples):
            reason = "prompt echo"
        elif key in seen:
            reason = "duplicate"
        else:
            reason = "kept"
        seen.add(key)
        out.append(Screened(t, reason))
    kept = [s for s in out if s.reason == "kept"]
    if kept:
        texts = [s.text for s in kept]
        parts: dict[str, np.ndarray] = {}
        if scorer is not None:
            v = np.asarray(scorer([text] + texts), dtype=np.float32)
            parts["index"] = v[1:] @ v[0]
        own = generator.similarity(text, texts) if generator is not None else None
        if own is not None:
            parts[generator.name] = np.asarray(own, dtype=np.float32)
        for i, s in enumerate(kept):
            s.scores = {k: float(v[i]) for k, v in parts.items()}
            s.score = float(np.mean(list(s.scores.values()))) if s.scores else 0.0
            if s.scores and s.score < min_similarity:
                s.reason = "dissimilar"
    return out


def diverse_top(screened: Sequence[Screened], n: int, max_overlap: float = 0.75) -> list[Paraphrase]:
    """Best first, skipping a candidate whose content words overlap an already chosen one by more than
    ``max_overlap`` (Jaccard), so the N returned are not N copies of one rewording."""
    ranked = sorted((s for s in screened if s.reason == "kept"), key=lambda s: -(s.score or 0.0))
    chosen: list[Screened] = []
    for s in ranked:
        words = set(content(s.text)) or set(_words(s.text))
        if any(_jaccard(words, set(content(c.text)) or set(_words(c.text))) > max_overlap for c in chosen):
            continue
        chosen.append(s)
        if len(chosen) == n:
            break
    if len(chosen) < n:  # fill up with near-duplicates of each other rather than return fewer
        rest = [s for s in ranked if s not in chosen]
        chosen += rest[:n - len(chosen)]
        chosen.sort(key=lambda s: -(s.score or 0.0))
    return [Paraphrase(s.text, float(s.score or 0.0)) for s in chosen]


def _jaccard(a: set, b: set) -> float:
    return len(a & b) / len(a | b) if a or b else 1.0


ROUNDS = PARAPHRASE_ROUNDS  # batches drawn at most (seed, seed+1, ...) until n candidates pass the screen


def screen_rounds(generator: Generator, text: str, n: int, candidates: int = 24,
                  scorer: Callable[[Sequence[str]], np.ndarray] | None = None,
                  min_similarity: float = DEFAULT_MIN_SIMILARITY, seed: int | None = 0, rounds: int = ROUNDS,
                  exclude: set[str] | None = None,
                  same_intent: Callable[[list[str]], Sequence[bool]] | None = None,
                  meaning: Callable[[str, str], str | None] | None = None) -> list[Screened]:
    """Screen one batch of ``candidates``; while fewer than ``n`` pass, draw another batch (next
    seed), up to ``rounds`` batches. ``exclude``: normal forms that do not count as new (stored
    questions). ``same_intent``: the round-trip check where the input's intent is known (augment:
    does the candidate, searched in the index, come back to its own FAQ?); candidates that fail it
    are dropped as 'other intent'. A text mostly in a script the generator does not write is refused
    before sampling (:class:`faqsearch.generators.UnsupportedLanguageError`)."""
    from .languages import checked

    if len(text) > PARAPHRASE_MAX_CHARS:  # the prompt would outgrow the model's context: minutes for nothing
        raise InvalidOptionError(f"the text is {len(text)} characters; at most {PARAPHRASE_MAX_CHARS} are reworded")
    checked(generator, [text])
    out: list[Screened] = []
    seen: set[str] = set(exclude or ())
    for r in range(max(1, rounds)):
        batch = screen(text, generator.sample(text, candidates, seed=None if seed is None else seed + r), scorer,
                       generator, min_similarity, meaning)
        for s in batch:
            key = normal(s.text)
            if s.reason == "kept" and key in seen:
                s.reason = "duplicate" if key not in (exclude or ()) else "stored"
            seen.add(key)
        kept = [s for s in batch if s.reason == "kept"]
        if same_intent is not None and kept:
            for s, ok in zip(kept, same_intent([s.text for s in kept])):
                if not ok:
                    s.reason = "other intent"
        out += batch
        if sum(s.reason == "kept" for s in out) >= n:
            break
    return out


def paraphrase(generator: Generator, text: str, n: int = 5, candidates: int = 24,
               scorer: Callable[[Sequence[str]], np.ndarray] | None = None,
               min_similarity: float = DEFAULT_MIN_SIMILARITY, seed: int | None = 0,
               rounds: int = ROUNDS, meaning: Callable[[str, str], str | None] | None = None,
               same_intent: Callable[[list[str]], Sequence[bool]] | None = None) -> list[Paraphrase]:
    """Up to ``n`` rewordings of ``text``: batches of ``candidates`` samples, screened, re-ranked, diverse
    (at most ``rounds`` batches; one batch is about a third of the time for fewer paraphrases)."""
    n, candidates = check_whole(n, "n", 1, 100), check_whole(candidates, "candidates", 1, 1000)  # n=0: no cap at all
    if not text.strip():
        return []
    return diverse_top(screen_rounds(generator, text, n, candidates, scorer, min_similarity, seed, rounds,
                                     same_intent=same_intent, meaning=meaning), n)
