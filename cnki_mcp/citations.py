"""Citation and export formats for ``export_citations``.

``render(papers, fmt, template)`` turns stored records into one text in one of ``FORMATS``:

* five prose styles (GB/T 7714-2015 numeric, APA 7, MLA 9, Chicago author-date, Vancouver/NLM) that
  follow the published rules as the official CSL styles encode them (checked against citeproc-js);
* exchange formats for reference managers (BibTeX, RIS, EndNote tagged, CSL-JSON);
* data formats (JSON, CSV, Markdown) and safe ``custom`` templates.

Missing authors, source or year are listed per record in ``missing_fields``; the prose styles show a
placeholder such as ``[作者未取得]`` in their place.

``export(...)`` adds what the tool does around it: saving under ``<data>/exports/`` without
overwriting anything, and the 512 KB rule for text returned inline. ``validate_template`` lets the
tool reject a bad ``custom`` template before any work starts.
"""

from __future__ import annotations

import csv
import io
import json
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cnki_mcp import files
from cnki_mcp.errors import CnkiError
from cnki_mcp.model import CitationResult, Paper, public_paper

FORMATS: tuple[str, ...] = (
    "gbt7714",
    "apa",
    "mla",
    "chicago",
    "vancouver",
    "bibtex",
    "ris",
    "endnote",
    "csl_json",
    "json",
    "csv",
    "markdown",
    "custom",
)
PROSE_FORMATS: tuple[str, ...] = ("gbt7714", "apa", "mla", "chicago", "vancouver")
_ALIASES = {"": "gbt7714", "gbt7714-2015": "gbt7714", "csl-json": "csl_json"}

AUTHOR_PLACEHOLDER = "[作者未取得]"
SOURCE_PLACEHOLDER = "[来源未取得]"
YEAR_PLACEHOLDER = "[年份未取得]"

TEMPLATE_FIELDS: tuple[str, ...] = (
    "title",
    "authors",
    "source",
    "journal",
    "year",
    "volume",
    "issue",
    "pages",
    "doi",
    "url",
    "record_ref",
    "type",
    "clc",
)
MAX_TEMPLATE_BYTES = 5000
# Entries of the text formats are separated by one blank line, without a trailing newline.
ENTRY_SEPARATOR = "\n\n"
# Larger exports are only returned as a file (UTF-8 bytes).
MAX_TEXT_BYTES = 512 * 1024
EXPORTS_FOLDER = "exports"


# --------------------------------------------------------------------------------------------
# Document types


@dataclass(frozen=True)
class DocType:
    key: str
    gb: str
    csl: str
    bibtex: str
    ris: str
    endnote: str


# Substring of Paper.document_type -> type; first match wins (a 博士 thesis may say 博士学位论文).
_DOC_TYPES: tuple[tuple[str, DocType], ...] = (
    ("会议", DocType("conference", "C", "paper-conference", "inproceedings", "CONF", "Conference Paper")),
    ("博士", DocType("phd", "D", "thesis", "phdthesis", "THES", "Thesis")),
    ("硕士", DocType("master", "D", "thesis", "mastersthesis", "THES", "Thesis")),
    ("学位", DocType("thesis", "D", "thesis", "misc", "THES", "Thesis")),
    ("报纸", DocType("newspaper", "N", "article-newspaper", "misc", "NEWS", "Newspaper Article")),
    ("期刊", DocType("journal", "J", "article-journal", "article", "JOUR", "Journal Article")),
    ("图书", DocType("book", "M", "book", "book", "BOOK", "Book")),
)
_UNKNOWN_TYPE = DocType("unknown", "Z", "document", "misc", "GEN", "Generic")
_ONLINE_FIRST_TYPE = DocType("online_first", "J", "article-journal", "article", "JOUR", "Journal Article")


def doc_type(paper: Paper) -> DocType:
    """Classify a record; online-first (网络首发) journal articles are a type of their own."""
    text = paper.document_type or ""
    for marker, kind in _DOC_TYPES:
        if marker in text:
            if kind.key == "journal" and paper.online_first:
                return _ONLINE_FIRST_TYPE
            return kind
    if paper.online_first:
        return _ONLINE_FIRST_TYPE
    return _UNKNOWN_TYPE


# --------------------------------------------------------------------------------------------
# Names and languages

_CJK = re.compile(r"[\u2e80-\u9fff\uf900-\ufaff\uac00-\ud7af\U00020000-\U0003ffff]")


def has_cjk(text: str) -> bool:
    return bool(_CJK.search(text))


@dataclass(frozen=True)
class Name:
    """A personal name split for Western styles, or a literal kept whole (Han names, groups)."""

    family: str = ""
    given: str = ""
    literal: str = ""


def parse_name(raw: str) -> Name:
    text = " ".join(raw.split())
    # Han names have no given/family split in these styles: 王利明 stays 王利明.
    if not text or has_cjk(text):
        return Name(literal=text)
    if "," in text:
        family, _, given = text.partition(",")
        family, given = family.strip(), given.strip()
        return Name(family=family, given=given) if family and given else Name(literal=family or given or text)
    parts = text.split(" ")
    if len(parts) == 1:
        return Name(literal=text)
    capitalised = [part for part in parts if _is_capitalised_surname(part)]
    if capitalised and len(capitalised) < len(parts):
        # Chinese authors of English papers write the surname in capitals, first or last: WANG Fang, Fang WANG.
        family = " ".join(part.title() for part in capitalised)
        return Name(family=family, given=" ".join(part for part in parts if part not in capitalised))
    # Lower-case particles before the surname belong to it: "Maria de Souza" -> "de Souza".
    cut = len(parts) - 1
    while cut > 1 and parts[cut - 1].islower():
        cut -= 1
    return Name(family=" ".join(parts[cut:]), given=" ".join(parts[:cut]))


