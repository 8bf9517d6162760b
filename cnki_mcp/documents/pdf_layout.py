"""A PDF's lines (pdf_text.py) as a reader text: running heads and feet dropped, lines joined into
paragraphs, headings found, sections. Pure.

- Furniture: CNKI's "(C)1994-… China Academic Journal Electronic Publishing House" line anywhere; at the
  top or bottom of a page, page numbers (``· 3 ·``, ``- 3 -``, ``iv``, ``第 3 页``) and lines repeated at
  the top or bottom of two pages or more, digits aside (journal name and issue, a thesis's university
  line, the chapter's running head) — unless set larger than the body text (a heading).
- Joining: a line ending in a hyphen PDFium marked as soft (U+FFFE, or a control character) or in a
  hyphen between lower-case letters joins the next without it; lines meeting at a Han character join
  without a space; others with one. A paragraph ends at a wider gap, or after a short line ending a
  sentence, or at a heading.
- Page and column breaks: a paragraph runs on into the next page or column unless its sentence ended
  on a short line, or the next line is indented (from its own column's left edge), a heading, a list
  item or a figure/table caption. Lines between its two parts in another size (footnotes, a running head
  or foot seen once) or a caption with its table are moved after the paragraph, which stays one; each
  page still starts where its own first line went.
- Headings: with an outline, its titles verbatim, found in the text near their page (one synthetic
  heading line at the top of the page when the text lacks it); without one, the numbered headings
  (第一章, 第一节, 一、, （一）, 1., 1.1, 1.1.1) and the usual unnumbered ones (摘要, 参考文献 …), each
  once; table-of-contents lines (dot leaders, a page number at the end) are never headings.
"""

from __future__ import annotations

import re
import statistics
import unicodedata
from collections.abc import Container

import msgspec

from cnki_mcp.core.model import Section
from cnki_mcp.documents.pdf_text import Line, OutlineEntry

Block = tuple[int, str]

_CNKI_LINE = re.compile(
    r"(?:\(C\)|©|\(c\))\s*1994\s*[-–—]\s*\d{4}\s*China\s+Academic\s+Journal\s+Electronic\s+Publishing\s+House"
    r"|^(?:All\s+rights\s+reserved\.?\s*)?https?://www\.cnki\.net/?$",
    re.I,
)
_PAGE_NUMBER = re.compile(
    r"^[\s·•\-–—－_]*(?:\d{1,4}|[ivxlcdm]{1,7}|[IVXLCDM]{1,7})[\s·•\-–—－_]*$"
    r"|^第\s*\d+\s*页(?:\s*[,，/]?\s*共\s*\d+\s*页)?$|^\d+\s*/\s*\d+$|^Page\s+\d+(?:\s+of\s+\d+)?$",
    re.I,
)
_EDGE_LINES = 2
_HEAD_CHARS = 60  # running heads and feet are short lines
_SOFT_END = re.compile("[\ufffe\u00ad\u0000-\u0008\u000b\u000c\u000e-\u001f]$")
_CONTROL = re.compile("[\ufffe\u00ad\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]")
_HYPHEN_END = re.compile(r"[a-z]-$")
_SENTENCE_END = re.compile(r"[。！？!?.:：;；”」』)）]$")
_ITEM = re.compile(r"^(?:\[\d+\]|［\d+］|[(（]\d+[)）]|[①-⑳])")  # a reference or list item starts a paragraph
_CAPTION = re.compile(r"^(?:图|表|Fig\.?|Figure|Table)\s*\d+(?:[-－.．]\d+)*(?:[\s.．:：]|$)", re.I)
_FEW_LINES = 3  # a column with fewer body lines has no left edge of its own
_HELD_LINES = 30  # at most this many lines between a paragraph's parts are moved after it
_LEADERS = re.compile(r"(?:\.\s*){4,}|(?:…\s*){2,}|(?:·\s*){4,}|(?:-\s*){6,}|_{4,}")
_TOC_PAGE = re.compile(r"\S\s+(?:\d{1,4}|[ivxlcdm]{1,6})$", re.I)
_HAN_NUM = "一二三四五六七八九十百零〇两"
# Heading kinds, outermost first: (kind, pattern whose group 1 is the number).
_KINDS = (
    ("chapter", re.compile(rf"^第\s*([{_HAN_NUM}\d]+)\s*[章篇部]\s*\S")),
    ("section", re.compile(rf"^第\s*([{_HAN_NUM}\d]+)\s*节\s*\S")),
    ("han", re.compile(rf"^([{_HAN_NUM}]+)\s*[、．.]\s*\S")),
    ("paren", re.compile(rf"^[（(]\s*([{_HAN_NUM}]+)\s*[)）]\s*\S")),
    ("d3", re.compile(r"^(\d{1,2}\.\d{1,2}\.\d{1,2})\.?\s*[^\d\s.]")),
    ("d2", re.compile(r"^(\d{1,2}\.\d{1,2})\.?\s*[^\d\s.]")),
    ("d1", re.compile(r"^(\d{1,2})(?:\s*[.．、]\s*|\s+)(?=[A-Z\u4e00-\u9fff])\S")),
)
_ORDER = ("chapter", "section", "han", "paren", "d1", "d2", "d3")
_SEQUENTIAL = frozenset({"chapter", "han", "d1"})
_NAMED = re.compile(
    r"^(?:摘\s*要|abstract|关\s*键\s*词|引\s*言|前\s*言|绪\s*论|导\s*论|结\s*论|结\s*语|结\s*束\s*语|参\s*考\s*文\s*献|"
    r"致\s*谢|后\s*记|附\s*录|references|bibliography|introduction|conclusions?|acknowledge?ments?)$",
    re.I,
)
_HEADING_CHARS = 60
_BIG = 1.15  # a line this much taller than the body text is a heading, never furniture


