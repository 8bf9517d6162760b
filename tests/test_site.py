"""Site layer without a browser: cursor keys, template helpers, binding, and the human step's rules."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Protocol

import pytest
import pytest_asyncio

from cnki_mcp.core.clock import poll, within
from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.model import Paper
from cnki_mcp.core.redact import endpoint_url
from cnki_mcp.ops.jobs import Job, Jobs, OperationContext
from cnki_mcp.pages.page_state import PageState
from cnki_mcp.pages.parse import GridPage
from cnki_mcp.research.backend import SiteBackend
from cnki_mcp.site import exchange as exchange_module
from cnki_mcp.site.door import Door, page_problem, with_return_url
from cnki_mcp.site.exchange import Attempts, note_snapshot
from cnki_mcp.site.grid_query import Condition, GridQuery, compile_expression
from cnki_mcp.site.limiter import Limiter
from cnki_mcp.site.listings import Listings, anchor_of, filter_years, parse_form, query_key
from cnki_mcp.site.remote import Routing
from cnki_mcp.site.site import Site, bind_detail
from cnki_mcp.store.library import Store
from cnki_mcp.tools import get_metadata

CHALLENGE = "<html><head><title>安全验证</title></head><body><div id='app'></div></body></html>"
CLEAR = "<html><head><title>高级检索</title></head><body><div class='ecp_header_login_area'>登录</div></body></html>"


def test_query_key_ignores_the_page_but_not_years_sort_or_terms() -> None:
    branches = compile_expression({"field": "title", "value": "违约金"})
    base = GridQuery(branches)
    assert query_key(base) == query_key(GridQuery(compile_expression({"field": "title", "value": "违约金"})))
    assert query_key(base) == query_key(GridQuery(branches, sort=""))  # "" and relevance are the same CNKI sort
    others = [
        GridQuery(branches, year_from=2020),
        GridQuery(branches, year_to=2020),
        GridQuery(branches, sort="date_desc"),
        GridQuery(compile_expression({"field": "title", "value": "违约金", "match": "exact"})),
    ]
    assert len({query_key(q) for q in [base, *others]}) == 5


def test_anchor_is_the_first_positive_literal() -> None:
    branches = [[Condition("title", "排除", negated=True), Condition("authors", " 张三 ")], [Condition("title", "乙")]]
    assert anchor_of(branches) == "张三"
    assert anchor_of([[Condition("title", "x", negated=True)]]) == "知网"


def test_captured_form_and_endpoint() -> None:
    body = "QueryJson=%7B%22a%22%3A1%7D&pageSize=20&aside=&boolSearch=true&subject=a+b"
    assert parse_form(body) == {"QueryJson": '{"a":1}', "pageSize": "20", "aside": "", "boolSearch": "true", "subject": "a b"}
    assert endpoint_url("https://kns.cnki.net/kns8s/brief/grid?x=1#y") == "https://kns.cnki.net/kns8s/brief/grid"


def test_year_filter_drops_unknown_and_outside_years() -> None:
    page = GridPage(rows=[Paper(title="a", year=2019), Paper(title="b", year=2021), Paper(title="c")], total=3)
    assert [p.title for p in filter_years(page, 2020, 0).rows] == ["b"]
    assert [p.title for p in filter_years(page, 0, 2020).rows] == ["a"]
    assert filter_years(page, 0, 0) is page
    assert filter_years(page, 2020, 2022).total == 3


def test_bind_detail_keeps_the_reference_and_fills_gaps() -> None:
    requested = Paper(record_ref="rec_1", title="违约金研究：以司法为例", authors=["张三"], source="法学研究", url="https://kns.cnki.net/kcms2/article/abstract?v=1",
                      dbname="CJFDLAST2024", filename="FXYJ202401001", document_type="期刊")
    observed = Paper(record_ref="rec_other", title="违约金研究 ： 以司法为例", authors=["张三"], source="法学研究", abstract="摘要")
    bound = bind_detail(requested, observed, "https://kns.cnki.net/kcms2/article/abstract?v=2")
    assert bound.record_ref == "rec_1" and bound.abstract == "摘要"
    assert bound.url == requested.url and bound.locator.endswith("v=2")
    assert (bound.dbname, bound.filename, bound.document_type) == ("CJFDLAST2024", "FXYJ202401001", "期刊")
    with pytest.raises(CnkiError) as caught:
        bind_detail(requested, Paper(title="另一篇", authors=["张三"]), "https://kns.cnki.net/x")
    assert caught.value.code == "IDENTITY_CONFLICT"
    with pytest.raises(CnkiError):
        bind_detail(requested, Paper(title="违约金研究：以司法为例", authors=["李四"]), "https://kns.cnki.net/x")


def test_livepage_problems_hide_query_strings() -> None:
    url = "https://kns.cnki.net/verify/home?returnUrl=secret"
    problem = page_problem(PageState(state="challenge", reason="滑块"), url)
    assert problem is not None and problem.code == "VERIFICATION_REQUIRED" and problem.details["url"] == endpoint_url(url)
    assert page_problem(PageState(state="login"), url).code == "LOGIN_REQUIRED"
    assert page_problem(PageState(state="denied", reason="机构未订购"), url).code == "ACCESS_DENIED"
    assert page_problem(PageState(state="ready"), url) is None


# --------------------------------------------------------------------------------------------
# The human step against a scripted browser


class FakeTab:
    def __init__(self) -> None:
        self.closed = False
        self.crashed = False
        self.url = "https://kns.cnki.net/kns8s/AdvSearch"
        self.target_id = "fake-target"


class ScriptedBrowser:
    """Answers inspections from a list of pages; the last one repeats."""

    def __init__(self, pages: list[str]) -> None:
        self.pages = pages
        self.shown: list[Any] = []
        self.minimised: list[Any] = []
        self.running = True

    async def _evaluate(self, tab: Any, expression: str, timeout: float = 10.0) -> Any:
        html = self.pages.pop(0) if len(self.pages) > 1 else self.pages[0]
        return {"url": tab.url, "ready": True, "complete": True, "pending": False, "condition": True, "html": html}

    async def page_html(self, tab: Any, timeout: float = 10.0) -> str:
        return self.pages[0]

    async def screenshot(self, tab: Any, timeout: float = 10.0) -> bytes:
        return b"\x89PNG"

    async def bring_to_front(self, tab: Any) -> bool:
        self.shown.append(tab)
        return False

    async def minimize(self, tab: Any) -> bool:
        self.minimised.append(tab)
        return True


@pytest_asyncio.fixture
async def jobs(tmp_path: Path) -> AsyncIterator[Jobs]:
    store = await asyncio.to_thread(Store.open, tmp_path / "data")
    await store.start()
    yield Jobs(store)
    await store.close()


def make_site(pages: list[str], tmp_path: Path) -> Site:
    site = Site(ScriptedBrowser(pages), Limiter(interval_ms=0), tmp_path / "diagnostics")  # type: ignore[arg-type]
    site.person.timeout = 5.0
    site.person.poll = 0.01
    return site


async def run_step(jobs: Jobs, site: Site, on_verification: str = "ask", epoch: int | None = None) -> tuple[Job, FakeTab]:
    tab = FakeTab()
    reason = CnkiError("VERIFICATION_REQUIRED")

    async def work(op: OperationContext) -> str:
        await site.human_step(op, tab, reason, epoch=epoch)  # type: ignore[arg-type]
        return "done"

    job = jobs.start("metadata", get_metadata.BUDGET.of(on_verification), work)
    return job, tab


async def test_two_clear_observations_end_the_step(jobs: Jobs, tmp_path: Path) -> None:
    site = make_site([CHALLENGE, CHALLENGE, CLEAR, CHALLENGE, CLEAR, CLEAR], tmp_path)
    site.person.poll = 0.1
    job, tab = await run_step(jobs, site)
    await asyncio.sleep(0.05)
    assert job.record.status == "awaiting_user" and "验证" in job.record.message
    assert site.person.page(job.record.operation_id) is tab and site.person.page() is tab
    assert site.limiter.held
    await within(job.done.wait(), 10)
    assert job.record.status == "completed" and job.record.result == "done"
    assert site.epoch == 1 and site.limiter.backoff == 2.0 and not site.limiter.held
    assert site.person.page() is None
    assert site.browser.shown == [tab] and site.browser.minimised == [tab]  # type: ignore[attr-defined]
    assert site.browser.pages == [CLEAR]  # type: ignore[attr-defined]  # clear, challenge (reset), clear, clear


async def test_resume_ends_the_step_and_skip_never_starts_it(jobs: Jobs, tmp_path: Path) -> None:
    site = make_site([CHALLENGE], tmp_path)
    job, _ = await run_step(jobs, site)
    await asyncio.sleep(0.05)
    view = await jobs.resume(job.record.operation_id)
    assert view.status == "completed"
    assert site.epoch == 1

    job, _ = await run_step(jobs, site, on_verification="skip")
    await within(job.done.wait(), 5)
    assert job.record.status == "skipped" and job.record.errors[0].code == "VERIFICATION_SKIPPED"
    assert site.epoch == 1 and not site.browser.minimised[1:]  # type: ignore[attr-defined]


async def test_a_step_already_solved_returns_at_once(jobs: Jobs, tmp_path: Path) -> None:
    site = make_site([CHALLENGE], tmp_path)
    job, _ = await run_step(jobs, site, epoch=-1)
    await within(job.done.wait(), 5)
    assert job.record.status == "completed" and site.epoch == 0 and site.browser.shown == []  # type: ignore[attr-defined]


async def test_timeout_and_cancel_release_the_limiter(jobs: Jobs, tmp_path: Path) -> None:
    site = make_site([CHALLENGE], tmp_path)
    site.person.timeout = 0.3
    job, _ = await run_step(jobs, site)
    await within(job.done.wait(), 5)
    assert job.record.errors[0].code == "VERIFICATION_TIMEOUT"
    assert not site.limiter.held
    snapshot = tmp_path / "diagnostics" / job.record.errors[0].details["snapshot"]
    assert snapshot.read_text(encoding="utf-8").startswith("<!-- cnki-mcp snapshot kind=challenge ")
    assert snapshot.with_suffix(".png").read_bytes() == b"\x89PNG"

    site.person.timeout = 60
    job, _ = await run_step(jobs, site)

    async def waiting() -> bool:
        return job.record.status == "awaiting_user"

    assert await poll(waiting, 5, 0.01)  # the page is with the person (however loaded the machine)
    assert site.limiter.held
    view = await jobs.cancel(job.record.operation_id)
    assert view.status == "cancelled"
    assert not site.limiter.held
    assert site.person.page() is None
    assert job.active_seconds() < 1.0  # time waiting for a person is not charged


async def test_show_without_a_waiting_page(tmp_path: Path) -> None:
    site = make_site([CLEAR], tmp_path)
    with pytest.raises(CnkiError) as caught:
        await site.person.show()
    assert caught.value.code == "VERIFICATION_NOT_FOUND"


# --------------------------------------------------------------------------------------------
# The door: retry bookkeeping, snapshots in errors, what the listings are told


class DoorBrowser(ScriptedBrowser):
    """A scripted browser whose connection generation a test moves on."""

    def __init__(self) -> None:
        super().__init__([CLEAR])
        self.connection_generation = 1
        self.closed_tabs: list[Any] = []

    async def ensure(self) -> None:
        return None

    async def close_tab(self, tab: Any, *, with_popups: bool = True) -> None:
        self.closed_tabs.append(tab)


def test_note_snapshot_merges_a_saved_name_and_leaves_an_unsaved_one_out() -> None:
    kept = note_snapshot(CnkiError("PARSER_UNSUPPORTED", details={"url": "https://kns.cnki.net/x"}), "grid-1.html")
    plain = note_snapshot(CnkiError("PARSER_UNSUPPORTED", details={"url": "https://kns.cnki.net/x"}), "")
    bare = note_snapshot(CnkiError("QUERY_REJECTED"), "grid-2.html")

    assert kept.details == {"url": "https://kns.cnki.net/x", "snapshot": "grid-1.html"}
    assert plain.details == {"url": "https://kns.cnki.net/x"}
    assert bare.details == {"snapshot": "grid-2.html"}


def test_return_url_is_added_once() -> None:
    verify = "https://kns.cnki.net/verify/home?captchaType=blockPuzzle"
    back = "https://kns.cnki.net/kns8s/AdvSearch"

    added = with_return_url(verify, back)

    assert added == verify + "&returnUrl=https%3A%2F%2Fkns.cnki.net%2Fkns8s%2FAdvSearch"
    assert with_return_url(added, "https://kns.cnki.net/other") == added


@pytest.mark.parametrize(("site", "host"), [("oversea", "oversea.cnki.net"), ("mainland", "kns.cnki.net")])
def test_the_verify_page_returns_to_the_search_page_on_the_sessions_site(tmp_path: Path, site: str, host: str) -> None:
    browser = DoorBrowser()
    browser.routing = Routing(site=site)
    door = Door(browser, Limiter(interval_ms=0), tmp_path / "diagnostics")  # type: ignore[arg-type]
    target = door.verify_target(f"https://{host}/verify/home?captchaType=blockPuzzle")
    assert target.endswith(f"&returnUrl=https%3A%2F%2F{host}%2Fkns8s%2FAdvSearch"), target


async def test_attempts_recover_a_broken_connection_once_and_back_off_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(exchange_module, "BACKOFF_SLEEPS", (0.0, 0.0))
    browser = DoorBrowser()
    door = Door(browser, Limiter(interval_ms=0), tmp_path / "diagnostics")  # type: ignore[arg-type]
    broken = CnkiError("BROWSER_UNAVAILABLE")
    throttled = CnkiError("RATE_LIMITED")
    attempts = Attempts(door)

    first, again = await attempts.recover(broken), await attempts.recover(broken)
    other = await attempts.recover(CnkiError("RESOURCE_FAILED"))
    waited = [await attempts.back_off(throttled), await attempts.back_off(CnkiError("SITE_UNAVAILABLE"))]
    denied = await attempts.back_off(CnkiError("ACCESS_DENIED"))
    with pytest.raises(CnkiError) as third:
        await attempts.back_off(throttled)
    browser.running = False
    dead = await Attempts(door).recover(broken)

    assert (first, again, other, dead) == (True, False, False, False)
    assert waited == [True, True] and denied is False
    assert third.value is throttled
    assert attempts.backoffs == 2
    assert door.limiter.backoff == 8.0  # slowed on every rate-limit or 5xx answer, the third included


async def test_listings_are_told_when_the_door_drops_tabs_or_meets_a_new_browser(tmp_path: Path) -> None:
    browser = DoorBrowser()
    door = Door(browser, Limiter(interval_ms=0), tmp_path / "diagnostics")  # type: ignore[arg-type]
    listings = Listings(door)
    await door.sync()
    listings._template = object()  # type: ignore[assignment]
    listings._listings["key"] = object()  # type: ignore[assignment]

    door.drop_pages()
    template_after_drop, cursors_after_drop = listings._template, dict(listings._listings)
    listings._template = object()  # type: ignore[assignment]
    browser.connection_generation = 2
    await door.sync()

    assert template_after_drop is None and list(cursors_after_drop) == ["key"]
    assert listings._template is None and listings._listings == {}
    assert door.generation == 2


def test_the_site_has_every_member_of_the_site_backend(tmp_path: Path) -> None:
    site = make_site([CLEAR], tmp_path)
    members = [
        name
        for name in dir(SiteBackend)
        if not name.startswith("_") and name not in dir(Protocol)
    ]

    missing = [name for name in members if not hasattr(site, name)]

    assert {"api_get", "show_decoy", "epoch", "listings", "wait_page", "snapshot"} <= set(members)
    assert missing == []
