"""Every JSON-facing and stored object, as msgspec Structs. Field names are the public contract.

``omit_defaults=True`` keeps the JSON compact: empty lists, ``None`` and empty strings are left out,
as clients of the reference implementation expect.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from cnki_mcp.core.source_filters import SourceFindings
from cnki_mcp.core.watch_model import Watch
from cnki_mcp.core.zotero_model import ZoteroNote

STORE_VERSION = 5
PARSER_VERSION = "6"


class Problem(msgspec.Struct, omit_defaults=True):
    code: str
    message: str
    retryable: bool = False
    details: Any = None


class TierEvidence(msgspec.Struct, omit_defaults=True):
    tier: str
    text: str = ""


class Quality(msgspec.Struct, omit_defaults=True):
    """Journal evidence read from a navi.cnki.net journal page."""

    canonical_title: str = ""
    identity_basis: str = ""  # current_title | translated_title | former_title
    tiers: list[str] = []
    tier_evidence: list[TierEvidence] = []
    composite_impact: float | None = None
    aggregate_impact: float | None = None
    metric_year: int = 0
    # The journal's 基本信息 (``NNNN-NNNC``, check digit verified; ``11-1234/D``); stores written before
    # these fields load them empty.
    issn: str = ""
    cn: str = ""
    source_url: str = ""
    state: str = ""  # present | unknown
    observed_at: str = ""
    parser: str = ""


class Paper(msgspec.Struct, omit_defaults=True):
    """One stored bibliographic record (a "record")."""

    record_ref: str = ""
    title: str = ""
    authors: list[str] = []
    source: str = ""
    source_url: str = ""
    year: int = 0
    publication_date: str = ""
    document_type: str = ""
    doi: str = ""
    dbcode: str = ""
    dbname: str = ""
    filename: str = ""
    url: str = ""
    # The raw site link used for fetching; stored, never shown to clients (see public_paper).
    locator: str = ""
    abstract: str = ""
    excerpt: str = ""
    sentence: str = ""  # the matching text of the latest 句子检索 that listed it (brief/senquery's 句子1：…)
    keywords: list[str] = []
    institutions: list[str] = []
    funds: list[str] = []
    clc_codes: list[str] = []  # 中图分类号 (Chinese Library Classification), e.g. ["TP18", "TP311.13"]
    volume: str = ""
    issue: str = ""
    pages: str = ""
    cited: int | None = None
    downloaded: int | None = None
    online_first: bool = False
    quality: Quality | None = None
    listed_at: str = ""
    detail_observed_at: str = ""
    detail_parser: str = ""


PRIVATE_PAPER_FIELDS = ("locator",)


def public_paper(paper: Paper) -> dict[str, Any]:
    """The paper as clients see it: builtins, without internal fields."""
    data = msgspec.to_builtins(paper)
    for name in PRIVATE_PAPER_FIELDS:
        data.pop(name, None)
    return data


class Budget(msgspec.Struct, omit_defaults=True):
    max_requests: int = 0
    timeout_seconds: int = 0
    on_verification: str = ""


class OperationHead(msgspec.Struct, omit_defaults=True):
    """What an operation is and where it stands: the first fields of both the stored record and the client's view.

    Not keyword-only: msgspec would move keyword-only base fields behind the record's own, changing its JSON order.
    """

    operation_id: str
    kind: str
    status: str
    stage: str = ""
    message: str = ""
    progress: dict[str, Any] | None = None


class Operation(OperationHead, omit_defaults=True):
    """A background job record; ``checkpoint`` is stored but never shown to clients."""

    requests: int = 0
    active_seconds: float = 0.0
    budget: Budget = msgspec.field(default_factory=Budget)
    result: Any = None
    errors: list[Problem] = []
    checkpoint: Any = None
    created_at: str = ""
    updated_at: str = ""


class BudgetView(msgspec.Struct, omit_defaults=True):
    """An operation's budget as clients see it: both limits always stated, even when zero."""

    max_requests: int
    timeout_seconds: int
    on_verification: str = ""


