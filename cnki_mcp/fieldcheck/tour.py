"""The field check: ``cnki-mcp doctor --site`` and ``diagnostics`` with ``site_check: true``.

A small fixed tour of CNKI through the dedicated browser and the person's login, with the normal
pacing, budget and challenge handling (at most 12 requests, nothing downloaded): the search template
on the advanced-search page, page 1 and page 2 of a listing CNKI always fills, the detail page of a
journal paper and of a thesis from those rows, the journal's page, the reader of a paper that has an
「HTML阅读」/「在线阅读」 entry, and the login state the page header shows. Every step says what it
found; a step whose page no longer looks as the parsers expect is failed (✗) with its code and a
redacted snapshot, and one that could not look (no screen, browser or network, a proxy, the CDN's 418, a
login or a check to pass: ``LOCAL_CODES``) is blocked (!) with what to do. A failure means the site
changed, nothing else: what one paper lacks of its own is told apart by a second paper (a field, the
reader entry: at most SPARE_DETAILS more detail pages), and a step with nothing to look at on a healthy
site (no thesis in the rows, no paper with a reader entry, a reader CNKI refuses) is skipped (–) with the
reason, as is a step an earlier failure left without input; only a ✗ fails the check (a ! leaves it
blocked). The result is kept in the store (the last one), with the names the header showed, so
``doctor --report`` can keep them out of a report.

Its lines are Chinese; ``doctor --site`` asks for English ones (``english``) when the CLI speaks English
(``CNKI_LANG=en``). The ``diagnostics`` tool's stay Chinese, as every tool text does, whatever the locale.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass, field
from typing import Any

import msgspec

from cnki_mcp import __version__
from cnki_mcp.core.clock import utc_now_iso
from cnki_mcp.core.errors import CnkiError, as_cnki_error
from cnki_mcp.core.errors_en import ERRORS_EN, english_message
from cnki_mcp.core.model import PARSER_VERSION, CheckStep, Paper, Problem, SiteCheck
from cnki_mcp.core.text import shortened
from cnki_mcp.documents.online_reader import HTML_ENTRY, HTML_ENTRY_LINKS, read_document
from cnki_mcp.ops.jobs import FINAL_STATUSES, Job, Jobs, OperationContext
from cnki_mcp.pages.markup import load_page
from cnki_mcp.pages.page_state import PageState
from cnki_mcp.pages.parse import GridPage, parse_detail, parse_journal
from cnki_mcp.pages.reader import ReaderDocument
from cnki_mcp.pages.urls import is_site_url
from cnki_mcp.research.backend import SiteBackend, grid_page
from cnki_mcp.research.enrich import Enrichment
from cnki_mcp.site.door import ADVANCED_SEARCH_URL, BOOTSTRAP_TIMEOUT, Observation
from cnki_mcp.site.exchange import Spec
from cnki_mcp.site.grid_query import GridQuery, compile_expression
from cnki_mcp.site.listings import CONTROL_EXPRESSION
from cnki_mcp.site.registry import DETAIL, GRID, JOURNAL
from cnki_mcp.site.site import bind_detail
from cnki_mcp.store.library import Store

log = logging.getLogger(__name__)

KIND = "site_check"
LOGIN_LOOK_SECONDS = 8.0
STEPS = (
    ("template", "检索页（高级检索的检索请求）"),
    ("grid", "检索结果第 1 页"),
    ("grid_page2", "检索结果第 2 页"),
    ("journal_detail", "期刊论文详情页"),
    ("thesis_detail", "学位论文详情页"),
    ("journal", "期刊页"),
    ("reader", "HTML 阅读"),
    ("login", "登录状态"),
)
LABELS = dict(STEPS)
LABELS_EN = {
    "template": "Search page (the advanced search's request)",
    "grid": "Results, page 1",
    "grid_page2": "Results, page 2",
    "journal_detail": "Journal paper's detail page",
    "thesis_detail": "Thesis's detail page",
    "journal": "Journal page",
    "reader": "HTML reader",
    "login": "Login state",
}
# The registry exchange each step reads (``site.registry``), so a site change a step finds names the
# exchange whose samples to renew; the reader and the login look watch live tabs, outside the exchanges.
STEP_EXCHANGES: dict[str, Spec] = {
    "template": GRID,
    "grid": GRID,
    "grid_page2": GRID,
    "journal_detail": DETAIL,
    "thesis_detail": DETAIL,
    "journal": JOURNAL,
}
THESIS_TYPES = ("博士", "硕士")
# What a detail page must yield, by the product's field names and as a person reads them.
FIELD_LABELS = {
    "title": "题名",
    "authors": "作者",
    "institutions": "单位",
    "abstract": "摘要",
    "keywords": "关键词",
    "source": "来源",
    "year": "年份",
    "source_url": "期刊链接",
    "document_type": "文献类型",
    "doi": "DOI",
    "funds": "基金",
    "clc_codes": "分类号",
}
FIELD_LABELS_EN = {
    "title": "title",
    "authors": "authors",
    "institutions": "institutions",
    "abstract": "abstract",
    "keywords": "keywords",
    "source": "source",
    "year": "year",
    "source_url": "journal link",
    "document_type": "document type",
    "doi": "DOI",
    "funds": "funds",
    "clc_codes": "classification",
}
JOURNAL_FIELDS = ("title", "authors", "institutions", "abstract", "keywords", "source", "year", "source_url")
# A thesis page fills its source line by script, so its year is the listing's, not the page's.
THESIS_FIELDS = ("title", "authors", "abstract", "keywords", "document_type")
# A listing's rows are read when most of them carry these.
ROW_FIELDS = ("authors", "source", "year")
ROW_SHARE = 0.5
# Failures after which no later step can do better (besides the catalogue's fatal codes).
STOP_CODES = frozenset(
    {"VERIFICATION_SKIPPED", "VERIFICATION_REPEATED", "LOGIN_TIMEOUT", "BROWSER_NOT_FOUND", "BROWSER_PROFILE_IN_USE"}
)
# Detail pages the tour may read beyond the journal paper's and the thesis's: a second sample when a page
# lacks a field (one paper's own gap is no site change) and rows to look in for an HTML阅读 entry (many
# papers, theses above all, offer none). With the reader's two requests and the login look kept free,
# the tour stays within its 12 requests.
SPARE_DETAILS = 2
READER_RESERVE = 3  # requests kept for the reader (its detail page and the click) and the login look
MESSAGE_CHARS = 160  # a ✗ step line quotes at most this much of its error's message, ending at a sentence
STRUCTURE_HINT = "可能是知网改版；请运行 cnki-mcp doctor --report，把生成的报告附在 issue 中。"
STRUCTURE_HINT_EN = "CNKI may have changed its pages; run cnki-mcp doctor --report and attach the report to an issue."
# Failures that say nothing of CNKI's pages: trouble on this machine or its network (no screen, no browser, no
# network, a proxy, the CDN's 418), a login or a check the person must pass, a busy or throttling site. Such a
# step is "blocked" (!): its message names the cause and what to do, and it asks for no report.
LOCAL_CODES = frozenset(
    {
        "NETWORK_UNREACHABLE", "BROWSER_UNAVAILABLE", "BROWSER_NOT_FOUND", "BROWSER_PROFILE_IN_USE",
        "DATA_DIRECTORY_IN_USE", "RESOURCE_FAILED", "LOGIN_REQUIRED", "LOGIN_TIMEOUT", "ACCESS_DENIED",
        "VERIFICATION_REQUIRED", "VERIFICATION_SKIPPED", "VERIFICATION_TIMEOUT", "VERIFICATION_REPEATED",
        "RATE_LIMITED", "SITE_UNAVAILABLE", "SITE_TEMPORARILY_EMPTY", "BUDGET_EXHAUSTED",
    }
)
MARKS = {"ok": "✓", "failed": "✗", "blocked": "!", "skipped": "–"}
LOCAL_HINT = "没能检查的原因在本机、网络或登录，与知网的页面无关：按标 ! 的项目所说处理后，再运行一次检查。"
LOCAL_HINT_EN = ("What kept the check from looking lies on this machine, its network or the login, not in CNKI's pages: "
                 "do what the lines marked ! say, then run the check again.")
FAILED_EN = "CNKI's page does not read as the parsers expect."


# --------------------------------------------------------------------------------------------
# What a page yielded (pure)


def _words(english: bool, zh: str, en: str) -> str:
    return en if english else zh


def _fields(english: bool) -> dict[str, str]:
    return FIELD_LABELS_EN if english else FIELD_LABELS


def missing_fields(paper: Paper, required: tuple[str, ...], english: bool = False) -> list[str]:
    """The required fields ``paper`` has no value for, as a person reads them (题名, 摘要 …)."""
    return [_fields(english)[name] for name in required if not getattr(paper, name)]


def shared_gaps(first: list[str], second: list[str]) -> list[str]:
    """The fields two papers' pages both lack: what the page's structure lacks, not one paper."""
    return [gap for gap in first if gap in second]


def reader_candidates(rows: list[Paper], read: Collection[str]) -> list[Paper]:
    """Rows whose detail page may show a reader entry, not read yet: journal papers first (they offer
    HTML阅读 most often), theses last, books never; the listing's order within each."""

    def rank(row: Paper) -> int:
        return 0 if row.document_type == "期刊" else 2 if row.document_type in THESIS_TYPES else 1

    return sorted((row for row in rows if row.locator and row.locator not in read and row.document_type != "图书"), key=rank)