def _is_capitalised_surname(part: str) -> bool:
    """A name token written all in capitals (WANG, OUYANG, SIMA-QIAN), not an initial (F, F.)."""
    letters = part.replace("-", "").replace("'", "")
    return len(letters) >= 2 and letters.isalpha() and letters.isupper()


def _language(paper: Paper) -> str:
    sample = paper.title or paper.source or " ".join(paper.authors)
    return "zh-CN" if has_cjk(sample) else "en"


# --------------------------------------------------------------------------------------------
# Missing fields


def missing_fields(paper: Paper) -> list[str]:
    missing = []
    if not [a for a in paper.authors if a.strip()]:
        missing.append("authors")
    if not paper.source.strip():
        missing.append("source")
    if paper.year <= 0:
        missing.append("year")
    return missing


# --------------------------------------------------------------------------------------------
# CSL-JSON

_DATE = re.compile(r"^(\d{4})(?:-(\d{1,2})(?:-(\d{1,2}))?)?")


def _date_parts(paper: Paper, kind: DocType) -> list[int]:
    """Year only, except newspapers, which are cited by their full issue date."""
    if paper.year <= 0:
        return []
    if kind.key == "newspaper":
        match = _DATE.match(paper.publication_date.strip())
        if match and int(match.group(1)) == paper.year:
            parts = [int(part) for part in match.groups() if part]
            if len(parts) > 1 and not 1 <= parts[1] <= 12:
                parts = parts[:1]
            if len(parts) > 2 and not 1 <= parts[2] <= 31:
                parts = parts[:2]
            return parts
    return [paper.year]


def _genre(paper: Paper, kind: DocType) -> str:
    zh = _language(paper) == "zh-CN"
    if kind.key == "phd":
        return "博士学位论文" if zh else "Doctoral dissertation"
    if kind.key == "master":
        return "硕士学位论文" if zh else "Master\u2019s thesis"
    if kind.key == "thesis":
        return "学位论文" if zh else "Thesis"
    return ""


def csl_item(paper: Paper) -> dict[str, Any]:
    """One CSL-JSON item: Han names as literals, Western names split, theses/books with a publisher."""
    kind = doc_type(paper)
    item: dict[str, Any] = {"id": paper.record_ref, "type": kind.csl, "title": paper.title}
    names = [parse_name(a) for a in paper.authors if a.strip()]
    if names:
        item["author"] = [
            {"literal": n.literal} if n.literal else {"family": n.family, "given": n.given} for n in names
        ]
    parts = _date_parts(paper, kind)
    if parts:
        item["issued"] = {"date-parts": [parts]}
    source = paper.source.strip()
    if source:
        # Theses name the degree-granting school and books the publisher; the rest sit in a container.
        item["publisher" if kind.csl in ("thesis", "book", "document") else "container-title"] = source
    genre = _genre(paper, kind)
    if genre:
        item["genre"] = genre
    for key, value in (("volume", paper.volume), ("issue", paper.issue), ("page", paper.pages)):
        if value.strip():
            item[key] = value.strip()
    if paper.doi.strip():
        item["DOI"] = paper.doi.strip()
    if paper.url.strip():
        item["URL"] = paper.url.strip()
    if paper.abstract.strip():
        item["abstract"] = paper.abstract.strip()
    keywords = [k.strip() for k in paper.keywords if k.strip()]
    if keywords:
        item["keyword"] = ", ".join(keywords)
    if paper.clc_codes:
        item["call-number"] = _clc(paper)
    item["language"] = _language(paper)
    return item


def _clc(paper: Paper) -> str:
    """中图分类号 as one call number (RIS CN, EndNote %L, CSL call-number): ``TP18; TP311.13``."""
    return "; ".join(code.strip() for code in paper.clc_codes if code.strip())


def _unique(names: list[str]) -> list[str]:
    """Suffix repeated identifiers (_2, _3 …): citeproc and BibTeX keep only one item per id."""
    seen: set[str] = set()
    out = []
    for name in names:
        candidate, n = name, 2
        while candidate.lower() in seen:
            candidate, n = f"{name}_{n}", n + 1
        seen.add(candidate.lower())
        out.append(candidate)
    return out


def csl_items(papers: list[Paper]) -> list[dict[str, Any]]:
    items = [csl_item(p) for p in papers]
    for item, item_id in zip(items, _unique([p.record_ref for p in papers])):
        item["id"] = item_id
    return items


# --------------------------------------------------------------------------------------------
# Shared pieces of the prose styles


@dataclass
class _Cite:
    """A record reduced to what the prose styles print: placeholders filled in, and the URL only for
    online-first articles (a database's abstract page is no access path for a printed article)."""

    kind: DocType
    english: bool
    names: list[Name]
    title: str
    source: str
    year: str
    date: list[int]
    volume: str
    issue: str
    pages: str
    doi: str
    url: str
    genre: str


def _typographic(text: str) -> str:
    """Straight apostrophes print as typographic ones, as in typeset reference lists."""
    return " ".join(text.split()).replace("'", "’")


# Volume and issue belong to journal articles, pages to parts of a larger work; a thesis or book
# carrying them (a data slip) cites without them.
_PAGED = ("article-journal", "paper-conference", "article-newspaper")


def _cite(paper: Paper) -> _Cite:
    kind = doc_type(paper)
    names = [parse_name(_typographic(a)) for a in paper.authors if a.strip()]
    return _Cite(
        kind=kind,
        english=_language(paper) == "en",
        names=names or [Name(literal=AUTHOR_PLACEHOLDER)],
        title=_typographic(paper.title),
        source=_typographic(paper.source) or SOURCE_PLACEHOLDER,
        year=str(paper.year) if paper.year > 0 else YEAR_PLACEHOLDER,
        date=_date_parts(paper, kind),
        volume=paper.volume.strip() if kind.csl == "article-journal" else "",
        issue=paper.issue.strip() if kind.csl == "article-journal" else "",
        pages=paper.pages.strip() if kind.csl in _PAGED else "",
        doi=paper.doi.strip(),
        url=paper.url.strip() if kind.key == "online_first" else "",
        genre=_genre(paper, kind),
    )