class OperationView(OperationHead, omit_defaults=True, kw_only=True):
    """What clients see of an operation: the record without its checkpoint; requests and active time always."""

    requests: int
    active_seconds: float
    budget: BudgetView
    result: Any = None
    errors: list[Problem] = []
    created_at: str = ""
    updated_at: str = ""


class TitleRow(msgspec.Struct, omit_defaults=True):
    """A paper as a search summary lists it (a record no longer in the store: its ref alone)."""

    record_ref: str
    title: str | msgspec.UnsetType = msgspec.UNSET
    url: str = ""
    sentence: str = ""  # a 句子检索's matching text

    @classmethod
    def of(cls, paper: Paper, *, sentence: bool = False) -> TitleRow:
        """The row of ``paper``; with ``sentence`` (the summary of a 句子检索) its matching text too."""
        return cls(record_ref=paper.record_ref, title=paper.title, url=paper.url, sentence=paper.sentence if sentence else "")


class CoverageView(msgspec.Struct, omit_defaults=True, kw_only=True):
    """One listing of a search as clients see it: pages, rows, total (null when unknown), exhausted always."""

    channel: str
    pages: int
    rows: int
    total: int | None
    exhausted: bool
    zero_confirmed_by: str = ""  # page | control_query: how a zero total was confirmed
    failed: bool = False
    error: str = ""
    error_code: str = ""
    added: int = 0  # the citation graph: candidates no other channel had listed

    @classmethod
    def of(cls, entry: Coverage) -> CoverageView:
        confirmed = "page" if entry.zero == "stated" else "control_query"
        return cls(
            channel=entry.channel,
            pages=entry.pages,
            rows=entry.rows,
            total=entry.total,
            exhausted=entry.exhausted,
            zero_confirmed_by=confirmed if entry.total == 0 and entry.zero else "",
            failed=entry.failed,
            error=entry.error,
            error_code=entry.error_code,
            added=entry.added,
        )


class SearchSummary(SourceFindings, omit_defaults=True, kw_only=True):
    """A search's answer: counts, why candidates were left out, coverage, the plan and the first results."""

    search_id: str
    status: str
    candidate_count: int
    eligible_count: int
    selected_count: int
    enhanced_count: int
    quality_source_count: int
    selection_exclusions: dict[str, int] = {}
    coverage: list[CoverageView]
    incomplete_channels: list[str] = []  # listings stopped by a failure before their end
    plan: Plan
    results: list[TitleRow]
    # structured and expert searches: the professional-search expression of the same search (no years)
    expert_expression: str = ""
    # publications per year of the search's first listing, when a facet answer for it is at hand (no request)
    year_trend: YearTrend | None = None


class Coverage(msgspec.Struct, omit_defaults=True):
    channel: str
    pages: int = 0
    rows: int = 0
    total: int | None = None
    exhausted: bool = False
    failed: bool = False
    error: str = ""
    error_code: str = ""
    zero: str = ""  # an empty listing is a real zero: "stated" by the page, or confirmed by a "control" listing
    added: int = 0  # the citation graph (channel "citation"): candidates no other channel had listed


class Channel(msgspec.Struct, omit_defaults=True):
    """One CNKI search issued by a search: a name (q1, q2, q3, feedback1 …) and its condition."""

    name: str
    field: str = ""
    groups: list[list[str]] = []
    weight: float = 0.0
    expression: Any = None
    reason: str = ""
    expert: str = ""  # a professional-search expression (canonical), sent as QueryJson's EXPERT item


# Plans whose results keep CNKI's own order: no concepts to rank by, no keyword feedback.
SITE_ORDER_METHODS = frozenset({"structured", "expert"})


class Plan(msgspec.Struct, omit_defaults=True):
    concepts: list[list[str]] = []
    channels: list[Channel] = []
    method: str = ""
    warnings: list[str] = []


class Evidence(msgspec.Struct):
    relevance: float = 0.0
    quality: float = 0.0
    title_match: float = 0.0
    abstract_match: float = 0.0
    keyword_match: float = 0.0
    rrf: float = 0.0
    concept_coverage: float = 0.0
    source_tier: float = 0.0
    impact: float = 0.0
    annual_citations: float = 0.0
    resource_type: float = 0.0
    quality_evidence_present: bool = False
    graph_links: int = 0  # selected papers it cites or is cited by (search options.expand)