class Layout(msgspec.Struct):
    blocks: list[Block]
    titles: list[str]  # each heading block's section title, in order
    page_starts: list[int]  # offset in the text where each page's first block begins (-1: none)
    missing: list[str]  # outline titles the text lacks (a heading line was put at their page's top)


def key(text: str) -> str:
    return re.sub(r"\s+", "", _CONTROL.sub("", text)).casefold()


def _body_size(lines: list[Line]) -> float:
    """The body text's font size: the median of the lines'."""
    sizes = [line.size for line in lines if line.size > 0]
    return statistics.median(sizes) if sizes else 0.0


def _typical_gap(lines: list[Line]) -> float:
    """The usual space between two lines of a paragraph: the median gap between consecutive lines."""
    gaps = [
        before.bottom - line.top
        for before, line in zip(lines, lines[1:], strict=False)
        if before.page == line.page and before.column == line.column and before.bottom > line.top
    ]
    return statistics.median(gaps) if gaps else 0.0


def _edges(lines: list[Line]) -> set[int]:
    """Indexes of the lines at the top and bottom of their page."""
    by_page: dict[int, list[int]] = {}
    for index, line in enumerate(lines):
        by_page.setdefault(line.page, []).append(index)
    edge: set[int] = set()
    for indexes in by_page.values():
        ordered = sorted(indexes, key=lambda i: -lines[i].top)
        edge.update(ordered[:_EDGE_LINES] + ordered[-_EDGE_LINES:])
    return edge


def _furniture_key(text: str) -> str:
    return re.sub(r"\d+", "#", key(text))


def drop_furniture(lines: list[Line]) -> list[Line]:
    """The lines without running heads and feet, page numbers and CNKI's copyright line."""
    body = _body_size(lines)
    edges = _edges(lines)
    pages_of: dict[str, set[int]] = {}
    for index in edges:
        pages_of.setdefault(_furniture_key(lines[index].text), set()).add(lines[index].page)
    kept = []
    for index, line in enumerate(lines):
        if _CNKI_LINE.search(line.text):
            continue
        if index in edges:
            big = body and line.size >= _BIG * body
            if _PAGE_NUMBER.match(line.text.strip()):
                continue
            short = len(line.text) <= _HEAD_CHARS
            if short and len(pages_of.get(_furniture_key(line.text), ())) >= 2 and not big:
                continue
        kept.append(line)
    return kept


def _is_toc(text: str) -> bool:
    """A table-of-contents line: dot leaders, or a page number after the title."""
    return bool(_LEADERS.search(text) or _TOC_PAGE.search(text))


def _han_number(text: str) -> int:
    if text.isdigit():
        return int(text)
    digits = {c: i for i, c in enumerate("零一二三四五六七八九")} | {"〇": 0, "两": 2}
    total, current = 0, 0
    for char in text:
        if char == "十":
            total += (current or 1) * 10
            current = 0
        elif char == "百":
            total += (current or 1) * 100
            current = 0
        else:
            current = digits.get(char, 0)
    return total + current


