"""Text normalisation shared by the corpus reader, edits and queries.

Every stored question and every query goes through :func:`clean_text`: invalid UTF-8 (lone
surrogates from argv or from decoding with ``surrogateescape``) becomes U+FFFD, text is put in
Unicode NFC, control characters become spaces and runs of whitespace one space. A text with no
visible character left is blank: a question must not be one, and a query gets no answer.
"""
from __future__ import annotations

import numbers
import re
import unicodedata
from typing import Any

from .defaults import MAX_COUNT
from .errors import BlankQueryError, InvalidOptionError, TextTypeError

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_CONTROL_BUT_LINES = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_SPACES = re.compile(r"\s+")
# invisible at the ends of a text: zero-width (a cell pasted from a web page) and direction marks (a
# right-to-left spreadsheet's cell: "\u200fret-01" was an FAQ apart from "ret-01")
_ZERO_WIDTH = "\u200b\u200c\u200d\u2060\ufeff\u200e\u200f\u061c\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
# Chinese and Japanese, written without spaces: kana, CJK ideographs (extensions and compatibility
# ones included), 々〆〇〻 and half-width katakana
UNSPACED = re.compile("[\u3005-\u3007\u303b\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f"
                      "\U00020000-\U0003134f]")
_LINE_SPACES = re.compile(r"[^\S\n]+")
_INVISIBLE = {"Cc", "Cf", "Cs", "Co", "Cn", "Zs", "Zl", "Zp", "Mn", "Me"}


def as_items(value) -> list:
    """A list of the items given: one string is one item (not its characters), so
    ``remove("faq-1")`` or ``approve(faq, "a phrasing")`` mean what they say."""
    if isinstance(value, str):
        return [value]
    try:
        return list(value)
    except TypeError:
        raise TextTypeError(f"expected a string or a list of them, got {type(value).__name__}") from None


