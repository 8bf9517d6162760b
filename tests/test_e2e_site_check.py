"""End to end: the field check and the report, on a real headless Chromium and the CNKI simulator.

Over MCP (``diagnostics`` with ``site_check: true``, one server for every tour): a clean tour is all ✓
within its request budget, and each page type the simulator redesigns (``page_change``) fails its own
step with a snapshot, the steps it feeds are skipped and every other step passes. Papers without
HTML阅读 (``no_html_entry``), a refused reader, a journal without a journal page (``no_journal_link``) and a
thesis-less listing (``listing_without``) are ✓ through a later row, or – with the reason, never ✗; a
redesign is still ✗. From the command line
(``cnki-mcp doctor --site`` and ``--report``, as a person runs them): the lines printed, the exit status,
and a report zip that holds what it lists and none of the planted secrets.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from cnki_mcp.core.errors import CATALOGUE
from cnki_mcp.fieldcheck.tour import LABELS_EN, STEPS
from cnki_mcp.store.library import peek_store
from tests.harness import AWAITING, REPO, McpSession, chromium_path, serve_params
from tests.kns.server import KnsSimulator

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.timeout(600),
    pytest.mark.skipif(chromium_path() is None, reason="没有可用的 Chromium"),
]

BUDGET = 12
STEP_NAMES = [name for name, _ in STEPS]
FED_BY_THE_GRID = ("grid_page2", "journal_detail", "thesis_detail", "journal", "reader")
# page_change → (the step that fails, the steps it leaves without input)
BROKEN = {
    "template": ("template", ("grid", *FED_BY_THE_GRID)),
    "grid_title": ("grid", FED_BY_THE_GRID),
    "journal_abstract": ("journal_detail", ()),
    "thesis_abstract": ("thesis_detail", ()),
    "journal_name": ("journal", ()),
    "reader_container": ("reader", ()),
    "login_header": ("login", ()),
}
PLANTED_NAME = "植入用户名"
PLANTED = (
    '<p class="note">Ecp_ClientId=PLANTCOOKIE7788; SID_kns8=PLANTSID9911</p>'
    '<a href="https://kns.cnki.net/kcms2/x?ticket=PLANTTICKET4455&amp;a=1">x</a>'
    f"<p>欢迎 {PLANTED_NAME}</p>"
)
SECRETS = ("PLANTCOOKIE7788", "PLANTSID9911", "PLANTTICKET4455", PLANTED_NAME)


def statuses(check: dict) -> dict[str, str]:
    return {step["name"]: step["status"] for step in check["steps"]}


async def test_a_clean_tour_passes_and_each_changed_page_fails_its_own_step(kns: KnsSimulator, isolated_data_dir: Path) -> None:
    params = serve_params(isolated_data_dir, kns.browser_args, CNKI_INLINE_WAIT_SECONDS="5")
    async with McpSession.serving(params, wait_timeout=180) as session:
        kns.configure(login="institution")
        clean = await session.wait(await session.call("diagnostics", {"site_check": True}))
        check = clean["result"]
        assert clean["status"] == "completed", clean
        assert statuses(check) == dict.fromkeys(STEP_NAMES, "ok")
        assert check["status"] == "passed"
        assert 0 < check["requests"] <= BUDGET
        assert clean["requests"] == check["requests"]
        assert check["browser"].startswith("Chrome/")
        assert kns.count("file") == 0  # the reader entry was followed, nothing was downloaded
        assert list((isolated_data_dir / "downloads").iterdir()) == []

        for change, (broken, skipped) in BROKEN.items():
            kns.configure(page_change=change)
            view = await session.wait(await session.call("diagnostics", {"site_check": True}))
            check = view["result"]
            expected = dict.fromkeys(STEP_NAMES, "ok") | dict.fromkeys(skipped, "skipped") | {broken: "failed"}
            failed = next(step for step in check["steps"] if step["name"] == broken)
            assert view["status"] == "partial", (change, view)
            assert statuses(check) == expected, (change, check)
            assert failed["code"] in CATALOGUE, failed
            assert failed["snapshot"], failed
            assert (isolated_data_dir / "diagnostics" / failed["snapshot"]).is_file(), failed
            assert [error["details"]["step"] for error in view["errors"]] == [broken]
            assert check["requests"] <= BUDGET, (change, check)


def step_of(check: dict, name: str) -> dict:
    return next(step for step in check["steps"] if step["name"] == name)


async def test_papers_without_html_reading_or_a_journal_page_are_no_failure_but_a_changed_page_is(
    kns: KnsSimulator, isolated_data_dir: Path
) -> None:
    params = serve_params(isolated_data_dir, kns.browser_args, CNKI_INLINE_WAIT_SECONDS="5")
    async with McpSession.serving(params, wait_timeout=180) as session:
        kns.configure(login="institution")
        clean = (await session.wait(await session.call("diagnostics", {"site_check": True})))["result"]
        # The rows the tour holds (pages 1 and 2), from the oracle of the query it sent.
        rows = kns.expected(next(r for r in kns.requests if r.endpoint == "grid").form["QueryJson"])[:100]
        journals = [paper.filename for paper in rows if paper.resource == "JOURNAL"]
        every = {paper.filename for paper in kns.corpus.papers}

        async def tour(**scenario: object) -> tuple[dict, dict]:
            kns.reset()
            kns.configure(login="institution", **scenario)
            view = await session.wait(await session.call("diagnostics", {"site_check": True}))
            return view, view["result"]

        # The first journal paper and the thesis lack HTML阅读, so does the next row; the one after has it.
        view, check = await tour(no_html_entry=every - {journals[2]})
        assert view["status"] == "completed", view
        assert statuses(check) == dict.fromkeys(STEP_NAMES, "ok")
        assert step_of(check, "reader")["found"].endswith("（读过的第 4 篇论文的详情页才有阅读入口）")
        assert check["requests"] == clean["requests"] + 2 <= BUDGET
        assert kns.count("detail") == 4 + 1  # four listing rows, then the reader's paper once more

        # No row within the bound has it (the next journal paper would): – with the reason, no ✗.
        for scenario in ({"no_html_entry": every - {journals[3]}}, {"no_html_entry": True, "html_entry_decoy": True}):
            view, check = await tour(**scenario)
            reader = step_of(check, "reader")
            assert view["status"] == "completed", (scenario, view)
            assert view.get("errors", []) == []
            assert check["status"] == "passed"
            assert statuses(check) == dict.fromkeys(STEP_NAMES, "ok") | {"reader": "skipped"}
            assert reader["message"].startswith("读过的 4 篇论文的详情页都没有「HTML阅读」或「在线阅读」入口"), reader
            assert kns.count("detail") == 4
            assert kns.count("download") == 0
            assert check["requests"] <= BUDGET

        # CNKI refuses this paper's reader (it holds only the record): –, not ✗.
        view, check = await tour(reader="refused")
        assert view["status"] == "completed", view
        assert statuses(check) == dict.fromkeys(STEP_NAMES, "ok") | {"reader": "skipped"}
        assert "READER_REFUSED" in step_of(check, "reader")["message"]

        # A listing without theses: – with the reason; the reader is found among the other rows.
        view, check = await tour(listing_without={"DISSERTATION"})
        assert view["status"] == "completed", view
        assert statuses(check) == dict.fromkeys(STEP_NAMES, "ok") | {"thesis_detail": "skipped"}
        assert step_of(check, "thesis_detail")["message"].startswith("检索结果前两页里没有学位论文")

        # A journal CNKI keeps no page for: the next journal paper has its link, and the journal page is read.
        view, check = await tour(no_journal_link={journals[0]})
        assert view["status"] == "completed", view
        assert statuses(check) == dict.fromkeys(STEP_NAMES, "ok")
        assert "另一篇读到了" in step_of(check, "journal_detail")["found"]
        assert kns.count("journal") == 1
        assert check["requests"] == clean["requests"] + 1

        # Every journal paper without its link is the page's structure: ✗, and the journal step has nothing.
        view, check = await tour(no_journal_link=set(journals))
        failed = step_of(check, "journal_detail")
        assert view["status"] == "partial", view
        assert statuses(check) == dict.fromkeys(STEP_NAMES, "ok") | {"journal_detail": "failed", "journal": "skipped"}
        assert failed["code"] == "SITE_STRUCTURE_CHANGED"
        assert "期刊链接" in failed["message"]

        # The reader reached through a later row, redesigned: still ✗.
        view, check = await tour(no_html_entry=every - {journals[2]}, page_change="reader_container")
        failed = step_of(check, "reader")
        assert view["status"] == "partial", view
        assert statuses(check) == dict.fromkeys(STEP_NAMES, "ok") | {"reader": "failed"}
        assert failed["code"] == "READER_UNSUPPORTED", failed
        assert check["requests"] <= BUDGET


def doctor(data: Path, sim: KnsSimulator, *args: str, language: str = "zh") -> subprocess.CompletedProcess[str]:
    env = dict(
        os.environ,
        CNKI_LANG=language,
        CNKI_DATA_DIR=str(data),
        CNKI_HEADLESS="1",
        CNKI_BROWSER_PATH=chromium_path() or "",
        CNKI_BROWSER_ARGS=sim.browser_args,
        CNKI_REQUEST_INTERVAL_MS="10",
    )
    command = [sys.executable, "-m", "cnki_mcp", "doctor", *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, cwd=REPO, timeout=240)


def test_doctor_site_prints_each_step_and_doctor_report_packs_no_secret(kns: KnsSimulator, isolated_data_dir: Path) -> None:
    kns.configure(login="both", personal_name=PLANTED_NAME, page_extra=PLANTED)
    clean = doctor(isolated_data_dir, kns, "--site")
    lines = clean.stdout.splitlines()
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert [line[0] for line in lines[1:-1]] == ["✓"] * len(STEPS)
    assert lines[-1].startswith(f"{len(STEPS)}/{len(STEPS)} 项通过")

    kns.configure(no_html_entry=True)
    unread = doctor(isolated_data_dir, kns, "--site")
    lines = unread.stdout.splitlines()
    assert unread.returncode == 0, unread.stdout + unread.stderr
    assert [line[0] for line in lines[1:-1]] == ["✓"] * 6 + ["–", "✓"]
    assert lines[-3].startswith("– HTML 阅读：未检查，读过的 4 篇论文的详情页都没有「HTML阅读」或「在线阅读」入口"), lines[-3]
    assert lines[-1].startswith(f"{len(STEPS) - 1}/{len(STEPS)} 项通过，1 项未检查（标 –），")
    assert lines[-1].endswith("页面结构与预期一致。")

    kns.configure(no_html_entry=frozenset(), page_change="journal_abstract")
    changed = doctor(isolated_data_dir, kns, "--site")
    failed = [line for line in changed.stdout.splitlines() if line.startswith("✗")]
    assert changed.returncode == 1, changed.stdout + changed.stderr
    assert len(failed) == 1
    assert failed[0].startswith("✗ 期刊论文详情页：SITE_STRUCTURE_CHANGED 页面结构与预期不符，缺少：摘要。")
    assert "快照 diagnostics/check-journal_detail-" in failed[0]

    data = peek_store(isolated_data_dir)
    assert data is not None and data.last_site_check is not None
    snapshot = next(step.snapshot for step in data.last_site_check.steps if step.name == "journal_detail")
    saved = (isolated_data_dir / "diagnostics" / snapshot).read_text(encoding="utf-8")
    assert PLANTED_NAME in saved  # snapshots keep the header; the report must not
    assert PLANTED_NAME in data.known_names

    packed = doctor(isolated_data_dir, kns, "--report")
    zipped = isolated_data_dir / "diagnostics" / packed.stdout.strip().rsplit(" ", 1)[-1]
    archive = zipfile.ZipFile(zipped)
    members = sorted(name.removeprefix("cnki-mcp-report/") for name in archive.namelist())
    contents = b"".join(archive.read(name) for name in archive.namelist()).decode("utf-8")
    assert packed.returncode == 0, packed.stdout + packed.stderr
    assert zipped.parent == isolated_data_dir / "diagnostics"
    assert members == sorted(
        ["README.md", "environment.json", "errors.json", "site-check.json", "site-check.txt", f"snapshots/{snapshot}"]
    )
    assert [secret for secret in SECRETS if secret in contents] == []
    assert "SITE_STRUCTURE_CHANGED" in archive.read("cnki-mcp-report/errors.json").decode()
    assert "✗ 期刊论文详情页" in archive.read("cnki-mcp-report/site-check.txt").decode()
    assert '"browser_version": "Chrome/' in archive.read("cnki-mcp-report/environment.json").decode()


async def test_an_anonymous_session_meets_the_slider_and_is_told_that_logging_in_stops_it(
    kns: KnsSimulator, isolated_data_dir: Path
) -> None:
    """Issue 39 item 9: without any login the grid sends the session to the blockPuzzle slider; the person is told
    to solve it and that a personal or institution login is what makes it rare. Logged in, the same slider says
    nothing of logging in."""
    kns.configure(anonymous_slider=True)
    params = serve_params(isolated_data_dir, kns.browser_args, CNKI_REQUEST_INTERVAL_MS="20")
    search = {"query": "研究", "options": {"freshness": "live", "metadata": "basic", "max_pages": 1}}
    async with McpSession.serving(params, wait_timeout=180) as mcp:  # a busy machine: room for the browser's start
        waiting = await mcp.wait(await mcp.call("search", search), until=AWAITING)
        assert waiting["status"] == "awaiting_user", waiting
        assert "匿名访问" in waiting["message"] and "机构账号" in waiting["message"], waiting["message"]
        kns.solve()
        done = await mcp.wait(waiting)
        assert done["status"] == "completed", done
        assert done["result"]["candidate_count"] > 0, done

        kns.configure(login="institution")
        kns.captcha("grid", style="json403")
        status = await mcp.wait(await mcp.call("session_status", {"refresh": True}))
        assert status["result"]["institution"] == "observed", status
        waiting = await mcp.wait(await mcp.call("search", {**search, "query": "模型"}), until=AWAITING)
        assert waiting["status"] == "awaiting_user", waiting
        assert "匿名" not in waiting["message"], waiting["message"]
        kns.solve()
        assert (await mcp.wait(waiting))["status"] == "completed"


def test_doctor_site_reports_an_anonymous_session(kns: KnsSimulator, isolated_data_dir: Path) -> None:
    """Issue 39 item 9: ``doctor --site`` says the session is anonymous when the header shows no login at all."""
    kns.configure(login="none")
    run = doctor(isolated_data_dir, kns, "--site")
    login = next(line for line in run.stdout.splitlines() if "登录状态" in line)
    assert login.startswith("✓") and "匿名访问" in login, run.stdout + run.stderr


def test_doctor_site_speaks_english_when_the_cli_does(kns: KnsSimulator, isolated_data_dir: Path) -> None:
    """Issue 41 item 6: with CNKI_LANG=en every line is English; only CNKI's own data (titles, types) stays as it is."""
    clean = doctor(isolated_data_dir, kns, "--site", language="en")
    lines = clean.stdout.splitlines()
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert lines[0] == "Checking CNKI's pages on site (at most 12 requests, nothing downloaded)…"
    assert [line.split(":", 1)[0] for line in lines[1:-1]] == [f"✓ {LABELS_EN[name]}" for name, _ in STEPS]
    assert lines[-1].startswith(f"{len(STEPS)}/{len(STEPS)} passed, ") and lines[-1].endswith("the pages look as expected.")
    quoting = {LABELS_EN[name] for name in ("grid", "grid_page2", "journal_detail", "thesis_detail", "journal")}
    assert [line for line in lines if re.search(r"[\u4e00-\u9fff]", line) and line.split(":", 1)[0][2:] not in quoting] == []

    kns.configure(page_change="journal_abstract")
    changed = doctor(isolated_data_dir, kns, "--site", language="en")
    failed = [line for line in changed.stdout.splitlines() if line.startswith("✗")]
    assert changed.returncode == 1, changed.stdout + changed.stderr
    assert failed[0].startswith("✗ Journal paper's detail page: SITE_STRUCTURE_CHANGED the page does not look as expected, it lacks: abstract.")
    assert "Snapshot diagnostics/check-journal_detail-" in failed[0]
    assert changed.stdout.splitlines()[-1].endswith("run cnki-mcp doctor --report and attach the report to an issue.")
