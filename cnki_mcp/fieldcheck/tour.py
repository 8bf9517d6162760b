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


# --------------------------------------------------------------------------------------------
# What a page yielded (pure)


def missing_fields(paper: Paper, required: tuple[str, ...]) -> list[str]:
    """The required fields ``paper`` has no value for, as a person reads them (题名, 摘要 …)."""
    return [FIELD_LABELS[name] for name in required if not getattr(paper, name)]


def shared_gaps(first: list[str], second: list[str]) -> list[str]:
    """The fields two papers' pages both lack: what the page's structure lacks, not one paper."""
    return [gap for gap in first if gap in second]


def reader_candidates(rows: list[Paper], read: Collection[str]) -> list[Paper]:
    """Rows whose detail page may show a reader entry, not read yet: journal papers first (they offer
    HTML阅读 most often), theses last, books never; the listing's order within each."""

    def rank(row: Paper) -> int:
        return 0 if row.document_type == "期刊" else 2 if row.document_type in THESIS_TYPES else 1

    return sorted((row for row in rows if row.locator and row.locator not in read and row.document_type != "图书"), key=rank)


def detail_found(paper: Paper) -> str:
    """What a detail page yielded: the fields read, with counts and lengths where they say more."""
    parts = []
    for name, label in FIELD_LABELS.items():
        value = getattr(paper, name)
        if not value:
            continue
        if isinstance(value, list):
            parts.append(f"{label} {len(value)}")
        elif name == "abstract":
            parts.append(f"{label} {len(value)} 字")
        elif name == "document_type":
            parts.append(f"{label} {value}")
        else:
            parts.append(label)
    return "读到 " + "、".join(parts) if parts else "没有读到字段"


def grid_gaps(page: GridPage, number: int) -> list[str]:
    """What a listing page lacks that the product needs: rows, the total, page 1's paging cursor, and
    authors / source / year on most rows."""
    if not page.rows:
        return ["结果行"]
    gaps = []
    if page.total is None:
        gaps.append("结果总数")
    if number == 1 and not page.cursor:
        gaps.append("翻页标记")
    if any(not (row.title and row.locator) for row in page.rows):
        gaps.append("题名链接")
    for name in ROW_FIELDS:
        if sum(1 for row in page.rows if getattr(row, name)) < ROW_SHARE * len(page.rows):
            gaps.append(FIELD_LABELS[name])
    return gaps


def grid_found(page: GridPage) -> str:
    rows = len(page.rows)
    filled = "、".join(
        f"{FIELD_LABELS[name]} {sum(1 for row in page.rows if getattr(row, name))}/{rows}" for name in ROW_FIELDS
    )
    total = f"共 {page.total} 条" if page.total is not None else "总数未知"
    kinds = sorted({row.document_type for row in page.rows if row.document_type})
    where = f"第 {page.page}/{page.page_count} 页" if page.page_count else ""
    return "，".join(part for part in (f"{rows} 行", total, where, filled, "类型 " + "、".join(kinds) if kinds else "") if part)


def journal_found(quality: Any) -> str:
    tiers = "、".join(quality.tiers) or "无"
    factors = []
    if quality.composite_impact is not None:
        factors.append(f"复合影响因子 {quality.composite_impact}")
    if quality.aggregate_impact is not None:
        factors.append(f"综合影响因子 {quality.aggregate_impact}")
    year = f"（{quality.metric_year}版）" if quality.metric_year and factors else ""
    return f"刊名 {quality.canonical_title}；收录 {tiers}；" + ("、".join(factors) + year if factors else "无影响因子")


def reader_found(document: ReaderDocument) -> str:
    scope = {"full": "全文", "trial": "试读", "partial": "部分", "unknown": "范围未知"}.get(document.coverage.scope, "")
    return (
        f"{len(document.sections)} 个章节，{len(document.text)} 字，{scope}，"
        f"读法 {document.coverage.generation or '页面'}"
    )


def login_found(page: PageState) -> str:
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


