"""What each tool is asked: one msgspec Struct per tool's arguments, with the contract's limits, enums and
documented defaults. Pure data (the input half of the JSON contract, as ``model`` is the output half); the
rules that check them live with the MCP surface (``surface.arguments``)."""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal, get_args

import msgspec

# --- limits and enums (the tool contract and its documented defaults) -------------------------------

QUERY_MAX = 1000
YEAR_MAX = 2200
LIMIT_DEFAULT = 50
LIMIT_MAX = 100
BATCH_MAX = 100
EXPORT_MAX = 1000  # records in one export: record_refs, and entries of a search per call (offset pages on)
STATUS_WAIT_MAX = 55
DOWNLOAD_WAIT_DEFAULT = 120
DOWNLOAD_WAIT_MAX = 900
INTERVAL_JITTER = 0.25  # each interval drawn from ±25 % of it, so orders do not tick like a clock
TEXT_BYTES_MAX = 512 * 1024

MODES = ("precise", "balanced", "broad")
POLICIES = ("ask", "skip")
SORTS = ("relevance", "date_desc", "cited_desc", "downloaded_desc")
METADATA = ("ranked", "all", "basic")
FRESHNESS = ("prefer_cache", "live")
Scope = Literal["selected", "eligible", "candidates"]  # which part of a stored search
SCOPES: tuple[str, ...] = get_args(Scope)
DownloadFormat = Literal["auto", "pdf", "caj"]  # auto: the PDF where there is one, else the CAJ
DOWNLOAD_FORMATS: tuple[str, ...] = get_args(DownloadFormat)
FILE_FORMATS = DOWNLOAD_FORMATS[1:]  # what a download can be
ZOTERO_MAX = 100  # records in one save_to_zotero call
# search_facets and facet_filters: the facets a tool takes, each with the label CNKI's left panel gives it.
FACETS: dict[str, str] = {
    "year": "年度",
    "subject": "学科",
    "topic": "主题",
    "source": "文献来源",
    "author": "作者",
    "institution": "机构",
    "fund": "基金",
    "doc_type": "文献类型",
}
FACET_NAMES = tuple(FACETS)
FACET_CODES_MAX = 20  # picks of one facet in one listing
REFERENCES_MAX = 100  # 《题名》 spans in one link_references text
CHECK_ENTRIES_MAX = 200  # entries in one check_references call
PLAN_GROUPS_MAX = 8  # concept groups of one search (inner arrays of concept_groups)
PLAN_TERMS_MAX = 6  # synonyms in one concept group
PLAN_TERM_CHARS = 80
EXPRESSION_MAX_CHARS = 3600  # CNKI refuses longer professional-search expressions
RIGHTS_STREAK = 3  # download_papers: refusals for want of rights in a row (among the papers tried) that stop it
CONTINUE_REQUESTS = 200  # operation_control continue: added when omitted and the requests ran out
CONTINUE_SECONDS = 300  # ... and when omitted and the time ran out
CITATION_FORMATS: tuple[str, ...] = (
    "gbt7714",
    "gbt7714_2025",
    "gbt7714_author_date",
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
# The formats written as prose: the styles check_references can correct an entry into.
CHECK_STYLES: tuple[str, ...] = ("gbt7714", "gbt7714_2025", "gbt7714_author_date", "apa", "mla", "chicago", "vancouver")
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
TAG_CHARS = 100
RELATIONS = ("references", "citing", "similar")
RELATED_WAIT_DEFAULT = 40  # seconds the call waits for the list before answering with the operation
FACET_LIMIT_DEFAULT = 10  # search_facets: entries per facet
FACET_LIMIT_MAX = 50
CHART_BARS = 10  # the chart: bars per facet other than year
EXPAND_MAX = 20  # search options.expand: the top selected papers whose references and citing papers are read

# Integer options: name -> (default for search, maximum). structured_search derives candidate_target.
OPTION_RANGES: dict[str, tuple[int, int]] = {
    "candidate_target": (300, 3000),
    "max_pages": (5, 100),
    "max_requests": (600, 5000),
    "timeout_seconds": (900, 7200),
}


# --- the Structs -----------------------------------------------------------------------------------


class ToolArgs(msgspec.Struct, forbid_unknown_fields=True):
    """Base of every tool's arguments."""


class SearchOptions(ToolArgs):
    on_verification: str = "ask"
    sort: str = "relevance"
    candidate_target: int = 300
    max_pages: int = 5
    max_requests: int = 600
    timeout_seconds: int = 900
    metadata: str = "ranked"
    freshness: str = "prefer_cache"
    expand: int = 0


class SearchArgs(ToolArgs):
    query: str
    mode: str = "balanced"
    limit: int = LIMIT_DEFAULT
    year_from: int = 0  # 0 = unbounded
    year_to: int = 0
    concept_groups: list[list[str]] = []  # empty = plan automatically
    options: SearchOptions = msgspec.field(default_factory=SearchOptions)


class NativeSearchArgs(ToolArgs):
    """What the searches that keep CNKI's own order share (structured and professional expressions)."""

    limit: int = LIMIT_DEFAULT
    year_from: int = 0
    year_to: int = 0
    sort: str = "relevance"  # after parse: the effective sort, equal to options.sort
    options: SearchOptions = msgspec.field(default_factory=SearchOptions)
    facet_filters: dict[str, list[str]] = {}  # facet name → codes from search_facets (OR within, AND across)


class StructuredSearchArgs(NativeSearchArgs, kw_only=True):
    expression: dict[str, Any]  # tree checked by query.py


class ExpertSearchArgs(NativeSearchArgs, kw_only=True):
    expression: str  # a professional-search expression, read and checked by expert.py


class SearchFacetsArgs(ToolArgs):
    search_id: str = ""  # or expression (+ years): the listing whose facets are read
    expression: dict[str, Any] = {}
    year_from: int = 0
    year_to: int = 0
    facet_filters: dict[str, list[str]] = {}
    facets: list[str] = []  # empty = every facet
    limit: int = FACET_LIMIT_DEFAULT
    chart: bool = False
    freshness: str = "prefer_cache"
    on_verification: str = "ask"


class SaveToZoteroArgs(ToolArgs):
    record_refs: list[str] = []
    search_id: str = ""
    scope: str = "selected"
    collection: str = ""
    attach: bool = True
    tags: list[str] = []


class RelatedPapersArgs(ToolArgs):
    relation: str = "references"
    limit: int = LIMIT_DEFAULT
    record_ref: str = ""
    refresh: bool = False
    title: str = ""
    wait_seconds: int = RELATED_WAIT_DEFAULT
    cursor: str = ""
    on_verification: str = "ask"


class ExportCitationsArgs(ToolArgs):
    record_refs: list[str] = []
    references_of: str = ""  # a record_ref: export the stored reference list of that paper
    titles: list[str] = []
    search_id: str = ""
    scope: str = "selected"
    offset: int = 0  # with search_id: the first entry of the scope to export
    format: str = "gbt7714"
    template: str = ""
    filename: str = ""


class LinkReferencesArgs(ToolArgs):
    text: str
    lookup_missing: bool = False


class CheckReferencesArgs(ToolArgs):
    text: str = ""
    references: list[str] = []  # after parse: the entries to check, in order (split from text when given)
    style: str = "gbt7714"
    on_verification: str = "ask"


class AuthorPapersArgs(ToolArgs):
    author: str
    record_ref: str = ""  # a paper of this author: its byline's institutions tell namesakes apart
    institution: str = ""  # or the author's institution (作者单位)
    limit: int = LIMIT_DEFAULT
    offset: int = 0
    on_verification: str = "ask"


class JournalIssuesArgs(ToolArgs):
    journal: str = ""  # the journal's name; or issn, cn, or record_ref of one of its papers (exactly one)
    issn: str = ""
    cn: str = ""
    record_ref: str = ""
    year: int = 0  # 0: the years and issues; a year with issue: that issue's table of contents
    issue: str = ""  # as years gives it: its issue label or its code
    limit: int = LIMIT_DEFAULT
    offset: int = 0
    on_verification: str = "ask"

class ToolName(StrEnum):
    AUTHOR_PAPERS = "author_papers"
    CHECK_REFERENCES = "check_references"
    DIAGNOSTICS = "diagnostics"
    DOWNLOAD_PAPER = "download_paper"
    DOWNLOAD_PAPERS = "download_papers"
    EXPERT_SEARCH = "expert_search"
    EXPORT_CITATIONS = "export_citations"
    GET_METADATA = "get_metadata"
    JOURNAL_ISSUES = "journal_issues"
    LINK_REFERENCES = "link_references"
    LOGIN = "login"
    OPERATION_CONTROL = "operation_control"
    OPERATION_STATUS = "operation_status"
    READ_ONLINE_HTML = "read_online_html"
    RELATED_PAPERS = "related_papers"
    SAVE_TO_ZOTERO = "save_to_zotero"
    SEARCH = "search"
    SEARCH_FACETS = "search_facets"
    SEARCH_RESULTS = "search_results"
    SESSION_STATUS = "session_status"
    STRUCTURED_SEARCH = "structured_search"
