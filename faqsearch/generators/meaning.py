"""Meaning changes a similarity score lets through, in English and Chinese: a negation added, dropped
or moved ("不能使用" became "可以使用" at cosine 0.94), a number changed, another kind of question (how
-> why), a condition put in front, words echoed from the prompt's examples, and a word the index
knows swapped for another one it knows (金融卡, a debit card, became 信用卡, a credit card, at 0.88),
which the index itself judges: the rewording must get the input's first answer. The screen drops
such candidates; a paraphrase that keeps the meaning rarely needs any of these changes.
"""
from __future__ import annotations

import re
import unicodedata
from typing import Callable, Sequence

# English negations (whole words, after "n't" is split off) and Chinese negating characters
_EN_NEGATIONS = frozenset("not no never nothing none nobody nowhere neither nor cannot without unable fail fails "
                          "failed failing missing forgot forget forgotten".split()
                          # contractions typed without the apostrophe ("cant remember", "dont have")
                          + "cant dont doesnt didnt isnt arent wasnt werent wont wouldnt couldnt shouldnt havent "
                            "hasnt hadnt aint".split())
# 忘 (forget) negates as "forgot" does in English; "cannot recall" (想不起来, 记不住...) is one word for it
_ZH_NEGATIONS = frozenset("不没沒无無未别別非勿莫否忘")
_ZH_FORGOT = re.compile("想不起(?:来|來)?|[记記]不(?:得|住|清楚?|起(?:来|來)?)")
# characters that hold a negating one without negating ("不过" but, "无论" whatever, "非常" very, "否则"
# otherwise, "未来" future, "别的" other, "莫名" ...): the pair is read as one word
_ZH_NOT_NEGATING = ("不过", "不管", "不论", "无论", "無論", "非常", "否则", "否則", "未来", "未來", "别的", "別的",
                    "别人", "別人", "不错", "不錯", "差不多", "不少", "没错", "沒錯", "是否", "能否", "可否", "与否",
                    "與否", "可不可以", "不小心", "不慎")
# an A-not-A question ("能不能", "收不收", "有没有") asks yes or no: no negation
_A_NOT_A = re.compile(r"(.)[不没沒]\1")
_EN_WORD = re.compile(r"[a-z]+(?:'[a-z]+)?")
_NUMBER_WORDS = {w: str(i) for i, w in enumerate("zero one two three four five six seven eight nine ten eleven "
                                                   "twelve".split()) if w != "one"}  # "get a new one": a pronoun
_ZH_DIGITS = "零〇一二两兩三四五六七八九十百千万萬"
# a Chinese numeral counts where a measure word follows it ("三天", "两张", "5次"): "一下" or "一个人" alone do not
_ZH_NUMERAL = re.compile(f"[{_ZH_DIGITS}]+(?=[天日个個次张張元块塊月年周週号號位分秒岁歲小笔筆期])")
_DIGITS = re.compile(r"\d+(?:[.,]\d+)*")


def _norm(text: str) -> str:
    return unicodedata.normalize("NFKC", text).lower()


def _zh_plain(text: str) -> str:
    """The text with the words that hold a negating character without negating blanked out."""
    t = _A_NOT_A.sub(lambda m: " " * 3, _norm(text))
    t = _ZH_FORGOT.sub(lambda m: "忘" + " " * (len(m.group(0)) - 1), t)
    for word in _ZH_NOT_NEGATING:
        t = t.replace(word, " " * len(word))
    return t


def negations(text: str) -> int:
    t = _zh_plain(text).replace("n't", " not").replace("can not", "cannot")
    return sum(w in _EN_NEGATIONS for w in _EN_WORD.findall(t)) + sum(ch in _ZH_NEGATIONS for ch in t)


def _zh_negated(text: str, span: int) -> list[set[str]]:
    """For each Chinese negation, the characters of the ``span`` after it (what it negates; in "用不了",
    "cannot use", the one before it; what is forgotten stands on either side, four characters each:
    "忘记登录密码", "登录密码忘了")."""
    t = _zh_plain(text)
    return [(set(t[max(0, i - 4):i] + t[i + 1:i + 5]) - set("记記") if ch == "忘" else
             set(t[i + 1:i + 1 + span]) | (set(t[max(0, i - 2):i]) if t[i + 1:i + 2] == "了" else set()))
            - {" ", "了"} for i, ch in enumerate(t) if ch in _ZH_NEGATIONS]


def moved(source: str, cand: str) -> bool:
    """A Chinese negation now negates something else: one of the input's negations has no negation in
    the candidate near a character of what it negated (the three after it; "X不了" negates X):
    "不用了想销掉" -> "不销掉" moved; "不能用" -> "无法使用" and "不能登录" -> "登录不了" did not."""
    after = _zh_negated(cand, 3)
    return any(not any(src & got for got in after) for src in _zh_negated(source, 3) if src)


def numbers(text: str) -> list[str]:
    """The numbers a text states, as digits or numerals with a measure word, in order."""
    t = _norm(text)
    found = [m.group(0).replace(",", "") for m in _DIGITS.finditer(t)]
    found += [_NUMBER_WORDS[w] for w in _EN_WORD.findall(t) if w in _NUMBER_WORDS]
    found += [n for n in _ZH_NUMERAL.findall(t) if n != "一"]  # 一个, 一张: an article
    return sorted(found)


