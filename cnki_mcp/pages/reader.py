"""The HTML full-text reader, both generations, as pure parsing (docs/site-notes.md, "The reader").

- ``nzkhtml`` (2024–2025, ``nzkhtml/xmlRead/…``): the text is in ``#paperRead.ChapterContainer``,
  the catalogue in ``.catalogboxs``; ``parse_reader`` reads it.
- The 2026 reader (``reader/xml?invoice=…`` or ``reader/read?invoice=…``, page title
  ``HTML阅读-<篇名>``) is a small single-page app fed by the JSON of
  ``ossapi/kreader-api/v1/xml/data``. ``parse_reader_data`` reads that JSON (generation
  ``reader_json``); ``parse_reader`` reads the page the app rendered (``reader_dom``) when the JSON
  cannot be had. The rendered page has no known container, so the block holding the text is found
  by where the text is.

Trial is judged from the content, never from the URL alone: 2026 reader URLs say
``loginType=trialRead`` even while an institution's session shows the whole article. The signs
are a trial notice (试读结束…), a trial flag in the JSON, and text that stops where the catalogue
goes on; the last counts on a rendered page only when the URL asks for trial reading too (a page
may still be loading its later chapters), in the JSON by itself (the JSON is the whole answer).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import lxml.html
import msgspec
from lxml import etree

from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.model import ReaderCoverage, Section
from cnki_mcp.core.text import clean, title_key, trim, unique_strings
from cnki_mcp.pages.markup import check_size, first_match, load_page, meta_first, meta_tags, own_text, text_of

READER_MIN_BYTES = 150
DATA_PATH = "/ossapi/kreader-api/v1/xml/data"
TRIAL_NOTICE = re.compile("仅供试读|试读结束|试读内容结束|购买后阅读全文|订购后阅读全文|剩余内容请购买")
NOTICE_CHARS = 60

Block = tuple[int, str]  # (heading level, or 0 for a text block; the text)

_TRIAL_URL = re.compile(r"logintype=trialread|/trialread", re.I)
_APP_PATH = re.compile(r"/reader/(?:xml|read)(?:/|$)", re.I)
_APP_TITLE = re.compile(r"^\s*HTML\s*阅读\s*[-—－_|]\s*")
_HEADINGS = {f"h{level}": level for level in range(1, 7)}
_BLOCK_TAGS = frozenset({"div", "section", "article", "p", "li", "tr", "blockquote", "figure", "figcaption"})
_CELL_TAGS = frozenset({"td", "th"})
_NZKHTML_CONTAINERS = ("#paperRead", "#XMLContent, .reader-content, .html-content")
_READER_NOISE = "nav, header, footer, aside, button, .toolbar, .ai-panel, .catalog, .slider-wrapper"
_TITLE_SELECTOR = ".js-prefix h1.Chapter, .ChapterH1 h1.Chapter, .article-title, .paper-title"
_NON_TEXT = ("img", "canvas", "svg", "math", "iframe", "object")
_PANEL_NAME = re.compile(r"catalog|\btoc\b|outline|mulu", re.I)
_PANEL_LABEL = re.compile(r"^(?:目\s*录|图\s*表|目录图表|catalogue|catalog|contents)$", re.I)
_CAPTION_ENTRY = re.compile(r"^(?:图|表|Fig\.?|Table)\s*\d", re.I)
_PAGE_FURNITURE = re.compile(r"^(?:返回顶部|回到顶部)$|^欢迎")
_FURNITURE_CHARS = 40
_ENTRY_CHARS = 150
_MAIN_SHARE = 0.9  # a child holding this share of the text is the text's block
_DATA_FLAG_KEY = re.compile(r"trial|tryread|shidu", re.I)
_TRUE_VALUES = frozenset({"1", "true", "y", "yes"})
_LEADING_NUMBER = re.compile(r"^\s*\[\d+\]\s*")
_MATH = re.compile(r"<math[\s>]")


class ReaderDocument(msgspec.Struct):
    """One reader text. ``provisional``: the page's text stops before its catalogue ends and nothing
    else shows why, so a page still loading could change the verdict (the caller looks again)."""

    title: str
    text: str
    sections: list[Section]
    trial: bool
    coverage: ReaderCoverage
    provisional: bool = False


class _Signs(msgspec.Struct):
    """What the page or data shows about the text's extent, before it is judged."""

    catalogue: list[str] = []  # catalogue entries the page lists (2026 DOM: headings, figures, tables)
    notice: str = ""  # the trial notice shown
    data_flag: str = ""  # the JSON key that marks a trial
    trial_url: bool = False  # the URL asks for trial reading (never proof alone)


