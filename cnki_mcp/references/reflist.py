"""Reference lists as people paste them: split into entries, and each entry read into its fields.

A line that is a whole reference is an entry, numbered (``[1]``, ``1.``, ``1、``, ``（1）``, ``(1)``) or not,
in any mix; a blank line ends an entry; a wrapped line is joined back only when it cannot stand alone; a
stray line is an entry of its own (read as having no title); a heading such as 参考文献 / References is not
an entry. Each entry is read in the first of these shapes that fits: GB/T 7714 (numeric or author-date,
with its ``[J]`` type code), APA (``(2021).`` after the names), Chicago author-date and MLA (a quoted
title), Vancouver (``2021;15(3):``), then loose lines (《题名》, or a bare title). Full-width punctuation
reads as half-width; the title keeps the characters the entry wrote. Pure functions; nothing here knows
CNKI.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cnki_mcp.core.hanzi import has_han
from cnki_mcp.core.refcheck_model import ParsedReference

# Full-width ASCII forms and the ideographic space read as their half-width forms, one character for
# one, so a position in the read text is the same position in the entry as written.
_HALF_WIDTH = {code: code - 0xFEE0 for code in range(0xFF01, 0xFF5F)} | {0x3000: 0x20, 0x3002: 0x2E, 0x3010: 0x5B, 0x3011: 0x5D}
_DASHES = dict.fromkeys(map(ord, "\u2010\u2011\u2012\u2013\u2014\u2015\u2212\uff5e~"), "-")

_NUMBER = re.compile(r"^\s*(?:\[\s*\d{1,3}\s*\]|\(\s*\d{1,3}\s*\)|\d{1,3}\s*[.、)]\s*(?=\S)(?!\d))\s*")
_BRACKET_NUMBER = re.compile(r"^\s*\[\s*\d{1,3}\s*\]")
_HEADING = re.compile(
    r"^\s*(?:(?:主要|中文|英文|外文)?(?:参考文献|参考资料|引用文献)|(?:中文|英文|外文)文献|references|bibliography|works cited)\s*[:：]?\s*$", re.I
)
_SAME_AS_ABOVE = re.compile(r"^\s*(?:同上|同前|ibid\.?|id\.?)(?:[\s,，.。:：;；]|$)", re.I)
_URL = re.compile(r"https?://\S+")
_DOI = re.compile(r"(?:doi\s*[:：]?\s*|https?://(?:dx\.)?doi\.org/)?(10\.\d{4,9}/[^\s,;，；]+)", re.I)
_TYPE_CODE = re.compile(r"\[\s*(J|D|M|C|N|R|S|P|A|Z|G|EB|DB|CP|DS|PP|CM|CA)\s*(?:/\s*(?:OL|CD|MT|DK)\s*)?\]", re.I)
_YEAR = r"(?:1[5-9]|20)\d{2}"
_YEAR_ANYWHERE = re.compile(rf"(?<!\d)({_YEAR})(?!\d)")
_ET_AL = re.compile(r"(?:,|，|、)?\s*(?:等|et\s+al\.?)\s*$", re.I)
_ROLE = re.compile(r"\s*(?:主编|编著|编|著|译|等著|等编)\s*$")
# vol(issue): pages in every punctuation the styles use: 2023, 44(3): 5-23 / 44(3), 5-23 / 2023(05): 5-23.
_SERIAL = re.compile(
    rf"^(?:(?P<year>{_YEAR})[a-z]?\s*[,;]?\s*)?(?:(?P<volume>[0-9A-Za-z]+)\s*)?"
    r"(?:\((?P<issue>[^()]{1,12})\)\s*)?(?:[:,]\s*(?P<pages>[A-Za-z]?\d[\w+\-, ]*))?\s*[.]?\s*$"
)
_PAGES = re.compile(r"(?:pp?\.\s*)?([A-Za-z]?\d+(?:\s*-\s*[A-Za-z]?\d+)?)")
_MIN_TITLE_HAN = 4
_MIN_TITLE_WORDS = 2
# No opening quote inside: each quote is tried up to the next one, so a search is linear in the entry.
_QUOTED = re.compile(r"[“\"](?P<title>[^“”\"]+)[”\"]")
_BOOK_TITLE = re.compile(r"《(?P<title>[^《》]+(?:《[^《》]*》[^《》]*)*)》")
# The date's tail (", May 3") is bounded and holds no parenthesis, so each "(" is tried in constant time:
# the match is linear in the entry ("(2020," repeated took quadratic time).
_APA = re.compile(rf"^(?P<authors>.*?)\s*\((?P<year>{_YEAR}|n\.\s*d\.)[a-z]?(?:,[^()]{{0,40}})?\)\s*\.?\s*(?P<rest>.+)$")
_CHICAGO = re.compile(rf"^(?P<authors>.+?)\.\s+(?P<year>{_YEAR})[a-z]?\.\s+(?P<rest>[“\"].+)$")
_VANCOUVER_TAIL = re.compile(
    rf"(?P<year>{_YEAR})(?:\s+[A-Z][a-z]{{2}}(?:\s+\d{{1,2}})?)?\s*;\s*(?P<volume>[0-9A-Za-z]*)"
    r"\s*(?:\((?P<issue>[^()]+)\))?\s*(?::\s*(?P<pages>[\w\-]+))?"
)
# Splitting: an entry cut here, before more follows (a comma, a colon, a hyphen, an opening mark, "and").
_OPEN_END = re.compile(r"(?:[,、:;\-&(\[《“/]|\b(?:and|of|the|for|in|on|to|with|a|an))\s*$", re.I)
# ... a line that starts as no reference does: a type code, a closing mark or a separator, "//".
_TAIL_START = re.compile(rf"^(?:{_TYPE_CODE.pattern}|//|[)\]》”’,.:;])", re.I)
# ... a line that starts with where and when (2021, 39(3): / 12-25 / pp. / vol. / no.).
_SERIAL_START = re.compile(r"^(?:\d{1,4}\s*(?:[,;:(\-]|$)|\(\s*\d|(?:pp?|vol|no)\.\s*\d)", re.I)
_LINK_START = re.compile(r"^(?:doi\b|https?://|www\.)", re.I)
_WIDE_PUNCTUATION = frozenset("，、：；。（）《》“”【】")
# Splitting never joins more than this into one entry: no reference is this long, and it keeps splitting
# linear in the input (each line is read once alone, and an entry at most once for each line it takes).
_MAX_ENTRY_CHARS = 2000
_MAX_ENTRY_LINES = 12
# How much of an entry's end the rules about its end look at.
_ENDING_CHARS = 16
# The most entries one check_references call takes.
# A line with no other structure is taken as a bare title only from this length on (见第三章 is not one).
_MIN_BARE_HAN = 6


@dataclass
class Entry:
    """One entry of the list: its text as given and what was read from it (``why`` when nothing was)."""

    text: str
    parsed: ParsedReference
    why: str = ""


# --- splitting -------------------------------------------------------------------------------------


@dataclass
class _Open:
    """The entry being read: its text and, once asked for, what it reads as."""

    text: str
    lines: int = 1
    _entry: Entry | None = None

    @property
    def entry(self) -> Entry:
        if self._entry is None:
            self._entry = read_entry(self.text)
        return self._entry


def listed_lines(text: str) -> list[str]:
    """The lines of a pasted list, line ends of every system read alike, headings dropped (blank lines kept:
    they separate entries)."""
    lines = [line.strip() for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n")]
    return [line for line in lines if not _HEADING.match(line)]


def line_count(text: str) -> int:
    """The lines of a pasted list that entries are read from (neither blank nor a heading)."""
    return sum(1 for line in listed_lines(text) if line)


def split_entries(text: str, limit: int | None = None) -> list[str]:
    """The entries of a pasted list, in order.

    A line that is a whole reference is an entry of its own, numbered (``[1]``, ``1.``, ``1、``, ``（1）``,
    ``(1)``) or not, in any mix; a blank line ends an entry; a line continues the entry before it only when
    it cannot stand alone and something says it belongs there (see ``_continues``). Anything else, a stray
    line in the middle included, is an entry of its own, never merged into its neighbours. With ``limit``,
    reading stops at the entry after the limit (a list too long to take is not read to its end).
    """
    entries: list[_Open] = []
    after_blank = True
    for line in listed_lines(text):
        if not line:
            after_blank = True
            continue
        item = _Open(line)
        if not after_blank and entries and _continues(entries[-1], item):
            entries[-1] = _Open(_joined(entries[-1].text, line), entries[-1].lines + 1)
        elif limit is not None and len(entries) > limit:
            break
        else:
            entries.append(item)
        after_blank = False
    return [entry.text for entry in entries]


def _whole(entry: Entry) -> bool:
    """Whether an entry reads as a complete reference: a title, a year, names and where it appeared (a type
    code alone is not enough: "陈明, 2020. 题名[J]." still waits for its journal)."""
    parsed = entry.parsed
    return not entry.why and bool(parsed.year and parsed.authors and parsed.source)


def _continues(head: _Open, line: _Open) -> bool:
    """Whether ``line`` is the wrapped rest of ``head``. Never when the line is a whole reference or starts
    with a bracketed number; otherwise when ``head`` is cut mid-sentence, when the line starts as no
    reference does (a type code, a closing mark, a lower-case word, where and when: ``2021, 39(3):``, a DOI),
    or when it gives what ``head`` lacks (a year, a source, a type code) without names of its own. Each
    text is read at most once, and only when a rule needs it."""
    if (
        head.lines >= _MAX_ENTRY_LINES
        or len(head.text) + len(line.text) > _MAX_ENTRY_CHARS
        or _BRACKET_NUMBER.match(line.text.translate(_HALF_WIDTH))
    ):
        return False
    read = line.text.translate(_HALF_WIDTH).translate(_DASHES)
    ending = head.text[-_ENDING_CHARS:].translate(_HALF_WIDTH).translate(_DASHES)
    if _whole(line.entry):
        # "[1] 王利明, 陈晓红," or "van Dijk," is a list of names cut short: even a whole line is its rest.
        return bool(re.search(r"[^\W\d_][,、;&]\s*$", ending)) and not _whole(head.entry)
    if _OPEN_END.search(ending) or _TAIL_START.match(read):
        return True
    if _numbered(line.text) or re.fullmatch(r"\d{1,4}", read):
        # A number alone is a page number left by a copy, not a wrap.
        return False
    if _LINK_START.match(read):
        return not (head.entry.parsed.doi or _URL.search(head.text))
    if re.match(r"[a-z]", read) or _SERIAL_START.match(read):
        return not (ending.endswith((".", "?", "!")) and _whole(head.entry))
    if not _whole(head.entry):
        if line.entry.parsed.authors:
            return False
        joined = read_entry(_joined(head.text, line.text)).parsed
        return any(getattr(joined, name) and not getattr(head.entry.parsed, name) for name in ("year", "source", "type_code"))
    # A whole entry that stops on a letter was cut inside a word group ("Law / Review, 39(3), 12-25.").
    return bool(re.search(r"[A-Za-z]$", ending))


def _numbered(line: str) -> int:
    """The length of the entry number (``[1]``, ``1.``, ``1、``, ``（1）``, ``［１］``, ``【1】``) at the start of
    ``line``, or 0."""
    found = _NUMBER.match(line.translate(_HALF_WIDTH))
    return found.end() if found else 0


def _joined(head: str, tail: str) -> str:
    """A wrapped line joined back: no space between Han characters, beside full-width punctuation or a type
    code after Han, or after a hyphen."""
    last, first = head[-1:], tail[:1]
    if head.endswith("-") or (
        (has_han(last) or last in _WIDE_PUNCTUATION) and (has_han(first) or first in _WIDE_PUNCTUATION or _TYPE_CODE.match(tail))
    ):
        return head + tail
    return f"{head} {tail}"


# --- reading one entry -----------------------------------------------------------------------------

ENTRY_CHARS_MAX = 2000  # the longest real references (a long URL included) are well under 1,000


def read_entry(text: str) -> Entry:
    """``text`` read into its fields; ``why`` says what is missing when no title could be read."""
    if len(text) > ENTRY_CHARS_MAX:  # not a reference: never handed to the patterns (nor to the event loop's time)
        return Entry(text, ParsedReference(), f"这一条有 {len(text)} 个字符，超过一条参考文献的上限 {ENTRY_CHARS_MAX} 个字符，"
                     "没有解析；请检查是否把几条或整段文字粘成了一条，分开后重试。")
    original = text[_numbered(text) :].strip()
    if not original:
        return Entry(text, ParsedReference(), "这一行只有编号，没有内容。")
    if _SAME_AS_ABOVE.match(original):
        return Entry(text, ParsedReference(), "这一条写的是“同上/Ibid.”，没有自己的题名，请写出完整的文献信息。")
    doi = ""
    found = _DOI.search(original)
    if found:
        doi = found.group(1).rstrip(".)]）】")
    # Blanking (not deleting) the DOI and links keeps positions aligned with the entry as written.
    blanked = _blank(_blank(original, _DOI), _URL)
    read = blanked.translate(_HALF_WIDTH).translate(_DASHES)
    parsed = None
    for reader in (_gbt, _apa, _chicago, _mla, _vancouver, _loose):
        parsed = reader(original, read)
        if parsed is not None:
            break
    if parsed is None or not _usable_title(parsed.title):
        why = "没有识别出题名" + ("（只有网址）" if _URL.search(original) and not read.strip(" .") else "")
        return Entry(text, ParsedReference(doi=doi), f"{why}；请按“作者. 题名[J]. 刊名, 年, 卷(期): 页码.”的格式写出这一条。")
    parsed.doi = parsed.doi or doi
    return Entry(text, parsed)


def _blank(text: str, pattern: re.Pattern[str]) -> str:
    return pattern.sub(lambda m: " " * len(m.group(0)), text)


def _usable_title(title: str) -> bool:
    if has_han(title):
        return sum(1 for char in title if has_han(char)) >= _MIN_TITLE_HAN
    return len(re.findall(r"[A-Za-z]{2,}", title)) >= _MIN_TITLE_WORDS


def _slice(original: str, read: str, part: str, start: int = 0) -> str:
    """``part`` (found in the read text) as the entry wrote it."""
    at = read.find(part, start)
    return original[at : at + len(part)].strip() if at >= 0 else part.strip()


def _clean_title(title: str) -> str:
    return title.strip().strip("《》“”\"'").strip(" .,;:，。；：").strip()


# GB/T 7714 ----------------------------------------------------------------------------------------


def _gbt(original: str, read: str) -> ParsedReference | None:
    code = _TYPE_CODE.search(read)
    if not code:
        return None
    before, after = read[: code.start()], read[code.end() :]
    parsed = ParsedReference(style="gbt7714", type_code=code.group(1).upper())
    dated = re.match(rf"^(?P<authors>.+?)[,]\s*(?P<year>{_YEAR})[a-z]?\s*\.\s*(?P<title>.+)$", before)
    if dated and not has_han(dated.group("year")):
        parsed.style = "gbt7714_author_date"
        parsed.year = int(dated.group("year"))
        names, title = dated.group("authors"), dated.group("title")
    else:
        # The names end at the first period; "et al." ends them with its own.
        cut = re.search(r"et\s+al\.|\.", before, re.I)
        names, title = (before[: cut.end()], before[cut.end() :]) if cut else ("", before)
    parsed.authors, parsed.et_al = _names(names, inverted=False)
    parsed.title = _clean_title(_slice(original, read, title.strip()))
    _gbt_source(parsed, after)
    return parsed


def _gbt_source(parsed: ParsedReference, after: str) -> None:
    text = after.strip()
    if text.startswith("//"):
        # A part of a book or proceedings: //Proceedings. Place: Publisher, Year: pages.
        head, _, rest = text[2:].partition(". ")
        parsed.source = _clean_title(_TYPE_CODE.sub("", head))
        _year_and_pages(parsed, rest)
        return
    text = text.lstrip(". ").rstrip(" .")
    if parsed.type_code == "J":
        split = re.match(r"^(?P<source>.+?)\s*(?:,\s*(?=[\d(\[])|(?=\([^()]{1,12}\)\s*(?::|$)))(?P<rest>.*)$", text)
        if split:
            parsed.source = split.group("source").strip()
            _serial(parsed, split.group("rest"))
        else:
            parsed.source = text
        return
    if parsed.type_code == "N":
        parsed.source, _, rest = (part.strip() for part in text.partition(","))
        dated = _YEAR_ANYWHERE.search(rest)
        if dated and not parsed.year:
            parsed.year = int(dated.group(1))
        edition = re.search(r"\(([^()]+)\)", rest)
        parsed.pages = edition.group(1).strip() if edition else ""
        return
    # Books, theses, reports: Place: Publisher, Year: pages.
    head, _, rest = text.partition(",")
    parsed.source = head.rpartition(":")[2].strip() if ":" in head else head.strip()
    _year_and_pages(parsed, rest)


def _year_and_pages(parsed: ParsedReference, text: str) -> None:
    """``Place: Publisher, Year: pages``: the pages follow the year (a place may stand before it, or only
    a colon when the publisher is left out: ``西安: 2022: 268``)."""
    dated = _YEAR_ANYWHERE.search(text)
    if dated and not parsed.year:
        parsed.year = int(dated.group(1))
    pages = re.search(r":\s*(" + _PAGES.pattern + r")", text[dated.end() :] if dated else text)
    if pages:
        parsed.pages = _page_text(pages.group(1))


def _serial(parsed: ParsedReference, text: str) -> None:
    found = _SERIAL.match(text.strip())
    if not found:
        _year_and_pages(parsed, text)
        return
    if found.group("year") and not parsed.year:
        parsed.year = int(found.group("year"))
    parsed.volume = (found.group("volume") or "").strip()
    parsed.issue = (found.group("issue") or "").strip()
    parsed.pages = _page_text(found.group("pages") or "")


def _page_text(text: str) -> str:
    return re.sub(r"\s*-\s*", "-", text.translate(_DASHES).strip().rstrip(".,"))


# APA, Chicago, MLA, Vancouver ---------------------------------------------------------------------


def _apa(original: str, read: str) -> ParsedReference | None:
    found = _APA.match(read)
    if not found or _TYPE_CODE.search(read):
        return None
    parsed = ParsedReference(style="apa")
    if found.group("year")[0].isdigit():
        parsed.year = int(found.group("year"))
    parsed.authors, parsed.et_al = _names(found.group("authors"), inverted=True)
    rest = found.group("rest")
    title, tail = _sentence(rest)
    parsed.title = _clean_title(re.sub(r"\s*\[[^\]]*\]\s*$", "", _slice(original, read, title, found.start("rest"))))
    located = re.match(r"^(?P<source>.+?)\s*,\s*(?P<serial>(?:\d|\().*)$", tail.strip())
    if located:
        parsed.source = located.group("source").strip()
        serial = re.match(r"^(?P<volume>[0-9A-Za-z]*)\s*(?:\((?P<issue>[^()]+)\))?\s*(?:,\s*(?P<pages>[\w\-+ ]+))?", located.group("serial"))
        if serial:
            parsed.volume = (serial.group("volume") or "").strip()
            parsed.issue = (serial.group("issue") or "").strip()
            parsed.pages = _page_text(serial.group("pages") or "")
    else:
        parsed.source = tail.strip().rstrip(".")
    return parsed


def _sentence(text: str) -> tuple[str, str]:
    """The first sentence of ``text`` (a title ends at '. ', '? ' or '! ') and what follows."""
    cut = re.search(r"(?<=[.?!])\s+(?=\S)", text)
    if not cut:
        return text, ""
    return text[: cut.start()], text[cut.end() :]


def _chicago(original: str, read: str) -> ParsedReference | None:
    found = _CHICAGO.match(read)
    if not found:
        return None
    quoted = _QUOTED.match(found.group("rest"))
    if not quoted:
        return None
    parsed = ParsedReference(style="chicago", year=int(found.group("year")))
    parsed.authors, parsed.et_al = _names(found.group("authors"), inverted=True, first_only=True)
    parsed.title = _clean_title(_slice(original, read, quoted.group("title"), found.start("rest")))
    tail = found.group("rest")[quoted.end() :].strip()
    located = re.match(r"^(?P<source>.+?)\s+(?P<volume>\d+)\s*(?:\((?P<issue>[^()]+)\))?\s*(?::\s*(?P<pages>[\w\-]+))?", tail)
    if located:
        parsed.source = located.group("source").strip().rstrip(",")
        parsed.volume = located.group("volume")
        parsed.issue = (located.group("issue") or "").strip()
        parsed.pages = _page_text(located.group("pages") or "")
    else:
        parsed.source = tail.rstrip(".").strip()
    return parsed


def _mla(original: str, read: str) -> ParsedReference | None:
    quoted = _QUOTED.search(read)
    if not quoted:
        return None
    parsed = ParsedReference(style="mla")
    parsed.authors, parsed.et_al = _names(read[: quoted.start()].strip().rstrip("."), inverted=True, first_only=True)
    parsed.title = _clean_title(_slice(original, read, quoted.group("title"), quoted.start()))
    parts = [part.strip() for part in read[quoted.end() :].strip().rstrip(".").split(",")]
    if parts:
        parsed.source = parts[0]
    for part in parts[1:]:
        if m := re.match(r"^vol\.\s*(\S+)", part, re.I):
            parsed.volume = m.group(1)
        elif m := re.match(r"^nos?\.\s*(\S+)", part, re.I):
            parsed.issue = m.group(1)
        elif m := re.match(r"^pp?\.\s*(.+)$", part, re.I):
            parsed.pages = _page_text(m.group(1))
        elif (m := _YEAR_ANYWHERE.search(part)) and not parsed.year:
            parsed.year = int(m.group(1))
    return parsed


def _vancouver(original: str, read: str) -> ParsedReference | None:
    tail = _VANCOUVER_TAIL.search(read)
    if not tail:
        return None
    segments = [s.strip() for s in re.split(r"(?<=[.?!])\s+", read[: tail.start()].strip()) if s.strip()]
    if len(segments) < 2:
        return None
    parsed = ParsedReference(style="vancouver", year=int(tail.group("year")))
    names = segments[0].rstrip(".")
    parsed.authors, parsed.et_al = _names(names, inverted=False)
    title = " ".join(segments[1:-1]) if len(segments) > 2 else segments[1]
    parsed.title = _clean_title(re.sub(r"\s*\[[^\]]*\]\s*$", "", _slice(original, read, title)))
    parsed.source = segments[-1].rstrip(".").strip() if len(segments) > 2 else ""
    parsed.volume = (tail.group("volume") or "").strip()
    parsed.issue = (tail.group("issue") or "").strip()
    parsed.pages = _page_text(tail.group("pages") or "")
    return parsed


# Loose lines --------------------------------------------------------------------------------------


def _loose(original: str, read: str) -> ParsedReference | None:
    parsed = ParsedReference(style="loose")
    titled = _BOOK_TITLE.search(original)
    if titled:
        parsed.title = titled.group("title").strip()
        names = read[: titled.start()].strip().rstrip(":：,，.")
        parsed.authors, parsed.et_al = _names(names, inverted=False)
        rest = read[titled.end() :]
        source = _BOOK_TITLE.search(original, titled.end())
        if source:
            parsed.source = source.group("title").strip()
    else:
        text = read.strip().rstrip(".")
        pieces = [p for p in re.split(r"\s*[,;]\s*|\s{2,}|\s+(?=\d{4}\b)", text) if p.strip()]
        if not pieces:
            return None
        title = max(pieces, key=len)
        if has_han(title) and sum(1 for char in title if has_han(char)) < _MIN_BARE_HAN:
            return None
        parsed.title = _clean_title(_slice(original, read, title))
        names = text[: text.find(title)].strip(" ,.")
        parsed.authors, parsed.et_al = _names(names, inverted=False)
        rest = text[text.find(title) + len(title) :]
    dated = re.search(rf"({_YEAR})\s*年?", rest)
    if dated:
        parsed.year = int(dated.group(1))
    issue = re.search(r"第\s*(\d+)\s*期", rest)
    if issue:
        parsed.issue = issue.group(1)
    return parsed


# Names --------------------------------------------------------------------------------------------


def _names(text: str, *, inverted: bool, first_only: bool = False) -> tuple[list[str], bool]:
    """Personal names of an author list and whether it ends with 等 / et al.

    ``inverted``: names written ``Family, Given`` (APA all of them, MLA and Chicago only the first).
    """
    text = _ROLE.sub("", text.strip().rstrip(".,"))
    et_al = bool(_ET_AL.search(text))
    text = _ET_AL.sub("", text).strip().rstrip(",")
    if not text:
        return [], et_al
    text = re.sub(r",?\s*(?:&|\band\b|和|与)\s*", ", ", text)
    parts = [p.strip() for p in re.split(r"\s*[,;、]\s*", text) if p.strip()]
    if inverted and not has_han(text):
        names: list[str] = []
        i = 0
        while i < len(parts):
            nxt = parts[i + 1] if i + 1 < len(parts) else ""
            takes_given = bool(nxt) and (not first_only or not names) and _looks_given(nxt)
            names.append(f"{parts[i]}, {nxt}" if takes_given else parts[i])
            i += 2 if takes_given else 1
        return names, et_al
    if len(parts) == 1 and has_han(text) and " " in text.strip():
        # 王利明 陈晓红: Han names separated by spaces only.
        parts = text.split()
    return parts, et_al


def _looks_given(part: str) -> bool:
    """The given-name half of an inverted name: initials (J. A., J.-P.) or one or two capitalised words."""
    if re.fullmatch(r"(?:[A-Z]\.?(?:-[A-Z]\.?)?\s*)+", part):
        return True
    words = part.split()
    capitals = [re.sub(r"[^A-Za-z]", "", w) for w in words]
    return 1 <= len(words) <= 2 and all(w[:1].isupper() for w in words) and not any(len(c) > 1 and c.isupper() for c in capitals)