class SearchEntry(msgspec.Struct):
    record_ref: str
    score: float = 0.0
    eligible: bool = False
    selected: bool = False
    evidence: Evidence = msgspec.field(default_factory=Evidence)


class SearchRecord(SourceFindings, omit_defaults=True):
    search_id: str
    status: str
    query: str = ""
    plan: Plan = msgspec.field(default_factory=Plan)
    coverage: list[Coverage] = []
    entries: list[SearchEntry] = []
    created_at: str = ""
    # what search_facets needs to ask again for the search's listing
    year_from: int = 0
    year_to: int = 0
    facet_filters: dict[str, list[str]] = {}
    errors: list[Problem] = []  # why a search that failed or was cut short (status not completed) is so


class FacetValue(msgspec.Struct, omit_defaults=True):
    """One entry of a facet as CNKI's left panel lists it; ``code`` narrows a listing (facet_filters)."""

    value: str
    code: str
    count: int
    approximate: bool = False  # CNKI wrote the count in 万 (rounded)


class FacetRecord(msgspec.Struct, omit_defaults=True, kw_only=True):
    """A facet answer kept in the store: the listing's count and each facet's entries (all CNKI gave)."""

    key: str
    observed_at: str
    total: int | None = None
    facets: dict[str, list[FacetValue]] = {}
    # facets the panel did not fill although the listing has rows, with why
    notes: dict[str, str] = {}


class YearTrend(msgspec.Struct, omit_defaults=True):
    """Publications per year of a listing, ascending, with one sentence saying how the field grew."""

    years: list[FacetValue]
    summary: str
    channel: str = ""


class ChartRow(msgspec.Struct, omit_defaults=True):
    """One bar of the chart: its panel (facet), its label as drawn, the name it stands for, its count."""

    facet: str
    label: str
    value: str
    count: int


class ChartInfo(msgspec.Struct, kw_only=True):
    """The PNG beside the answer (also sent as MCP image content) and how it was drawn."""

    path: str
    mime_type: str = "image/png"
    width: int
    height: int
    bytes: int
    render_ms: float
    font: str = ""  # the CJK font file used; "" when none was found
    font_warning: str = ""  # said when no CJK font was found: bars are numbered, names are in chart_table


class FacetsResult(msgspec.Struct, omit_defaults=True, kw_only=True):
    """search_facets' answer."""

    status: str = "completed"
    total: int | None = None
    facets: dict[str, list[FacetValue]] = {}
    notes: dict[str, str] = {}
    search_id: str = ""
    facet_filters: dict[str, list[str]] = {}
    chart: ChartInfo | None = None
    chart_table: list[ChartRow] = []


class CacheEntry(msgspec.Struct):
    search_id: str
    at: str


class Artifact(msgspec.Struct, omit_defaults=True):
    """Download ledger entry, written before the click so an uncertain click is never replayed."""

    state: str  # clicked | completed
    record_ref: str
    title: str = ""
    format: str = ""
    folder: str = ""
    name: str = ""
    path: str = ""
    bytes: int = 0
    sha256: str = ""
    download_guid: str = ""
    incoming: str = ""
    operation_id: str = ""
    source: str = ""
    updated_at: str = ""
    chosen_name: bool = False  # the caller named the file (kept as given whatever the content)
    content_format: str = ""  # what the file is: pdf | caj | unknown (a CAJ order may deliver a PDF)
    warnings: list[str] = []  # what is odd about a kept file (encrypted, other format, unknown header)


class CheckStep(msgspec.Struct, omit_defaults=True, kw_only=True):
    """One step of the field check (``doctor --site``): the page it looked at and what it found there.

    ``status`` is ok, failed (``code``, ``message`` and the ``snapshot`` saved), blocked (``code`` and ``message``:
    trouble here, not on CNKI's pages) or skipped (``message`` says why: an earlier step gave it nothing to look
    at, or the tour stopped).
    """

    name: str
    label: str
    status: str  # ok | failed | blocked | skipped
    found: str = ""
    code: str = ""
    message: str = ""
    snapshot: str = ""
    requests: int = 0
    seconds: float = 0.0