def _heading_kind(text: str) -> tuple[str, str] | None:
    """(kind, number) of a numbered heading line, ("named", "") of an unnumbered one, else None."""
    stripped = text.strip()
    if len(stripped) > _HEADING_CHARS or _is_toc(stripped) or re.search(r"[。，；,;]$", stripped):
        return None
    if _NAMED.match(stripped):
        return "named", ""
    for kind, pattern in _KINDS:
        found = pattern.match(stripped)
        if found:
            return kind, found.group(1)
    return None


def _right_edges(lines: list[Line]) -> dict[tuple[int, int], float]:
    """The right edge of the text of each page's columns."""
    rights: dict[tuple[int, int], float] = {}
    for line in lines:
        rights[(line.page, line.column)] = max(rights.get((line.page, line.column), 0.0), line.x1)
    return rights


def _left_edges(lines: list[Line], body: float) -> dict[tuple[int, int], float]:
    """The left edge of the body text of each page's columns (odd and even pages may differ); a
    column of fewer than ``_FEW_LINES`` lines (an article's last page) takes the whole file's."""
    starts: dict[tuple[int, int], list[float]] = {}
    for line in lines:
        if not body or not _resized(line.size, body):
            starts.setdefault((line.page, line.column), []).append(line.x0)
    widest: dict[int, float] = {}
    for (_, column), xs in starts.items():
        widest[column] = min(widest.get(column, xs[0]), *xs)
    return {where: min(xs) if len(xs) >= _FEW_LINES else widest[where[1]] for where, xs in starts.items()}


def _resized(size: float, other: float) -> bool:
    return abs(size - other) > 0.15 * max(size, other)


class _Frame(msgspec.Struct):
    """What line breaks are judged against: the body text's size, the usual gap, the columns' edges."""

    body: float
    typical: float
    rights: dict[tuple[int, int], float]
    lefts: dict[tuple[int, int], float]

    @property
    def unit(self) -> float:
        return max(self.body, 1.0)

    def short(self, line: Line) -> bool:
        """The line stops well before its column's right edge."""
        return line.x1 < self.rights[(line.page, line.column)] - 2 * self.unit

    def indented(self, line: Line) -> bool:
        """The line starts right of its column's left edge (a first line's indent)."""
        return line.x0 > self.lefts.get((line.page, line.column), line.x0) + 1.5 * self.unit


def numbered_headings(lines: list[Line], rights: dict[tuple[int, int], float], body: float) -> dict[int, tuple[int, str]]:
    """Line index → (level, title) for the headings the text shows, each title once (the last
    occurrence: a table of contents comes first); top-level numbers must count up from 1. A line
    that reaches the column's right edge goes on in the next line: a paragraph, not a heading."""
    found: list[tuple[int, str, str]] = []
    last: dict[str, int] = {}
    for index, line in enumerate(lines):
        kind = _heading_kind(line.text)
        if kind is None or line.x1 >= rights[(line.page, line.column)] - 2 * body:
            continue
        name, number = kind
        if name in _SEQUENTIAL:
            value = _han_number(number) if name != "d1" else int(number)
            if value not in (1, last.get(name, 0) + 1):
                continue
            last[name] = value
        found.append((index, name, line.text.strip()))
    kinds = [k for k in _ORDER if any(name == k for _, name, _ in found)]
    chosen: dict[str, tuple[int, int, str]] = {}
    for index, name, title in found:
        level = 1 if name == "named" else kinds.index(name) + 1
        chosen[key(title)] = (index, level, title)
    return {index: (level, title) for index, level, title in chosen.values()}


def _numbering_only(text: str) -> bool:
    return bool(re.fullmatch(rf"[\d.．、()（）{_HAN_NUM}第章节]+", text))


def _matches(lines: list[Line], at: int, title: str) -> int:
    """How many lines from ``at`` (1–3) spell ``title`` (numbering before it allowed); 0 when they do not."""
    wanted = key(title)
    seen = ""
    for count in range(1, 4):
        if at + count - 1 >= len(lines):
            return 0
        seen += key(lines[at + count - 1].text)
        if seen == wanted or (seen.endswith(wanted) and _numbering_only(seen[: -len(wanted)])):
            return count
        if not (wanted.startswith(seen) or wanted in seen or _numbering_only(seen)):
            return 0
    return 0