_TERMINAL = (".", "?", "!", "。", "？", "！")


def _join(parts: list[str], delimiter: str) -> str:
    """Join non-empty parts; a delimiter never doubles the period a part already ends with."""
    out = ""
    for part in parts:
        if not part:
            continue
        if out:
            glue = delimiter
            if glue.startswith(".") and out.endswith(_TERMINAL):
                glue = glue[1:]
            out += glue
        out += part
    return out


def _end(text: str, suffix: str = ".") -> str:
    return text if not suffix or text.endswith(_TERMINAL) else text + suffix


def _initials(given: str, *, period: bool, hyphen: bool, spaced: bool) -> str:
    """``Jean-Paul R.`` -> ``J.-P. R.`` (APA), ``J P R`` (GB/T), ``JPR`` (Vancouver)."""
    words = []
    for word in given.replace(".", " ").split():
        pieces = [p for p in word.split("-") if p]
        marks = [p[0].upper() + ("." if period else "") for p in pieces]
        if hyphen:
            words.append("-".join(marks))
        else:
            words.extend(marks)
    return (" " if spaced else "").join(words)


_STOP_WORDS = frozenset(
    "about above across afore after against al along alongside amid amidst among amongst anenst apropos apud "
    "around as aside astride at athwart atop barring before behind below beneath beside besides between beyond "
    "but by circa despite down during et except for forenenst from given in inside into lest like modulo near "
    "next notwithstanding of off on onto out over per plus pro qua sans since than through throughout thruout "
    "till to toward towards under underneath until unto up upon versus vs. v. vs v via vis-à-vis with within "
    "without or yet so and nor a an the de d' von van c ca".split()
)
_CASE_SEPARATOR = re.compile(r"([\u2018\u2019\u201c\u201d\"'\-\u2013\u2014/.,;?!:\[\]()])")


def title_case(text: str) -> str:
    """English title case as CSL processors apply it: stop words stay lower case except first/last
    and after a colon; words that already contain a capital are left alone."""
    segments = _CASE_SEPARATOR.split(text)
    first, after_punct = True, False
    last: tuple[int, int] | None = None
    out: list[list[str]] = []
    for index, segment in enumerate(segments):
        if index % 2:
            out.append([segment])
            if segment in "!?:":
                after_punct = True
            continue
        words = re.split(r"([ \u00a0\u2000-\u200b\u205f\u3000]+)", segment)
        following = segments[index + 1] if index + 1 < len(segments) else ""
        for j in range(0, len(words), 2):
            word = words[j]
            if not word:
                continue
            lower = word.lower()
            is_last_word = all(not w for w in words[j + 2 :: 2])
            capitalize = (
                (len(word) > 1 and lower not in _STOP_WORDS)
                or (index == 0 and is_last_word and following == "-")
                or first
                or after_punct
            )
            if capitalize and word == lower:
                words[j] = word[0].upper() + word[1:]
            first = after_punct = False
            last = (len(out), j)
        out.append(words)
    if last is not None:
        words = out[last[0]]
        word = words[last[1]]
        if len(word) > 1 and word.lower() in _STOP_WORDS:
            words[last[1]] = word[0].upper() + word[1:]
    return "".join("".join(words) for words in out)


_RANGE = re.compile(r"^(\d+)\s*[-\u2013]\s*(\d+)$")


def _page_range(pages: str, form: str, dash: str) -> str:
    match = _RANGE.match(pages)
    if not match:
        return pages
    first, last = match.groups()
    if form == "expanded" or len(first) != len(last) or int(last) <= int(first):
        return f"{first}{dash}{last}"
    if form == "chicago-16":
        start = int(first)
        if start < 100 or start % 100 == 0:
            return f"{first}{dash}{last}"
        form = "minimal" if start % 100 < 10 else "minimal-two"
    keep = 0
    while keep < len(last) and first[keep] == last[keep]:
        keep += 1
    tail = last[keep:]
    if form == "minimal-two" and len(tail) < 2:
        tail = last[-2:]
    return f"{first}{dash}{tail}"


def _issue(issue: str) -> str:
    """Issue ranges ("1-2") take an en dash like page ranges."""
    match = _RANGE.match(issue)
    return f"{match.group(1)}–{match.group(2)}" if match else issue


def _inner_quotes(title: str) -> str:
    """Inside a quoted title, double quotes become single ones (MLA, Chicago)."""
    return title.replace("“", "‘").replace("”", "’")


def _is_range(pages: str) -> bool:
    return bool(re.search(r"\d\s*[-\u2013,]\s*\d", pages))


_MONTHS = (
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
)
_MLA_MONTHS = ("Jan.", "Feb.", "Mar.", "Apr.", "May", "June", "July", "Aug.", "Sept.", "Oct.", "Nov.", "Dec.")


# Types printed inside a container (journal, newspaper, proceedings), whose title is title-cased in
# English; theses, books and unknown types name a publisher instead, printed as written.
_CONTAINED = ("article-journal", "article-newspaper", "paper-conference")


def _container(cite: _Cite) -> str:
    return title_case(cite.source) if cite.english and cite.kind.csl in _CONTAINED else cite.source


def _doi_link(doi: str) -> str:
    return doi if doi.lower().startswith("http") else f"https://doi.org/{doi}"


def _two_literals(names: list[Name]) -> bool:
    return len(names) == 2 and all(n.literal for n in names)


def _and_list(rendered: list[str], names: list[Name], conjunction: str) -> str:
    if len(rendered) == 1:
        return rendered[0]
    glue = f" {conjunction} " if _two_literals(names) else f", {conjunction} "
    return ", ".join(rendered[:-1]) + glue + rendered[-1]