class SiteCheck(msgspec.Struct, omit_defaults=True, kw_only=True):
    """One field check: its steps in tour order, the requests and seconds it took, the browser it used."""

    status: str  # passed | failed (a page changed) | blocked (trouble here kept a step from looking)
    started_at: str
    finished_at: str = ""
    version: str = ""
    parser: str = ""
    browser: str = ""  # what the browser reports itself as (Chrome/131.0…)
    site: str = ""  # the overseas host the tour went to ("": the mainland site)
    requests: int = 0
    seconds: float = 0.0
    steps: list[CheckStep] = []


class ErrorEvent(msgspec.Struct, omit_defaults=True):
    """An error code an operation met (the store keeps the newest few hundred, for a report)."""

    code: str
    at: str
    kind: str = ""


class RelationEntry(msgspec.Struct, omit_defaults=True):
    """One item of a paper's reference, citing or similar list, in CNKI's order."""

    record_ref: str = ""  # the catalogue record; "" when CNKI links the item to no record
    text: str = ""  # the citation as one line, kept for items without a record


class RelationPart(msgspec.Struct, omit_defaults=True):
    """One database of a list (CJFD, CDFD …): the total CNKI stated and the items read so far."""

    database: str
    total: int = 0
    entries: list[RelationEntry] = []
    next_start: int = 0  # ``start`` of the next request; 0 once every item stated has been read
    size: int = 0  # items per request in effect (lowered when the site answers fewer than asked)
    by_record: bool = False  # ``start`` counts items from 1 instead of pages


class RelationList(msgspec.Struct, omit_defaults=True):
    """Which papers one paper cites (references), which cite it (citing), or CNKI's similar papers."""

    source_ref: str
    relation: str  # references | citing | similar
    parts: list[RelationPart] = []
    origin: str = "api"  # api | page (what the detail page rendered itself)
    stated: bool = True  # whether CNKI stated the totals (a rendered list may not)
    observed_at: str = ""
    # A first page still being read: the databases answered so far (a continue does not ask them again).
    complete: bool = True
    asked: list[str] = []


class RelatedPaper(msgspec.Struct, omit_defaults=True):
    """An item of a related_papers answer: a compact record, or an item CNKI links to no record."""

    record_ref: str | None  # null: no CNKI record (a book, a foreign work without a link …)
    title: str = ""
    authors: list[str] = []
    year: int = 0
    source: str = ""
    document_type: str = ""
    url: str = ""
    database: str = ""
    citation: str = ""  # items without a record: the citation as CNKI gives it


class RelatedResult(msgspec.Struct, omit_defaults=True, kw_only=True):
    """related_papers' answer: one page of a list; ``total`` as CNKI states it (null when it states none)."""

    relation: str
    source: dict[str, Any]
    total: int | None
    offset: int
    papers: list[RelatedPaper]
    next_cursor: str | None
    origin: str  # api | page
    warnings: list[str] = []


class JournalIssue(msgspec.Struct):
    """One issue of a journal's year as navi lists it: its label (``06`` of No.06) and its yearIssue code."""

    issue: str
    code: str


class IssueYear(msgspec.Struct):
    year: int
    issues: list[JournalIssue]


class IssueRecord(msgspec.Struct, omit_defaults=True, kw_only=True):
    """One paper of an issue's table of contents, stored in the catalogue under ``record_ref``."""

    record_ref: str
    title: str
    authors: list[str] = []
    pages: str = ""
    section: str = ""  # the column heading (栏目) it stands under
    url: str = ""


class JournalIssuesResult(msgspec.Struct, omit_defaults=True, kw_only=True):
    """journal_issues' answer: the journal's years and issues, or one issue's table of contents (paged)."""

    status: str = "completed"
    journal: str
    source_url: str = ""
    years: list[IssueYear] | None = None  # without year: every year (newest first) with its issues
    year: int | None = None
    issue: str = ""
    total: int | None = None  # with year + issue: the issue's papers in all
    offset: int = 0
    next_offset: int | None = None
    records: list[IssueRecord] | None = None