def render(check: SiteCheck) -> list[str]:
    """The check as lines for a person: one ✓ / ✗ / ! / – line per step, then the totals."""
    lines = [step_line(step) for step in check.steps]
    passed = sum(1 for step in check.steps if step.status == "ok")
    skipped = sum(1 for step in check.steps if step.status == "skipped")
    blocked = sum(1 for step in check.steps if step.status == "blocked")
    unchecked = f"，{skipped} 项未检查（标 –）" if skipped else ""
    unchecked += f"，{blocked} 项没能检查（标 !）" if blocked else ""
    verdict = {
        "passed": "页面结构与预期一致。",
        "blocked": LOCAL_HINT,
    }.get(check.status, f"有页面与预期不符，见标 ✗ 的项目；{STRUCTURE_HINT}")
    browser = f"，浏览器 {check.browser}" if check.browser else ""
    site = f"，海外站点 {check.site}" if check.site else ""
    lines.append(f"{passed}/{len(check.steps)} 项通过{unchecked}，{check.requests} 次请求，{check.seconds:.1f} 秒{browser}{site}；"
                 f"{verdict}")
    return lines


def step_line(step: CheckStep) -> str:
    mark = MARKS[step.status]
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

    async def run(self) -> SiteCheck:
        started, clock = utc_now_iso(), time.monotonic()
        query = GridQuery(branches=compile_expression(CONTROL_EXPRESSION))
        await self._step("template", lambda: self._template(query))
        await self._step("grid", lambda: self._grid(query, 1))
        await self._step("grid_page2", lambda: self._grid(query, 2))
        await self._step("journal_detail", lambda: self._detail("期刊", ("期刊",), JOURNAL_FIELDS))
        await self._step("thesis_detail", lambda: self._detail("学位论文", THESIS_TYPES, THESIS_FIELDS))
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
        label = LABELS[name]
        self.op.stage(name, {"done": len(self.steps), "total": len(STEPS), "steps": [step_line(s) for s in self.steps]})
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
            step.message = f"页面结构与预期不符，缺少：{'、'.join(gap.gaps)}。"
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
            if error.fatal or error.code in STOP_CODES:
                self.stopped = f"检查在「{label}」停止（{error.code}）"
        step.requests = self.op.requests - requests
        step.seconds = round(time.monotonic() - clock, 1)
        if step.status in ("failed", "blocked"):
            details = {"step": name, "snapshot": step.snapshot} if step.snapshot else {"step": name}
            if name in STEP_EXCHANGES:
                details["exchange"] = STEP_EXCHANGES[name].name
            self.op.add_error(Problem(code=step.code, message=f"{label}：{step.message}", details=details))
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
        return f"检索请求 POST {path}，{len(template['fields'])} 个表单字段，QueryJson 含 {'、'.join(template['query_json'])}"

    async def _grid(self, query: GridQuery, number: int) -> str:
        if self.steps[0].status != "ok":
            raise _Skip("没有取得检索请求的格式")
        if number == 2 and self.page1 is None:
            raise _Skip("第 1 页没有读到结果行")
        self.site.listings.last_answer = ("", "")
        try:
            page = await grid_page(self.site, self.op, query, number)
        finally:
            self.seen.html, self.seen.url = self.site.listings.last_answer
        gaps = grid_gaps(page, number)
        if number == 2 and self.page1 is not None:
            first = {row.record_ref for row in self.page1.rows}
            if page.rows and all(row.record_ref in first for row in page.rows):
                gaps.append("第 2 页的新结果（与第 1 页相同）")
        if gaps:
            raise _Gap(grid_found(page) if page.rows else "", gaps)
        if number == 1:
            self.page1 = page
        else:
            self.page1 = GridPage(rows=[*self.page1.rows, *page.rows]) if self.page1 else page
        return grid_found(page)

    async def _detail(self, what: str, types: tuple[str, ...], required: tuple[str, ...]) -> str:
        if self.page1 is None:
            raise _Skip("检索结果没有读到，没有可查看的论文")
        rows = [row for row in self.page1.rows if row.document_type in types and row.locator]
        if not rows:
            raise _Skip(f"检索结果前两页里没有{what}（这一次的结果如此，不表示页面有变化）")
        paper = await self._open(rows[0])
        found = detail_found(paper)
        gaps = missing_fields(paper, required)
        if gaps and len(rows) > 1 and self._spare_left():
            # One paper may lack a field of its own (no keywords, a journal without a journal page);
            # a field is missing from the page's structure only when a second paper lacks it too.
            self.spares += 1
            shared = shared_gaps(gaps, missing_fields(await self._open(rows[1]), required))
            if not shared:
                return f"{found}；另一篇读到了{'、'.join(gaps)}（是第一篇论文本身没有）"
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
            raise _Skip("没有读到期刊论文的详情页")
        paper = next((paper for paper in self.journal_papers if paper.source_url), None)
        if paper is None:
            raise _Skip("期刊论文详情页没有给出期刊链接")
        quality = await self.site.read(
            self.op, paper.source_url, self.seen.recording(lambda html, url: parse_journal(html, url, paper.source)),
            JOURNAL.name,
        )
        return journal_found(quality)

    async def _reader(self) -> str:
        if not self.read:
            raise _Skip("没有读到可以打开阅读页的详情页")
        if self.reader_paper is None:
            await self._look_for_reader()
        if self.reader_paper is None:
            raise _Skip(
                f"读过的 {len(self.read)} 篇论文的详情页都没有「HTML阅读」或「在线阅读」入口"
                "（不少论文，尤其学位论文，不提供在线阅读；这不表示页面有变化）"
            )
        try:
            _, document = await read_document(self.op, self.engine, self.site, self.reader_paper)
        except CnkiError as error:
            if error.code != "READER_REFUSED":
                raise
            # CNKI holds only the record of this paper, or the login's subscription lacks it: no page changed.
            raise _Skip("阅读入口打开后，知网答复不提供这篇论文的在线阅读（READER_REFUSED，与收录或订购有关）；这不表示页面有变化") from None
        found = reader_found(document)
        gaps = [] if document.text.strip() else ["正文"]
        if not document.sections:
            gaps.append("章节")
        if gaps:
            raise _Gap(found, gaps)
        where = list(self.read.values()).index(self.reader_paper) + 1
        return found if where == 1 else f"{found}（读过的第 {where} 篇论文的详情页才有阅读入口）"

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
            raise _Gap("", ["页面头部的登录区域（机构名称、登录或退出入口）"])
        self.names = [name for name in [*page.institutions, page.personal_name] if name]
        return login_found(page)


# --------------------------------------------------------------------------------------------
# Starting it


async def tour(op: OperationContext, site: SiteBackend, enrichment: Enrichment, store: Store) -> SiteCheck:
    """The field check as an operation's work: the tour, its result kept in the store."""
    walk = Tour(op, site, enrichment)
    check = await walk.run()
    store.put_site_check(check, walk.names)
    return check


async def run_in_terminal(jobs: Jobs, job: Job, echo: Callable[[str], None]) -> SiteCheck | None:
    """``cnki-mcp doctor --site``: the tour's operation ``job``, its steps printed as they finish and a person
    told when a page waits for them. Returns the check (None when the operation itself failed)."""
    echo(f"现场检查知网页面（至多 {job.record.budget.max_requests} 次请求，不下载文件）……")
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
            echo(f"需要你处理：{message}")
        if view.status in FINAL_STATUSES:
            break
    if not isinstance(view.result, dict):
        for problem in view.errors:
            echo(f"{MARKS['blocked'] if problem.code in LOCAL_CODES else MARKS['failed']} {problem.code}: {problem.message}")
        return None
    check = msgspec.convert(view.result, SiteCheck)
    for step in check.steps[shown:]:
        echo(step_line(step))
    echo(render(check)[-1])
    return check