def detail_found(paper: Paper, english: bool = False) -> str:
    """What a detail page yielded: the fields read, with counts and lengths where they say more."""
    parts = []
    for name, label in _fields(english).items():
        value = getattr(paper, name)
        if not value:
            continue
        if isinstance(value, list):
            parts.append(f"{label} {len(value)}")
        elif name == "abstract":
            parts.append(_words(english, f"{label} {len(value)} 字", f"{label} {len(value)} characters"))
        elif name == "document_type":
            parts.append(f"{label} {value}")
        else:
            parts.append(label)
    if english:
        return "read " + ", ".join(parts) if parts else "no field read"
    return "读到 " + "、".join(parts) if parts else "没有读到字段"


def grid_gaps(page: GridPage, number: int, english: bool = False) -> list[str]:
    """What a listing page lacks that the product needs: rows, the total, page 1's paging cursor, and
    authors / source / year on most rows."""
    if not page.rows:
        return [_words(english, "结果行", "result rows")]
    gaps = []
    if page.total is None:
        gaps.append(_words(english, "结果总数", "the total"))
    if number == 1 and not page.cursor:
        gaps.append(_words(english, "翻页标记", "the paging cursor"))
    if any(not (row.title and row.locator) for row in page.rows):
        gaps.append(_words(english, "题名链接", "title links"))
    for name in ROW_FIELDS:
        if sum(1 for row in page.rows if getattr(row, name)) < ROW_SHARE * len(page.rows):
            gaps.append(_fields(english)[name])
    return gaps