def outline_headings(
    lines: list[Line], outline: list[OutlineEntry]
) -> tuple[dict[int, tuple[int, str, int]], list[tuple[int, int, str]]]:
    """The outline's titles placed in the text: line index → (level, title, lines it spans), and
    the entries not found as (page, level, title), to be put at the top of their page."""
    placed: dict[int, tuple[int, str, int]] = {}
    missing: list[tuple[int, int, str]] = []
    cursor = 0
    for entry in outline:
        near = range(len(lines)) if entry.page < 0 else [
            i for i in range(cursor, len(lines)) if abs(lines[i].page - entry.page) <= 1
        ]
        hit = next(((i, n) for i in near if i >= cursor and i not in placed and (n := _matches(lines, i, entry.title))), None)
        if hit is None:
            missing.append((entry.page, entry.level, entry.title))
            continue
        placed[hit[0]] = (entry.level, entry.title, hit[1])
        cursor = hit[0] + hit[1]
    return placed, missing


def _joins(before: str, after: str) -> str:
    """``before`` continued by the next line ``after``."""
    if _SOFT_END.search(before):
        return _SOFT_END.sub("", before) + after
    if _HYPHEN_END.search(before) and after[:1].islower():
        return before[:-1] + after
    if _wide(before[-1:]) or _wide(after[:1]):
        return before + after
    return f"{before} {after}"


def _wide(char: str) -> bool:
    return bool(char) and unicodedata.east_asian_width(char) in ("W", "F")


def _breaks(previous: Line, line: Line, frame: _Frame) -> bool:
    """Whether a paragraph ends between two consecutive lines: a table-of-contents line stands
    alone, a change of font size or a wider gap ends a paragraph, and so does a sentence ending in a
    short line, or before an indented line or an item. Across a page or column break the gap says
    nothing: an unfinished sentence runs on; an ended one goes on unless the line ending it is short or
    indented itself, or the next is indented from its own column's edge, an item or a caption."""
    if _LEADERS.search(previous.text) or _LEADERS.search(line.text):
        return True
    if frame.body and _resized(previous.size, line.size):
        return True
    ended = bool(_SENTENCE_END.search(previous.text))
    if previous.page != line.page or previous.column != line.column:
        if _CAPTION.match(line.text):
            return True
        # an indented line ending its sentence is a one-line paragraph, whatever its width
        alone = frame.short(previous) or frame.indented(previous)
        return ended and (alone or frame.indented(line) or bool(_ITEM.match(line.text)))
    gap = previous.bottom - line.top
    if frame.body and gap > frame.typical + 0.5 * frame.body:
        return True
    indented = line.x0 > previous.x0 + 1.5 * frame.unit
    return ended and (frame.short(previous) or indented or bool(_ITEM.match(line.text)))


def _interruption(
    lines: list[Line], start: int, previous: Line, frame: _Frame, stops: Container[int], pages: Container[int]
) -> int:
    """Where a paragraph, cut mid-sentence at the end of ``previous``'s page or column, goes on past
    the lines from ``start`` that interrupt it: lines in another size (footnotes, a running head or
    foot not taken for furniture, a table's cells) and captions with their wrapped lines, on its page
    or the next. ``start`` when nothing interrupts it or it does not go on after them (a heading, a
    line in ``stops``, or a page in ``pages`` whose missing outline heading goes first)."""
    if _SENTENCE_END.search(previous.text) or frame.short(previous):
        return start
    index, caption = start, False
    while index < len(lines) and index - start <= _HELD_LINES:
        line = lines[index]
        if index in stops or line.page not in (previous.page, previous.page + 1):
            return start
        if _CAPTION.match(line.text):
            caption = True
        elif not _resized(line.size, previous.size) and not (caption and not _breaks(lines[index - 1], line, frame)):
            break  # body text again
        index += 1
    else:
        return start
    if index == start or index >= len(lines):
        return start
    after = lines[index]
    crossed = (after.page, after.column) != (previous.page, previous.column)
    runs_on = crossed and after.page not in pages and not frame.indented(after) and not _breaks(previous, after, frame)
    return index if runs_on else start


def _held(lines: list[Line], frame: _Frame) -> list[tuple[int, str]]:
    """Interrupting lines as blocks of their own: (page, text)."""
    held: list[tuple[int, str]] = []
    for index, line in enumerate(lines):
        if index == 0 or _breaks(lines[index - 1], line, frame):
            held.append((line.page, line.text))
        else:
            held[-1] = (held[-1][0], _joins(held[-1][1], line.text))
    return held