# --------------------------------------------------------------------------------------------
# GB/T 7714-2015 (numeric)


def _gbt_name(name: Name) -> str:
    if name.literal:
        return name.literal
    return _join([name.family.upper(), _initials(name.given, period=False, hyphen=False, spaced=True)], " ")


def _gbt(cite: _Cite, number: int) -> str:
    names = [_gbt_name(n) for n in cite.names]
    if len(names) > 3:
        names = names[:3] + ["et al." if cite.english else "等"]
    online = bool(cite.doi or cite.url)
    title = f"{cite.title}[{cite.kind.gb}{'/OL' if online else ''}]"
    if cite.kind.csl == "article-newspaper":
        date = "-".join(f"{p:02d}" if i else str(p) for i, p in enumerate(cite.date)) or cite.year
        where = _join([cite.source, date], ", ") + (f"({cite.pages})" if cite.pages else "")
        body = [title, where]
    elif cite.kind.csl == "article-journal":
        head = _join([cite.source, cite.year, cite.volume], ", ") + (f"({cite.issue})" if cite.issue else "")
        body = [title, _join([head, cite.pages], ": ")]
    elif cite.kind.csl == "paper-conference":
        body = [f"{title}//{cite.source}", _join([cite.year, cite.pages], ": ")]
    else:
        body = [title, _join([_join([cite.source, cite.year], ", "), cite.pages], ": ")]
    access = _join([cite.url, f"DOI:{cite.doi}" if cite.doi else ""], ". ")
    return f"[{number}] " + _end(_join([", ".join(names), *body, access], ". "))


# --------------------------------------------------------------------------------------------
# APA 7


def _apa_names(names: list[Name]) -> str:
    rendered = [
        n.literal or f"{n.family}, {_initials(n.given, period=True, hyphen=True, spaced=True)}" for n in names
    ]
    if len(rendered) >= 21:
        return ", ".join(rendered[:19]) + ", … " + rendered[-1]
    return _and_list(rendered, names, "&")


def _apa(cite: _Cite, suffix: str = "") -> str:
    date = cite.year + suffix
    if cite.kind.csl == "article-newspaper" and len(cite.date) > 1:
        date += ", " + " ".join([_MONTHS[cite.date[1] - 1], *map(str, cite.date[2:])])
    pages = _page_range(cite.pages, "expanded", "\u2013")
    link = _doi_link(cite.doi) if cite.doi else cite.url
    if cite.kind.csl in _CONTAINED:
        serial = cite.volume + (f"({_issue(cite.issue)})" if cite.issue else "")
        source = _join([_container(cite), serial, pages], ", ")
        title = cite.title
    elif cite.genre and link:
        # A thesis found in a database names its school inside the bracket.
        title, source = f"{cite.title} [{cite.genre}, {cite.source}]", ""
    else:
        title = cite.title + (f" [{cite.genre}]" if cite.genre else "")
        source = cite.source
    text = _join([_apa_names(cite.names), f"({date})", title, _end(source) if source else ""], ". ")
    return _join([_end(text), link], " ")


# --------------------------------------------------------------------------------------------
# MLA 9


def _mla_names(names: list[Name]) -> str:
    first = names[0].literal or f"{names[0].family}, {names[0].given}"
    if len(names) >= 3:
        return f"{first}, et al."
    if len(names) == 2:
        second = names[1].literal or f"{names[1].given} {names[1].family}"
        return _and_list([first, second], names, "and")
    return first


def _mla(cite: _Cite, authors: str) -> str:
    title = title_case(cite.title) if cite.english else cite.title
    source = _container(cite)
    pages = _page_range(cite.pages, "minimal-two", "\u2013")
    issue = _issue(cite.issue)
    locator = f"{'pp.' if _is_range(cite.pages) else 'p.'} {pages}" if pages else ""
    link = _doi_link(cite.doi) if cite.doi else cite.url
    if cite.kind.csl == "thesis":
        body = [title, _join([cite.year, link], ", "), _join([source, cite.genre], ", ")]
        return _end(_join([authors, *body], ". "))
    if cite.kind.csl == "book":
        return _end(_join([authors, title, _join([source, cite.year, link], ", ")], ". "))
    if cite.kind.csl == "article-newspaper" and len(cite.date) > 1:
        date = " ".join([*map(str, cite.date[2:]), _MLA_MONTHS[cite.date[1] - 1], str(cite.date[0])])
    else:
        date = cite.year
    container = _join(
        [
            source,
            f"vol. {cite.volume}" if cite.volume else "",
            (f"nos. {issue}" if issue != cite.issue else f"no. {issue}") if issue else "",
            date,
            locator,
            link,
        ],
        ", ",
    )
    return _end(_join([authors, f"\u201c{_end(_inner_quotes(title))}\u201d {container}"], ". "))


# --------------------------------------------------------------------------------------------
# Chicago author-date (18th)


def _particle(family: str) -> tuple[str, str]:
    """Split "de Souza" into ("de", "Souza")."""
    words = family.split(" ")
    cut = 0
    while cut < len(words) - 1 and words[cut].islower():
        cut += 1
    return " ".join(words[:cut]), " ".join(words[cut:])


def _chicago_inverted(name: Name) -> str:
    # Chicago files "Maria de Souza" under S: "Souza, Maria de".
    particle, core = _particle(name.family)
    return f"{core}, " + _join([name.given, particle], " ")


def _chicago_names(names: list[Name]) -> str:
    rendered = [names[0].literal or _chicago_inverted(names[0])]
    rendered += [n.literal or f"{n.given} {n.family}" for n in names[1:]]
    if len(rendered) >= 7:
        return ", ".join(rendered[:3]) + ", et al."
    return _and_list(rendered, names, "and")