def grid_found(page: GridPage, english: bool = False) -> str:
    rows = len(page.rows)
    filled = _words(english, "、", ", ").join(
        f"{_fields(english)[name]} {sum(1 for row in page.rows if getattr(row, name))}/{rows}" for name in ROW_FIELDS
    )
    kinds = sorted({row.document_type for row in page.rows if row.document_type})
    if english:
        total = f"{page.total} in all" if page.total is not None else "total unknown"
        where = f"page {page.page}/{page.page_count}" if page.page_count else ""
        parts = (f"{rows} rows", total, where, filled, "types " + ", ".join(kinds) if kinds else "")
        return ", ".join(part for part in parts if part)
    total = f"共 {page.total} 条" if page.total is not None else "总数未知"
    where = f"第 {page.page}/{page.page_count} 页" if page.page_count else ""
    return "，".join(part for part in (f"{rows} 行", total, where, filled, "类型 " + "、".join(kinds) if kinds else "") if part)


def journal_found(quality: Any, english: bool = False) -> str:
    factors = []
    if english:
        if quality.composite_impact is not None:
            factors.append(f"composite impact factor {quality.composite_impact}")
        if quality.aggregate_impact is not None:
            factors.append(f"aggregate impact factor {quality.aggregate_impact}")
        year = f" ({quality.metric_year} edition)" if quality.metric_year and factors else ""
        return (f"title {quality.canonical_title}; indexed in {', '.join(quality.tiers) or 'none'}; "
                + (", ".join(factors) + year if factors else "no impact factor"))
    tiers = "、".join(quality.tiers) or "无"
    if quality.composite_impact is not None:
        factors.append(f"复合影响因子 {quality.composite_impact}")
    if quality.aggregate_impact is not None:
        factors.append(f"综合影响因子 {quality.aggregate_impact}")
    year = f"（{quality.metric_year}版）" if quality.metric_year and factors else ""
    return f"刊名 {quality.canonical_title}；收录 {tiers}；" + ("、".join(factors) + year if factors else "无影响因子")