# --------------------------------------------------------------------------------------------
# URLs


def is_reader_app(url: str) -> bool:
    """Whether ``url`` is the 2026 reader (``reader/xml`` or ``reader/read``)."""
    try:
        return bool(_APP_PATH.search(urlsplit(url).path))
    except ValueError:
        return False


def reader_data_url(reader_url: str, requested: Iterable[str] = ()) -> str:
    """The JSON the 2026 reader page feeds on, with ``datatype=all``.

    The URL the page itself asked for wins (its parameters are the site's own); otherwise it is
    built next to the reader path from the reader URL's query (invoice, nonce, product, filename,
    tablename, type …), which is where the page takes them from.
    """
    asked = [url for url in requested if DATA_PATH in urlsplit(url).path]
    source = asked[-1] if asked else reader_url
    parts = urlsplit(source)
    path = parts.path
    if not asked:
        path = path[: path.lower().rfind("/reader/")] + DATA_PATH
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k.lower() != "datatype"]
    return urlunsplit((parts.scheme, parts.netloc, path, urlencode([*query, ("datatype", "all")]), ""))


# --------------------------------------------------------------------------------------------
# Blocks, sections and the verdict (shared by the DOM and the JSON)


class _Blocks:
    """Walks a reader container in document order, cutting text into blocks and headings."""

    def __init__(self) -> None:
        self.blocks: list[Block] = []
        self._buffer: list[str] = []

    def flush(self) -> None:
        raw = "".join(self._buffer)
        self._buffer = []
        text = "\n".join(line for line in (clean(part) for part in raw.split("\n")) if line)
        if text:
            self.blocks.append((0, text))

    def add(self, text: str | None) -> None:
        if text:
            self._buffer.append(clean(f"x{text}x")[1:-1])  # collapse, but keep edge spaces

    def walk(self, el: lxml.html.HtmlElement) -> None:
        for child in el:
            tag = child.tag if isinstance(child.tag, str) else ""
            if tag in _HEADINGS:
                self.flush()
                ident = (child.get("id") or "").lower()
                level = 1 if ident in ("bibliography", "footnote") else _HEADINGS[tag]
                title = text_of(child)
                if title:
                    self.blocks.append((level, title))
            elif tag == "br":
                self._buffer.append("\n")
            elif tag in _BLOCK_TAGS:
                self.flush()
                self.add(child.text)
                self.walk(child)
                self.flush()
            else:
                self.add(child.text)
                self.walk(child)
                if tag in _CELL_TAGS:
                    self._buffer.append(" ")
            self.add(child.tail)


def sections_of(blocks: list[Block]) -> list[Section]:
    starts: list[int] = []
    offset = 0
    for _, text in blocks:
        starts.append(offset)
        offset += len(text) + 2
    sections = []
    for index, (level, title) in enumerate(blocks):
        if not level:
            continue
        last = index
        for later in range(index + 1, len(blocks)):
            if 0 < blocks[later][0] <= level:
                break
            last = later
        end = starts[last] + len(blocks[last][1])
        sections.append(Section(level=level, title=title, offset=starts[index], length=end - starts[index]))
    return sections


def _non_space_count(text: str) -> int:
    return sum(1 for char in text if not char.isspace())


def _without_empty_tail(blocks: list[Block]) -> tuple[list[Block], list[str]]:
    """The blocks without the headings at the end that have no text under them (the catalogue goes
    on where the text stops; a trial notice there is no text of theirs), and those headings in order."""
    end = len(blocks)
    while end and (blocks[end - 1][0] or TRIAL_NOTICE.search(blocks[end - 1][1])):
        end -= 1
    tail = blocks[end:]
    return blocks[:end] + [block for block in tail if not block[0]], [text for level, text in tail if level]