def _chicago(cite: _Cite, suffix: str = "") -> str:
    title = title_case(cite.title) if cite.english else cite.title
    source = _container(cite)
    if cite.english and cite.kind.csl not in _CONTAINED:
        # Chicago capitalises the first letter of a publisher or school.
        source = source[:1].upper() + source[1:]
    pages = _page_range(cite.pages, "chicago-16", "\u2013")
    link = _doi_link(cite.doi) if cite.doi else cite.url
    quoted = f"\u201c{_end(_inner_quotes(title))}\u201d"
    issue = _issue(cite.issue)
    if cite.kind.csl == "article-journal":
        serial = _join([cite.volume, f"({issue})" if issue and cite.volume else ""], " ")
        if issue and not cite.volume:
            head = _join([source, f"{'nos.' if issue != cite.issue else 'no.'} {issue}"], ", ")
        elif serial:
            head = _join([source, serial], " ")
        elif pages:
            head = source + ","
        elif cite.doi:
            head = source + ", ahead of print"
        else:
            head = source
        where = _join([head, pages], ": " if serial or cite.issue else " ")
        body = f"{quoted} {where}"
    elif cite.kind.csl in ("paper-conference", "article-newspaper"):
        extra = pages
        if cite.kind.csl == "article-newspaper":
            # Chicago cites newspapers by date, without page numbers.
            extra = " ".join([_MONTHS[cite.date[1] - 1], *map(str, cite.date[2:])]) if len(cite.date) > 1 else ""
        body = f"{quoted} {_join([source, extra], ', ')}"
    elif cite.kind.csl == "thesis":
        body = f"{quoted} {_join([cite.genre, source], ', ')}"
    elif cite.kind.csl == "book":
        body = _join([title, source], ". ")
    else:
        body = f"{quoted} {source}"
    return _end(_join([_chicago_names(cite.names), cite.year + suffix, _end(body), link], ". "))


# --------------------------------------------------------------------------------------------
# Vancouver / NLM (Citing Medicine)


def _vancouver_name(name: Name) -> str:
    if name.literal:
        return name.literal
    return _join([name.family, _initials(name.given, period=False, hyphen=False, spaced=False)], " ")


def _vancouver(cite: _Cite, number: int) -> str:
    names = [_vancouver_name(n) for n in cite.names]
    if len(names) >= 7:
        names = names[:6] + ["et al."]
    pages = _page_range(cite.pages, "minimal", "\u2013")
    title = cite.title + (f" [{cite.genre}]" if cite.genre else "")
    # Citing Medicine marks a source read online with [Internet] and its address with "Available from:".
    internet = bool(cite.url and not cite.doi)
    source = cite.source + (" [Internet]" if internet else "")
    if cite.kind.csl == "article-journal":
        serial = cite.volume + (f"({_issue(cite.issue)})" if cite.issue else "")
        locator = _join([serial, pages], ":")
        tail = [source, cite.year + (f";{locator}" if locator else "")]
    elif cite.kind.csl == "article-newspaper":
        date = cite.year
        if len(cite.date) > 1:
            date = " ".join([str(cite.date[0]), _MONTHS[cite.date[1] - 1][:3], *map(str, cite.date[2:])])
        tail = [source, _join([date, pages], ":")]
    elif cite.kind.csl == "paper-conference":
        tail = [f"In: {source}", cite.year, f"p. {pages}" if pages else ""]
    else:
        tail = [_join([source, cite.year], "; ")]
    text = _end(_join([", ".join(names), title, *tail], ". "))
    link = f"doi:{cite.doi}" if cite.doi else (f"Available from: {cite.url}" if cite.url else "")
    return f"{number}. " + _join([text, link], " ")


# --------------------------------------------------------------------------------------------
# Bibliography order of the author-date styles


def _collation_key(text: str) -> tuple[tuple[int, Any], ...]:
    """Approximates the locale collation CSL processors sort with: punctuation and case ignored,
    digit runs compared as numbers, Latin before Han, Han by code point."""
    folded = unicodedata.normalize("NFKD", text.casefold())
    key: list[tuple[int, Any]] = []
    digits = ""
    for char in folded:
        if char.isdigit():
            digits += char
            continue
        if digits:
            key.append((0, int(digits)))
            digits = ""
        if unicodedata.combining(char) or not char.isalnum():
            continue
        key.append((2, ord(char)) if has_cjk(char) else (1, char))
    if digits:
        key.append((0, int(digits)))
    return tuple(key)


def _name_tokens(names: list[Name], initials: bool, demote: bool) -> tuple[Any, ...]:
    # Processors compare sort keys word by word ("Schmidt A. M." before "Schmidt A., Moreau"; "an
    # search" before "and over"), so every word is its own token.
    parts: list[str] = []
    for name in names:
        if name.literal:
            parts.append(name.literal)
        elif demote:
            particle, core = _particle(name.family)
            parts += [core, name.given, particle]
        else:
            given = _initials(name.given, period=True, hyphen=True, spaced=True) if initials else name.given
            parts += [name.family, given]
    return tuple(_collation_key(word) for part in parts for word in part.split())


def _sort_key(cite: _Cite, style: str) -> tuple[Any, ...]:
    """Author, then date (undated last), then title; MLA sorts by title before date. Names are
    compared in their sort form as the style truncates them (MLA: first author when 3 or more)."""
    names = cite.names
    if style == "mla" and len(names) >= 3:
        names = names[:1]
    elif style == "chicago" and len(names) >= 7:
        names = names[:3]
    author = _name_tokens(names, initials=style == "apa", demote=style == "chicago")
    # APA orders works of one year by full date; Chicago and MLA by year only.
    parts = cite.date if style == "apa" else cite.date[:1]
    date = (0, *parts, *[0] * (3 - len(parts))) if parts else (1, 0, 0, 0)
    title = tuple(_collation_key(word) for word in cite.title.split())
    return (author, title, date) if style == "mla" else (author, date, title)


_SUBSTITUTE = "\u2014\u2014\u2014"