def reader_found(document: ReaderDocument, english: bool = False) -> str:
    if english:
        scope = {"full": "full text", "trial": "trial", "partial": "partial", "unknown": "scope unknown"}.get(document.coverage.scope, "")
        return (f"{len(document.sections)} sections, {len(document.text)} characters, {scope}, "
                f"read as {document.coverage.generation or 'page'}")
    scope = {"full": "全文", "trial": "试读", "partial": "部分", "unknown": "范围未知"}.get(document.coverage.scope, "")
    return (
        f"{len(document.sections)} 个章节，{len(document.text)} 字，{scope}，"
        f"读法 {document.coverage.generation or '页面'}"
    )


def login_found(page: PageState, english: bool = False) -> str:
    if english:
        if not page.institutions and not page.personal:
            return ("anonymous: no personal or institutional login (CNKI asks anonymous visitors for slider checks "
                    "more often; far fewer after a login)")
        institution = f"recognised ({len(page.institutions)} names)" if page.institutions else "not recognised"
        return f"institution {institution}; personal {'logged in' if page.personal else 'not logged in'}"
    if not page.institutions and not page.personal:
        return "匿名访问：没有个人或机构登录（知网对匿名访问更常要求滑块验证，登录个人或机构账号后会少很多）"
    institution = f"已识别（{len(page.institutions)} 个名称）" if page.institutions else "未识别"
    personal = "已登录" if page.personal else "未登录"
    return f"机构 {institution}；个人 {personal}"


def has_reader_entry(html: str) -> bool:
    """Whether a detail page shows a live 「HTML阅读」/「在线阅读」 entry (a styled stand-in does not count)."""
    if not html:
        return False
    root = load_page(html)
    return any(re.search(HTML_ENTRY, anchor.text_content()) for anchor in root.cssselect(HTML_ENTRY_LINKS))


def render(check: SiteCheck, english: bool = False) -> list[str]:
    """The check as lines for a person: one ✓ / ✗ / ! / – line per step, then the totals."""
    lines = [step_line(step, english) for step in check.steps]
    passed = sum(1 for step in check.steps if step.status == "ok")
    skipped = sum(1 for step in check.steps if step.status == "skipped")
    blocked = sum(1 for step in check.steps if step.status == "blocked")
    words = _SUMMARY_EN if english else _SUMMARY
    unchecked = words["skipped"].format(skipped) if skipped else ""
    unchecked += words["blocked"].format(blocked) if blocked else ""
    verdict = {"passed": words["passed"], "blocked": words["local"]}.get(check.status, words["failed"])
    browser = words["browser"].format(check.browser) if check.browser else ""
    site = words["site"].format(check.site) if check.site else ""
    lines.append(words["summary"].format(passed=passed, steps=len(check.steps), unchecked=unchecked, requests=check.requests,
                                         seconds=check.seconds, browser=browser, site=site, verdict=verdict))
    return lines


# The totals line of ``render``, in each language.
_SUMMARY = {
    "skipped": "，{} 项未检查（标 –）",
    "blocked": "，{} 项没能检查（标 !）",
    "passed": "页面结构与预期一致。",
    "local": LOCAL_HINT,
    "failed": f"有页面与预期不符，见标 ✗ 的项目；{STRUCTURE_HINT}",
    "browser": "，浏览器 {}",
    "site": "，海外站点 {}",
    "summary": "{passed}/{steps} 项通过{unchecked}，{requests} 次请求，{seconds:.1f} 秒{browser}{site}；{verdict}",
}
_SUMMARY_EN = {
    "skipped": ", {} not checked (marked –)",
    "blocked": ", {} could not be checked (marked !)",
    "passed": "the pages look as expected.",
    "local": LOCAL_HINT_EN,
    "failed": f"a page does not look as expected, see the lines marked ✗; {STRUCTURE_HINT_EN}",
    "browser": ", browser {}",
    "site": ", overseas site {}",
    "summary": "{passed}/{steps} passed{unchecked}, {requests} requests, {seconds:.1f} s{browser}{site}; {verdict}",
}


