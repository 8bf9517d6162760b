"""Identity of a record: its keys, when two observations are the same paper, and its stable record_ref.

Identity is strongest first: CNKI's native dbname+filename, then the DOI, then the full bibliography
(title, authors, source, year). A title alone never identifies a paper. Hashes use Go's compact JSON
encoding so refs match the reference implementation's (``rec_`` + 24 hex characters).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import msgspec

from cnki_mcp.core.model import Paper
from cnki_mcp.core.text import doi_key, normalize, source_key, title_key

REF_PREFIX = "rec_"
REF_HEX = 24

# json.Marshal escapes these by default (HTML-safe output); Python's json does not.
_GO_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
_GO_ESCAPE_TABLE = str.maketrans(_GO_ESCAPES)


def _go_numbers(value: Any) -> Any:
    # Go prints a whole float without a fraction (1, not 1.0).
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e21:
        return int(value)
    if isinstance(value, dict):
        return {key: _go_numbers(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_go_numbers(item) for item in value]
    return value


def go_json(value: Any) -> str:
    """Compact JSON as Go's encoding/json writes it (UTF-8 kept; <, >, & escaped)."""
    builtins = _go_numbers(msgspec.to_builtins(value))
    return json.dumps(builtins, ensure_ascii=False, separators=(",", ":")).translate(_GO_ESCAPE_TABLE)


def fingerprint(value: Any) -> str:
    """Lowercase hex SHA-256 of ``go_json(value)``."""
    return hashlib.sha256(go_json(value).encode("utf-8")).hexdigest()


def native_key(paper: Paper) -> str:
    """``DBNAME:FILENAME`` upper-cased, or "" without both parts."""
    if not paper.dbname or not paper.filename:
        return ""
    return f"{paper.dbname}:{paper.filename}".upper()


def bibliography_key(paper: Paper) -> str:
    """Hash of title key, authors, source and year; "" unless all four are present."""
    if not paper.title or not paper.authors or not paper.source or paper.year <= 0:
        return ""
    return fingerprint([title_key(paper.title), normalize("|".join(paper.authors)), normalize(paper.source), paper.year])


def identity_keys(paper: Paper) -> list[str]:
    """The keys that may merge two observations (``native:``, ``doi:``, ``bib:``)."""
    keys = []
    if native := native_key(paper):
        keys.append("native:" + native)
    if paper.doi and (doi := doi_key(paper.doi)):
        keys.append("doi:" + doi)
    if bib := bibliography_key(paper):
        keys.append("bib:" + bib)
    return keys


def title_index_key(paper: Paper) -> str:
    """The lookup key for title searches; never used for merging."""
    return "title:" + title_key(paper.title)


def record_ref_for(paper: Paper) -> str:
    """The ref derived from the strongest identity available (native, DOI, bibliography, title+link)."""
    basis = native_key(paper) or (doi_key(paper.doi) if paper.doi else "") or bibliography_key(paper)
    if not basis:
        basis = paper.title + "\x00" + (paper.locator or paper.url)
    return REF_PREFIX + fingerprint(basis)[:REF_HEX]


def conflicts(a: Paper, b: Paper) -> bool:
    """True when both carry a DOI, native key or database code and the two differ."""
    if a.doi and b.doi and doi_key(a.doi) != doi_key(b.doi):
        return True
    native_a, native_b = native_key(a), native_key(b)
    if native_a and native_b and native_a != native_b:
        return True
    return bool(a.dbcode and b.dbcode and a.dbcode.lower() != b.dbcode.lower())


def same_paper(a: Paper, b: Paper) -> bool:
    """Same record: no conflict and an equal DOI, native key or bibliography key."""
    if conflicts(a, b):
        return False
    if a.doi and b.doi:
        return True
    if native_key(a) and native_key(b):
        return True
    bib_a = bibliography_key(a)
    return bool(bib_a) and bib_a == bibliography_key(b)


def detail_matches(requested: Paper, observed: Paper) -> bool:
    """Whether a parsed detail page is the requested record (title, first author, source agree)."""
    if conflicts(requested, observed) or title_key(requested.title) != title_key(observed.title):
        return False
    if requested.authors and observed.authors and normalize(requested.authors[0]) != normalize(observed.authors[0]):
        return False
    if requested.source and observed.source and source_key(requested.source) != source_key(observed.source):
        return False
    return True