class AuthorPapersResult(msgspec.Struct, omit_defaults=True, kw_only=True):
    """author_papers' answer: one page of the author's papers, the institutions that name them, the years covered."""

    status: str = "completed"
    author: str
    # how the papers were found: author_page (the person's code, every institution) | author_and_institution
    # (作者 AND 作者单位: papers written elsewhere may be missing) | author_name (namesakes may mix)
    method: str = ""
    institutions: list[str] = []
    years: list[int] = []
    ambiguous: bool  # always said: a bare name may mix namesakes
    message: str = ""
    total: int | None = None
    offset: int = 0
    next_offset: int | None = None
    records: list[dict[str, Any]] = []


class StoreData(msgspec.Struct):
    """The whole library: research.json of earlier versions, and the format of ``cnki-mcp store --dump``."""

    version: int = STORE_VERSION
    papers: dict[str, Paper] = {}
    sources: dict[str, Quality] = {}
    searches: dict[str, SearchRecord] = {}
    search_cache: dict[str, CacheEntry] = {}
    operations: dict[str, Operation] = {}
    artifacts: dict[str, Artifact] = {}
    # "<record_ref>|<relation>": the citation graph read so far (newest kept, see store.KEEP_RELATIONS).
    relations: dict[str, RelationList] = {}
    # listing key → its facet answer (search_facets; also the year trend of a search's summary)
    facets: dict[str, FacetRecord] = {}
    watches: dict[str, Watch] = {}  # name → topic watch (core.watch_model)
    # Ids retention removed (newest last), so a late lookup can say why the record is gone.
    retired_searches: list[str] = []
    retired_operations: list[str] = []
    # For doctor --report: error codes operations met (newest last), the last field check, and the names
    # the page header showed for the person and the institution (only ever used to keep them out of a report).
    recent_errors: list[ErrorEvent] = []
    last_site_check: SiteCheck | None = None
    known_names: list[str] = []
    # Successful downloads (any tool) per local day, "YYYY-MM-DD" -> count; the last few days are kept.
    downloads_by_day: dict[str, int] = {}


class DroppedEntry(msgspec.Struct, omit_defaults=True):
    """A part of the store (research.db, or research.json of an earlier version) that could not be read: one entry, or a whole section (no key)."""

    section: str
    key: str = ""
    reason: str = ""


class StoreRecovery(msgspec.Struct, omit_defaults=True, kw_only=True):
    """What opening the store left out, and where the original bytes were kept.

    ``kind`` is ``set_aside`` (nothing could be read: the file was renamed), ``entries_dropped``
    (the readable entries were loaded; ``dropped`` lists the first of the others) or ``foreign`` (a
    research.db holding what cnki-mcp did not create, set aside and its rows of our own tables carried over).
    """

    kind: str
    path: str
    reason: str = ""
    dropped_count: int = 0
    dropped: list[DroppedEntry] = []
    at: str = ""


class SaveState(msgspec.Struct, kw_only=True):
    """Whether research.db holds every change, as diagnostics shows it.

    ``unsaved_since`` is the time of the oldest change not on disk; ``failing_since`` the first
    failed write since the last one that succeeded, ``failed_writes`` how many failed since then.
    """

    dirty: bool = False
    saved_at: str = ""
    error: str = ""
    failing_since: str = ""
    unsaved_since: str = ""
    failed_writes: int = 0
    cause: str = ""  # of the failing writes: disk_full | read_only | corrupt | io_error | rejected | writer_stopped


# Successful downloads per local day before a batch stops (peers stay under about 100 a day); 0 = no cap.
DAILY_DOWNLOAD_LIMIT_DEFAULT = 100


# Stands for a gateway host in whatever the product keeps or shows: a gateway's own page mapped back
# (``https://gateway.invalid/login``) is no CNKI page, and the pages layer reads it as the gateway.
GATEWAY_PLACEHOLDER = "gateway.invalid"