def clean_text(text: str, multiline: bool = False) -> str:
    """NFC, no control characters, single spaces, stripped; invalid UTF-8 shown as U+FFFD.

    ``multiline`` (answers) keeps line breaks (CRLF, CR, U+2028/2029 become \\n), each line's indentation
    and the spaces and tabs within it (a nested list, a code block, a Chinese paragraph's "\u3000\u3000"),
    without spaces at the ends of lines, blank lines at the ends, or spaces and tabs before the text."""
    if not isinstance(text, str):
        raise TextTypeError(f"expected a string, got {type(text).__name__}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates: bytes that were not UTF-8
        text = text.encode("utf-8", "surrogateescape" if _escapes_only(text) else "surrogatepass") \
            .decode("utf-8", "replace")
    text = unicodedata.normalize("NFC", text)
    if multiline:
        text = re.sub(r"\r\n?|[\u2028\u2029\x85]", "\n", text)
        text = "\n".join(ln.rstrip() for ln in _CONTROL_BUT_LINES.sub(" ", text).split("\n")).strip("\n")
        return text.strip(_ZERO_WIDTH).lstrip(" \t")  # a cell's stray leading space; a full-width indent stays
    return _SPACES.sub(" ", _CONTROL.sub(" ", text)).strip().strip(_ZERO_WIDTH).strip()  # "ret-01\u200b" was an id apart


def answer_key(answer: str) -> str:
    """An answer as it compares with another (ids given to answers, rows grouped by answer, two answers
    of one id): each line's spaces one space and stripped, as answers were stored until 2026-11-28, so
    an answer's indentation neither parts two rows nor changes the id an id-less corpus gives it."""
    return "\n".join(_LINE_SPACES.sub(" ", ln).strip() for ln in answer.split("\n")).strip()


def _escapes_only(text: str) -> bool:
    return all(not ("\ud800" <= ch <= "\udfff") or "\udc80" <= ch <= "\udcff" for ch in text)


def folded(text: str) -> str:
    """Case-, width- and punctuation-insensitive form of a text: "Where is my parcel?!" and "where is
    my parcel" are one (NFKC, lower case, each run of punctuation and spaces one space)."""
    return re.sub(r"[\W_]+", " ", unicodedata.normalize("NFKC", text).lower()).strip()


def is_blank(text: str) -> bool:
    """True when no character would be visible (only spaces, controls, format or combining marks)."""
    return all(unicodedata.category(ch) in _INVISIBLE for ch in text)


def check_query(text: str) -> str:
    """``text`` when it is a query to answer; a blank one is a BlankQueryError (the CLI's usage error, the
    API's 422), so the library, the command line and the service refuse it alike."""
    if is_blank(clean_text(text)):
        raise BlankQueryError()
    return text


def check_whole(value: Any, name: str, low: int = 1, high: int = MAX_COUNT) -> int:
    """``value`` as an int where it is a whole number from ``low`` to ``high`` (a bool is none), else an
    InvalidOptionError naming ``name`` (a batch size of -1 encoded nothing and answered NaN)."""
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or not low <= value <= high:
        raise InvalidOptionError(f"{name} must be a whole number from {low} to {high}, got {value!r}")
    return int(value)


# Arabic and Hebrew vowel and cantillation marks, and the Arabic stretching letter (tatweel): written in
# formal or taught text, seldom in an FAQ; the encoders read "كَيْفَ" as other words than "كيف"
_POINTING = dict.fromkeys([*range(0x0591, 0x05C8), *range(0x064B, 0x0660), 0x0670, 0x0640])


def for_search(text: str) -> str:
    """A query as it is searched: without Arabic or Hebrew vowel marks and tatweel ("كَيْفَ أَحْذِفُ حِسَابِي؟"
    was answered with another FAQ than "كيف أحذف حسابي؟", its stored question); other text as it is."""
    return text.translate(_POINTING)


def search_key(text: str | None) -> str:
    """A text as a listing's search compares it ("contains"): NFC, then case-folded in every script
    (SQLite's LIKE folded ASCII only: "ВОЗВРАТ" found no "возврат", "RÜCKSENDUNG" no "Rücksendung")."""
    return unicodedata.normalize("NFC", text or "").casefold()


def check_page(limit: Any, offset: Any, contains: Any = None) -> tuple[int | None, int]:
    """``(limit, offset)`` of a page of a listing, checked as the CLI and the API check them: ``limit`` None
    or a whole number of at least 1, ``offset`` one of at least 0, both at most 2**31 (SQLite's LIMIT
    overflowed past 2**63, and -1 listed everything); ``contains`` None or a string."""
    if contains is not None and not isinstance(contains, str):
        raise TextTypeError(f"contains: expected a string, got {type(contains).__name__}")
    return (None if limit is None else check_whole(limit, "limit")), check_whole(offset, "offset", 0)


def plural(n: int, one: str, many: str | None = None) -> str:
    """The word for ``n`` things: plural(1, "FAQ") -> "FAQ", plural(2, "FAQ") -> "FAQs"."""
    return one if n == 1 else (many or one + "s")


def count(n: int, one: str, many: str | None = None) -> str:
    """``n`` and its word: count(1, "FAQ") -> "1 FAQ", count(3, "query", "queries") -> "3 queries"."""
    return f"{n} {plural(n, one, many)}"


def is_latin(ch: str) -> bool:
    """Basic Latin to Latin Extended-B, and Latin Extended Additional."""
    return ord(ch) < 0x250 or 0x1E00 <= ord(ch) <= 0x1EFF


def letter_units(text: str):
    """The letters of ``text`` grouped as a reader weighs them, as (first letter, weight) pairs: in text
    with Chinese or Japanese (:data:`UNSPACED`) each such character weighs 1 and so does a whole run
    of other letters (a word: "可以用PayPal付款吗" is six Han units and one Latin one, not six
    against six); in text without, every letter weighs 1 (a Russian word is longer than an English
    one, so words would tip a bilingual Russian and English text to English)."""
    if not UNSPACED.search(text):
        yield from ((ch, 1) for ch in text if ch.isalpha())
        return
    start, kind = -1, None
    for i, ch in enumerate(text + " "):
        now = None if not ch.isalpha() else "u" if UNSPACED.match(ch) else "l" if is_latin(ch) else "o"
        if kind is not None and (now != kind or kind == "u"):
            yield text[start], 1
            kind = None
        if now is not None and kind is None:
            start, kind = i, now


def non_latin_share(texts, limit: int = 2000) -> float:
    """The share of letters (weighed by :func:`letter_units`) outside the Latin script in (up to ``limit``
    of) ``texts``: 0 for English, near 1 for Chinese, Japanese, Russian or Arabic, and a Chinese question
    that names "PayPal" or "iPhone" stays Chinese. Digits, punctuation and spaces do not count."""
    import itertools

    latin = other = 0
    for text in itertools.islice(texts, limit):
        for first, weight in letter_units(text):
            if is_latin(first):
                latin += weight
            else:
                other += weight
    return other / (latin + other) if latin + other else 0.0


_SPACES_BUT_NO_BREAK = re.compile(r"[^\S\u00a0\u2007\u202f]+")  # where a line may break: not "10\u00a0kg"
_JOINS_ON = "ー々ゝゞヽヾ"  # marks that never start a line in Chinese or Japanese


def _width(ch: str) -> int:
    """Terminal columns of one character: 0 for marks and format characters (combining accents, a
    variation selector, a zero-width joiner), 2 for wide (East Asian) ones, else 1."""
    if unicodedata.category(ch) in ("Mn", "Me", "Cf"):
        return 0
    return 2 if unicodedata.east_asian_width(ch) in "WF" else 1


def columns(text: str) -> int:
    """The terminal columns ``text`` takes (:func:`_width` of each character)."""
    return sum(_width(ch) for ch in text)


def clip(text: str, width: int, mark: str = "...") -> str:
    """``text`` cut to at most ``width`` terminal columns, ``mark`` ending it where it was cut (a Chinese
    answer cut at 70 characters took 140 columns)."""
    if columns(text) <= width:
        return text
    out, used, room = [], 0, width - columns(mark)
    for ch in text:
        used += _width(ch)
        if used > room:
            break
        out.append(ch)
    return "".join(out) + mark


def fill(paragraph: str, width: int, indent: str = "", first: str | None = None) -> list[str]:
    """``paragraph`` as lines of at most ``width`` columns, each after ``indent`` (the first after
    ``first``): broken at spaces (not at no-break ones), and between Chinese or Japanese characters
    (:data:`UNSPACED`), never before a closing mark or after an opening one; a word is never broken
    (one longer than a line gets a line of its own)."""
    units: list[list] = []  # [text, a space before it]
    for word in _SPACES_BUT_NO_BREAK.split(paragraph.strip()):
        for i, ch in enumerate(word):
            kind = unicodedata.category(ch)
            before = units[-1][0][-1] if i else ""
            breakable = i and (UNSPACED.match(ch) or UNSPACED.match(before)) and ch not in _JOINS_ON \
                and not (kind.startswith("P") and kind not in ("Ps", "Pi")) and kind not in ("Mn", "Me", "Cf") \
                and unicodedata.category(before) not in ("Ps", "Pi")
            if i and not breakable:
                units[-1][0] += ch
            elif ch:
                units.append([ch, i == 0])
    line = first if first is not None else indent
    lines, used, empty = [], columns(line), True
    for text, space in units:
        add = (" " if space and not empty else "") + text
        if not empty and used + columns(add) > width:
            lines.append(line)
            line, used, add = indent, columns(indent), text
        line, used, empty = line + add, used + columns(add), False
    return [*lines, line]


# sentence punctuation, quotes and brackets (after NFKC): "How do I pay?" and "how do i pay" read alike, as
# do "「退款」怎么办。" and "退款怎么办"; signs that are part of what is asked ("C++", "$5", "50%") stay, and
# so do a decimal point or a thousands comma between digits ("3.5" is not "35")
_SENTENCE_MARKS = re.compile("(?<![0-9])[.,]|[.,](?![0-9])|[?!;:\u2026\u3002\u3001\uff61\uff64\"'\u201c\u201d\u2018\u2019"
                             "\u00ab\u00bb\u2039\u203a\u00bf\u00a1()\\[\\]{}\u3010\u3011\u300c\u300d\u300e\u300f"
                             "\u3008\u3009\u300a\u300b]")


def read_alike(text: str) -> tuple[str, ...]:
    """A text's words and signs, case and width folded (NFKC: "？" is "?", "ＡＰＰ" is "app"), without
    its sentence punctuation, quotes and brackets (_SENTENCE_MARKS; "can't" reads as "cant"): what an
    encoder reads alike (two texts alike here get the same or almost the same vector from MiniLM and
    USE, so they tie wherever both are questions)."""
    folded = _SENTENCE_MARKS.sub("", unicodedata.normalize("NFKC", text).casefold())
    return tuple(re.findall(r"\w+|[^\w\s]", folded))


# encodings a text file that is not UTF-8 is most often in (Excel and Windows exports), tried in this order
LEGACY_ENCODINGS = (("GB18030", "gb18030"), ("Big5", "big5"), ("Shift_JIS", "shift_jis"), ("EUC-KR", "euc_kr"),
                    ("Windows-1252", "cp1252"), ("MACINTOSH", "mac_roman"))  # Mac Roman: Excel for Mac's "CSV"


def _plausible(text: str) -> float:
    """How much a decoding looks like text: the share of its non-ASCII characters that are Latin or CJK
    letters or CJK punctuation (a wrong decoding of CJK bytes gives signs such as ´ ¿ £, Cyrillic or
    half-width kana among them), less the share of CJK characters wedged between ASCII letters (Latin
    text read as GBK: "Gr\u5927e" for "Größe"), more where it is mostly kana or hangul as Japanese and
    Korean are; -1 with a private-use character (no text has those)."""
    wide = [ch for ch in text if ord(ch) > 127]
    if not wide:
        return 0.0
    if any(unicodedata.category(ch) == "Co" for ch in wide):
        return -1.0
    good = sum((unicodedata.category(ch).startswith("L") and (ch <= "\u024f" or "\u3040" <= ch <= "\u9fff"
                                                             or "\uac00" <= ch <= "\ud7a3"))
               or "\u3000" <= ch <= "\u303f" or "\uff01" <= ch <= "\uff60" or "\u2013" <= ch <= "\u2026"
               for ch in wide)  # not half-width kana; typographic quotes and dashes are text
    wedged = len(re.findall(r"(?<=[A-Za-z])[\u3000-\u9fff\uac00-\ud7a3](?=[A-Za-z])", text)) \
        + len(re.findall(r"(?<=[a-z])[\u00c0-\u00de\u0152\u0160\u0178\u017d]", text))  # "itÕs", "cafŽ": the other 8-bit code
    han = sum("\u4e00" <= ch <= "\u9fff" for ch in wide)
    kana = sum("\u3040" <= ch <= "\u30ff" for ch in wide) >= 0.2 * len(wide)
    hangul = sum("\uac00" <= ch <= "\ud7a3" for ch in wide) >= 0.7 * len(wide) and han <= 0.1 * len(wide)
    return (good - 2 * wedged) / len(wide) + 0.5 * (kana or hangul)


def not_utf8_fix(line: bytes, limit: int = 3, what: str = "the line", terminal: bool = False,
                 whole: bytes | None = None) -> str:
    """What to do with a line that is not UTF-8 (of a file whose bytes are ``whole``): where the rest is
    UTF-8 with a few bad bytes, to mend those (converting the whole file would garble the rest);
    otherwise how the line reads in the encodings the whole decodes in (those whose reading of the whole
    looks most like text first, at most ``limit``), and the iconv command that converts from the first,
    so a person sees which reading is theirs (``terminal``: a command-line argument, whose fix is the
    terminal's encoding)."""
    whole = line if whole is None else whole[:whole.rfind(b"\n", 0, 1 << 20) + 1 or 1 << 20]  # whole lines: a
    # sample cut inside a character failed every codec of two-byte characters
    utf8 = whole.decode("utf-8", "replace")
    bad, fine = utf8.count("\ufffd"), sum(ord(ch) > 127 for ch in utf8) - utf8.count("\ufffd")
    if not terminal and fine >= 3 * bad:
        return (f"the rest is UTF-8 ({count(fine, 'character')} beyond ASCII read well, {count(bad, 'byte')} not): "
                "mend or remove those bytes in an editor (converting the whole file from another encoding would "
                "garble the rest)")
    readings = []
    for name, codec in LEGACY_ENCODINGS:
        try:
            score = _plausible(whole.decode(codec))
            text = line.decode(codec).strip()
        except UnicodeDecodeError:
            continue
        if score > 0:
            readings.append((-score, len(readings), name, text))
    readings = sorted(readings)[:limit]
    if not readings:
        return "re-save the file as UTF-8 (iconv -f ENCODING -t UTF-8 FILE > NEW)"
    said = "; ".join(f"{name}: {said_short(text)}" for _, _, name, text in readings)
    if terminal:
        return f"{what} reads as {said}. Set the terminal to UTF-8 (its locale, e.g. LANG=C.UTF-8)"
    return (f"{what} reads as {said}. Re-save the file as UTF-8 from the encoding that reads right "
            f"(e.g. iconv -f {readings[0][2]} -t UTF-8 FILE > NEW)")


def said_short(text: str, width: int = 40) -> str:
    """``text`` quoted, cut at ``width`` characters."""
    return repr(text if len(text) <= width else text[:width - 1] + "…")


def utf16_order(head: bytes) -> str | None:
    """The byte order of UTF-16 text without a byte-order mark, or None: the zero byte of ASCII text in
    every other place, or else text that reads as UTF-16 (printable lines of fields; Russian, Thai or
    Japanese UTF-16 has few zero bytes, and was called "a binary file")."""
    if len(head) > 3 and (head[1::2].count(0) > len(head) // 3 or head[0::2].count(0) > len(head) // 3):
        return "utf-16be" if head[0::2].count(0) > head[1::2].count(0) else "utf-16le"  # ASCII's zero byte first: BE
    for order in ("utf-16le", "utf-16be"):
        try:
            text = head[:len(head) // 2 * 2 - 2].decode(order)  # a pair of surrogates may be cut at the end
        except UnicodeDecodeError:
            continue
        if "\n" in text and any(c in text for c in ",\t{") and \
                sum(c.isprintable() or c in "\r\n\t" for c in text) >= 0.95 * len(text):
            return order
    return None