def _in_text_form(names: list[Name]) -> tuple[Any, ...]:
    """What an author-date citation shows of the names once given names and added names have done
    what they can: the first author with initials and the second surname for one or two authors;
    three or more stay apart unless the lists are identical."""
    if len(names) > 2:
        return tuple(names)
    first = names[0]
    primary = (first.literal, first.family, _initials(first.given, period=False, hyphen=False, spaced=False))
    return (primary, *[n.literal or n.family for n in names[1:]])


def _year_suffixes(ordered: list[_Cite]) -> list[str]:
    """2019a, 2019b …: works whose in-text citations would read the same, in bibliography order."""
    groups: dict[tuple[Any, ...], list[int]] = {}
    for index, cite in enumerate(ordered):
        groups.setdefault((_in_text_form(cite.names), cite.year), []).append(index)
    suffixes = [""] * len(ordered)
    for members in groups.values():
        if len(members) > 1:
            for number, index in enumerate(members):
                suffixes[index] = _suffix_letters(number)
    return suffixes


def _suffix_letters(number: int) -> str:
    """0 -> a, 25 -> z, 26 -> aa, 27 -> ab …"""
    letters = ""
    number += 1
    while number:
        number, rest = divmod(number - 1, 26)
        letters = chr(ord("a") + rest) + letters
    return letters


def prose_entries(papers: list[Paper], style: str) -> list[tuple[str, str]]:
    """(record_ref, entry) pairs of a prose style, in bibliography order (author-date styles sort)."""
    cites = [(p.record_ref, _cite(p)) for p in papers]
    if style == "gbt7714":
        return [(ref, _gbt(c, i)) for i, (ref, c) in enumerate(cites, 1)]
    if style == "vancouver":
        return [(ref, _vancouver(c, i)) for i, (ref, c) in enumerate(cites, 1)]
    ordered = sorted(cites, key=lambda rc: _sort_key(rc[1], style))
    if style in ("apa", "chicago"):
        suffixes = _year_suffixes([c for _, c in ordered])
        format_one = _apa if style == "apa" else _chicago
        return [(ref, format_one(c, suffix)) for (ref, c), suffix in zip(ordered, suffixes)]
    entries: list[tuple[str, str]] = []
    previous: list[Name] | None = None
    for ref, cite in ordered:
        # MLA replaces the names of consecutive works by the same authors with three em dashes.
        authors = _SUBSTITUTE if previous == cite.names else _mla_names(cite.names)
        entries.append((ref, _mla(cite, authors)))
        previous = cite.names
    return entries


# --------------------------------------------------------------------------------------------
# BibTeX

_TEX_SPECIAL = {
    "\\": "\\textbackslash{}",
    "{": "\\{",
    "}": "\\}",
    "%": "\\%",
    "&": "\\&",
    "#": "\\#",
    "_": "\\_",
    "$": "\\$",
    "~": "\\textasciitilde{}",
    "^": "\\textasciicircum{}",
}


_UNPAIRED_BRACES = {"{": "\\textbraceleft{}", "}": "\\textbraceright{}"}


def _braces_balanced(text: str) -> bool:
    depth = 0
    for char in text:
        depth += {"{": 1, "}": -1}.get(char, 0)
        if depth < 0:
            return False
    return depth == 0


def tex_escape(text: str) -> str:
    """Escape TeX specials. BibTeX counts braces even after a backslash, so ``\\{`` is used only
    when the value's braces pair up; otherwise they become brace-free commands."""
    text = " ".join(text.split())
    table = _TEX_SPECIAL if _braces_balanced(text) else {**_TEX_SPECIAL, **_UNPAIRED_BRACES}
    return "".join(table.get(char, char) for char in text)


def _tex_url(text: str) -> str:
    # url/doi stay verbatim for \url{}; braces and backslashes, which would end or break the field,
    # are percent-encoded (none of them is a valid URL character).
    return re.sub(r"\s+", "", text).replace("\\", "%5C").replace("{", "%7B").replace("}", "%7D")


_KEY_UNSAFE = re.compile(r"[^A-Za-z0-9_:./+-]")


def _bibtex_keys(papers: list[Paper]) -> list[str]:
    """Keys from record_ref, reduced to characters every BibTeX parser accepts, made unique."""
    return _unique([_KEY_UNSAFE.sub("_", p.record_ref.strip()) or f"record{i}" for i, p in enumerate(papers, 1)])


_BIBTEX_AND = re.compile(r"(?:^|\s)and(?:\s|$)", re.IGNORECASE)


def _bibtex_name(name: Name) -> str:
    """"Family, Given" for Western names; Han names, single words and names BibTeX would misread
    (an extra comma, the word "and") are braced whole so they are never split."""
    whole = name.literal or (f"{name.family}, {name.given}" if "," in name.given else f"{name.given} {name.family}")
    if name.literal or "," in whole or _BIBTEX_AND.search(whole):
        return "{" + tex_escape(whole) + "}"
    return f"{tex_escape(name.family)}, {tex_escape(name.given)}"


