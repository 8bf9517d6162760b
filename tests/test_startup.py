"""Start-up: what ``cnki-mcp serve`` loads before its first answer, the serving layer's import graph, the
stdio owner's endpoint opened after the first answer, and the start-up benchmark's smoke mode (issue 28)."""

from __future__ import annotations

import ast
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from cnki_mcp.core.clock import within
from cnki_mcp.serving import owner, shared
from cnki_mcp.serving.owner import claim, read_owner
from cnki_mcp.surface import server
from tests.harness import REPO, SERVE, McpSession, offline_params

HEAVY = ("pypinyin", "opencc")  # never needed to answer initialize, tools/list or diagnostics
# The layers under the surface that no answer to initialize, tools/list or diagnostics needs: their modules
# (and lxml, nodriver) load with the first tool that works with CNKI, papers or references.
WORKING_LAYERS = ("cnki_mcp.fieldcheck", "cnki_mcp.references", "cnki_mcp.documents", "cnki_mcp.research", "cnki_mcp.site", "cnki_mcp.pages")


def _python(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def _imported(importtime: str) -> set[str]:
    """Module names a ``-X importtime`` log shows as imported."""
    return {line.rsplit("|", 1)[1].strip() for line in importtime.splitlines() if line.startswith("import time:") and "|" in line}


# --- hanzi: its libraries on first use, once ------------------------------------------------------------


def test_hanzi_loads_opencc_and_pypinyin_on_first_use_and_builds_the_converter_once_across_threads() -> None:
    out = _python(
        "import sys, threading\n"
        "from cnki_mcp.core import hanzi\n"
        "before = [m for m in ('pypinyin', 'opencc') if m in sys.modules]\n"
        "barrier = threading.Barrier(8); seen = []\n"
        "def convert():\n"
        "    barrier.wait(); seen.append(id(hanzi._converter()))\n"
        "threads = [threading.Thread(target=convert) for _ in range(8)]\n"
        "[t.start() for t in threads]; [t.join() for t in threads]\n"
        "after_opencc = [m for m in ('pypinyin', 'opencc') if m in sys.modules]\n"
        "print(before, after_opencc, len(set(seen)), hanzi.simplified('漢語'), hanzi.readings('曾'), hanzi.han_weight('王'),\n"
        "      'pypinyin' in sys.modules)"
    )
    assert out == "[] ['opencc'] 1 汉语 ('ceng', 'zeng') ('wang', 2, 29579) True"


def test_starting_no_endpoint_imports_no_http_protocol() -> None:
    out = _python(
        "import sys, mcp.server\n"
        "had = {m for m in ('h11', 'uvicorn', 'uvicorn.protocols.http.h11_impl') if m in sys.modules}\n"
        "import cnki_mcp.serving.endpoint, cnki_mcp.serving.shared, cnki_mcp.surface.server\n"
        "print(sorted({m for m in ('h11', 'uvicorn', 'uvicorn.protocols.http.h11_impl') if m in sys.modules} - had))"
    )
    assert out == "[]"


# --- the serving layer's imports ------------------------------------------------------------------------


def _serving_imports(name: str) -> set[str]:
    """The ``cnki_mcp.serving`` modules ``name`` imports anywhere: top level, deferred, TYPE_CHECKING."""
    tree = ast.parse((REPO / "cnki_mcp" / "serving" / f"{name}.py").read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "cnki_mcp.serving":
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("cnki_mcp.serving."):
            found.add(node.module.rsplit(".", 1)[1])  # type: ignore[union-attr]
        elif isinstance(node, ast.Import):
            found |= {a.name.rsplit(".", 1)[1] for a in node.names if a.name.startswith("cnki_mcp.serving.")}
    return found


def test_the_serving_modules_import_one_another_without_a_cycle() -> None:
    graph = {name: _serving_imports(name) for name in ("endpoint", "owner", "relay", "shared")}
    assert graph == {
        "endpoint": set(),
        "owner": {"endpoint"},
        "relay": {"endpoint", "owner"},
        "shared": {"endpoint", "owner", "relay"},
    }


# --- the stdio owner's endpoint, after the first answer ---------------------------------------------------


class _FakeApp:
    events: list[str] = []

    def __init__(self, root: Path) -> None:
        self.root = root
        self.owner_pid: int | None = None
        self.closed = False
        self.events.append("app")

    async def call(self, handler: Any, args: Any, ctx: Any, *, needs_config: bool = True) -> dict[str, Any]:
        return {"status": "completed", "tool": handler}

    async def close(self) -> None:
        self.closed = True


def _fake_surface(monkeypatch: pytest.MonkeyPatch, body: Any) -> list[str]:
    """``serve_stdio`` replaced by ``body(app, answered)``; the App by ``_FakeApp``; what happened, in order."""
    events: list[str] = []
    monkeypatch.setattr(_FakeApp, "events", events)

    async def open_endpoint(self: owner.Owner, host: str = "127.0.0.1", port: int = 0) -> Any:
        events.append("endpoint")
        raise RuntimeError("no endpoint in this test")

    monkeypatch.setattr(shared, "App", _FakeApp)
    monkeypatch.setattr(owner.Owner, "open_endpoint", open_endpoint)
    monkeypatch.setattr(server, "serve_stdio", body)
    return events


async def test_the_owner_opens_its_endpoint_only_after_the_first_answer(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    served: dict[str, Any] = {}

    async def body(app: Any, answered: asyncio.Event) -> None:
        for _ in range(5):  # the start task runs meanwhile, and must still be waiting
            await asyncio.sleep(0)
        served["before"] = list(events)
        answered.set()
        served["answer"] = await app.call("diagnostics", None, None)
        for _ in range(5):
            await asyncio.sleep(0)

    events = _fake_surface(monkeypatch, body)
    sharing = shared.Shared(tmp_path)
    await sharing.serve_stdio()
    await sharing.close()
    assert served["before"] == ["app"]
    assert served["answer"] == {"status": "completed", "tool": "diagnostics"}
    assert events == ["app", "endpoint"]
    assert isinstance(sharing.app, _FakeApp) and sharing.app.closed and sharing.app.owner_pid is not None
    lock = claim(tmp_path)
    assert lock is not None  # released on close
    lock.release()


async def test_a_tool_call_is_answered_before_the_endpoint_opens(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    took: dict[str, Any] = {}

    async def body(app: Any, answered: asyncio.Event) -> None:
        took["answer"] = await within(app.call("session_status", None, None), 30)
        took["events"] = list(events)

    monkeypatch.setattr(shared, "START_AFTER_SECONDS", 3600.0)  # only an answer opens the endpoint
    events = _fake_surface(monkeypatch, body)
    sharing = shared.Shared(tmp_path)
    await sharing.serve_stdio()
    await sharing.close()
    assert took["answer"] == {"status": "completed", "tool": "session_status"}
    assert took["events"] == ["app"]


async def test_a_client_that_leaves_before_any_answer_opens_no_endpoint_and_frees_the_lock(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    async def body(app: Any, answered: asyncio.Event) -> None:
        return None

    events = _fake_surface(monkeypatch, body)
    sharing = shared.Shared(tmp_path)
    await sharing.serve_stdio()
    await sharing.close()
    assert events == ["app"]
    assert isinstance(sharing.app, _FakeApp) and sharing.app.closed
    lock = claim(tmp_path)
    assert lock is not None  # released on close
    lock.release()


# --- the real server over stdio -------------------------------------------------------------------------


async def test_listing_the_tools_loads_neither_opencc_nor_pypinyin_and_the_owner_still_opens_its_endpoint(tmp_path: Path) -> None:
    data = tmp_path / "data"
    command = (sys.executable, "-X", "importtime", *SERVE[1:])
    with tempfile.TemporaryFile("w+", encoding="utf-8") as errlog:
        async with McpSession.serving(offline_params(data, command=command), errlog=errlog) as mcp:
            listed = await mcp.client.list_tools()
            report = await mcp.call("diagnostics", {})
            deadline = time.monotonic() + 20
            while (info := read_owner(data)) is None:
                assert time.monotonic() < deadline, "owner.json was never written"
                await asyncio.sleep(0.1)
        errlog.seek(0)
        imported = _imported(errlog.read())
    assert [tool.name for tool in listed.tools] == [tool.name for tool in server.TOOLS]
    assert report["owner_pid"] == report["process_id"] == info.pid
    assert info.port > 0
    # The endpoint's protocol came after the first answer, in a worker thread.
    assert "cnki_mcp.app" in imported and "h11" in imported
    assert [name for name in HEAVY if name in imported] == []
    assert sorted(name for name in imported if name.startswith(WORKING_LAYERS) or name in ("lxml", "nodriver")) == []


# --- the benchmark --------------------------------------------------------------------------------------


@pytest.mark.slow
def test_the_startup_benchmark_smoke_mode_prints_its_figures() -> None:
    done = subprocess.run(
        [sys.executable, "bench/bench_startup.py", "--runs", "1"], cwd=REPO, capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].endswith(f"-m cnki_mcp serve ({len(server.TOOLS)} tools)")
    labels = [line.split("  ")[0] for line in lines if line.startswith(("spawn", "CPU", "first", "idle"))]
    assert labels == ["spawn → initialize (s)", "CPU by initialize (s)", "first tools/list (ms)", "idle RSS (MB)"]
    assert [line.split(":")[1].strip() for line in lines if line.startswith("goal:")] == ["initialize ≤ floor + 0.15 s", "idle RSS ≤ 80 MB"]
    figures = json.loads(lines[-1].removeprefix("figures: "))
    assert figures["runs"] == 1
    for side in ("server", "floor"):
        assert set(figures[side]) == {"initialize_s", "initialize_cpu_s", "tools_list_ms", "idle_rss_mb"}
        assert all(value > 0 for value in figures[side].values()), figures[side]
    assert figures["initialize_delta_s"] == pytest.approx(figures["server"]["initialize_s"] - figures["floor"]["initialize_s"])