class Route(msgspec.Struct, frozen=True, omit_defaults=True):
    """How CNKI is reached: directly, or through a university's remote-access gateway (``site/route.py``).

    What config.json keeps: the scheme and where the gateway is, never a ticket, a token or a URL with a query.
    ``gateway`` is the gateway's host, with ``:port`` when it is not 443 (for ``host_rewrite`` the suffix every
    rewritten host ends with, e.g. ``webvpn.zju.edu.cn:8001``). ``segment`` (wrdvpn) is the scheme segment the
    gateway writes for https on port 443 (``https``); ``prefix`` (prefix) is the path before the target URL
    (``/-----``).
    """

    kind: Literal["direct", "wrdvpn", "host_rewrite", "prefix"] = "direct"
    gateway: str = ""
    segment: str = ""
    prefix: str = ""

    def view(self) -> dict[str, Any]:
        """The route as session_status, diagnostics and doctor name it: its kind and gateway host (no ticket)."""
        return {"kind": "direct"} if self.kind == "direct" else {"kind": self.kind, "gateway": self.gateway}


class Config(msgspec.Struct, omit_defaults=True):
    """config.json; unknown keys are ignored so older and newer versions can share it."""

    browser_path: str = ""
    daily_download_limit: int = DAILY_DOWNLOAD_LIMIT_DEFAULT  # CNKI_DAILY_DOWNLOAD_LIMIT overrides it
    # Absent in config.json written before issue 29: direct access.
    route: Route = Route()
    site: Literal["auto", "mainland", "oversea"] = "auto"  # auto: where CNKI sends the session (site/remote.py)


class SessionState(msgspec.Struct, omit_defaults=True):
    """Login evidence, as returned by login and session_status."""

    personal: str = "not_observed"  # authenticated | not_observed
    institution: str = "not_observed"  # observed | not_observed
    institution_evidence: list[str] = []
    personal_evidence: list[str] = []
    permission_scope: str = "unknown"
    evidence_source: str = "not_checked"
    observed_at: str = ""
    cached: bool = False


class Hit(msgspec.Struct):
    """A record's sighting in one channel's listing (kept in the search checkpoint, used by ranking).

    ``position`` is the 1-based absolute rank in that channel's listing; ``weight`` the channel's weight.
    """

    channel: str
    position: int = 0
    weight: float = 0.0


class Section(msgspec.Struct):
    """A heading of an HTML full text; offset and length count code points of the text."""

    level: int
    title: str
    offset: int
    length: int


class ReaderCoverage(msgspec.Struct):
    """How much of the reader page the extracted text covers (read_online_html ``coverage``).

    ``scope`` is judged from the content: ``full`` (the whole catalogue has its text, no trial sign),
    ``trial`` (``trial_evidence`` says what showed it), ``partial`` (catalogue entries without text),
    ``unknown`` (nothing to compare the text with). ``generation`` names what was read:
    ``reader_json`` (the 2026 reader's own data), ``reader_dom`` (its rendered page) or ``nzkhtml``.
    ``fallback_reason`` says why the 2026 reader's data was not used when its page was read instead.
    """

    container: str = ""
    dom_characters: int = 0
    extracted_characters: int = 0
    missing_catalog_headings: list[str] = []
    non_text_elements: int = 0
    scope: str = "unknown"  # full | trial | partial | unknown
    generation: str = ""  # reader_json | reader_dom | nzkhtml
    trial_evidence: list[str] = []
    fallback_reason: str = ""


class FileCoverage(ReaderCoverage, kw_only=True):
    """The coverage of a downloaded file's text (scope ``download``, generation ``pdf`` or ``caj_pdf``):
    the file, its pages, the pages with a text layer and the pages the returned text comes from (1-based)."""

    file: str = ""
    pages: int = 0  # the file's pages, all of them
    pages_read: int = 0  # the pages read (the first MAX_PAGES of a longer file)
    pages_with_text: int = 0
    pages_without_text: list[int] = []
    pages_covered: list[int] = []


class CitationResult(msgspec.Struct, omit_defaults=True):
    """``data`` of an export_citations reply; ``path`` is set when the text was saved to a file."""

    format: str
    count: int
    text: str = ""
    path: str = ""
    missing_fields: dict[str, list[str]] = {}
    search_total: int = 0  # with search_id: the entries of the scope, all calls together
    next_offset: int = 0  # with search_id: where the next call starts when entries remain (absent: none)
    warnings: list[str] = []
    unlinked: list[str] = []  # with references_of: the items CNKI links to no record, as CNKI gives them


