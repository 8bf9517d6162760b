"""A backend-level simulated CNKI for the research engine (engine.md §16.1).

It implements :class:`cnki_mcp.research.enrich.SiteBackend` without a browser: every request charges the
operation, takes a slot of its own limiter, then "takes" ``latency`` seconds. It logs each request
it performed, tracks the peak number in flight, and can fail chosen requests or "crash" (block
forever from some request on) so tests can snapshot a store mid-search.

Paper i: title ``自动驾驶产品责任研究 %03d``, author ``作者i``, source ``法学期刊<i mod 15>``, year
2020 + i mod 6, type 期刊, CJFD / ``SIM%04d``. Listings: q1 (subject) 0–119, q2 (title) 30–149,
q3 (keywords) 60–179; feedback channels (subject + one extra keyword) list 1000–1019 and
2000–2019 in the order their keywords are first seen; 20 rows per page.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator, Callable

import msgspec

from cnki_mcp.core.clock import utc_now_iso
from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.identity import record_ref_for
from cnki_mcp.core.model import PARSER_VERSION, Paper, Quality
from cnki_mcp.core.text import source_key, title_key
from cnki_mcp.ops.jobs import OperationContext
from cnki_mcp.pages.parse import GridPage
from cnki_mcp.site.grid_query import GridQuery
from cnki_mcp.site.limiter import Limiter
from cnki_mcp.site.listings import Waiting

PAGE_SIZE = 20
ABSTRACT = "自动驾驶产品责任的归责与风险分配"
KEYWORDS = ["自动驾驶", "产品责任", "风险分配", "算法责任"]
FEEDBACK_TERMS = frozenset(KEYWORDS[2:])
CHANNEL_LISTS = {"subject": range(0, 120), "title": range(30, 150), "keywords": range(60, 180)}
FEEDBACK_LISTS = (range(1000, 1020), range(2000, 2020))


def sim_paper(i: int) -> Paper:
    paper = Paper(
        title=f"自动驾驶产品责任研究 {i:03d}",
        authors=[f"作者{i}"],
        source=f"法学期刊{i % 15}",
        year=2020 + i % 6,
        document_type="期刊",
        dbname="CJFD",
        filename=f"SIM{i:04d}",
        url=f"https://kns.cnki.net/kcms2/article/abstract?v={i}",
        listed_at=utc_now_iso(),
    )
    paper.record_ref = record_ref_for(paper)
    return paper


class FakeSite:
    def __init__(
        self,
        *,
        interval_ms: int = 0,
        latency: float = 0.001,
        max_inflight: int = 6,
        page_size: int = PAGE_SIZE,
        lists: dict[str, range] | None = None,
        feedback_lists: tuple[range, ...] = FEEDBACK_LISTS,
    ) -> None:
        self.limiter = Limiter(interval_ms, max_inflight)
        self.latency = latency
        self.page_size = page_size
        self.lists = dict(CHANNEL_LISTS if lists is None else lists)
        self.feedback_lists = feedback_lists
        self.feedback_keys: list[str] = []
        self.inflight = 0
        self.peak = 0
        self.log: list[tuple[str, str]] = []  # performed requests: (kind, what)
        self.queries: list[GridQuery] = []
        # kind -> {key: code}: the next request for key fails (after being charged and paced) with that code.
        self.failures: dict[str, dict[str, str]] = {"grid": {}, "detail": {}, "journal": {}, "locate": {}}
        # Called with (kind, key) before each request; returning True "crashes" the site from then on.
        self.crash_when: Callable[[str, str], bool] | None = None
        self.crashed = asyncio.Event()
        self.journal_titles: dict[str, str] = {}  # source -> the name its journal page shows
        self.extra_papers: list[Paper] = []  # more papers locate can find

    # -- bookkeeping --

    @property
    def counts(self) -> Counter[str]:
        return Counter(kind for kind, _ in self.log)

    async def _request(self, op: OperationContext, kind: str, key: str) -> None:
        op.charge()
        if self.crashed.is_set() or (self.crash_when is not None and self.crash_when(kind, key)):
            self.crashed.set()
            await asyncio.Event().wait()  # the process "died": this request never completes
        async with self.limiter.slot():
            self.inflight += 1
            self.peak = max(self.peak, self.inflight)
            try:
                await asyncio.sleep(self.latency)
            finally:
                self.inflight -= 1
        self.log.append((kind, key))
        code = self.failures[kind].pop(key, None)
        if code is not None:
            raise CnkiError(code, details={"simulated": key})

    # -- the listing a query stands for --

    def _listing(self, query: GridQuery) -> tuple[str, range]:
        branch = query.branches[0]
        fields = {condition.field for condition in branch}
        # A feedback channel ANDs one keyword the detail pages introduced to the subject concepts.
        extra = branch[-1].value
        if fields == {"subject"} and extra in FEEDBACK_TERMS:
            if extra not in self.feedback_keys:
                self.feedback_keys.append(extra)
            return f"feedback:{extra}", self.feedback_lists[self.feedback_keys.index(extra)]
        (field,) = fields
        return field, self.lists[field]

    # -- SiteBackend --

    async def grid(self, op: OperationContext, query: GridQuery, page: int) -> AsyncIterator[Waiting | GridPage]:
        name, listing = self._listing(query)
        self.queries.append(query)
        await self._request(op, "grid", f"{name}#{page}")
        start = (page - 1) * self.page_size
        numbers = listing[start : start + self.page_size]
        yield GridPage(
            rows=[sim_paper(i) for i in numbers],
            total=len(listing),
            page=page,
            page_count=-(-len(listing) // self.page_size),
            exhausted=page * self.page_size >= len(listing),
        )

    async def detail(self, op: OperationContext, paper: Paper) -> Paper:
        await self._request(op, "detail", paper.filename or paper.title)
        return msgspec.structs.replace(
            paper,
            abstract=ABSTRACT,
            keywords=list(KEYWORDS),
            source_url=f"https://navi.cnki.net/{paper.source}",
            detail_observed_at=utc_now_iso(),
            detail_parser=PARSER_VERSION,
            locator=paper.locator or paper.url,
        )

    async def journal(self, op: OperationContext, paper: Paper) -> Quality:
        await self._request(op, "journal", source_key(paper.source))
        shown = self.journal_titles.get(paper.source, paper.source)
        if source_key(shown) != source_key(paper.source):
            raise CnkiError("SOURCE_IDENTITY_UNCONFIRMED", details={"source": paper.source, "observed": shown})
        return Quality(
            canonical_title=shown,
            identity_basis="current_title",
            tiers=["CSSCI"],
            composite_impact=2.5,
            source_url=paper.source_url,
            state="present",
            observed_at=utc_now_iso(),
            parser=PARSER_VERSION,
        )

    def universe(self) -> list[Paper]:
        numbers = sorted({i for listing in (*self.lists.values(), *self.feedback_lists) for i in listing})
        return [sim_paper(i) for i in numbers]

    async def locate(
        self, op: OperationContext, titles: list[str], related: Callable[[str, str], bool] | None = None
    ) -> AsyncIterator[Waiting | dict[str, list[Paper]]]:
        assert 1 <= len(titles) <= 10
        await self._request(op, "locate", "|".join(titles))
        grouped: dict[str, list[Paper]] = {t: [] for t in titles}
        for paper in self.universe() + self.extra_papers:
            for title in titles:
                if related(title, paper.title) if related is not None else title_key(title) == title_key(paper.title):
                    grouped[title].append(paper)
        yield grouped