def _missing(catalogue: list[str], blocks: list[Block]) -> tuple[list[str], list[str]]:
    """Catalogue entries the text lacks, and the part of them that follows the last entry it has."""
    headings = {title_key(text) for level, text in blocks if level}
    keys = [title_key(text) for _, text in blocks]

    def present(entry: str) -> bool:
        key = title_key(entry)
        if key in headings:
            return True
        return bool(_CAPTION_ENTRY.match(entry)) and any(block.startswith(key) for block in keys)

    found = [present(entry) for entry in catalogue]
    missing = [entry for entry, here in zip(catalogue, found, strict=True) if not here]
    last = max((index for index, here in enumerate(found) if here), default=-1)
    return missing, [entry for entry in catalogue[last + 1 :]]


def _notice_evidence(notice: str) -> str:
    return f"页面显示试读提示：“{notice}”"


def _trial_evidence(signs: _Signs, tail: list[str], whole_answer: bool) -> list[str]:
    evidence = []
    if signs.notice:
        evidence.append(_notice_evidence(signs.notice))
    if signs.data_flag:
        evidence.append(f"阅读器数据标明为试读（{signs.data_flag}）")
    if tail and (whole_answer or signs.trial_url):
        where = "阅读器数据" if whole_answer else "试读地址的页面"
        evidence.append(f"{where}的正文在目录还有 {len(tail)} 个条目时结束（从“{tail[0]}”起没有正文）")
    return evidence


def _document(
    blocks: list[Block], signs: _Signs, *, title: str, generation: str, container: str, source_chars: int, non_text: int
) -> ReaderDocument:
    """Text, sections and the content-judged verdict (trial, scope) of one reader's blocks."""
    whole_answer = generation == "reader_json"
    blocks, empty = _without_empty_tail(blocks)
    missing, tail = _missing(signs.catalogue, blocks)
    missing = unique_strings([*missing, *empty])
    tail = unique_strings([*tail, *empty])
    text = "\n\n".join(block for _, block in blocks)
    if len(text.encode("utf-8")) < READER_MIN_BYTES:
        raise CnkiError("READER_UNSUPPORTED", "正文不足，未将摘要当全文", details={"characters": len(text)})
    evidence = _trial_evidence(signs, tail, whole_answer)
    extracted = _non_space_count(text)
    if evidence:
        scope = "trial"
    elif missing or extracted < source_chars:
        scope = "partial"
    elif signs.catalogue or whole_answer:
        scope = "full"
    else:
        scope = "unknown"
    coverage = ReaderCoverage(
        container=container,
        dom_characters=source_chars,
        extracted_characters=extracted,
        missing_catalog_headings=missing,
        non_text_elements=non_text,
        scope=scope,
        generation=generation,
        trial_evidence=evidence,
    )
    provisional = bool(missing) and not (signs.notice or signs.data_flag or whole_answer)
    return ReaderDocument(
        title=title, text=text, sections=sections_of(blocks), trial=bool(evidence), coverage=coverage, provisional=provisional
    )


def _check_identity(title: str, expected_title: str) -> None:
    if title and expected_title and title_key(title) != title_key(expected_title):
        raise CnkiError(
            "IDENTITY_CONFLICT", "正文题名与请求不一致", details={"requested": expected_title, "observed": title}
        )


# --------------------------------------------------------------------------------------------
# The reader page (nzkhtml, or the 2026 reader's rendered DOM)


def trial_notice(root: lxml.html.HtmlElement) -> str:
    """The trial notice (试读结束…) a pruned page shows, clipped; "" when there is none."""
    for el in root.iter():
        if isinstance(el.tag, str) and TRIAL_NOTICE.search(own_text(el)):
            return text_of(el)[:NOTICE_CHARS]
    return ""


def page_notice(html: str) -> str:
    """``trial_notice`` of a page's HTML."""
    return trial_notice(load_page(html))