def step_line(step: CheckStep, english: bool = False) -> str:
    mark = MARKS[step.status]
    if english:
        return _step_line_en(step, mark)
    cost = f"（{step.requests} 次请求，{step.seconds:.1f} 秒）"
    if step.status == "ok":
        return f"{mark} {step.label}：{step.found}{cost}"
    if step.status == "skipped":
        return f"{mark} {step.label}：未检查，{step.message}"
    if step.status == "blocked":  # the whole message: what to do is its end
        return f"{mark} {step.label}：{step.code} {_sentence(step.message)}{cost}"
    found = f"已{step.found}。" if step.found.startswith("读到") else (f"已读到：{step.found}。" if step.found else "")
    saved = f"快照 diagnostics/{step.snapshot}" if step.snapshot else "没有保存快照"
    return f"{mark} {step.label}：{step.code} {_sentence(shortened(step.message, MESSAGE_CHARS))}{found}{saved}{cost}"


def _step_line_en(step: CheckStep, mark: str) -> str:
    cost = f" ({step.requests} requests, {step.seconds:.1f} s)"
    if step.status == "ok":
        return f"{mark} {step.label}: {step.found}{cost}"
    if step.status == "skipped":
        return f"{mark} {step.label}: not checked, {step.message}"
    if step.status == "blocked":
        return f"{mark} {step.label}: {step.code} {step.message}{cost}"
    found = f" Found: {step.found}." if step.found else ""
    saved = f" Snapshot diagnostics/{step.snapshot}" if step.snapshot else " No snapshot saved"
    return f"{mark} {step.label}: {step.code} {step.message}{found}{saved}{cost}"


def _sentence(message: str) -> str:
    return message + ("" if message.endswith(("。", "！", "？", ".", "…")) else "。")


# --------------------------------------------------------------------------------------------
# The tour


class _Skip(Exception):
    """A step an earlier step left without anything to look at."""


class _Gap(Exception):
    """A page read without error that lacks what the product needs (SITE_STRUCTURE_CHANGED)."""

    def __init__(self, found: str, gaps: list[str]) -> None:
        super().__init__("、".join(gaps))
        self.found = found
        self.gaps = gaps


@dataclass
class _Seen:
    """The last page a step's parser was given (for its snapshot)."""

    html: str = ""
    url: str = ""

    def recording(self, parse: Callable[[str, str], Any]) -> Callable[[str, str], Any]:
        def wrapped(html: str, url: str) -> Any:
            self.html, self.url = html, url
            return parse(html, url)

        return wrapped