# a question that asks why asks something else than how, where or whether ("how do I cancel my order"
# is no rewording of "why did you cancel my order"); where, when, how much and what are read as one
# kind with how: "what does delivery cost?" asks what "how much is delivery?" asks
_ASKS = [("why", ("为什么", "为何", "怎么会", "為什麼", "為何", "怎麼會", "why", "how come", "what caused",
                 "what is the reason", "what's the reason"))]
# a condition or a cause put in front ("如果...", "因为...", "if ...")
_LEADS = ("如果", "要是", "假如", "因为", "因為", "所以", "但是", "虽然", "雖然", "而且", "if ", "because ", "so ", "but ")


# a question about what words mean ("What do you mean by ...", "What does X mean?", "...是什么意思"): a small
# model asks it of a request it cannot reword
_MEANING = re.compile(r"\bwhat (?:do|does|did) (?:.+ )?mean\b|\bwhat is meant\b|\bmeaning of\b|"
                      "什[么麼]意思|啥意思|是指什[么麼]|指的是什[么麼]")


def asks(text: str) -> set[str]:
    """The kinds of question a text asks whose change changes the question (why; what words mean)."""
    t = f" {_norm(text)} "
    out = {"meaning"} if _MEANING.search(t) else set()
    for kind, words in _ASKS:
        for w in words:
            if (f" {w} " in re.sub(r"[^\w' ]+", " ", t)) if w.isascii() else w in t:
                out.add(kind)
                t = t.replace(w, " ")
    return out


def leads(text: str) -> str | None:
    t = _norm(text).lstrip()
    return next((w.strip() for w in _LEADS if t.startswith(w)), None)


_GENERIC = ("为什么 為什麼 为何 為何 什么 什麼 时候 時候 哪里 哪裡 多久 多少 怎么 怎麼 如何 可以 能不 不能 应该 應該 需要 "
            "我们 我們 你们 你們 一下 还是 還是 没有 沒有 以后 以後 以前 之前 我的 你的 是不 是否 有没 有沒 查看 查到 "
            "收到 一般 重新 东西 東西 几天 幾天 现在 現在").split()
_PARTICLES = frozenset("了的吗嗎呢吧啊呀我你您他她它们們是在有和就也都还還要会會能想")
_GENERIC_EN = frozenset("what when where which how long much many does have with from your there their about would "
                        "could should this that after before still".split())


def echoes(cand: str, source: str, prompt_texts: Sequence[str]) -> bool:
    """The candidate repeats words of the prompt's examples that the input does not have (a small
    model continues its examples: "开错的账户" from an example about a wrong invoice): two CJK
    characters in a row from an example, not in the input, holding no particle or pronoun and not
    across a question or function word, or an English word of more than four letters."""
    if not prompt_texts:
        return False
    c, src = _norm(cand), _norm(source)
    examples = [_norm(x) for x in prompt_texts]
    masked = c
    for word in sorted(_GENERIC, key=len, reverse=True):  # a pair across a question word is no word
        masked = masked.replace(word, " ")
    for run in re.findall(r"[\u3400-\u9fff]{2,}", masked):
        for i in range(len(run) - 1):
            piece = run[i:i + 2]
            if piece not in src and not set(piece) & _PARTICLES and any(piece in x for x in examples):
                return True
    words = set(_EN_WORD.findall(" ".join(examples))) - set(_EN_WORD.findall(src)) - _GENERIC_EN
    return any(len(w) > 4 and w in words for w in _EN_WORD.findall(c))


def changes(source: str, cand: str) -> str | None:
    """Why ``cand`` says something other than ``source`` ('question changed', 'condition added',
    'negation', 'number'), or None (a swapped term is the index's to judge: :func:`answers_alike`)."""
    if asks(source) != asks(cand):
        return "question changed"
    lead = leads(cand)
    if lead and lead != leads(source):
        return "condition added"
    ns, nc = negations(source), negations(cand)
    # an odd count reads as "no" either way: the parity and the presence are both compared
    if ns % 2 != nc % 2 or (ns > 0) != (nc > 0) or moved(source, cand):
        return "negation"
    if numbers(source) != numbers(cand):
        return "number"
    return None


def answers_alike(searcher, text: str, faq_id: str | None = None) -> Callable[[list[str]], list[bool]] | None:
    """The check that a rewording of ``text`` is still the same question for this index: the index's
    first answer (answered or not) to each candidate is its first answer to ``text`` (or ``faq_id``).
    A product or entity word swapped for another one the index knows (金融卡 for 信用卡) moves the
    answer; a synonym the index reads alike does not. None (no check) where ``text`` has no first
    answer (an empty index, or nothing in common with it)."""
    def first(texts: list[str]) -> list[str | None]:
        return [r.nearest.faq_id if r.nearest is not None else None
                for r in searcher.answer(texts, k=1, threshold=-1.0)]

    target = faq_id if faq_id is not None else first([text])[0]
    if target is None:
        return None
    return lambda texts: [got == target for got in first(list(texts))]