def _leaves(el: lxml.html.HtmlElement) -> list[str]:
    """The texts of the innermost elements under ``el``."""
    return [
        text_of(leaf)
        for leaf in el.iter()
        if isinstance(leaf.tag, str) and not any(isinstance(child.tag, str) for child in leaf)
    ]


def _entries(el: lxml.html.HtmlElement) -> list[str]:
    """The entries an element lists, without panel labels (目录, 图表 …)."""
    return [text for text in _leaves(el) if text and not _PANEL_LABEL.match(text)]


def _panels(root: lxml.html.HtmlElement) -> list[lxml.html.HtmlElement]:
    """Catalogue panels (``.catalogboxs``, the 2026 目录图表 panel …), outermost only: an element
    named so that lists two entries or more, none of them paragraph-long (a single heading named
    ``catalog-title`` or a layout wrapper is no catalogue)."""
    found: list[lxml.html.HtmlElement] = []
    for el in root.iter():
        if not isinstance(el.tag, str) or any(panel in el.iterancestors() for panel in found):
            continue
        if not _PANEL_NAME.search(f"{el.get('class') or ''} {el.get('id') or ''}"):
            continue
        entries = _entries(el)
        if len(entries) >= 2 and all(len(text) <= _ENTRY_CHARS for text in entries):
            found.append(el)
    return found


def _catalogue(panels: list[lxml.html.HtmlElement]) -> list[str]:
    return unique_strings(entry for panel in panels for entry in _entries(panel))


def _drop(elements: Iterable[lxml.html.HtmlElement]) -> None:
    for el in list(elements):
        if el.getparent() is not None:
            el.drop_tree()


def _furniture(root: lxml.html.HtmlElement) -> list[lxml.html.HtmlElement]:
    """Page furniture around the 2026 reader's text: 返回顶部 links, the 欢迎<机构> banner."""
    return [
        el
        for el in root.iter()
        if isinstance(el.tag, str)
        and len(text := text_of(el)) <= _FURNITURE_CHARS
        and _PAGE_FURNITURE.search(text)
    ]


def _text_size(el: lxml.html.HtmlElement) -> int:
    return _non_space_count(el.text_content())


def _main_block(body: lxml.html.HtmlElement) -> lxml.html.HtmlElement | None:
    """The innermost element that still holds nearly all of the page's text (noise removed)."""
    node = body
    total = _text_size(body)
    if not total:
        return None
    while True:
        heavy = [child for child in node if isinstance(child.tag, str) and _text_size(child) >= _MAIN_SHARE * total]
        if len(heavy) != 1:
            return node
        node = heavy[0]


def _app_title(root: lxml.html.HtmlElement) -> str:
    """The article title from a 2026 reader's ``<title>HTML阅读-<篇名></title>``; "" elsewhere."""
    head = text_of(first_match(root, "title"))
    return trim(_APP_TITLE.sub("", head)) if _APP_TITLE.match(head) else ""


def _ranked(blocks: list[Block], title: str) -> list[Block]:
    """2026 DOM headings ranked among themselves: the title above them is text, the shallowest
    remaining heading is level 1 (as the JSON catalogue counts)."""
    key = title_key(title)
    out: list[Block] = []
    for level, text in blocks:
        if level and key and title_key(text) == key and not any(lvl for lvl, _ in out):
            level = 0
        out.append((level, text))
    shift = min((level for level, _ in out if level), default=1) - 1
    return [(max(1, level - shift) if level else 0, text) for level, text in out]


def _container(root: lxml.html.HtmlElement, app: bool) -> tuple[lxml.html.HtmlElement | None, str]:
    for selector in _NZKHTML_CONTAINERS:
        found = first_match(root, selector)
        if found is not None:
            return found, "nzkhtml"
    if not app:
        return None, ""
    body = root.find("body")
    scope = body if body is not None else root
    _drop(scope.cssselect(_READER_NOISE))
    _drop(_furniture(scope))
    return _main_block(scope), "reader_dom"


