"""Normalisation keys shared by the parsers, the store and ranking.

These functions define identity: two records merge or a detail page binds to a request only when
these keys agree, so they follow the reference rules exactly (Go's notion of whitespace, Go's
lower-casing, the exact punctuation set of the title key).
"""

from __future__ import annotations

import datetime
import json
import re
import unicodedata
from collections.abc import Iterable
from typing import Any

# Go's unicode.IsSpace set (what strings.Fields splits on). Python's str.split() would also split on
# the information separators U+001C–U+001F, which Go keeps.
_SPACE_CLASS = "\t\n\v\f\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
_SPACES = re.compile(f"[{_SPACE_CLASS}]+")
_SPACE_CHARS = "\t\n\v\f\r \x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000" + "".join(
    chr(point) for point in range(0x2000, 0x200B)
)

_TITLE_PUNCT = "—–：:，,；;。！!？?（()）“”「」《》"
_SPACE_BEFORE_PUNCT = re.compile(f" (?=[{re.escape(_TITLE_PUNCT)}])")
_SPACE_AFTER_PUNCT = re.compile(f"(?<=[{re.escape(_TITLE_PUNCT)}]) ")

# A UTF-16 surrogate code point: in a Python str it can only be half of a pair JSON's \uXXXX escapes split.
_SURROGATE = re.compile("[\ud800-\udfff]")

_DOI_PREFIXES = ("https://doi.org/", "http://doi.org/", "doi:")

# Unicode Script=Han (Unicode 15.1), the table Go's unicode.Han is built from.
HAN_RANGES: tuple[tuple[int, int], ...] = (
    (0x2E80, 0x2E99),
    (0x2E9B, 0x2EF3),
    (0x2F00, 0x2FD5),
    (0x3005, 0x3005),
    (0x3007, 0x3007),
    (0x3021, 0x3029),
    (0x3038, 0x303B),
    (0x3400, 0x4DBF),
    (0x4E00, 0x9FFF),
    (0xF900, 0xFA6D),
    (0xFA70, 0xFAD9),
    (0x16FE2, 0x16FE2),
    (0x16FE3, 0x16FE3),
    (0x16FF0, 0x16FF1),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B739),
    (0x2B740, 0x2B81D),
    (0x2B820, 0x2CEA1),
    (0x2CEB0, 0x2EBE0),
    (0x2EBF0, 0x2EE5D),
    (0x2F800, 0x2FA1D),
    (0x30000, 0x3134A),
    (0x31350, 0x323AF),
)


def has_surrogate(text: str) -> bool:
    """Whether ``text`` holds a surrogate code point (in a Python str: half of a pair, so not valid text)."""
    return _SURROGATE.search(text) is not None


def without_lone_surrogates(text: str) -> str:
    """``text`` with surrogate halves paired into their character and unpaired ones replaced by U+FFFD, so
    it can be encoded (a lone ``\\ud83d`` in CNKI's JSON would otherwise fail every later save)."""
    if not has_surrogate(text):
        return text
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def clean_strings(value: Any) -> Any:
    """A decoded JSON value with every string (keys too) passed through :func:`without_lone_surrogates`."""
    if isinstance(value, str):
        return without_lone_surrogates(value)
    if isinstance(value, list):
        return [clean_strings(item) for item in value]
    if isinstance(value, dict):
        return {without_lone_surrogates(key) if isinstance(key, str) else key: clean_strings(item) for key, item in value.items()}
    return value


def loads_site_json(body: str) -> Any:
    """JSON text from CNKI (an API answer, a value read from a page) decoded with no lone surrogate left in
    it: where the site's text enters, so nothing unencodable reaches the store. ValueError when not JSON."""
    return clean_strings(json.loads(body))


def is_format_char(char: str) -> bool:
    """An invisible format character (Unicode Cf): bidi controls, zero-width spaces and joiners, BOM."""
    return unicodedata.category(char) == "Cf"


