"""A reference as written against a CNKI record: does the record match it, which one of several, and
which fields differ.

What hand-made lists do is read as agreement: full-width or half-width punctuation, 《》 and quotes
around titles, traditional characters, case, en dashes in page ranges, 等 / et al. after the first
names, pinyin names for Han ones (Wang Liming, WANG L M, Liming Wang), abbreviated journal titles
(J Informetr), abbreviated page ranges (101-9). A title that misses its subtitle still finds its record,
and is reported as a difference. Pure functions.
"""

from __future__ import annotations

import itertools
import re
import unicodedata
from collections.abc import Sequence

from cnki_mcp.core.hanzi import has_han, readings, simplified, split_name
from cnki_mcp.core.model import Paper
from cnki_mcp.core.refcheck_model import FieldDifference, ParsedReference
from cnki_mcp.core.text import doi_key

# How a given title relates to a record's title.
SAME = "same"
PARTIAL = "partial"  # one is the other without its subtitle (or a longer head)
TRANSLATED = "translated"  # an English title given for a record in Chinese

_PARTIAL_SHARE = 0.4
_MIN_PARTIAL_CHARS = 4
_STOP_WORDS = frozenset({"of", "the", "and", "for", "in", "on", "a", "an", "to", "&"})
# Readings tried per name: a name of four characters with three readings each stays small.
_MAX_SPELLINGS = 64


def match_key(text: str) -> str:
    """Letters and digits only: simplified, width-folded, case-folded, 《》 and punctuation dropped."""
    folded = unicodedata.normalize("NFKC", simplified(text)).casefold()
    return "".join(char for char in folded if char.isalnum())


def title_relation(given: str, record_title: str) -> str:
    """SAME, PARTIAL, TRANSLATED or "" (no relation) between a given title and a record's title."""
    mine, theirs = match_key(given), match_key(record_title)
    if not mine or not theirs:
        return ""
    if mine == theirs:
        return SAME
    shorter, longer = sorted((mine, theirs), key=len)
    if longer.startswith(shorter) and len(shorter) >= max(_MIN_PARTIAL_CHARS, _PARTIAL_SHARE * len(longer)):
        return PARTIAL
    if not has_han(given) and has_han(record_title):
        return TRANSLATED
    return ""


# --- names ------------------------------------------------------------------------------------------


def _latin_tokens(name: str) -> list[str]:
    text = unicodedata.normalize("NFKD", name)
    text = "".join(char for char in text if not unicodedata.combining(char))
    return [t for t in re.split(r"[\s,.\-'’]+", text.casefold()) if t]


def _spellings(chars: str) -> set[str]:
    """Every pinyin spelling of Han characters run together (li ming -> liming)."""
    options = [readings(char) or (char,) for char in chars]
    spelled: set[str] = set()
    for combination in itertools.islice(itertools.product(*options), _MAX_SPELLINGS):
        spelled.add("".join(combination))
    return spelled


def _initials_of(chars: str) -> set[str]:
    options = [{r[0] for r in readings(char)} or {char} for char in chars]
    return {"".join(c) for c in itertools.islice(itertools.product(*options), _MAX_SPELLINGS)}


def _pinyin_matches(latin: str, han: str) -> bool:
    """``Wang Liming``, ``WANG Li-ming``, ``Wang L M``, ``Liming Wang``, ``L. Wang`` for 王利明."""
    surname, given = split_name(simplified(han))
    tokens = _latin_tokens(latin)
    if not tokens:
        return False
    family_spellings = _spellings(surname)
    for family_at in (0, len(tokens) - 1):
        if tokens[family_at] not in family_spellings:
            continue
        rest = "".join(tokens[:family_at] + tokens[family_at + 1 :])
        if not rest:
            return True  # a surname alone cannot say more
        if given and rest in _spellings(given) or rest in _initials_of(given) or rest in {s[:1] for s in _initials_of(given)}:
            return True
    return False


