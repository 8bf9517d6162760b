"""Login and session identity without a browser: the answer's shape and the login wait's rules."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest_asyncio

from cnki_mcp.core.clock import within
from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.model import SessionState
from cnki_mcp.ops.jobs import Jobs, OperationContext
from cnki_mcp.pages.urls import is_cnki_url as _cnki_page
from cnki_mcp.site.limiter import Limiter
from cnki_mcp.site.session import Sessions, identified, session_view
from cnki_mcp.site.site import Site
from cnki_mcp.store.library import Store
from cnki_mcp.tools import login


def header(inner: str) -> str:
    return f"<html><body><div class='ecp_header_login_area'>{inner}</div></body></html>"


ANONYMOUS = header("<a class='ecp_header_unitLogin'>机构登录</a><a>个人登录</a>")
INSTITUTION = header("<div class='ecp_header_unitName'>华东政法大学</div><a>个人登录</a>")
BOTH = header("<div class='ecp_header_unitName'>华东政法大学</div>"
              "<div class='ecp_header_personalName_loginbg'>reader</div><a>退出登录</a>")


def test_answer_shape_never_names_the_account() -> None:
    state = SessionState(personal="authenticated", institution="observed", institution_evidence=["华东政法大学"],
                         personal_evidence=["reader"], evidence_source="kns_header", observed_at="2026-10-02T12:42:28Z")
    assert session_view(state) == {
        "personal": "authenticated", "institution": "observed", "institution_evidence": ["华东政法大学"],
        "permission_scope": "unknown", "evidence_source": "kns_header", "observed_at": "2026-10-02T12:42:28Z",
    }
    assert session_view(SessionState(), cached=True) == {
        "personal": "not_observed", "institution": "not_observed", "permission_scope": "unknown",
        "evidence_source": "not_checked", "cached": True,
    }
    assert identified(state) and not identified(SessionState())


def test_identity_is_read_on_any_cnki_host() -> None:
    assert _cnki_page("https://www.cnki.net/")
    assert _cnki_page("http://kns.cnki.net/kns8s/AdvSearch")  # identityAnywhere accepts any scheme
    assert not _cnki_page("https://cnki.net.example.com/")
    assert not _cnki_page("https://vpn.example.edu.cn/cnki")


class Pages:
    """A browser whose one tab shows the given pages in turn (the last one repeats)."""

    def __init__(self, pages: list[str]) -> None:
        self.pages = pages
        self.running = True

    async def _evaluate(self, tab: Any, expression: str, timeout: float = 10.0) -> Any:
        html = self.pages.pop(0) if len(self.pages) > 1 else self.pages[0]
        return {"url": tab.url, "ready": True, "complete": True, "pending": False, "condition": True, "html": html}

    async def page_tabs(self) -> list[Any]:
        return []

    async def bring_to_front(self, tab: Any) -> bool:
        return False

    async def minimize(self, tab: Any) -> bool:
        return True


class FakeTab:
    closed = False
    crashed = False
    url = "https://kns.cnki.net/kns8s/AdvSearch"
    target_id = "login-tab"


@pytest_asyncio.fixture
async def jobs(tmp_path: Path) -> AsyncIterator[Jobs]:
    store = await asyncio.to_thread(Store.open, tmp_path / "data")
    await store.start()
    yield Jobs(store)
    await store.close()


async def wait_for_login(jobs: Jobs, pages: list[str], before: SessionState | None) -> tuple[Sessions, Any]:
    site = Site(Pages(pages), Limiter(interval_ms=0), Path("unused"))  # type: ignore[arg-type]
    sessions = Sessions(site)

    async def work(op: OperationContext) -> str:
        await sessions.wait_for_login(op, FakeTab(), before)  # type: ignore[arg-type]
        return "done"

    job = jobs.start("login", login.BUDGET.of(), work)
    return sessions, job


async def test_login_wait_ends_when_an_identity_appears(jobs: Jobs, monkeypatch: Any) -> None:
    monkeypatch.setattr("cnki_mcp.site.session.LOGIN_POLL", 0.01)
    sessions, job = await wait_for_login(jobs, [ANONYMOUS, ANONYMOUS, INSTITUTION], None)
    await within(job.done.wait(), 5)
    assert job.record.status == "completed"
    assert sessions.last is not None and sessions.last.institution_evidence == ["华东政法大学"]


async def test_forced_login_waits_for_a_different_identity_or_resume(jobs: Jobs, monkeypatch: Any) -> None:
    monkeypatch.setattr("cnki_mcp.site.session.LOGIN_POLL", 0.01)
    before = SessionState(institution="observed", institution_evidence=["华东政法大学"])
    sessions, job = await wait_for_login(jobs, [INSTITUTION, INSTITUTION, BOTH], before)
    await within(job.done.wait(), 5)
    assert job.record.status == "completed" and sessions.last is not None and sessions.last.personal == "authenticated"

    sessions, job = await wait_for_login(jobs, [INSTITUTION], before)
    await asyncio.sleep(0.1)
    assert job.record.status == "awaiting_user"
    assert (await jobs.resume(job.record.operation_id)).status == "completed"
    assert sessions.last is None  # resume ends the wait; the flow then confirms on a reloaded page


async def test_login_wait_times_out(jobs: Jobs, monkeypatch: Any) -> None:
    monkeypatch.setattr("cnki_mcp.site.session.LOGIN_POLL", 0.01)
    monkeypatch.setattr("cnki_mcp.site.session.LOGIN_TIMEOUT", 0.1)
    _, job = await wait_for_login(jobs, [ANONYMOUS], None)
    await within(job.done.wait(), 5)
    assert [e.code for e in job.record.errors] == ["LOGIN_TIMEOUT"]
    assert CnkiError("LOGIN_TIMEOUT").retryable
