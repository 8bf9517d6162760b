"""The prose styles: GB/T 7714 (2015 numeric, 2025 numeric, 2015 author-date), APA 7, MLA 9, Chicago
author-date and Vancouver/NLM.

Each follows the published rules as the official CSL styles encode them (checked against citeproc-js);
missing authors, source or year are shown as placeholders such as ``[作者未取得]``.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cnki_mcp.core.hanzi import han_weight, is_han
from cnki_mcp.core.model import Paper
from cnki_mcp.references.citations._common import (
    AUTHOR_PLACEHOLDER,
    SOURCE_PLACEHOLDER,
    YEAR_PLACEHOLDER,
    DocType,
    Name,
    date_parts,
    doc_type,
    genre,
    has_cjk,
    language,
    parse_name,
)

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
        english=language(paper) == "en",
        names=names or [Name(literal=AUTHOR_PLACEHOLDER)],
        title=_typographic(paper.title),
        source=_typographic(paper.source) or SOURCE_PLACEHOLDER,
        year=str(paper.year) if paper.year > 0 else YEAR_PLACEHOLDER,
        date=date_parts(paper, kind),
        volume=paper.volume.strip() if kind.csl == "article-journal" else "",
        issue=paper.issue.strip() if kind.csl == "article-journal" else "",
        pages=paper.pages.strip() if kind.csl in _PAGED else "",
        doi=paper.doi.strip(),
        url=paper.url.strip() if kind.key == "online_first" else "",
        genre=genre(paper, kind),
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
# GB/T 7714: 2015 numeric, 2025 numeric and 2015 author-date (著者-出版年制)


@dataclass(frozen=True)
class _GbtMarks:
    """What tells the GB/T styles apart in print: 2015 uses half-width punctuation and capital
    family names; 2025 full-width punctuation, names as written and hyphenated initials (J-P);
    the author-date style puts the year after the names and drops it from the source."""

    comma: str
    colon: str
    parens: tuple[str, str]
    capitals: bool
    hyphen: bool
    english_et_al: bool  # "et al." for English works (2015), 「等」 for every work (2025's CSL)
    author_date: bool = False


_GBT_MARKS = {
    "gbt7714": _GbtMarks(", ", ": ", ("(", ")"), capitals=True, hyphen=False, english_et_al=True),
    "gbt7714_2025": _GbtMarks("，", "：", ("（", "）"), capitals=False, hyphen=True, english_et_al=False),
    "gbt7714_author_date": _GbtMarks(
        ", ", ": ", ("(", ")"), capitals=True, hyphen=False, english_et_al=True, author_date=True
    ),
}
GBT_STYLES = tuple(_GBT_MARKS)


def _gbt_name(name: Name, marks: _GbtMarks) -> str:
    if name.literal:
        return name.literal
    family = name.family.upper() if marks.capitals else name.family
    return _join([family, _initials(name.given, period=False, hyphen=marks.hyphen, spaced=True)], " ")


def _gbt_names(cite: _Cite, marks: _GbtMarks) -> str:
    names = [_gbt_name(n, marks) for n in cite.names]
    if len(names) > 3:
        names = names[:3] + ["et al." if cite.english and marks.english_et_al else "等"]
    return marks.comma.join(names)


def _gbt(cite: _Cite, style: str, lead: str) -> str:
    """One entry; ``lead`` is the number (``[1] ``) of the numeric styles or the author-date suffix."""
    marks = _GBT_MARKS[style]
    comma, colon = marks.comma, marks.colon
    wrap = f"{marks.parens[0]}{{}}{marks.parens[1]}".format
    online = bool(cite.doi or cite.url)
    title = f"{cite.title}[{cite.kind.gb}{'/OL' if online else ''}]"
    year = "" if marks.author_date else cite.year
    # The 2025 style prints serial titles without periods (strip-periods).
    serial = cite.source.replace(".", "") if style == "gbt7714_2025" else cite.source
    if cite.kind.csl == "article-newspaper":
        date = "-".join(f"{p:02d}" if i else str(p) for i, p in enumerate(cite.date)) or cite.year
        body = [title, _join([serial, date], comma) + (wrap(cite.pages) if cite.pages else "")]
    elif cite.kind.csl == "article-journal":
        head = _join([serial, year, cite.volume], comma) + (wrap(cite.issue) if cite.issue else "")
        body = [title, _join([head, cite.pages], colon)]
    elif cite.kind.csl == "paper-conference":
        body = [f"{title}//{cite.source}", _join([year, cite.pages], colon)]
    else:
        body = [title, _join([_join([cite.source, year], comma), cite.pages], colon)]
    access = _join([cite.url, f"DOI:{cite.doi}" if cite.doi else ""], ". ")
    names = _gbt_names(cite, marks)
    if marks.author_date:
        return _end(_join([_join([names, cite.year + lead], comma), *body, access], ". "))
    return lead + _end(_join([names, *body, access], ". "))


def _gbt_sort_key(cite: _Cite) -> tuple[Any, ...]:
    """著者-出版年制 order: the names as printed (first three), then the year; Han names in pinyin
    order before Latin ones, as CJK collations sort."""
    names = " ".join(_gbt_name(n, _GBT_MARKS["gbt7714_author_date"]) for n in cite.names[:3])
    return (_pinyin_collation_key(names), _pinyin_collation_key(cite.year))


def _pinyin_collation_key(text: str) -> tuple[tuple[int, Any], ...]:
    """Digits (as numbers) before Han (by pinyin) before Latin letters; case and punctuation ignored."""
    return _digit_runs_key(unicodedata.normalize("NFKC", text).casefold(), _pinyin_weight)


def _pinyin_weight(char: str) -> tuple[int, Any] | None:
    if is_han(char):
        return (1, han_weight(char))
    return (2, char) if char.isalnum() else None


def _gbt_in_text_form(names: list[Name]) -> tuple[Any, ...]:
    """The 著者-出版年制 citation once names and the first author's initials are added: works tell
    apart unless every name (and the first initials) and the year agree."""
    first = names[0]
    primary = (first.literal, first.family, _initials(first.given, period=False, hyphen=False, spaced=False))
    return (primary, *[n.literal or n.family for n in names[1:]])


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
    # Journal titles print without periods (J. Inf. Sci. -> J Inf Sci), as NLM abbreviations do.
    journal = cite.source.replace(".", "") if cite.kind.csl == "article-journal" else cite.source
    source = journal + (" [Internet]" if internet else "")
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
    return _digit_runs_key(unicodedata.normalize("NFKD", text.casefold()), _locale_weight)


def _locale_weight(char: str) -> tuple[int, Any] | None:
    if unicodedata.combining(char) or not char.isalnum():
        return None
    return (2, ord(char)) if has_cjk(char) else (1, char)


def _digit_runs_key(text: str, weigh: Callable[[str], tuple[int, Any] | None]) -> tuple[tuple[int, Any], ...]:
    """A sort key: each run of digits as one number (before everything else), every other character as
    ``weigh`` ranks it (None: ignored)."""
    key: list[tuple[int, Any]] = []
    digits = ""
    for char in text:
        if char.isdigit():
            digits += char
            continue
        if digits:
            key.append((0, int(digits)))
            digits = ""
        weight = weigh(char)
        if weight is not None:
            key.append(weight)
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


def _year_suffixes(ordered: list[_Cite], form: Callable[[list[Name]], tuple[Any, ...]] = _in_text_form) -> list[str]:
    """2019a, 2019b …: works whose in-text citations would read the same, in bibliography order."""
    groups: dict[tuple[Any, ...], list[int]] = {}
    for index, cite in enumerate(ordered):
        groups.setdefault((form(cite.names), cite.year), []).append(index)
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
    if style == "gbt7714_author_date":
        ordered = sorted(cites, key=lambda rc: _gbt_sort_key(rc[1]))
        suffixes = _year_suffixes([c for _, c in ordered], _gbt_in_text_form)
        return [(ref, _gbt(c, style, suffix)) for (ref, c), suffix in zip(ordered, suffixes)]
    if style in GBT_STYLES:
        return [(ref, _gbt(c, style, f"[{i}] ")) for i, (ref, c) in enumerate(cites, 1)]
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