def _latin_matches(given: str, record: str) -> bool:
    """Western names: the same family name, and the same first initial when both give one."""
    mine, theirs = _latin_tokens(given), _latin_tokens(record)
    if not mine or not theirs:
        return False
    for family in {theirs[-1], theirs[0]}:
        if family in mine:
            other_mine = [t for t in mine if t != family]
            other_theirs = [t for t in theirs if t != family]
            if not other_mine or not other_theirs or other_mine[0][0] == other_theirs[0][0]:
                return True
    return False


def name_matches(given: str, record: str) -> bool:
    given, record = given.strip(), record.strip()
    if has_han(given) and has_han(record):
        return match_key(given) == match_key(record)
    if has_han(record):
        return _pinyin_matches(given, record)
    if has_han(given):
        return False
    return _latin_matches(given, record)


# --- fields -----------------------------------------------------------------------------------------


def _authors_difference(parsed: ParsedReference, record: Sequence[str]) -> FieldDifference | None:
    given = [name for name in parsed.authors if name.strip()]
    if not given or not record:
        return None
    pairs = list(zip(given, record))
    in_order = all(name_matches(mine, theirs) for mine, theirs in pairs)
    complete = len(given) == len(record) or (parsed.et_al and len(given) < len(record))
    if in_order and complete:
        return None
    shown = ", ".join(given) + (" 等" if parsed.et_al else "")
    return FieldDifference(field="authors", given=shown, cnki=", ".join(record))


def _page_span(text: str) -> tuple[str, str]:
    numbers = re.findall(r"[A-Za-z]?\d+", text.translate({0x2013: "-", 0x2014: "-", 0xFF0D: "-"}))
    if not numbers:
        return "", ""
    first, last = numbers[0], numbers[1] if len(numbers) > 1 else ""
    if last and first.isdigit() and last.isdigit() and len(last) < len(first):
        # An abbreviated range: 101-9 is 101-109, 1001-12 is 1001-1012.
        last = first[: len(first) - len(last)] + last
    return first.lstrip("0") or "0", last.lstrip("0")


def _pages_agree(given: str, record: str) -> bool:
    mine, theirs = _page_span(given), _page_span(record)
    if not mine[0] or not theirs[0]:
        return True
    if mine[0] != theirs[0]:
        return False
    return not mine[1] or not theirs[1] or mine[1] == theirs[1]


def _number_key(text: str) -> str:
    key = match_key(text)
    return key.lstrip("0") or key


def source_agrees(given: str, record: str) -> bool:
    """The same source, or one written shorter: 中国工业经济 / 中国工业经济杂志, J Informetr / Journal of Informetrics."""
    mine, theirs = match_key(given), match_key(record)
    if not mine or not theirs or mine == theirs:
        return True
    shorter, longer = sorted((mine, theirs), key=len)
    if has_han(given) and len(shorter) >= _MIN_PARTIAL_CHARS and shorter in longer:
        return True
    words = [w for w in _latin_tokens(given) if w not in _STOP_WORDS]
    full = [w for w in _latin_tokens(record) if w not in _STOP_WORDS]
    return bool(words) and _abbreviates(words, full)


def _abbreviates(words: list[str], full: list[str]) -> bool:
    """Each abbreviated word starts a word of the full title, in order (``j inf sci`` of ``journal of
    information science``)."""
    at = 0
    for word in words:
        while at < len(full) and not full[at].startswith(word):
            at += 1
        if at == len(full):
            return False
        at += 1
    return True


def differences(parsed: ParsedReference, paper: Paper, relation: str) -> list[FieldDifference]:
    """The fields the entry gives that the record says otherwise, in a fixed order."""
    found: list[FieldDifference] = []
    if parsed.year and paper.year and parsed.year != paper.year:
        found.append(FieldDifference(field="year", given=str(parsed.year), cnki=str(paper.year)))
    if parsed.pages and paper.pages and not _pages_agree(parsed.pages, paper.pages):
        found.append(FieldDifference(field="pages", given=parsed.pages, cnki=paper.pages))
    authors = _authors_difference(parsed, paper.authors)
    if authors is not None:
        found.append(authors)
    if relation == PARTIAL:
        found.append(FieldDifference(field="title", given=parsed.title, cnki=paper.title))
    # A source named in another script (an English journal name for a record CNKI files under its
    # Chinese name, as with English titles of Chinese papers) cannot be compared.
    comparable = relation != TRANSLATED and has_han(parsed.source) == has_han(paper.source)
    if comparable and parsed.source and paper.source and not source_agrees(parsed.source, paper.source):
        found.append(FieldDifference(field="source", given=parsed.source, cnki=paper.source))
    for field in ("volume", "issue"):
        mine, theirs = getattr(parsed, field), getattr(paper, field)
        if mine and theirs and _number_key(mine) != _number_key(theirs):
            found.append(FieldDifference(field=field, given=mine, cnki=theirs))
    if parsed.doi and paper.doi and doi_key(parsed.doi) != doi_key(paper.doi):
        found.append(FieldDifference(field="doi", given=parsed.doi, cnki=paper.doi))
    return found