def layout(lines: list[Line], outline: list[OutlineEntry], pages: int) -> Layout:
    """Blocks (headings and paragraphs), section titles and where each page starts."""
    lines = drop_furniture(lines)
    body, typical = _body_size(lines), _typical_gap(lines)
    rights = _right_edges(lines)
    frame = _Frame(body=body, typical=typical, rights=rights, lefts=_left_edges(lines, body))
    missing_titles: list[str] = []
    if outline:
        placed, missing = outline_headings(lines, outline)
        missing_titles = [title for _, _, title in missing]
        extra: dict[int, list[tuple[int, str]]] = {}
        for page, level, title in missing:
            extra.setdefault(page, []).append((level, title))
    else:
        placed = {i: (level, title, 1) for i, (level, title) in numbered_headings(lines, rights, body).items()}
        extra = {}
    built = _Builder()
    index = 0
    previous: Line | None = None
    while index < len(lines):
        line = lines[index]
        for level, title in extra.pop(line.page, []) if line.page not in built.marks else []:
            built.heading(line.page, level, title, title)
            previous = None
        heading = placed.get(index)
        if heading is not None:
            level, title, span = heading
            shown = " ".join(_CONTROL.sub("", lines[i].text).strip() for i in range(index, index + span))
            built.heading(line.page, level, shown, title)
            previous, index = None, index + span
            continue
        if previous is not None and built.paragraph:
            end = _interruption(lines, index, previous, frame, placed, extra)
            if end > index:  # the paragraph goes on after them: they follow it
                built.held.extend(_held(lines[index:end], frame))
                index = end
                continue
        if previous is not None and _breaks(previous, line, frame):
            built.flush()
        built.line(line)
        previous, index = line, index + 1
    built.flush()
    for page, entries in sorted(extra.items()):  # outline entries for pages without text
        for level, title in entries:
            built.heading(page, level, title, title)
    return Layout(blocks=built.blocks, titles=built.titles, page_starts=built.page_starts(pages), missing=missing_titles)


class _Builder:
    """Blocks in the making, and where each page's text starts (block, characters into it)."""

    def __init__(self) -> None:
        self.blocks: list[Block] = []
        self.titles: list[str] = []
        self.marks: dict[int, tuple[int, int]] = {}
        self.paragraph = ""
        self.held: list[tuple[int, str]] = []  # blocks that interrupted the paragraph, to follow it

    def flush(self) -> None:
        text = _CONTROL.sub("", self.paragraph).strip()
        here = len(self.blocks)
        for page, (block, chars) in self.marks.items():  # into the text as cleaned
            if block == here:
                self.marks[page] = (block, len(_CONTROL.sub("", self.paragraph[:chars]).lstrip()))
        if text:
            self.blocks.append((0, text))
        self.paragraph = ""
        for page, held in self.held:
            if cleaned := _CONTROL.sub("", held).strip():
                self.marks.setdefault(page, (len(self.blocks), 0))
                self.blocks.append((0, cleaned))
        self.held = []

    def heading(self, page: int, level: int, shown: str, title: str) -> None:
        self.flush()
        self.marks.setdefault(page, (len(self.blocks), 0))
        self.blocks.append((level, shown))
        self.titles.append(title)

    def line(self, line: Line) -> None:
        self.paragraph = _joins(self.paragraph, line.text) if self.paragraph else line.text
        # the page starts where this line's text went (a hyphen or space at the join aside)
        self.marks.setdefault(line.page, (len(self.blocks), len(self.paragraph) - len(line.text)))

    def page_starts(self, pages: int) -> list[int]:
        starts = _block_starts(self.blocks)
        out = []
        for page in range(pages):
            block, chars = self.marks.get(page, (len(self.blocks), 0))
            out.append(starts[block] + min(chars, len(self.blocks[block][1])) if block < len(self.blocks) else -1)
        return out


def _block_starts(blocks: list[Block]) -> list[int]:
    starts, offset = [], 0
    for _, text in blocks:
        starts.append(offset)
        offset += len(text) + 2
    return starts


def titled(sections: list[Section], titles: list[str]) -> list[Section]:
    """Sections (one per heading block, in order) named by their titles (the outline's, verbatim)."""
    return [msgspec.structs.replace(s, title=t) for s, t in zip(sections, titles, strict=True)]