def _bibtex(papers: list[Paper]) -> str:
    entries = []
    for paper, key in zip(papers, _bibtex_keys(papers)):
        kind = doc_type(paper)
        source_field = {
            "article": "journal",
            "inproceedings": "booktitle",
            "phdthesis": "school",
            "mastersthesis": "school",
        }.get(kind.bibtex, "publisher")
        if kind.key == "newspaper":
            # Classic BibTeX has no newspaper type: @misc names the paper in howpublished.
            source_field = "howpublished"
        fields: list[tuple[str, str]] = []
        names = [parse_name(a) for a in paper.authors if a.strip()]
        if names:
            fields.append(("author", " and ".join(_bibtex_name(n) for n in names)))
        values = [
            ("title", tex_escape(paper.title)),
            (source_field, tex_escape(paper.source)),
            ("year", str(paper.year) if paper.year > 0 else ""),
            ("volume", tex_escape(paper.volume)),
            ("number", tex_escape(paper.issue)),
            ("pages", re.sub(r"^(\d+)-(\d+)$", r"\1--\2", tex_escape(paper.pages))),
            ("type", tex_escape(_genre(paper, kind)) if kind.key == "thesis" else ""),
            ("note", "网络首发" if kind.key == "online_first" else ""),
            ("doi", _tex_url(paper.doi)),
            ("url", _tex_url(paper.url)),
            ("abstract", tex_escape(paper.abstract)),
            ("keywords", tex_escape(", ".join(k.strip() for k in paper.keywords if k.strip()))),
            ("clc", tex_escape(_clc(paper))),
        ]
        fields += [(name, value) for name, value in values if value]
        lines = [f"@{kind.bibtex}{{{key},"] + [f"  {name} = {{{value}}}," for name, value in fields] + ["}"]
        entries.append("\n".join(lines))
    return ENTRY_SEPARATOR.join(entries)


# --------------------------------------------------------------------------------------------
# RIS and EndNote tagged


def _clean(text: str) -> str:
    return " ".join(text.split())


def _ris(papers: list[Paper]) -> str:
    records = []
    for paper in papers:
        kind = doc_type(paper)
        lines = [("TY", kind.ris)]
        lines += [("AU", _clean(a)) for a in paper.authors if a.strip()]
        lines.append(("TI", _clean(paper.title)))
        # T2 is the source of every RIS type (journal, proceedings, newspaper); theses and books
        # name the school/publisher in PB.
        lines.append(("PB" if kind.csl in ("thesis", "book", "document") else "T2", _clean(paper.source)))
        if kind.csl == "article-journal":
            lines.append(("JO", _clean(paper.source)))
        lines.append(("PY", str(paper.year) if paper.year > 0 else ""))
        if kind.key == "newspaper" and paper.publication_date.strip():
            lines.append(("DA", _clean(paper.publication_date).replace("-", "/")))
        lines += [("VL", _clean(paper.volume)), ("IS", _clean(paper.issue))]
        pages = _clean(paper.pages)
        if pages:
            start, dash, end = pages.partition("-")
            lines.append(("SP", start.strip()))
            if dash:
                lines.append(("EP", end.strip()))
        lines += [("M3", _genre(paper, kind)), ("DO", _clean(paper.doi)), ("UR", _clean(paper.url))]
        lines.append(("AB", _clean(paper.abstract)))
        lines += [("KW", _clean(k)) for k in paper.keywords if k.strip()]
        lines.append(("CN", _clean(_clc(paper))))
        if kind.key == "online_first":
            lines.append(("N1", "网络首发"))
        body = [f"{tag}  - {value}" for tag, value in lines if value]
        records.append("\r\n".join(body + ["ER  - "]))
    return "\r\n\r\n".join(records) + "\r\n"


def _endnote(papers: list[Paper]) -> str:
    records = []
    for paper in papers:
        kind = doc_type(paper)
        lines = [("%0", kind.endnote)]
        lines += [("%A", _clean(a)) for a in paper.authors if a.strip()]
        lines.append(("%T", _clean(paper.title)))
        source_tag = {"thesis": "%I", "book": "%I", "document": "%I", "paper-conference": "%B"}.get(kind.csl, "%J")
        lines.append((source_tag, _clean(paper.source)))
        lines.append(("%D", str(paper.year) if paper.year > 0 else ""))
        if kind.key == "newspaper":
            lines.append(("%8", _clean(paper.publication_date)))
        lines += [("%V", _clean(paper.volume)), ("%N", _clean(paper.issue)), ("%P", _clean(paper.pages))]
        lines += [("%9", _genre(paper, kind)), ("%R", _clean(paper.doi)), ("%U", _clean(paper.url))]
        lines.append(("%X", _clean(paper.abstract)))
        lines += [("%K", _clean(k)) for k in paper.keywords if k.strip()]
        lines.append(("%L", _clean(_clc(paper))))
        if kind.key == "online_first":
            lines.append(("%Z", "网络首发"))
        records.append("\n".join(f"{tag} {value}" for tag, value in lines if value))
    return ENTRY_SEPARATOR.join(records)


# --------------------------------------------------------------------------------------------
# Data formats


def _json_text(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False, indent=2)


_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: str) -> str:
    """A spreadsheet opens cells starting with = + - @ (also after tabs/CRs) as formulas: quote them."""
    stripped = value.lstrip(" \t\r\n")
    if value.startswith(_FORMULA_START) or stripped.startswith(_FORMULA_START[:4]):
        return "'" + value
    return value


CSV_COLUMNS = ("title", "authors", "source", "year", "volume", "issue", "pages", "doi", "url", "clc")


