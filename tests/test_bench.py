"""Every script of bench/ runs in a small smoke mode here, so none can rot unnoticed (bench_store.py failed
with a ValueError for weeks once ``Store._prepare`` changed). The figures themselves are never asserted:
only that each script runs to its end and prints what it measures. bench_startup.py (with floor_server.py)
has its smoke test in test_startup.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def run(script: str, *args: str, timeout: float = 300) -> str:
    done = subprocess.run(
        [sys.executable, f"bench/{script}", *args], cwd=REPO, capture_output=True, text=True, timeout=timeout,
    )
    assert done.returncode == 0, f"{script} failed:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    return done.stdout


def test_bench_listing_prints_its_figures() -> None:
    out = run("bench_listing.py")
    assert out.startswith("tools/list: ") and "outputSchema" in out and "instructions: " in out, out


def test_bench_store_smoke() -> None:
    out = run("bench_store.py", "--smoke")
    for label in ("records              300 ", "research.db ", "open ", "save ", "on the event loop", "search_results page", "RSS "):
        assert label in out, out


@pytest.mark.slow
def test_bench_research_smoke() -> None:
    out = run("bench_research.py", "--smoke")
    assert "rank 200 candidates" in out and "300-candidate search: completed" in out and "default search: completed" in out, out


@pytest.mark.slow
def test_bench_server_smoke() -> None:
    from cnki_mcp.surface.tools import listed_tools

    out = run("bench_server.py", "--runs", "1")
    assert f"tools listed: {len(listed_tools())}" in out and "spawn → initialize" in out and "idle RSS" in out, out


@pytest.mark.slow
def test_bench_load_smoke() -> None:
    out = run("bench_load.py", "--streams", "2", "--calls", "3", "--papers", "300", "--baseline", "2")
    assert "store: 300 papers" in out and "errors: {}" in out and "server RSS" in out, out


@pytest.mark.slow
def test_joined_latency_smoke() -> None:
    out = run("joined_latency.py", "--calls", "3", "--takeovers", "1")
    assert '"added_p99_ms"' in out and '"takeover_seconds"' in out, out


@pytest.mark.slow
def test_soak_faults_smoke() -> None:
    out = run("soak_faults.py", "--kills", "1", "--flush-kills", "1", "--inputs", "20", timeout=400)
    assert "invariants held" in out and "'lost_records': 0" in out, out


@pytest.mark.browser
@pytest.mark.slow
def test_bench_site_smoke() -> None:
    out = run("bench_site.py", "--fetches", "2", "--launches", "1", "--requests", "4")
    assert "1. grid POST" in out and "2. headless launch" in out and "3. request starts" in out, out


@pytest.mark.packaging
@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_bench_frozen_smoke(tmp_path: Path) -> None:
    out = run("bench_frozen.py", "--runs", "1", "--layouts", "onedir", "--work", str(tmp_path / "frozen"), timeout=1800)
    assert "onedir" in out, out