@dataclass
class Tour:
    """One field check over ``site``; ``engine`` locates a paper again for the reader when its link expired."""

    op: OperationContext
    site: SiteBackend
    engine: Enrichment
    steps: list[CheckStep] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    page1: GridPage | None = None
    read: dict[str, Paper] = field(default_factory=dict)  # every detail page read, by the row's locator
    journal_papers: list[Paper] = field(default_factory=list)
    reader_paper: Paper | None = None
    spares: int = 0  # detail pages read beyond the first journal paper and thesis (SPARE_DETAILS)
    stopped: str = ""
    seen: _Seen = field(default_factory=_Seen)
    english: bool = False  # the lines in English (doctor --site with CNKI_LANG=en)

    def _say(self, zh: str, en: str) -> str:
        return _words(self.english, zh, en)

    async def run(self) -> SiteCheck:
        started, clock = utc_now_iso(), time.monotonic()
        query = GridQuery(branches=compile_expression(CONTROL_EXPRESSION))
        await self._step("template", lambda: self._template(query))
        await self._step("grid", lambda: self._grid(query, 1))
        await self._step("grid_page2", lambda: self._grid(query, 2))
        await self._step("journal_detail", lambda: self._detail(("期刊", "journal paper"), ("期刊",), JOURNAL_FIELDS))
        await self._step("thesis_detail", lambda: self._detail(("学位论文", "thesis"), THESIS_TYPES, THESIS_FIELDS))
        await self._step("journal", self._journal)
        await self._step("reader", self._reader)
        await self._step("login", self._login)
        # A skipped step ("–") had nothing to look at on a healthy site; only a failed one says the site changed.
        statuses = {step.status for step in self.steps}
        return SiteCheck(
            status="failed" if "failed" in statuses else "blocked" if "blocked" in statuses else "passed",
            started_at=started,
            finished_at=utc_now_iso(),
            version=__version__,
            parser=PARSER_VERSION,
            browser=await self.site.browser_version() if self.site.browser_running else "",
            site=self.site.site_view().get("host", ""),
            requests=self.op.requests,
            seconds=round(time.monotonic() - clock, 1),
            steps=self.steps,
        )

    async def _step(self, name: str, body: Callable[[], Awaitable[str]]) -> None:
        label = (LABELS_EN if self.english else LABELS)[name]
        lines = [step_line(s, self.english) for s in self.steps]
        self.op.stage(name, {"done": len(self.steps), "total": len(STEPS), "steps": lines})
        if self.stopped:
            self.steps.append(CheckStep(name=name, label=label, status="skipped", message=self.stopped))
            return
        requests, clock = self.op.requests, time.monotonic()
        self.seen = _Seen()
        step = CheckStep(name=name, label=label, status="ok")
        try:
            step.found = await body()
        except _Gap as gap:
            step.status, step.found, step.code = "failed", gap.found, "SITE_STRUCTURE_CHANGED"
            step.message = self._say(f"页面结构与预期不符，缺少：{'、'.join(gap.gaps)}。",
                                     f"the page does not look as expected, it lacks: {', '.join(gap.gaps)}.")
            step.snapshot = await self._snapshot(name, None)
        except _Skip as skip:
            step.status, step.message = "skipped", str(skip)
        except Exception as exc:  # noqa: BLE001 - every failure of a step is reported on its line
            error = as_cnki_error(exc)
            if error.code == "CANCELLED":
                raise
            if error.code == "OPERATION_FAILED":
                log.exception("field check step %s failed", name)
            step.code, step.message = error.code, error.message
            if error.code in LOCAL_CODES:
                step.status = "blocked"
            else:
                step.status, step.snapshot = "failed", await self._snapshot(name, error)
            if self.english:  # the catalogue's messages are Chinese only
                step.message = ERRORS_EN.get(error.code, FAILED_EN)
            if error.fatal or error.code in STOP_CODES:
                self.stopped = self._say(f"检查在「{label}」停止（{error.code}）", f"the check stopped at \"{label}\" ({error.code})")
        step.requests = self.op.requests - requests
        step.seconds = round(time.monotonic() - clock, 1)
        if step.status in ("failed", "blocked"):
            details = {"step": name, "snapshot": step.snapshot} if step.snapshot else {"step": name}
            if name in STEP_EXCHANGES:
                details["exchange"] = STEP_EXCHANGES[name].name
            self.op.add_error(Problem(code=step.code, message=self._say(f"{label}：", f"{label}: ") + step.message, details=details))
        self.steps.append(step)

    async def _snapshot(self, name: str, error: CnkiError | None) -> str:
        """The failed step's snapshot: the one its error names, else the page its parser saw, else the work tab."""
        if error is not None and isinstance(error.details, dict) and error.details.get("snapshot"):
            return str(error.details["snapshot"])
        kind = f"check-{name}"
        try:
            if self.seen.html:
                return await self.site.snapshot(kind, self.seen.html, self.seen.url)
            if self.site.has_work_tab:
                return await self.site.tab_snapshot(kind, self.site.work_tab_now())
        except CnkiError as exc:
            log.debug("no snapshot for the failed step %s: %s", name, exc)
        return ""

    # -- the steps ------------------------------------------------------------------------------

    async def _template(self, query: GridQuery) -> str:
        anchor = CONTROL_EXPRESSION["value"]
        template = await self.site.listings.fresh_template(self.op, anchor)
        path = template["url"].split("cnki.net", 1)[-1]
        return self._say(
            f"检索请求 POST {path}，{len(template['fields'])} 个表单字段，QueryJson 含 {'、'.join(template['query_json'])}",
            f"search request POST {path}, {len(template['fields'])} form fields, QueryJson holds {', '.join(template['query_json'])}",
        )

    async def _grid(self, query: GridQuery, number: int) -> str:
        if self.steps[0].status != "ok":
            raise _Skip(self._say("没有取得检索请求的格式", "the search request's form was not obtained"))
        if number == 2 and self.page1 is None:
            raise _Skip(self._say("第 1 页没有读到结果行", "page 1 yielded no rows"))
        self.site.listings.last_answer = ("", "")
        try:
            page = await grid_page(self.site, self.op, query, number)
        finally:
            self.seen.html, self.seen.url = self.site.listings.last_answer
        gaps = grid_gaps(page, number, self.english)
        if number == 2 and self.page1 is not None:
            first = {row.record_ref for row in self.page1.rows}
            if page.rows and all(row.record_ref in first for row in page.rows):
                gaps.append(self._say("第 2 页的新结果（与第 1 页相同）", "new results on page 2 (it repeats page 1)"))
        if gaps:
            raise _Gap(grid_found(page, self.english) if page.rows else "", gaps)
        if number == 1:
            self.page1 = page
        else:
            self.page1 = GridPage(rows=[*self.page1.rows, *page.rows]) if self.page1 else page
        return grid_found(page, self.english)

    async def _detail(self, what: tuple[str, str], types: tuple[str, ...], required: tuple[str, ...]) -> str:
        if self.page1 is None:
            raise _Skip(self._say("检索结果没有读到，没有可查看的论文", "no results were read, so there is no paper to look at"))
        rows = [row for row in self.page1.rows if row.document_type in types and row.locator]
        if not rows:
            raise _Skip(self._say(
                f"检索结果前两页里没有{what[0]}（这一次的结果如此，不表示页面有变化）",
                f"the first two result pages hold no {what[1]} (this time's results happen to; no sign of a page change)",
            ))
        paper = await self._open(rows[0])
        found = detail_found(paper, self.english)
        gaps = missing_fields(paper, required, self.english)
        if gaps and len(rows) > 1 and self._spare_left():
            # One paper may lack a field of its own (no keywords, a journal without a journal page);
            # a field is missing from the page's structure only when a second paper lacks it too.
            self.spares += 1
            shared = shared_gaps(gaps, missing_fields(await self._open(rows[1]), required, self.english))
            if not shared:
                return self._say(f"{found}；另一篇读到了{'、'.join(gaps)}（是第一篇论文本身没有）",
                                 f"{found}; another paper had {', '.join(gaps)} (the first paper itself lacks them)")
            gaps = shared
        if gaps:
            raise _Gap(found, gaps)
        return found

    async def _open(self, row: Paper) -> Paper:
        """The detail page of the listing's ``row``, kept for the journal and reader steps."""
        paper = await self.site.read(
            self.op, row.locator, self.seen.recording(lambda html, url: bind_detail(row, parse_detail(html, url), url)),
            DETAIL.name,
        )
        self.read[row.locator] = paper
        if row.document_type == "期刊":
            self.journal_papers.append(paper)
        if self.reader_paper is None and await asyncio.to_thread(has_reader_entry, self.seen.html):
            self.reader_paper = paper
        return paper

    def _spare_left(self) -> bool:
        """Whether one more detail page fits: within SPARE_DETAILS, with the reader's and login's requests kept."""
        left = self.op.remaining_requests()
        return self.spares < SPARE_DETAILS and (left is None or left > READER_RESERVE)

    async def _journal(self) -> str:
        if not self.journal_papers:
            raise _Skip(self._say("没有读到期刊论文的详情页", "no journal paper's detail page was read"))
        paper = next((paper for paper in self.journal_papers if paper.source_url), None)
        if paper is None:
            raise _Skip(self._say("期刊论文详情页没有给出期刊链接", "the journal paper's detail page gave no journal link"))
        quality = await self.site.read(
            self.op, paper.source_url, self.seen.recording(lambda html, url: parse_journal(html, url, paper.source)),
            JOURNAL.name,
        )
        return journal_found(quality, self.english)

    async def _reader(self) -> str:
        if not self.read:
            raise _Skip(self._say("没有读到可以打开阅读页的详情页", "no detail page was read to open a reader from"))
        if self.reader_paper is None:
            await self._look_for_reader()
        if self.reader_paper is None:
            raise _Skip(self._say(
                f"读过的 {len(self.read)} 篇论文的详情页都没有「HTML阅读」或「在线阅读」入口"
                "（不少论文，尤其学位论文，不提供在线阅读；这不表示页面有变化）",
                f"none of the {len(self.read)} detail pages read offers an HTML or online reading entry "
                "(many papers, theses above all, offer none; no sign of a page change)",
            ))
        try:
            _, document = await read_document(self.op, self.engine, self.site, self.reader_paper)
        except CnkiError as error:
            if error.code != "READER_REFUSED":
                raise
            # CNKI holds only the record of this paper, or the login's subscription lacks it: no page changed.
            raise _Skip(self._say(
                "阅读入口打开后，知网答复不提供这篇论文的在线阅读（READER_REFUSED，与收录或订购有关）；这不表示页面有变化",
                "the reader entry opened, and CNKI answered that it offers no online reading of this paper "
                "(READER_REFUSED, a matter of holdings or subscription); no sign of a page change",
            )) from None
        found = reader_found(document, self.english)
        gaps = [] if document.text.strip() else [self._say("正文", "the text")]
        if not document.sections:
            gaps.append(self._say("章节", "sections"))
        if gaps:
            raise _Gap(found, gaps)
        where = list(self.read.values()).index(self.reader_paper) + 1
        return found if where == 1 else self._say(f"{found}（读过的第 {where} 篇论文的详情页才有阅读入口）",
                                                  f"{found} (only the detail page of paper {where} read had a reader entry)")

    async def _look_for_reader(self) -> None:
        """Detail pages of further rows, journal papers first, until one shows a reader entry (SPARE_DETAILS)."""
        if self.page1 is None:
            return
        for row in reader_candidates(self.page1.rows, self.read):
            if self.reader_paper is not None or not self._spare_left():
                return
            self.spares += 1
            try:
                await self._open(row)
            except CnkiError as error:
                if error.fatal or error.code in STOP_CODES or error.code == "BUDGET_EXHAUSTED":
                    raise
                log.info("field check: the detail page of %s was not read (%s)", row.locator, error.code)

    async def _login(self) -> str:
        tab = await self.site.work_tab()
        if not is_site_url(tab.url):
            await self.site.navigate(self.op, tab, ADVANCED_SEARCH_URL, BOOTSTRAP_TIMEOUT)

        def accept(seen: Observation) -> Observation | None:
            return seen if seen.complete else None

        seen = await self.site.wait_page(self.op, tab, accept, LOGIN_LOOK_SECONDS)
        self.seen.html, self.seen.url = seen.html, seen.url
        page = seen.page
        if not page.identity_ready:
            raise _Gap("", [self._say("页面头部的登录区域（机构名称、登录或退出入口）",
                                      "the header's login area (institution name, login or logout entry)")])
        self.names = [name for name in [*page.institutions, page.personal_name] if name]
        return login_found(page, self.english)