def _csv(papers: list[Paper]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerow(CSV_COLUMNS)
    for paper in papers:
        row = [
            paper.title,
            "; ".join(a.strip() for a in paper.authors if a.strip()),
            paper.source,
            str(paper.year) if paper.year > 0 else "",
            paper.volume,
            paper.issue,
            paper.pages,
            paper.doi,
            paper.url,
            _clc(paper),
        ]
        writer.writerow([csv_cell(cell) for cell in row])
    # The byte-order mark lets Excel detect UTF-8 and show Chinese text instead of mojibake.
    return "\ufeff" + buffer.getvalue()


def _markdown(papers: list[Paper]) -> str:
    lines = []
    for paper in papers:
        title = re.sub(r"([\\\[\]*_`<>])", r"\\\1", _clean(paper.title)) or "(无题名)"
        url = _clean(paper.url).replace(" ", "%20").replace("(", "%28").replace(")", "%29")
        line = f"[{title}]({url})" if url else title
        lines.append(f"- {line}")
    return ENTRY_SEPARATOR.join(lines)


# --------------------------------------------------------------------------------------------
# custom templates

_TOKEN = re.compile(r"\{\{|\}\}|\{([^{}]*)\}|[{}]")


def _template_tokens(template: str) -> list[tuple[str, str]]:
    """Split a template into ("text", s) and ("field", name) tokens, or raise INVALID_TEMPLATE."""
    if len(template.encode("utf-8")) > MAX_TEMPLATE_BYTES:
        raise CnkiError("INVALID_TEMPLATE", f"custom 模板不能超过 {MAX_TEMPLATE_BYTES} 字节。")
    if "\x00" in template or "\x01" in template:
        raise CnkiError("INVALID_TEMPLATE", "custom 模板不能包含控制字符。")
    tokens: list[tuple[str, str]] = []
    position = 0
    for match in _TOKEN.finditer(template):
        if match.start() > position:
            tokens.append(("text", template[position : match.start()]))
        position = match.end()
        token = match.group(0)
        if token in ("{{", "}}"):
            tokens.append(("text", token[0]))
        elif token in ("{", "}"):
            hint = "字面花括号请写成 {{ 或 }}。"
            raise CnkiError(
                "INVALID_TEMPLATE",
                f"custom 模板中有未配对的“{token}”（第 {match.start() + 1} 个字符）；{hint}",
            )
        else:
            name = match.group(1)
            if name not in TEMPLATE_FIELDS:
                allowed = "、".join(f"{{{f}}}" for f in TEMPLATE_FIELDS)
                raise CnkiError(
                    "INVALID_TEMPLATE",
                    f"custom 模板中的占位符 {{{name}}} 不受支持；可用：{allowed}。",
                    details={"placeholder": name, "allowed": list(TEMPLATE_FIELDS)},
                )
            tokens.append(("field", name))
    if position < len(template):
        tokens.append(("text", template[position:]))
    return tokens


def validate_template(template: str) -> None:
    """Raise INVALID_TEMPLATE for unknown placeholders, unbalanced braces or oversized templates."""
    _template_tokens(template)


def _template_values(paper: Paper) -> dict[str, str]:
    authors = ", ".join(_clean(a) for a in paper.authors if a.strip()) or AUTHOR_PLACEHOLDER
    return {
        "title": _clean(paper.title),
        "authors": authors,
        "source": _clean(paper.source),
        "journal": _clean(paper.source),
        "year": str(paper.year) if paper.year > 0 else "",
        "volume": _clean(paper.volume),
        "issue": _clean(paper.issue),
        "pages": _clean(paper.pages),
        "doi": _clean(paper.doi),
        "url": _clean(paper.url),
        "record_ref": paper.record_ref,
        "type": _clean(paper.document_type),
        "clc": _clean(_clc(paper)),
    }


def _custom(papers: list[Paper], template: str) -> str:
    tokens = _template_tokens(template)
    entries = []
    for paper in papers:
        values = _template_values(paper)
        # Values are inserted after parsing, so braces inside them are never read as placeholders.
        entries.append("".join(values[v] if kind == "field" else v for kind, v in tokens))
    return ENTRY_SEPARATOR.join(entries)


# --------------------------------------------------------------------------------------------
# Entry point


def normalize_format(fmt: str | None) -> str:
    name = (fmt or "").strip().lower()
    name = _ALIASES.get(name, name)
    if name not in FORMATS:
        raise CnkiError(
            "INVALID_FORMAT",
            f"不支持的格式：{fmt}；可用：{'、'.join(FORMATS)}。",
            details={"allowed": list(FORMATS)},
        )
    return name


def render(papers: list[Paper], fmt: str, template: str | None = None) -> CitationResult:
    """Render ``papers`` (in the caller's order) in format ``fmt``.

    Raises INVALID_FORMAT for an unknown format and INVALID_TEMPLATE for a bad ``custom`` template.
    """
    name = normalize_format(fmt)
    if name == "custom":
        text = _custom(papers, template or "")
    elif name in PROSE_FORMATS:
        text = ENTRY_SEPARATOR.join(entry for _, entry in prose_entries(papers, name))
    elif name == "bibtex":
        text = _bibtex(papers)
    elif name == "ris":
        text = _ris(papers)
    elif name == "endnote":
        text = _endnote(papers)
    elif name == "csl_json":
        text = _json_text(csl_items(papers))
    elif name == "json":
        text = _json_text([public_paper(p) for p in papers])
    elif name == "csv":
        text = _csv(papers)
    else:
        text = _markdown(papers)
    missing = {p.record_ref: m for p in papers if (m := missing_fields(p))}
    return CitationResult(format=name, count=len(papers), text=text, missing_fields=missing)


def export(
    papers: list[Paper],
    fmt: str,
    template: str | None = None,
    *,
    data_dir: Path | None = None,
    filename: str = "",
) -> CitationResult:
    """Render, save to ``<data_dir>/exports/<filename>`` when a name is given, apply the size rule.

    The file is written before the size check, so an oversized export still reaches the disk; the
    reply then carries only ``path``. Without a file name an oversized text is OUTPUT_TOO_LARGE.
    Existing files are never overwritten (FILE_EXISTS). Blocks on disk I/O: use asyncio.to_thread.
    """
    if filename:
        files.validate_filename(filename)
    result = render(papers, fmt, template)
    if filename:
        if data_dir is None:
            raise ValueError("data_dir is required to save an export")
        folder = files.safe_folder(Path(data_dir), EXPORTS_FOLDER)
        result.path = files.write_new_file(folder, filename, result.text.encode("utf-8")).path
    size = len(result.text.encode("utf-8"))
    if size > MAX_TEXT_BYTES:
        if not result.path:
            raise CnkiError(
                "OUTPUT_TOO_LARGE",
                f"导出内容有 {size} 字节，超过 512 KB；请指定 filename 保存为文件。",
                details={"bytes": size, "limit": MAX_TEXT_BYTES},
            )
        result.text = ""
    return result
