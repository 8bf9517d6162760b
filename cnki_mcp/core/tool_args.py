"""What the tools are asked: the contract's limits, enums and documented defaults, and ``ToolArgs``, the base of
every tool's argument Struct. Pure data (the input half of the JSON contract, as ``model`` is the output half);
each tool's Struct and its rules live in its module (``cnki_mcp.tools.<tool_name>``), whose name is the tool's."""

from __future__ import annotations

from typing import Literal, get_args

import msgspec

# --- limits and enums (the tool contract and its documented defaults) -------------------------------

YEAR_MAX = 2200
LIMIT_DEFAULT = 50
LIMIT_MAX = 100
BATCH_MAX = 100
STATUS_WAIT_MAX = 55
DOWNLOAD_WAIT_DEFAULT = 120
DOWNLOAD_WAIT_MAX = 900
INTERVAL_JITTER = 0.25  # each interval drawn from ±25 % of it, so orders do not tick like a clock
TEXT_BYTES_MAX = 512 * 1024

POLICIES = ("ask", "skip")
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
    "source_category": "来源类别",
}
FACET_NAMES = tuple(FACETS)
# What search_facets answers when no facet is named: every facet but 来源类别 (named on request; the default
# answer and its request stay what they were before that facet existed).
FACETS_BY_DEFAULT = FACET_NAMES[:-1]
FACET_CODES_MAX = 20  # picks of one facet in one listing
PLAN_GROUPS_MAX = 8  # concept groups of one search (inner arrays of concept_groups)
PLAN_TERMS_MAX = 6  # synonyms in one concept group
PLAN_TERM_CHARS = 80
EXPRESSION_MAX_CHARS = 3600  # CNKI refuses longer professional-search expressions
RIGHTS_STREAK = 3  # download_papers: refusals for want of rights in a row (among the papers tried) that stop it
CONTINUE_REQUESTS = 200  # operation_control continue: added when omitted and the requests ran out
CONTINUE_SECONDS = 300  # ... and when omitted and the time ran out
CitationFormat = Literal[
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
    "refworks",
    "noteexpress",
]
CITATION_FORMATS: tuple[str, ...] = get_args(CitationFormat)
# The formats written as prose: the styles check_references can correct an entry into.
CheckStyle = Literal["gbt7714", "gbt7714_2025", "gbt7714_author_date", "apa", "mla", "chicago", "vancouver"]
CHECK_STYLES: tuple[str, ...] = get_args(CheckStyle)
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
CHART_BARS = 10  # the chart: bars per facet other than year

# Integer options: name -> (default for search, maximum). structured_search derives candidate_target.
OPTION_RANGES: dict[str, tuple[int, int]] = {
    "candidate_target": (300, 3000),
    "max_pages": (5, 100),
    "max_requests": (600, 5000),
    "timeout_seconds": (900, 7200),
}


# --- the base Struct --------------------------------------------------------------------------------


class ToolArgs(msgspec.Struct, forbid_unknown_fields=True):
    """Base of every tool's arguments."""
