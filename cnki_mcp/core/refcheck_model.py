"""What check_references answers: a reference entry as read, its differences from CNKI's record, the candidates
when it is ambiguous, and the summary. Part of the JSON contract (field names are public), kept beside
``model`` because only the reference check uses it.
"""

from __future__ import annotations

import msgspec


class ParsedReference(msgspec.Struct, omit_defaults=True):
    """What check_references read from one entry of a reference list (only what the entry gives)."""

    style: str = ""  # gbt7714 | gbt7714_author_date | apa | mla | chicago | vancouver | loose
    authors: list[str] = []
    et_al: bool = False  # the list ends with 等 / et al.
    title: str = ""
    type_code: str = ""  # GB/T 7714 document type: J, D, M, C, N …
    source: str = ""
    year: int = 0
    volume: str = ""
    issue: str = ""
    pages: str = ""
    doi: str = ""


class FieldDifference(msgspec.Struct):
    field: str  # year | pages | authors | title | source | volume | issue | doi
    given: str
    cnki: str


class ReferenceCandidate(msgspec.Struct, omit_defaults=True):
    record_ref: str
    title: str
    authors: list[str] = []
    year: int = 0
    source: str = ""
    document_type: str = ""


class CheckedReference(msgspec.Struct, omit_defaults=True, kw_only=True):
    """One entry of check_references' answer, in input order (``index`` from 1)."""

    index: int
    input: str
    status: str  # verified | differs | not_found | ambiguous | unparsed | unchecked (the lookup failed)
    message: str = ""
    parsed: ParsedReference | None = None
    record_ref: str = ""
    differences: list[FieldDifference] = []
    not_compared: list[str] = []  # fields the entry gives that CNKI's record cannot confirm
    candidates: list[ReferenceCandidate] = []
    corrected: str = ""


class CheckSummary(msgspec.Struct, kw_only=True):
    total: int  # the entries read (from ``text``) or given (``references``), each checked once
    lines: int = 0  # the lines of ``text`` they were read from (wrapped lines joined); 0 for ``references``
    verified: int = 0
    differs: int = 0
    not_found: int = 0
    ambiguous: int = 0
    unparsed: int = 0
    unchecked: int = 0


class CheckResult(msgspec.Struct, kw_only=True):
    style: str
    entries: list[CheckedReference]
    summary: CheckSummary
