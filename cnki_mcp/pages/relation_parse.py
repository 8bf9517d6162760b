"""A paper's references (参考文献), citing papers (引证文献) and similar papers as CNKI answers them.

Pure rules, no I/O: the databases a list is split into (one request each), the address of one
request, an answer (``{"data":{"total":N,"data":[{"metadata":[{"name":"TI","value":…}…],
"relations":[{"scope":"ABSTRACT","url":…}]}]}}``) read into entries, whether a set of answers can be
data at all (a decoy record, totals that disagree), the lists a detail page renders itself (or, in
the 2026 citation area, the link to the page that lists them, and that page), an
entry as a catalogue record, and the cursor of ``related_papers``. CNKI's side is described in
docs/site-notes.md ("References, citing and similar papers").
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import parse_qsl, quote, urljoin, urlsplit

import lxml.html
import msgspec

from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.identity import fingerprint
from cnki_mcp.core.model import Paper
from cnki_mcp.core.text import clean, loads_site_json, normalize, title_key, trim
from cnki_mcp.pages.markup import NON_CONTENT_TAGS, parse_markup, text_of
from cnki_mcp.pages.parse import year_of
from cnki_mcp.pages.urls import is_site_url

RELATIONS = ("references", "citing", "similar")
RELATION_NAMES = {"references": "参考文献", "citing": "引证文献", "similar": "相似文献"}
# The databases a reference or citing list is split into; CNKI asks for each as type=<code>REF.
DATABASES = ("CJFD", "CDFD", "CMFD", "CPFD", "IPFD", "CCND", "CYFD", "CBBD", "SCPD", "SCSD", "WWJD", "NLNK")
SIMILAR = "SIMILAR"  # similar papers come as one list, without a type
MAX_SIZE = 100
API_ROOT = "https://kns.cnki.net/restapi"
SITE_ROOT = "https://kns.cnki.net/"  # what an answer's relative links resolve against on the mainland
DATABASE_TYPES = {
    "CJFD": "期刊", "CDFD": "博士", "CMFD": "硕士", "CPFD": "会议", "IPFD": "会议", "CCND": "报纸",
    "CYFD": "年鉴", "CBBD": "图书", "SCPD": "专利", "SCSD": "标准", "WWJD": "外文期刊",
}
_MARKS = {"CJFD": "J", "CDFD": "D", "CMFD": "D", "CPFD": "C", "IPFD": "C", "CCND": "N", "CBBD": "M", "SCPD": "P",
          "SCSD": "S", "WWJD": "J"}
# The database blocks of a rendered list, by the words of their headings.
_DATABASE_NAMES = (
    ("博士", "CDFD"), ("硕士", "CMFD"), ("国际会议", "IPFD"), ("会议", "CPFD"), ("报纸", "CCND"), ("年鉴", "CYFD"),
    ("图书", "CBBD"), ("专利", "SCPD"), ("标准", "SCSD"), ("外文", "WWJD"), ("期刊", "CJFD"), ("其他", "NLNK"),
)
# A database an item is listed under in at least this many answers of one paper is a decoy, not data.
REPEATED_DATABASES = 3
SIGNATURES_KEPT = 512
DECOY_ITEMS_MAX = 3  # a list this short, answered the same for two papers, is a decoy
CURSOR_PREFIX = "rp1."


def databases(relation: str) -> tuple[str, ...]:
    return (SIMILAR,) if relation == "similar" else DATABASES


class Ask(msgspec.Struct, frozen=True):
    """One request of a list: a database, the ``start`` value and the size asked."""

    database: str
    start: int
    size: int


def v_token(url: str) -> str:
    """The ``v`` value of a detail-page link (the paper's token the lists are asked with), "" when none."""
    try:
        query = urlsplit(url).query
    except ValueError:
        return ""
    for key, value in parse_qsl(query, keep_blank_values=True):
        if key == "v" and value.strip():
            return value.strip()
    return ""


def request_url(relation: str, v: str, ask: Ask) -> str:
    """The address of one request (references and citing per database, similar as one list)."""
    token = quote(v, safe="")
    if relation == "similar":
        return (f"{API_ROOT}/literature-api/v1/articles/relations/similar?v={token}&uniplatform=NZKPT"
                f"&start={ask.start}&size={ask.size}")
    path = "references" if relation == "references" else "citations"
    return f"{API_ROOT}/citation-api/v1/literature/{path}?v={token}&type={ask.database}REF&start={ask.start}&size={ask.size}"


# --- answers --------------------------------------------------------------------------------------


class Entry(msgspec.Struct, omit_defaults=True):
    """One item of an answer; ``url`` is empty when CNKI links it to no record."""

    text: str = ""  # the item as one citation line
    database: str = ""
    title: str = ""
    year: int = 0
    authors: list[str] = []
    url: str = ""  # its detail page; "" when CNKI links it to no record
    date: str = ""
    source: str = ""
    doi: str = ""
    abstract: str = ""

    @property
    def key(self) -> str:
        """Title and first author: what tells two items apart."""
        author = normalize(self.authors[0]) if self.authors else ""
        return title_key(self.title or self.text) + "|" + author


class Answer(msgspec.Struct):
    """One request's answer: the total CNKI states for the database, and the items of this page."""

    total: int
    entries: list[Entry]
    unreadable: int = 0  # items with nothing to read in them (counted, never silently dropped)


class NotData(ValueError):
    """An answer that is not a list at all (another shape, an error code, not JSON); the text says why."""


def _number(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def read_answer(body: str, database: str, site_root: str = SITE_ROOT) -> Answer:
    """The answer to one request as data (relative links on ``site_root``); NotData when it is anything else."""
    try:
        answer = loads_site_json(body)
    except ValueError:
        raise NotData("回答不是 JSON") from None
    if not isinstance(answer, dict):
        raise NotData("回答不是 JSON 对象")
    code = answer.get("code")
    if code is not None and _number(code) not in (0, 200):
        raise NotData(f"接口回答 code={code}：{trim(str(answer.get('message') or ''))[:80]}")
    data = answer.get("data")
    total = _number(data.get("total")) if isinstance(data, dict) else None
    items = data.get("data") if isinstance(data, dict) else None
    if total is None or not isinstance(items, list):
        raise NotData("回答中没有 data.total 与 data.data")
    entries: list[Entry] = []
    unreadable = 0
    for item in items:
        entry = _entry(item, database, site_root) if isinstance(item, dict) else None
        if entry is None:
            unreadable += 1
        else:
            entries.append(entry)
    return Answer(total=total, entries=entries, unreadable=unreadable)


def _metadata(item: dict[str, Any]) -> dict[str, str]:
    """``metadata`` as NAME → value: a list of {name, value} pairs (or, seen nowhere yet, a plain object)."""
    raw = item.get("metadata")
    pairs: Iterable[tuple[Any, Any]]
    if isinstance(raw, list):
        pairs = ((m.get("name"), m.get("value")) for m in raw if isinstance(m, dict))
    elif isinstance(raw, dict):
        pairs = raw.items()
    else:
        pairs = ()
    fields: dict[str, str] = {}
    for name, value in pairs:
        if isinstance(name, str) and isinstance(value, (str, int)) and str(value).strip():
            fields.setdefault(name.strip().upper(), clean(str(value)))
    return fields


def _titles(value: Any) -> list[str]:
    """``[{title: …}]``, ``{title: …}`` or a string: the titles in it."""
    values = value if isinstance(value, list) else [value]
    out = []
    for one in values:
        text = one.get("title") or one.get("name") if isinstance(one, dict) else one
        if isinstance(text, str) and text.strip():
            out.append(clean(text))
    return out


def _link(item: dict[str, Any], site_root: str) -> str:
    """The item's detail page: the relation with scope ABSTRACT (else any detail link), on a CNKI host; a
    relative link on ``site_root`` (the session's site, as the answer's absolute links name it)."""
    relations = item.get("relations")
    links = [r for r in relations if isinstance(r, dict)] if isinstance(relations, list) else []
    links.sort(key=lambda r: str(r.get("scope") or "").upper() != "ABSTRACT")
    for relation in links:
        url = relation.get("url")
        if isinstance(url, str) and url.strip():
            absolute = urljoin(site_root, url.strip())
            if is_site_url(absolute) and _is_detail(absolute):
                return absolute
    return ""


def _is_detail(url: str) -> bool:
    path = urlsplit(url).path.lower()
    return "/kcms2/article/abstract" in path or "/kcms/detail" in path


def split_authors(text: str) -> list[str]:
    """``a;b;`` (CNKI ends the list with a separator) as names."""
    return [name for name in (trim(part) for part in re.split(r"[;；]", text)) if name]


def _entry(item: dict[str, Any], database: str, site_root: str) -> Entry | None:
    fields = _metadata(item)
    authors = split_authors(fields.get("AU", "")) or _titles(item.get("authors"))
    sources = _titles(item.get("source"))
    date = fields.get("PT", "")
    entry = Entry(
        title=fields.get("TI", ""),
        authors=authors,
        source=fields.get("LY", "") or (sources[0] if sources else ""),
        year=year_of(fields.get("YE", "")) or year_of(date),
        date=date,
        abstract=fields.get("AB", ""),
        doi=fields.get("DOI", ""),
        url=_link(item, site_root),
        database="" if database == SIMILAR else database,
    )
    if not entry.title:
        # Nothing named a title: the values CNKI gave, in its order, are the citation.
        entry.text = "；".join(fields.values())
        return entry if entry.text else None
    entry.text = citation_line(entry)
    return entry


def citation_line(entry: Entry) -> str:
    """The item as one line: ``作者. 题名[J]. 来源, 2020.`` with what is known."""
    mark = _MARKS.get(entry.database, "")
    line = f"{entry.title}[{mark}]" if mark else entry.title
    if entry.authors:
        line = f"{', '.join(entry.authors)}. {line}"
    tail = ", ".join(part for part in (entry.source, str(entry.year) if entry.year else "") if part)
    return f"{line}. {tail}." if tail else f"{line}."


# --- whether answers can be data ------------------------------------------------------------------


def page_problem(answer: Answer, ask: Ask, known: int) -> str:
    """What makes one page of a database impossible as data ("" when nothing does).

    ``known`` is how many items of the database were read before this page.
    """
    if answer.total < len(answer.entries) and not answer.unreadable:
        return f"{ask.database} 的回答列出 {len(answer.entries)} 条，却说共 {answer.total} 条"
    if known and answer.total < known:
        return f"{ask.database} 此前说共有、且已读到 {known} 条，这一页却说共 {answer.total} 条"
    if not known and answer.total > 0 and not answer.entries and not answer.unreadable:
        return f"{ask.database} 说共有 {answer.total} 条，第一页却没有任何条目"
    return ""


def decoy_reason(
    source: Paper, relation: str, answers: Mapping[str, Answer], decoys: Iterable[str] = (), *, complete: bool = True
) -> str:
    """Why the first answers of a list cannot be the paper's data ("" when nothing says so).

    A site under pressure is reported to answer a fixed record for any paper, or empty lists: an item
    already known as a decoy, one item under several databases (they are disjoint), the paper
    listing itself, or (``complete``: every database answered) no citing paper at all while the record
    counts citations.
    """
    known = set(decoys)
    own = title_key(source.title) + "|" + (normalize(source.authors[0]) if source.authors else "")
    places: dict[str, int] = {}
    for answer in answers.values():
        for key in {entry.key for entry in answer.entries}:
            if key in known:
                return "知网给出的条目是此前识别出的假数据"
            if key == own or (not source.authors and key.split("|")[0] == title_key(source.title)):
                return "列表中出现了这篇文献自己"
            places[key] = places.get(key, 0) + 1
    if places and max(places.values()) >= REPEATED_DATABASES:
        return f"同一条目同时出现在 {max(places.values())} 个数据库的列表中"
    stated = sum(answer.total for answer in answers.values())
    if complete and relation == "citing" and stated == 0 and (source.cited or 0) > 0:
        return f"知网说没有引证文献，而这篇文献的被引次数是 {source.cited}"
    return ""


def repeated_keys(answers: Mapping[str, Answer]) -> set[str]:
    """Items listed under more than one database (the databases of a list are disjoint)."""
    places: dict[str, int] = {}
    for answer in answers.values():
        for key in {entry.key for entry in answer.entries}:
            places[key] = places.get(key, 0) + 1
    return {key for key, count in places.items() if count > 1}


class Signatures:
    """The first answers of recent lists, so one answer given for two different papers is caught."""

    def __init__(self, kept: int = SIGNATURES_KEPT) -> None:
        self.kept = kept
        self._seen: OrderedDict[str, str] = OrderedDict()
        self.decoys: set[str] = set()

    @staticmethod
    def of(relation: str, answers: Mapping[str, Answer]) -> str:
        items = sorted((database, entry.key) for database, answer in answers.items() for entry in answer.entries)
        return fingerprint([relation, items]) if items else ""

    def other_paper(self, source_ref: str, relation: str, answers: Mapping[str, Answer]) -> str:
        """The other paper these very answers were given for, or ""; remembers them for this paper.

        Only short lists count (a decoy is a fixed record or two): a thesis and the article drawn from it
        may well cite the same long list.
        """
        if sum(len(answer.entries) for answer in answers.values()) > DECOY_ITEMS_MAX:
            return ""
        signature = self.of(relation, answers)
        if not signature:
            return ""
        seen = self._seen.get(signature)
        if seen and seen != source_ref:
            self.decoys.update(entry.key for answer in answers.values() for entry in answer.entries)
            return seen
        self._seen[signature] = source_ref
        self._seen.move_to_end(signature)
        while len(self._seen) > self.kept:
            self._seen.popitem(last=False)
        return ""


# --- what a detail page renders itself ------------------------------------------------------------

_HINTS = {"references": ("reference", "refer"), "citing": ("citing", "cited"), "similar": ("similar",)}
_HINT_ATTRIBUTES = ("id", "class", "data-id", "data-relation")
_EMPTY_NOTICE = re.compile(r"暂无|没有找到|无相关")
_COUNT = re.compile(r"[(（]\s*(\d+)\s*[)）]")
_TYPE_MARK = re.compile(r"\[([A-Z]{1,2})\]")
_INDEX = re.compile(r"^\s*\[\d+\]\s*")


class Rendered(msgspec.Struct):
    """A list as the detail page shows it: per database block, the count it states (None: none) and its items."""

    parts: list[tuple[str, int | None, list[Entry]]]


def _container(root: lxml.html.HtmlElement, relation: str) -> lxml.html.HtmlElement | None:
    hints = _HINTS[relation]
    best: lxml.html.HtmlElement | None = None
    best_items = -1
    for element in root.iter():
        if not isinstance(element.tag, str) or element.tag in ("li", "a", "ul"):
            continue
        marks = " ".join((element.get(name) or "") for name in _HINT_ATTRIBUTES).lower()
        if not any(hint in marks for hint in hints):
            continue
        items = len(element.findall(".//li"))
        if items > best_items:
            best, best_items = element, items
    return best


def _database_of(heading: str) -> str:
    for word, code in _DATABASE_NAMES:
        if word in heading:
            return code
    return ""


def _rendered_entry(li: lxml.html.HtmlElement, base_url: str, database: str) -> Entry | None:
    text = _INDEX.sub("", text_of(li))
    if not text:
        return None
    entry = Entry(text=text, database=database)
    for anchor in li.iter("a"):
        url = urljoin(base_url, (anchor.get("href") or "").strip())
        if is_site_url(url) and _is_detail(url):
            entry.url, entry.title = url, text_of(anchor)
            break
    mark = _TYPE_MARK.search(text)
    if mark:
        entry.title = entry.title or trim(text[: mark.start()])
        parts = [trim(part) for part in re.split(r"[.．]", text[mark.end():]) if trim(part)]
        if parts:
            entry.authors = [name for name in (trim(n) for n in re.split(r"[,，;；]", parts[0])) if name]
        if len(parts) > 1:
            entry.source = parts[1]
        entry.year = year_of(text[mark.end():])
    return entry


def _content_root(html: str) -> lxml.html.HtmlElement:
    root = parse_markup(html)
    for junk in [el for el in root.iter() if isinstance(el.tag, str) and el.tag in NON_CONTENT_TAGS]:
        junk.drop_tree()
    return root


def _parts(blocks: list[lxml.html.HtmlElement], relation: str, base_url: str) -> list[tuple[str, int | None, list[Entry]]]:
    parts: list[tuple[str, int | None, list[Entry]]] = []
    for block in blocks:
        heading = text_of(block.cssselect(".dbTitle, h3, h4")[0]) if block.cssselect(".dbTitle, h3, h4") else ""
        count = _COUNT.search(heading)
        database = _database_of(heading) if relation != "similar" else ""
        entries = [e for e in (_rendered_entry(li, base_url, database) for li in block.iter("li")) if e is not None]
        parts.append((database, int(count[1]) if count else None, entries))
    return parts


def _listed(parts: list[tuple[str, int | None, list[Entry]]]) -> bool:
    return any(entries for _, _, entries in parts)


def _rendered_in(root: lxml.html.HtmlElement, relation: str, base_url: str) -> Rendered | None:
    container = _container(root, relation)
    if container is None:
        return None
    parts = _parts(container.cssselect(".essayBox") or [container], relation, base_url)
    if not _listed(parts) and not _EMPTY_NOTICE.search(text_of(container)):
        return None  # neither items nor "none": not filled in yet
    return Rendered(parts=parts)


def read_rendered(html: str, relation: str, base_url: str) -> Rendered | None:
    """The relation's list on a live detail page; None while the page has not filled it in.

    Each block (``.essayBox``, else the whole list) names its database in a heading with a count
    ``(N)``; every ``li`` is an item, linked when it holds a detail-page link. Hidden panels count
    (a tab not shown still holds its list).
    """
    return _rendered_in(_content_root(html), relation, base_url)


# The 2026 citation area: ``#refpartdiv`` holds only tabs and ``#MapArea``, whose 参考文献 / 引证文献 are links
# (``a.ReferLinkOn`` the current one, as KCMS has marked it for years) to pages that list them.
_AREA = "#refpartdiv, #MapArea"
# Ids the links carry (2026: ``#references``; older KCMS numbered them rl1 参考文献, rl3 引证文献).
_LINK_IDS = {"references": ("references", "rl1"), "citing": ("citations", "citing", "rl3")}


class ListLink(msgspec.Struct, frozen=True):
    """Where the 2026 area's link for a relation leads: the page that lists it."""

    url: str


def _list_link(anchors: Iterable[lxml.html.HtmlElement], relation: str, base_url: str) -> str:
    """The first link named for ``relation`` (its words, 二级… excluded, or its id) that leads to another CNKI page."""
    for anchor in anchors:
        named = trim(text_of(anchor)).startswith(RELATION_NAMES[relation])
        if not named and (anchor.get("id") or "").strip().lower() not in _LINK_IDS.get(relation, ()):
            continue
        href = (anchor.get("href") or "").strip()
        if not href or href.startswith("#") or href.lower().startswith("javascript"):
            continue
        url = urljoin(base_url, href)
        if is_site_url(url) and url.split("#", 1)[0] != base_url.split("#", 1)[0]:
            return url
    return ""


def read_area(html: str, relation: str, base_url: str) -> Rendered | ListLink | None:
    """The detail page's citation area: its own list (up to 2025, ``read_rendered``), or in the 2026 area the
    link to the page that lists the relation; None while neither shows. In the 2026 area only items count:
    an area with none and no usable link is never read as an empty list (it stays None, the caller gives up
    with RELATIONS_UNAVAILABLE and a snapshot)."""
    root = _content_root(html)
    area = root.cssselect(_AREA)
    current = root.cssselect("a.ReferLinkOn")
    rendered = _rendered_in(root, relation, base_url)
    if not area and not current:
        return rendered
    if rendered is not None and _listed(rendered.parts):
        return rendered
    link = _list_link([*current, *(a for element in area for a in element.iter("a"))], relation, base_url)
    return ListLink(url=link) if link else None


def read_list_page(html: str, relation: str, base_url: str) -> Rendered | None:
    """The page an area link leads to: its database blocks (``.essayBox`` with a ``.dbTitle (N)`` heading, as
    KCMS list pages write them), else the relation's container, else the ``li`` items numbered ``[N]``; None
    while it lists no item."""
    root = _content_root(html)
    container = _container(root, relation)
    blocks = root.cssselect(".essayBox") or ([container] if container is not None else [])
    parts = _parts(blocks, relation, base_url)
    if not _listed(parts):
        items = [li for li in root.iter("li") if _INDEX.match(text_of(li))]
        entries = [e for e in (_rendered_entry(li, base_url, "") for li in items) if e is not None]
        parts = [("", None, entries)]
    return Rendered(parts=parts) if _listed(parts) else None


# --- entries as records ---------------------------------------------------------------------------


def entry_paper(entry: Entry, observed_at: str) -> Paper:
    """A linked entry as an observation for the catalogue (never overrides a detail page: see catalog.merge)."""
    return Paper(
        title=entry.title,
        authors=list(entry.authors),
        source=entry.source,
        year=entry.year,
        publication_date=entry.date,
        document_type=DATABASE_TYPES.get(entry.database, ""),
        doi=entry.doi,
        url=entry.url,
        locator=entry.url,
        abstract=entry.abstract,
        listed_at=observed_at,
    )


# --- the cursor -----------------------------------------------------------------------------------


def encode_cursor(source_ref: str, relation: str, offset: int) -> str:
    raw = json.dumps([source_ref, relation, offset], separators=(",", ":")).encode()
    return CURSOR_PREFIX + base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[str, str, int]:
    """(record_ref, relation, offset) of a cursor; INVALID_CURSOR when it is not one of ours."""
    bad = CnkiError("INVALID_CURSOR", details={"field": "cursor"})
    if not cursor.startswith(CURSOR_PREFIX):
        raise bad
    body = cursor[len(CURSOR_PREFIX):]
    try:
        value = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    except (ValueError, binascii.Error):
        raise bad from None
    if (
        not isinstance(value, list)
        or len(value) != 3
        or not isinstance(value[0], str)
        or value[1] not in RELATIONS
        or not isinstance(value[2], int)
        or isinstance(value[2], bool)
        or value[2] < 0
    ):
        raise bad
    return value[0], value[1], value[2]
