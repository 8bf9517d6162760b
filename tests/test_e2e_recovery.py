"""Recovery end to end: the real MCP client and server, headless Chromium and the simulator.

A person is needed (login wall on the grid, a login finished in a tab opened by hand, a captcha in the
middle of a search, or skipped by policy), a page cannot be parsed, the browser is killed mid-search,
and the server exits. One server process serves the MCP tests of the module; the exit tests start
their own servers and speak JSON-RPC on the pipes so that nothing but the server ends the browser.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time
import urllib.request
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import parse_qsl, quote, urlsplit

import psutil
import pytest
import pytest_asyncio

from cnki_mcp.core.clock import within
from tests.harness import AWAITING, McpSession, RawServer, processes_on, serve_params
from tests.kns.corpus import Paper as SimPaper
from tests.kns.server import KnsSimulator, SimRequest

pytestmark = [pytest.mark.browser, pytest.mark.asyncio(loop_scope="module")]

SURNAMES = ["王", "张", "李", "刘", "陈", "杨", "赵", "黄", "周", "吴"]


def expression(topic: str) -> dict[str, Any]:
    """A title topic, an author with one of ten surnames, not 研究 in the title (6–12 rows per topic)."""
    return {
        "op": "and",
        "items": [
            {"field": "title", "value": topic},
            {"op": "or", "items": [{"field": "authors", "value": name} for name in SURNAMES]},
            {"op": "not", "items": [{"field": "title", "value": "研究"}]},
        ],
    }


def listed(kns: KnsSimulator, topic: str) -> list[SimPaper]:
    """The papers the simulator lists for ``expression(topic)`` (no year range)."""
    branches = [
        {"Key": name, "Logic": 1, "ChildItems": [], "Items": [
            {"Field": "TI", "Operator": "FUZZY", "Value": topic, "Logic": 0},
            {"Field": "AU", "Operator": "FUZZY", "Value": name, "Logic": 0},
            {"Field": "TI", "Operator": "FUZZY", "Value": "研究", "Logic": 2},
        ]}
        for name in SURNAMES
    ]
    return kns.expected({"QNode": {"QGroup": [{"Key": "Subject", "Items": [], "ChildItems": branches}]}})


def token(url: str) -> str:
    return dict(parse_qsl(urlsplit(url).query)).get("v", "")


def details(requests: list[SimRequest]) -> list[SimRequest]:
    return [r for r in requests if r.endpoint == "detail"]


class Mcp(McpSession):
    """The module's connected client, with this module's shortcuts."""

    async def search(self, topic: str, **options: Any) -> dict[str, Any]:
        """Start a live structured search on ``topic`` (returns after the 2 s inline wait at most)."""
        return await self.call("structured_search", {
            "expression": expression(topic), "limit": 50, "options": {"freshness": "live", **options},
        })

    async def records(self, search_id: str) -> list[dict[str, Any]]:
        page = await self.call("search_results", {"search_id": search_id, "view": "records", "limit": 100})
        return [row["record"] for row in page["results"]]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def mcp(kns_server: KnsSimulator, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Mcp]:
    data = tmp_path_factory.mktemp("recovery") / "data"
    # The person who opens a tab by hand does it over the DevTools port: the one process let on it besides ours.
    person = (sys.executable, "-m", "tests.serve_beside_a_person", "serve")
    params = serve_params(data, kns_server.browser_args, command=person, CNKI_INLINE_WAIT_SECONDS="2", CNKI_TEST_PERSON_PID=str(os.getpid()))
    async with Mcp.serving(params) as mcp:
        yield mcp


async def test_a_grid_redirect_to_the_login_host_is_a_login_wall_for_a_person(mcp: Mcp, kns: KnsSimulator) -> None:
    warm = await mcp.wait(await mcp.search("绿色金融", metadata="basic"))
    assert warm["status"] == "completed", warm  # the template is captured: the fault meets our own POST
    kns.clear_log()
    kns.fault("grid", "login", times=1)

    view = await mcp.wait(await mcp.search("在线教育", metadata="basic"), until=AWAITING)
    assert view["status"] == "awaiting_user", view
    assert "登录" in view["message"]
    assert await mcp.call("operation_control", {"action": "show"}) == {"status": "shown"}
    posts = [r for r in kns.requests if r.endpoint == "grid"]
    assert [(r.method, r.status) for r in posts] == [("POST", 302)]
    assert kns.count("login") >= 1  # the work tab went to the login page for the person

    kns.configure(login="personal", personal_name="reader")  # the person logged in there
    resumed = await mcp.call("operation_control", {"action": "resume", "operation_id": view["operation_id"]})
    done = await mcp.wait(resumed)
    assert done["status"] == "completed", done
    assert [r["title"] for r in done["result"]["results"]] == [p.title for p in listed(kns, "在线教育")]
    assert [r.status for r in kns.requests if r.endpoint == "grid" and r.method == "POST"][-1] == 200


def _open_tab_by_hand(profile: Path, url: str) -> str:
    """Open a tab through the browser's own DevTools HTTP endpoint, as a person would: not through the server
    (the module's server lets this process on the port: ``tests/serve_beside_a_person.py``)."""
    port = int((profile / "DevToolsActivePort").read_text(encoding="utf-8").splitlines()[0])
    request = urllib.request.Request(f"http://127.0.0.1:{port}/json/new?{quote(url, safe=':/?=&')}", method="PUT")
    with urllib.request.urlopen(request, timeout=10) as answer:
        return str(json.loads(answer.read())["id"])


def _close_tab_by_hand(profile: Path, target: str) -> None:
    port = int((profile / "DevToolsActivePort").read_text(encoding="utf-8").splitlines()[0])
    with contextlib.suppress(OSError), urllib.request.urlopen(f"http://127.0.0.1:{port}/json/close/{target}", timeout=5):
        pass


async def test_login_notices_a_login_finished_in_a_tab_the_person_opened(mcp: Mcp, kns: KnsSimulator) -> None:
    kns.configure(login="none")
    view = await mcp.wait(await mcp.call("login", {"force": True}), until=AWAITING)
    assert view["status"] == "awaiting_user", view
    # The login tab keeps showing the anonymous header; only a tab opened by hand sees the new identity.
    kns.configure(login="institution", institution_name="华东政法大学")
    profile = mcp.data / "browser" / "profile"
    target = await asyncio.to_thread(_open_tab_by_hand, profile, "https://www.cnki.net/")
    try:
        done = await mcp.wait(view, timeout=20)
    finally:
        await asyncio.to_thread(_close_tab_by_hand, profile, target)
    assert done["status"] == "completed", done
    assert done["result"]["institution"] == "observed"
    assert done["result"]["institution_evidence"] == ["华东政法大学"]
    assert kns.count("home") >= 1


async def test_a_captcha_in_the_middle_waits_for_the_person_then_completes(mcp: Mcp, kns: KnsSimulator) -> None:
    papers = listed(kns, "检索增强")
    kns.captcha("detail", after=3)
    view = await mcp.wait(await mcp.search("检索增强", metadata="all"), until=AWAITING)
    assert view["status"] == "awaiting_user", view
    assert "验证" in view["message"]
    assert kns.challenge_pending
    kns.solve()
    done = await mcp.wait(view)
    assert done["status"] == "completed", done
    assert done["result"]["enhanced_count"] == len(papers)
    assert kns.count("verify") >= 1
    records = {r["filename"]: r for r in await mcp.records(done["result"]["search_id"])}
    assert all(records[p.filename]["abstract"] == p.abstract for p in papers)


async def test_skip_policy_reports_the_records_it_skipped(mcp: Mcp, kns: KnsSimulator) -> None:
    papers = listed(kns, "大语言模型")
    kns.captcha("detail", after=3)
    view = await mcp.wait(await mcp.search("大语言模型", metadata="all", on_verification="skip"))
    assert view["status"] == "partial", view
    assert view["result"]["enhanced_count"] == 3 and kns.solves == 0
    skipped = [e for e in view["errors"] if e["code"] == "VERIFICATION_SKIPPED"]
    assert skipped and {e["code"] for e in view["errors"]} == {"VERIFICATION_SKIPPED"}
    records = await mcp.records(view["result"]["search_id"])
    unread = {r["record_ref"] for r in records if not r.get("detail_observed_at")}
    assert len(records) == len(papers) and len(unread) == len(papers) - 3
    assert {e["details"]["record_ref"] for e in skipped} == unread


@pytest.mark.slow  # two 12 s render waits: the page is read again after relocating the paper
async def test_a_page_that_cannot_be_parsed_is_reported_and_saved_scrubbed(mcp: Mcp, kns: KnsSimulator) -> None:
    view = await mcp.wait(await mcp.search("自动驾驶", metadata="basic"))
    record = (await mcp.records(view["result"]["search_id"]))[0]
    kns.clear_log()
    kns.fault("detail", "truncate", fraction=0.2)  # cut before the title: not a detail page any more
    diagnostics = mcp.data / "diagnostics"
    before = set(diagnostics.glob("detail-*.html"))
    answer = await mcp.wait(await mcp.call("get_metadata", {"record_refs": [record["record_ref"]], "refresh": True}))
    assert answer["status"] == "partial", answer
    (error,) = answer["errors"]
    assert error["code"] == "PARSER_UNSUPPORTED" and error["details"]["record_ref"] == record["record_ref"]
    saved = sorted(set(diagnostics.glob("detail-*.html")) - before)
    assert saved
    text = saved[0].read_text(encoding="utf-8")
    assert text.startswith("<!-- cnki-mcp snapshot kind=detail url=https://kns.cnki.net/kcms2/article/abstract?v=REDACTED")
    secrets = {token(r.url) for r in details(kns.requests)}
    assert secrets and not any(secret in text for secret in secrets)  # the expiring link is scrubbed
    assert saved[0].with_suffix(".png").is_file()  # the rendered tab's screenshot goes along
    assert oct(saved[0].stat().st_mode & 0o777) == "0o600"


async def test_a_killed_browser_is_unavailable_then_recover_and_continue_repeat_nothing(
    mcp: Mcp, kns: KnsSimulator
) -> None:
    papers = listed(kns, "个人信息")
    answered = 4
    kns.fault("detail", "delay", seconds=20, after=answered)  # later detail pages hang until the kill
    view = await mcp.search("个人信息", metadata="all")
    op_id = view["operation_id"]
    deadline = time.monotonic() + 30
    while kns.count("detail") < len(papers) and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    assert kns.count("detail") == len(papers), kns.counts  # the answered ones are stored, the rest hang
    report = (await mcp.call("diagnostics", {}))["browser"]
    root = psutil.Process(report["process_id"])
    for process in [root, *root.children(recursive=True)]:
        with contextlib.suppress(psutil.Error):
            process.kill()

    failed = await mcp.wait({"operation_id": op_id, "status": "running"})
    assert failed["status"] == "partial", failed
    assert [e["code"] for e in failed["errors"]] == ["BROWSER_UNAVAILABLE"]
    before = list(kns.requests)
    stored = {token(r.url) for r in details(before) if r.status == 200}
    journals = {r.url for r in before if r.endpoint == "journal" and r.status == 200}
    assert len(stored) == answered
    kns.configure(faults=[])

    assert (await mcp.call("operation_control", {"action": "recover"}))["status"] == "completed"
    continued = await mcp.call("operation_control", {"action": "continue", "operation_id": op_id})
    done = await mcp.wait(continued)
    assert done["status"] == "completed" and done["operation_id"] == op_id, done
    assert done["result"]["enhanced_count"] == len(papers)
    after = kns.requests[len(before):]
    assert not [r for r in after if r.endpoint == "grid"]  # the listing was stored: not asked again
    assert not stored & {token(r.url) for r in details(after)}
    assert not journals & {r.url for r in after if r.endpoint == "journal"}
    assert len(details(after)) == len(papers) - answered
    assert (await mcp.call("diagnostics", {}))["browser"]["connection_generation"] == 2


# --------------------------------------------------------------------------------------------
# Server exit: nothing but the server may end its browser here, so the pipes are spoken to directly.


@pytest.fixture
def errlog(tmp_path: Path) -> Iterator[BinaryIO]:
    with (tmp_path / "stderr.txt").open("wb") as handle:
        yield handle


@pytest.mark.parametrize("ending", ["stdin_closed", "sigterm"])
async def test_no_browser_process_outlives_the_server(
    kns: KnsSimulator, tmp_path: Path, errlog: BinaryIO, ending: str
) -> None:
    data = tmp_path / "data"
    profile = data / "browser" / "profile"
    raw = await RawServer.spawn(serve_params(data, kns.browser_args, CNKI_INLINE_WAIT_SECONDS="30"), errlog, read_timeout=60)
    proc = raw.proc
    try:
        await raw.initialize()
        status = await raw.call("session_status", {"refresh": True})
        assert status["status"] == "completed", status
        assert processes_on(profile)  # the browser and its helpers run
        assert proc.stdin is not None
        if ending == "sigterm":
            proc.send_signal(signal.SIGTERM)
        else:
            proc.stdin.close()
        await within(proc.wait(), 8)
        left = processes_on(profile)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        for process in processes_on(profile):  # what a failed run left behind on this test's own profile
            with contextlib.suppress(psutil.Error):
                process.kill()
    errlog.flush()
    assert left == [], (tmp_path / "stderr.txt").read_text(errors="replace")[-2000:]
    if ending == "stdin_closed":
        assert proc.returncode == 0