def parse_reader(html: str, *, url: str = "", expected_title: str = "") -> ReaderDocument:
    """Text, sections and coverage of a reader page: nzkhtml, or the 2026 reader as rendered."""
    root = load_page(html)
    app_title = _app_title(root)
    panels = _panels(root)
    signs = _Signs(catalogue=_catalogue(panels), notice=trial_notice(root), trial_url=bool(_TRIAL_URL.search(url)))
    _drop(panels)
    container, generation = _container(root, bool(app_title) or is_reader_app(url))
    if container is None:
        raise CnkiError("READER_UNSUPPORTED", "没有识别到正文容器")
    title = meta_first(meta_tags(root), "citation_title") or app_title
    selector = _TITLE_SELECTOR + (", h1" if generation == "reader_dom" else "")
    title = title or text_of(first_match(container, selector))
    _check_identity(title, expected_title)
    _drop(container.cssselect(_READER_NOISE))
    walker = _Blocks()
    walker.add(container.text)
    walker.walk(container)
    walker.flush()
    blocks = _ranked(walker.blocks, title) if generation == "reader_dom" else walker.blocks
    ident = container.get("id")
    return _document(
        blocks,
        signs,
        title=title,
        generation=generation,
        container=f"#{ident}" if ident else str(container.tag),
        source_chars=_text_size(container),
        non_text=sum(1 for _ in container.iter(*_NON_TEXT)),
    )


# --------------------------------------------------------------------------------------------
# The 2026 reader's JSON (ossapi/kreader-api/v1/xml/data, datatype=all)


def _fragment(markup: Any) -> lxml.html.HtmlElement | None:
    """An HTML fragment of the JSON (a title, a paragraph with MathML and citation marks) as a tree."""
    text = str(markup or "")
    if not text.strip():
        return None
    try:
        return lxml.html.fragment_fromstring(text, create_parent="div")
    except (etree.ParserError, ValueError):
        return None


def _plain(markup: Any) -> str:
    """The text of a fragment; citation marks stay as they read (``…作用[1]``)."""
    return text_of(_fragment(markup))


def _titles(items: Any) -> list[str]:
    """``[{title}]`` lists (authors, affiliation, keywords, funds) as texts."""
    rows = items if isinstance(items, list) else []
    return unique_strings(_plain(item.get("title")) for item in rows if isinstance(item, dict))


def _table_rows(markup: Any) -> list[str]:
    table = _fragment(f"<table>{markup or ''}</table>")
    if table is None:
        return []
    rows = (" | ".join(text_of(cell) for cell in row.iter("td", "th")) for row in table.iter("tr"))
    return [row for row in rows if row.strip(" |")]


def _caption(value: dict[str, Any]) -> list[str]:
    english = value.get("enTitle") or value.get("titleEN") or value.get("titleEn")
    return [line for line in (_plain(value.get("title")), _plain(english)) if line]


def _level(value: dict[str, Any]) -> int:
    try:
        return min(6, max(1, int(str(value.get("level") or 1))))
    except ValueError:
        return 1


def _item_block(item: Any) -> Block | None:
    """One ``fullText`` item: a heading (CATALOG, level kept), a paragraph, a table as text rows, or
    a figure's caption (its image is not text). Unknown kinds keep whatever text they carry."""
    if not isinstance(item, dict) or not isinstance(item.get("value"), dict):
        return None
    value: dict[str, Any] = item["value"]
    kind = str(item.get("type") or "").upper()
    if kind == "CATALOG":
        title = _plain(value.get("title"))
        return (_level(value), title) if title else None
    if kind == "TABLE":
        lines = [*_caption(value), *_table_rows(value.get("content"))]
    elif kind == "FIGURE":
        lines = _caption(value)
    else:
        lines = [_plain(value.get("content") or value.get("title"))]
    text = "\n".join(line for line in lines if line)
    return (0, text) if text else None


def _header(data: dict[str, Any], metadata: dict[str, Any], title: str) -> list[Block]:
    people = "\n".join(line for line in ("；".join(_titles(data.get("authors"))), "；".join(_titles(data.get("affiliation")))) if line)
    lines = [
        title,
        _plain(metadata.get("titleEN")),
        people,
        f"摘要：{abstract}" if (abstract := _plain(metadata.get("abstracts"))) else "",
        f"Abstract: {english}" if (english := _plain(metadata.get("abstractsEN"))) else "",
        f"关键词：{'；'.join(keywords)}" if (keywords := _titles(data.get("keywords"))) else "",
        f"基金资助：{'；'.join(funds)}" if (funds := _titles(data.get("funds"))) else "",
    ]
    return [(0, line) for line in lines if line]


