"""Load benchmark: 50 concurrent request streams on one stdio server, a 20,000-paper store, a search running.

Run:  python bench/bench_load.py [--streams 50] [--calls 40] [--papers 20000] [--processes 0] [--baseline 100]

Builds research.db with ``bench_store.build`` (20,000 papers, 120 stored searches, 200 operations) in a
temporary directory, starts the real serve loop with the fake CNKI site (``python -m
tests.test_hardening_faults``, slow enough that its search keeps running for the whole measurement), starts
a live search, then runs ``--streams`` concurrent request streams over the one MCP session. Each stream
makes ``--calls`` calls, picked at random among ``search_results`` (any stored search, scope, view and
page), ``operation_status`` (the running search, no wait) and ``export_citations`` (a stored search in a
random format, or 20 random record_refs). MCP stdio is one client per process, so "50 clients" here are 50
concurrent request streams through one session, which is what a host multiplexing agents does.
``--processes N`` adds N more servers, each on a copy of the store, loaded the same way at the same time.

Prints p50/p95/p99/max latency per tool and overall, calls per second, errors, the server's RSS (peak
while loaded) and whether the background search kept making progress.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_store import build  # noqa: E402
from mcp import ClientSession, StdioServerParameters, stdio_client  # noqa: E402

from cnki_mcp.references import citations  # noqa: E402

FORMATS = sorted(set(citations.FORMATS) - {"custom"})
SCOPES = ("selected", "eligible", "candidates")
VIEWS = ("titles", "compact", "records")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


class Server:
    """One server process (fake site) and its MCP session, plus what the load needs to know."""

    def __init__(self, data: Path, log: Path) -> None:
        self.data = data
        self.log = log
        self.latencies: dict[str, list[float]] = {}
        self.errors: dict[str, int] = {}
        self.rss: list[int] = []
        # Read before the server starts: which searches and records the load may ask for.
        conn = sqlite3.connect(data / "research.db")
        self.search_ids = sorted(row[0] for row in conn.execute("SELECT key FROM searches"))
        self.refs = sorted(row[0] for row in conn.execute("SELECT key FROM papers"))
        conn.close()
        self.pid = 0
        self.search_id = ""
        self.baseline: dict[str, list[float]] = {}

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CNKI_")}
        env.update(
            CNKI_DATA_DIR=str(self.data), CNKI_BROWSER_PATH=str(self.data.parent / "no-browser"),
            CNKI_INLINE_WAIT_SECONDS="1", HARDENING_FAKE_LOG=str(self.log), HARDENING_FAKE_LATENCY="0.4",
            PYTHONPATH=str(REPO),
        )
        return env

    async def call(self, session: ClientSession, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        started = time.perf_counter()
        result = await session.call_tool(tool, args)
        self.latencies.setdefault(tool, []).append(time.perf_counter() - started)
        data = result.structured_content or {}
        if result.is_error:
            code = (data.get("errors") or [{}])[0].get("code", "?")
            self.errors[f"{tool}:{code}"] = self.errors.get(f"{tool}:{code}", 0) + 1
        return data

    def pick(self, rng: random.Random) -> tuple[str, dict[str, Any]]:
        roll = rng.random()
        if roll < 0.5:
            return "search_results", {
                "search_id": rng.choice(self.search_ids), "scope": rng.choice(SCOPES), "view": rng.choice(VIEWS),
                "offset": rng.choice([0, 0, 50, 100]), "limit": rng.choice([20, 50, 100]),
            }
        if roll < 0.8:
            return "operation_status", {"operation_id": self.search_id}
        if rng.random() < 0.5:
            return "export_citations", {"search_id": rng.choice(self.search_ids), "format": rng.choice(FORMATS)}
        return "export_citations", {"record_refs": rng.sample(self.refs, 20), "format": rng.choice(FORMATS)}

    async def stream(self, session: ClientSession, seed: int, calls: int) -> None:
        rng = random.Random(seed)
        for _ in range(calls):
            tool, args = self.pick(rng)
            await self.call(session, tool, args)

    async def sample_rss(self, stop: asyncio.Event) -> None:
        process = psutil.Process(self.pid)
        while not stop.is_set():
            self.rss.append(process.memory_info().rss)
            await asyncio.sleep(0.1)

    async def run(self, streams: int, calls: int, seed: int, baseline: int) -> dict[str, Any]:
        params = StdioServerParameters(command=sys.executable, args=["-m", "tests.test_hardening_faults"], env=self.env(), cwd=str(REPO))
        with open(self.data.parent / "stderr.txt", "ab") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    diagnostics = (await session.call_tool("diagnostics", {})).structured_content or {}
                    self.pid = int(diagnostics["process_id"])
                    opened = time.perf_counter()
                    await session.call_tool("search_results", {"search_id": self.search_ids[0]})  # opens the store
                    open_seconds = time.perf_counter() - opened
                    idle_rss = psutil.Process(self.pid).memory_info().rss
                    started = await self.call(session, "search", {"query": "自动驾驶 产品责任", "options": {"freshness": "live"}})
                    self.search_id = started["operation_id"]
                    before = len(self.log.read_text().splitlines()) if self.log.exists() else 0
                    await self.stream(session, seed * 1000 + 999, baseline)  # one stream alone: the unloaded figure
                    self.baseline = {tool: values[:] for tool, values in self.latencies.items() if tool != "search"}
                    self.latencies = {"search": self.latencies["search"]}
                    stop = asyncio.Event()
                    sampler = asyncio.create_task(self.sample_rss(stop))
                    began = time.perf_counter()
                    await asyncio.gather(*(self.stream(session, seed * 1000 + i, calls) for i in range(streams)))
                    elapsed = time.perf_counter() - began
                    stop.set()
                    await sampler
                    status = await self.call(session, "operation_status", {"operation_id": self.search_id})
                    after = len(self.log.read_text().splitlines()) if self.log.exists() else 0
                    await session.call_tool("operation_control", {"action": "cancel", "operation_id": self.search_id})
        return {
            "elapsed": elapsed, "idle_rss": idle_rss, "search_status": status.get("status"), "open_seconds": open_seconds,
            "site_requests_during_load": after - before,
        }


def table(latencies: dict[str, list[float]]) -> None:
    if not latencies:
        return
    everything = [v for values in latencies.values() for v in values]
    print(f"{'tool':<20}{'calls':>7}{'p50 ms':>9}{'p95 ms':>9}{'p99 ms':>9}{'max ms':>9}")
    for tool, values in sorted(latencies.items()) + [("all", everything)]:
        print(f"{tool:<20}{len(values):>7}{percentile(values, .5) * 1e3:>9.1f}{percentile(values, .95) * 1e3:>9.1f}"
              f"{percentile(values, .99) * 1e3:>9.1f}{max(values) * 1e3:>9.1f}")


def report(label: str, server: Server, outcome: dict[str, Any], streams: int) -> None:
    loaded = {tool: values for tool, values in server.latencies.items() if tool != "search"}
    total = sum(len(values) for values in loaded.values())
    print(f"\n== {label}: first call (opens the {len(server.refs)}-paper store): {outcome['open_seconds'] * 1e3:.0f} ms")
    print(f"== {label}: one stream alone (baseline)")
    table(server.baseline)
    print(f"== {label}: {streams} concurrent streams, {total} calls in {outcome['elapsed']:.1f} s "
          f"({total / outcome['elapsed']:.0f} calls/s), a search running")
    table(loaded)
    print(f"errors: {json.dumps(server.errors, ensure_ascii=False) or 'none'}")
    print(f"server RSS: idle {outcome['idle_rss'] / 2**20:.0f} MiB, peak under load {max(server.rss) / 2**20:.0f} MiB, "
          f"median {statistics.median(server.rss) / 2**20:.0f} MiB")
    print(f"background search: {outcome['search_status']}, {outcome['site_requests_during_load']} site requests "
          "completed while the load ran")


async def main_async(args: argparse.Namespace) -> None:
    work = Path(tempfile.mkdtemp(prefix="cnki-bench-load-"))
    try:
        first = work / "s0" / "data"
        started = time.perf_counter()
        build(first, args.papers)
        print(f"store: {args.papers} papers, built in {time.perf_counter() - started:.1f} s, "
              f"research.db {(first / 'research.db').stat().st_size / 2**20:.1f} MiB")
        servers = [Server(first, work / "s0" / "requests.log")]
        for n in range(1, args.processes + 1):
            data = work / f"s{n}" / "data"
            data.mkdir(parents=True)
            shutil.copy(first / "research.db", data / "research.db")
            servers.append(Server(data, work / f"s{n}" / "requests.log"))
        outcomes = await asyncio.gather(
            *(s.run(args.streams, args.calls, i + 1, args.baseline) for i, s in enumerate(servers))
        )
        for i, (server, outcome) in enumerate(zip(servers, outcomes, strict=True)):
            report(f"server {i}", server, outcome, args.streams)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=50)
    parser.add_argument("--calls", type=int, default=40, help="calls per stream")
    parser.add_argument("--papers", type=int, default=20_000)
    parser.add_argument("--processes", type=int, default=0, help="extra servers on copies of the store")
    parser.add_argument("--baseline", type=int, default=100, help="calls of one stream alone before the load")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