# --------------------------------------------------------------------------------------------
# Starting it


async def tour(op: OperationContext, site: SiteBackend, enrichment: Enrichment, store: Store, english: bool = False) -> SiteCheck:
    """The field check as an operation's work: the tour, its result kept in the store."""
    walk = Tour(op, site, enrichment, english=english)
    check = await walk.run()
    store.put_site_check(check, walk.names)
    return check


async def run_in_terminal(jobs: Jobs, job: Job, echo: Callable[[str], None], english: bool = False) -> SiteCheck | None:
    """``cnki-mcp doctor --site``: the tour's operation ``job`` (started with the same ``english``), its steps
    printed as they finish and a person told when a page waits for them. Returns the check (None when the
    operation itself failed)."""
    limit = job.record.budget.max_requests
    echo(f"Checking CNKI's pages on site (at most {limit} requests, nothing downloaded)…" if english
         else f"现场检查知网页面（至多 {limit} 次请求，不下载文件）……")
    shown, message = 0, ""
    while True:
        view = await jobs.wait(job, 5.0)
        progress = view.progress if isinstance(view.progress, dict) else {}
        lines = list(progress.get("steps") or [])
        for line in lines[shown:]:
            echo(line)
        shown = max(shown, len(lines))
        if view.status == "awaiting_user" and view.message != message:
            message = view.message
            echo("The browser window needs you (a login or a check); the check goes on once you are done." if english
                 else f"需要你处理：{message}")
        if view.status in FINAL_STATUSES:
            break
    if not isinstance(view.result, dict):
        for problem in view.errors:
            said = english_message(problem) if english else problem.message
            echo(f"{MARKS['blocked'] if problem.code in LOCAL_CODES else MARKS['failed']} {problem.code}: {said}")
        return None
    check = msgspec.convert(view.result, SiteCheck)
    for step in check.steps[shown:]:
        echo(step_line(step, english))
    echo(render(check, english)[-1])
    return check