class ExportReply(msgspec.Struct, kw_only=True):
    """export_citations' answer (inline, or the result of the operation that first located titles)."""

    status: str = "completed"
    data: CitationResult


class LocalReply(msgspec.Struct, kw_only=True):
    """An answer that needed no operation: from the cache or the local store, no request made."""

    status: str = "completed"
    source: str  # cache | local | download (a downloaded file read)
    requests: int | msgspec.UnsetType = msgspec.UNSET  # 0 where the tool's reply counts requests
    result: Any
    errors: list[Problem] | msgspec.UnsetType = msgspec.UNSET  # a partial answer (status "partial"): what is missing


class ReadResult(msgspec.Struct, omit_defaults=True, kw_only=True):
    """read_online_html's answer: one page of the text (or of one section) and the whole catalogue.

    ``sections`` offsets count into the whole text, so another section can be chosen; ``offset`` and
    ``next_offset`` (null at the end) page through the selected part.
    """

    record_ref: str
    title: str
    url: str = ""
    section: Section | None = None
    text: str
    sections: list[Section]
    offset: int
    next_offset: int | None
    total_characters: int
    trial: bool
    coverage: ReaderCoverage
    complete_article: bool | None  # null when nothing tells whether the text is whole


class DownloadResult(msgspec.Struct, omit_defaults=True, kw_only=True):
    """download_paper's answer: the file (completed) or where the clicked download is expected."""

    state: str  # completed | clicked
    record_ref: str
    format: str
    path: str = ""
    bytes: int = 0
    sha256: str = ""
    source: str = ""  # download | cache | local | local_copy
    content_format: str = ""
    warnings: list[str] = []
    folder: str = ""
    name: str = ""
    operation_id: str = ""
    copied_from: str = ""  # a local_copy: the downloaded file it was copied from


class BatchItem(msgspec.Struct, omit_defaults=True, kw_only=True):
    """One paper of a download_papers batch: what became of it (``code``/``message`` when not downloaded).

    ``status``: downloaded | already_downloaded | refused | failed | uncertain (clicked, outcome unknown:
    never ordered again by the batch) | not_reached.
    """

    record_ref: str
    title: str = ""
    status: str
    path: str = ""  # the file, for downloaded and already_downloaded
    format: str = ""  # pdf | caj: the entry ordered
    sha256: str = ""
    bytes: int = 0
    code: str = ""  # why not downloaded (DOWNLOAD_REFUSED, SIDE_EFFECT_UNCERTAIN …)
    message: str = ""


class BatchResult(msgspec.Struct, kw_only=True):
    """download_papers' answer: every paper in the order given, a count per status, the papers not reached,
    and today's count against the daily cap (``daily_limit`` 0: no cap)."""

    items: list[BatchItem]
    summary: dict[str, int]
    remaining: list[str]
    downloads_today: int
    daily_limit: int
    search_id: str = ""


class ZoteroAttachment(msgspec.Struct, omit_defaults=True, kw_only=True):
    """What happened to one record's file in save_to_zotero."""

    status: str  # attached | not_stored | failed | not_downloaded | file_changed
    format: str = ""
    path: str = ""
    bytes: int = 0
    message: str = ""


class ZoteroItem(msgspec.Struct, omit_defaults=True, kw_only=True):
    """One record of save_to_zotero's answer, in the order asked."""

    record_ref: str
    status: str = ""  # saved | already_saved | already_in_library | failed
    title: str = ""
    item_type: str = ""
    zotero_keys: list[str] = []  # already_in_library: the library's items it matched (DOI, or title and year)
    error: Problem | None = None
    attachment: ZoteroAttachment | None = None
    note: ZoteroNote | None = None


class ZoteroTarget(msgspec.Struct):
    id: str
    name: str


class ZoteroReply(msgspec.Struct, omit_defaults=True, kw_only=True):
    status: str  # completed | partial | failed
    target: ZoteroTarget
    items: list[ZoteroItem]
    summary: dict[str, int]
    library_checked: bool = False  # Zotero's local API answered: the whole library was looked at for these records
    warnings: list[str] = []
    errors: list[Problem] = []