def not_compared(parsed: ParsedReference, paper: Paper, relation: str) -> list[str]:
    """The fields the entry gives that the record cannot confirm: CNKI's record lacks them (a detail page
    that could not be read leaves volume, issue, pages and DOI empty), or names the source in another script."""
    fields = [
        name
        for name in ("year", "pages", "authors", "source", "volume", "issue", "doi")
        if getattr(parsed, name) and not getattr(paper, name)
    ]
    if parsed.source and paper.source and (relation == TRANSLATED or has_han(parsed.source) != has_han(paper.source)):
        fields.insert(len([f for f in fields if f in ("year", "pages", "authors")]), "source")
    return fields


# --- choosing among records --------------------------------------------------------------------------

# GB/T 7714 type codes and the CNKI document types they name.
_TYPE_MARKERS = {"J": ("期刊",), "D": ("博士", "硕士", "学位"), "C": ("会议",), "N": ("报纸",), "M": ("图书",)}


def first_author_agrees(parsed: ParsedReference, paper: Paper) -> bool:
    return bool(parsed.authors and paper.authors and name_matches(parsed.authors[0], paper.authors[0]))


def plausible(parsed: ParsedReference, paper: Paper) -> bool:
    """Whether the record can be the work the entry means: some author in common, or the same year,
    when the entry gives them (one wrong fact, such as the year or the order of names, is allowed)."""
    checks = []
    if parsed.authors and paper.authors:
        checks.append(any(name_matches(mine, theirs) for mine in parsed.authors for theirs in paper.authors))
    if parsed.year and paper.year:
        checks.append(parsed.year == paper.year)
    return not checks or any(checks)


def _agreement(parsed: ParsedReference, paper: Paper) -> int:
    """How many discriminating facts of the entry the record shares (authors, year, type, source)."""
    score = 0
    if first_author_agrees(parsed, paper):
        score += 1
    if parsed.year and parsed.year == paper.year:
        score += 1
    markers = _TYPE_MARKERS.get(parsed.type_code, ())
    if markers and any(marker in paper.document_type for marker in markers):
        score += 1
    if parsed.source and paper.source and match_key(parsed.source) == match_key(paper.source):
        score += 1
    return score


def choose(parsed: ParsedReference, candidates: Sequence[tuple[Paper, str]]) -> tuple[Paper | None, list[Paper]]:
    """The record the entry means, or (None, the tied records) when its facts do not single one out.

    Titles of the same relation compete (SAME before PARTIAL before TRANSLATED); among those, the one
    record sharing the most facts wins. A record that shares neither an author nor the year the entry
    gives is another work with a like title (a paper called 机器学习 for the book 机器学习). A translated
    title is accepted only with a first author that agrees, since the listing does not show the English
    title the record was found by.
    """
    for relation in (SAME, PARTIAL, TRANSLATED):
        papers = [paper for paper, rel in candidates if rel == relation and plausible(parsed, paper)]
        if relation == TRANSLATED:
            papers = [paper for paper in papers if first_author_agrees(parsed, paper)]
        if not papers:
            continue
        scores = [_agreement(parsed, paper) for paper in papers]
        best = max(scores)
        leaders = [paper for paper, score in zip(papers, scores) if score == best]
        if len(leaders) == 1:
            return leaders[0], []
        return None, leaders
    return None, []