def _references(items: Any) -> list[Block]:
    rows = [item for item in (items if isinstance(items, list) else []) if isinstance(item, dict)]
    entries = []
    for row in rows:
        text = _LEADING_NUMBER.sub("", _plain(row.get("title")))
        seq = trim(str(row.get("seq") or ""))
        if text:
            entries.append((0, f"[{seq}] {text}" if seq else text))
    return [(1, "参考文献"), *entries] if entries else []


def _data_flag(data: dict[str, Any], metadata: dict[str, Any]) -> str:
    """The key that marks the data as a trial (its name is not documented: any *trial*/*tryRead* key
    with a true value, in ``data`` or ``data.metadata``)."""
    for scope, where in ((data, "data"), (metadata, "metadata")):
        for key, value in scope.items():
            if _DATA_FLAG_KEY.search(key) and str(value).strip().lower() in _TRUE_VALUES:
                return f"{where}.{key}"
    return ""


def _payload(body: str) -> dict[str, Any]:
    """``data`` of a ``{code: 200, data: {…}}`` answer; READER_UNSUPPORTED for anything else."""
    check_size(body)
    try:
        payload = msgspec.json.decode(body.encode("utf-8", "replace"))
    except msgspec.DecodeError:
        raise CnkiError("READER_UNSUPPORTED", "阅读器数据不是 JSON") from None
    if not isinstance(payload, dict):
        raise CnkiError("READER_UNSUPPORTED", "阅读器数据的结构不受支持")
    code = payload.get("code")
    if str(code) != "200":
        message = trim(str(payload.get("message") or payload.get("msg") or ""))
        raise CnkiError(
            "READER_UNSUPPORTED", f"阅读器数据接口答复 code {code}{'：' + message if message else ''}", details={"code": code}
        )
    data = payload.get("data")
    if not isinstance(data, dict):
        raise CnkiError("READER_UNSUPPORTED", "阅读器数据没有 data 部分")
    return data


def parse_reader_data(body: str, *, expected_title: str = "") -> ReaderDocument:
    """Text, sections and coverage from the 2026 reader's JSON (generation ``reader_json``)."""
    data = _payload(body)
    metadata = data.get("metadata")
    metadata = metadata if isinstance(metadata, dict) else {}
    title = _plain(metadata.get("title"))
    _check_identity(title, expected_title)
    items = data.get("fullText")
    items = items if isinstance(items, list) else []
    body_blocks = [block for block in map(_item_block, items) if block is not None]
    flag = _data_flag(data, metadata)
    if not any(not level for level, _ in body_blocks) and not flag:
        raise CnkiError("READER_UNSUPPORTED", "阅读器数据没有正文", details={"items": len(items)})
    blocks = [*_header(data, metadata, title), *body_blocks, *_references(data.get("references"))]
    extracted = _non_space_count("".join(text for _, text in blocks))
    figures = sum(1 for item in items if isinstance(item, dict) and str(item.get("type")).upper() == "FIGURE")
    formulas = sum(len(_MATH.findall(str(item.get("value")))) for item in items if isinstance(item, dict))
    return _document(
        blocks,
        _Signs(data_flag=flag),
        title=title,
        generation="reader_json",
        container=DATA_PATH,
        source_chars=extracted,
        non_text=figures + formulas,
    )


def with_notice(document: ReaderDocument, notice: str) -> ReaderDocument:
    """The data's document once its rendered page is seen: a trial notice there makes it a trial."""
    if not notice:
        return document
    evidence = [_notice_evidence(notice), *document.coverage.trial_evidence]
    coverage = msgspec.structs.replace(document.coverage, scope="trial", trial_evidence=evidence)
    return msgspec.structs.replace(document, trial=True, coverage=coverage)