def first_control(text: str) -> int:
    """Where the first control character is (NUL, ESC …, or a format character such as a bidi override;
    tab and line breaks are whitespace, not controls), or -1."""
    for at, char in enumerate(text):
        if is_format_char(char) or (unicodedata.category(char) == "Cc" and not char.isspace()):
            return at
    return -1


def is_blank(text: str) -> bool:
    """Nothing visible: empty, or only whitespace, control characters (NUL …) and format characters."""
    return all(char.isspace() or is_format_char(char) or unicodedata.category(char) == "Cc" for char in text)


def without_format_chars(text: str) -> str:
    return "".join(char for char in text if not is_format_char(char))


def trim(text: str) -> str:
    """Strip leading and trailing whitespace in Go's sense."""
    return text.strip(_SPACE_CHARS)


def clean(text: str) -> str:
    """Collapse every whitespace run to one space and trim the ends (case is kept)."""
    return _SPACES.sub(" ", text).strip(" ")


def normalize(text: str) -> str:
    """Lower-case, split on whitespace, join with single spaces (punctuation is kept)."""
    return clean(text).lower()


def title_key(title: str) -> str:
    """normalize(), then drop spaces directly before or after the title punctuation set."""
    key = normalize(title)
    key = _SPACE_BEFORE_PUNCT.sub("", key)
    return _SPACE_AFTER_PUNCT.sub("", key)


def strip_source_tail(text: str) -> str:
    """A source name without trailing spaces, '.' and '。' (as pages print 'Journal . 2024')."""
    return clean(text).rstrip(" .。")


def source_key(source: str) -> str:
    return normalize(strip_source_tail(source)).replace("（", "(").replace("）", ")")


def doi_key(doi: str) -> str:
    key = trim(doi).lower()
    for prefix in _DOI_PREFIXES:
        if key.startswith(prefix):
            key = key[len(prefix) :]
    return key


def unique_strings(items: Iterable[str]) -> list[str]:
    """Trimmed, non-empty items, first spelling of each normalize() key, order kept."""
    seen: set[str] = set()
    out: list[str] = []
    for item in items:
        value = trim(item)
        if not value:
            continue
        key = normalize(value)
        if key in seen:
            continue
        seen.add(key)
        out.append(value)
    return out


def is_han(char: str) -> bool:
    """True when the single character belongs to the Han script."""
    point = ord(char)
    if point < 0x2E80:
        return False
    for low, high in HAN_RANGES:
        if point < low:
            return False
        if point <= high:
            return True
    return False


def has_han(text: str) -> bool:
    return any(is_han(char) for char in text)


# CNKI's date forms: 2024-03-05, 2024/3/5, 2024.03, 2024年3月5日, and online-first times (2024-03-05 10:12).
_DATE = re.compile(r"^(\d{4})(?:\s*[-/.年]\s*(\d{1,2})(?:\s*[-/.月]\s*(\d{1,2})\s*日?|\s*月)?)?(?![\d/.-])")


def date_numbers(text: str) -> list[int]:
    """[year, month, day] as far as ``text`` gives them and they are a real date; [] when it is no date."""
    match = _DATE.match(text.strip())
    if not match:
        return []
    parts = [int(part) for part in match.groups() if part]
    if len(parts) > 1 and not 1 <= parts[1] <= 12:
        return parts[:1]
    if len(parts) > 2:
        try:
            datetime.date(*parts)
        except ValueError:
            return parts[:2]
    return parts


def shortened(message: str, limit: int) -> str:
    """``message`` within ``limit`` characters, "…" saying that more followed: cut after its last sentence that
    keeps at least half, else after its last clause or word, never inside a word."""
    if len(message) <= limit:
        return message
    room = limit - 1  # for the "…"
    sentence = max(message.rfind(mark, 0, room) for mark in "。！？；") + 1
    if sentence >= room // 2:
        return message[:sentence] + "…"
    clause = max(message.rfind(mark, 0, room) for mark in "，、：,;:") + 1
    cut = max(sentence, clause, message.rfind(" ", 0, room + 1))  # a space: the cut goes before it
    return (message[:cut].rstrip() if cut > 0 else message[:room]) + "…"
