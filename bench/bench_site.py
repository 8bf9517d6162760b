"""Site layer figures against the local CNKI simulator with a real headless Chromium.

    .venv/bin/python bench/bench_site.py [--fetches 100] [--launches 3] [--interval-ms 200] [--requests 36]

1. In-page grid fetch overhead on loopback, limiter interval 0: the same 50-row grid POST sent
   (a) directly from Python over a kept-alive HTTPS connection, (b) as an in-page fetch() from a
   kns.cnki.net tab (``Browser.fetch_in_page``), (c) as a whole ``Site.grid`` page (limiter slot,
   in-page fetch, parse), interleaved; medians and the median of the paired differences (b − a).
   Target (issue 3): overhead < 40 ms.
2. Browser launch to ready, headless, on one persistent profile (the first launch creates it):
   ``Browser.ensure()`` (process start → DevToolsActivePort → nodriver attached) and on to the
   first CNKI page loaded in a new tab. Median of --launches. Target: < 3 s.
3. Spacing of request starts under CNKI_REQUEST_INTERVAL_MS: a fresh ``Site`` whose limiter comes
   from the environment (template capture, then --requests detail pages and grid pages from 8
   concurrent workers), gaps between consecutive request arrivals in the simulator's log.
   Target: never closer than the interval.

Nothing leaves the loopback interface; the browser profile and data live in a temporary directory.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import itertools
import os
import shutil
import ssl
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cnki_mcp.core.model import Budget, Paper
from cnki_mcp.ops.jobs import Jobs, OperationContext
from cnki_mcp.pages.parse import parse_grid
from cnki_mcp.research.backend import grid_page
from cnki_mcp.site import page_io  # noqa: E402  (the raw in-page fetch, measured beside the engine's)
from cnki_mcp.site.browser import Browser
from cnki_mcp.site.grid_query import GridQuery, compile_expression
from cnki_mcp.site.limiter import Limiter
from cnki_mcp.site.listings import ADVANCED_SEARCH_URL
from cnki_mcp.site.site import Site
from cnki_mcp.store.library import Store
from tests.kns.server import KnsSimulator, SimRequest

TARGETS = {"overhead_ms": 40.0, "launch_s": 3.0}
GRID_URL = "https://kns.cnki.net/kns8s/brief/grid"
GRID_HEADERS = {"Content-Type": "application/x-www-form-urlencoded; charset=UTF-8", "X-Requested-With": "XMLHttpRequest"}
TOPICS = ["知识图谱", "大语言模型", "数字经济", "检索增强", "个人信息", "医学影像", "在线教育", "湿地生态"]


def executable() -> Path:
    found = os.environ.get("CNKI_BROWSER_PATH") or shutil.which("chromium") or shutil.which("google-chrome")
    if not found:
        sys.exit("没有找到 Chromium：请设置 CNKI_BROWSER_PATH")
    return Path(found)


def ms(seconds: float) -> float:
    return round(seconds * 1000, 1)


def summary(values: list[float]) -> str:
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
    return f"median {ms(statistics.median(values))} ms, min {ms(ordered[0])} ms, p90 {ms(p90)} ms (n={len(values)})"


async def in_operation(jobs: Jobs, work: Callable[[OperationContext], Awaitable[Any]]) -> Any:
    job = jobs.start("metadata", Budget(max_requests=100_000, timeout_seconds=3600), work)
    await job.done.wait()
    if job.record.errors:
        raise SystemExit(f"benchmark operation failed: {job.record.errors}")
    return job.record.result


class DirectPoster:
    """The same POST from Python on one kept-alive TLS connection (run in a worker thread)."""

    def __init__(self, port: int, body: str) -> None:
        self.body = body.encode()
        self.connection = http.client.HTTPSConnection("127.0.0.1", port, context=ssl._create_unverified_context())
        self.headers = {**GRID_HEADERS, "Host": "kns.cnki.net", "Referer": ADVANCED_SEARCH_URL}

    def post(self) -> tuple[float, str]:
        started = time.perf_counter()
        self.connection.request("POST", "/kns8s/brief/grid", body=self.body, headers=self.headers)
        response = self.connection.getresponse()
        text = response.read().decode("utf-8")
        elapsed = time.perf_counter() - started
        if response.status != 200:
            raise SystemExit(f"direct POST answered {response.status}")
        return elapsed, text


async def grid_overhead(sim: KnsSimulator, browser: Browser, jobs: Jobs, diagnostics: Path, fetches: int) -> dict[str, float]:
    site = Site(browser, Limiter(interval_ms=0), diagnostics)
    query = GridQuery(compile_expression({"field": "title", "value": "的"}))
    await in_operation(jobs, lambda op: grid_page(site, op, query, 1))  # captures the template
    ours = [r for r in sim.requests if r.endpoint == "grid" and r.method == "POST" and r.form.get("pageSize") == "50"]
    body = urlencode(ours[-1].form)
    tab = await browser.new_tab(ADVANCED_SEARCH_URL)
    direct = DirectPoster(sim.port, body)
    text = (await asyncio.to_thread(direct.post))[1]
    rows = len(parse_grid(text, GRID_URL).rows)

    samples: dict[str, list[float]] = {"direct": [], "in_page": [], "site_grid": [], "parse": []}

    async def measure(op: OperationContext) -> None:
        for _ in range(fetches):
            elapsed, answer = await asyncio.to_thread(direct.post)
            samples["direct"].append(elapsed)
            started = time.perf_counter()
            parse_grid(answer, GRID_URL)
            samples["parse"].append(time.perf_counter() - started)
            started = time.perf_counter()
            result = await page_io.fetch_in_page(browser, tab, GRID_URL, method="POST", body=body, headers=GRID_HEADERS)
            samples["in_page"].append(time.perf_counter() - started)
            assert result.status == 200 and len(result.text) == len(answer), (result.status, len(result.text), len(answer))
            started = time.perf_counter()
            await grid_page(site, op, query, 1)
            samples["site_grid"].append(time.perf_counter() - started)

    await in_operation(jobs, measure)
    await browser.close_tab(tab)
    direct.connection.close()
    paired = [b - a for a, b in zip(samples["direct"], samples["in_page"])]
    direct_parsed = [a + p for a, p in zip(samples["direct"], samples["parse"])]
    print(f"1. grid POST, {rows} rows, {len(text) // 1024} KiB answer, limiter interval 0")
    print(f"   direct Python HTTPS POST     {summary(samples['direct'])}")
    print(f"   in-page fetch (browser)      {summary(samples['in_page'])}")
    print(f"   Site.grid (fetch + parse)    {summary(samples['site_grid'])}")
    print(f"   direct POST + parse_grid     {summary(direct_parsed)}")
    overhead = statistics.median(paired)
    site_overhead = statistics.median(samples["site_grid"]) - statistics.median(direct_parsed)
    print(f"   in-page overhead (median of paired differences) {ms(overhead)} ms"
          f" — target < {TARGETS['overhead_ms']:.0f} ms, ratio {overhead * 1000 / TARGETS['overhead_ms']:.2f}")
    print(f"   Site.grid over direct POST + parse               {ms(site_overhead)} ms")
    return {"overhead_ms": ms(overhead), "site_overhead_ms": ms(site_overhead)}


async def launches(sim: KnsSimulator, root: Path, count: int) -> dict[str, float]:
    profile = root / "launch-profile"
    attached: list[float] = []
    first_page: list[float] = []
    for _ in range(count):
        browser = Browser(profile, executable(), headless=True, extra_args=sim.browser_arg_list)
        started = time.perf_counter()
        await browser.ensure()
        attached.append(time.perf_counter() - started)
        tab = await browser.new_tab()
        await browser.navigate(tab, ADVANCED_SEARCH_URL, until="complete")
        first_page.append(time.perf_counter() - started)
        await browser.close()
    median = statistics.median(attached)
    print(f"2. headless launch, {count} runs on one profile (the first creates it)")
    print(f"   launch → DevTools attached   {', '.join(f'{s:.2f}' for s in attached)} s; median {median:.2f} s"
          f" — target < {TARGETS['launch_s']:.0f} s, ratio {median / TARGETS['launch_s']:.2f}")
    print(f"   launch → first CNKI page     {', '.join(f'{s:.2f}' for s in first_page)} s;"
          f" median {statistics.median(first_page):.2f} s")
    return {"launch_s": round(median, 2), "first_page_s": round(statistics.median(first_page), 2)}


async def spacing(sim: KnsSimulator, browser: Browser, jobs: Jobs, diagnostics: Path, interval_ms: int, requests: int) -> dict[str, float]:
    os.environ["CNKI_REQUEST_INTERVAL_MS"] = str(interval_ms)
    limiter = Limiter.from_env()
    site = Site(browser, limiter, diagnostics)
    exits: list[float] = []  # when the limiter let each request go (one more: the slot after the template click)
    acquire = limiter.acquire

    async def timed_acquire(cancel_check: Callable[[], None] | None = None) -> Callable[[], None]:
        release = await acquire(cancel_check)
        exits.append(time.monotonic())
        return release

    limiter.acquire = timed_acquire  # type: ignore[method-assign]
    papers = [p for p in sim.corpus.papers if p.doc_type == "期刊" and not p.online_first][:requests]
    queries = [GridQuery(compile_expression({"field": "title", "value": topic})) for topic in TOPICS]
    sim.clear_log()

    async def work(op: OperationContext) -> None:
        items: list[Callable[[], Awaitable[Any]]] = [lambda q=q: grid_page(site, op, q, 1) for q in queries]
        items += [lambda p=p: site.detail(op, Paper(title=p.title, locator=sim.detail_url(p))) for p in papers]

        async def worker() -> None:
            while items:
                await items.pop(0)()

        await asyncio.gather(*(worker() for _ in range(8)))

    started = time.perf_counter()
    await in_operation(jobs, work)
    wall = time.perf_counter() - started
    paced: list[SimRequest] = sorted((r for r in sim.requests if r.endpoint != "other"), key=lambda r: r.at)
    gaps = [b.at - a.at for a, b in itertools.pairwise(paced)]
    interval = interval_ms / 1000
    closer = sum(1 for gap in gaps if gap < interval)
    kinds = {endpoint: sum(1 for r in paced if r.endpoint == endpoint) for endpoint in ("search", "grid", "detail")}
    print(f"3. request starts with CNKI_REQUEST_INTERVAL_MS={interval_ms}, 8 workers, limiter max in flight {limiter.max_inflight}")
    print(f"   {len(paced)} requests {kinds} in {wall:.2f} s (floor {(len(exits) - 1) * interval:.2f} s);"
          f" favicon fetches by the browser itself are not paced and not counted")
    print(f"   gap between arrivals at the site: min {ms(min(gaps))} ms, median {ms(statistics.median(gaps))} ms,"
          f" max {ms(max(gaps))} ms; closer than the interval: {closer} of {len(gaps)}"
          f" — min/interval ratio {min(gaps) / interval:.3f}")
    short = [f"{a.endpoint}({a.form.get('pageSize', '')})→{b.endpoint} {ms(b.at - a.at)} ms"
             for a, b in itertools.pairwise(paced) if b.at - a.at < 0.95 * interval]
    print(f"   arrivals more than 5 % early: {short or 'none'}")
    starts = [b - a for a, b in itertools.pairwise(exits)]
    early = sum(1 for gap in starts if gap < interval)
    print(f"   gap between limiter releases:    min {ms(min(starts))} ms, median {ms(statistics.median(starts))} ms,"
          f" max {ms(max(starts))} ms; closer than the interval: {early} of {len(starts)}")
    return {"min_gap_ms": ms(min(gaps)), "median_gap_ms": ms(statistics.median(gaps)), "closer": closer}


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-site-") as tmp, KnsSimulator() as sim:
        root = Path(tmp)
        store = await asyncio.to_thread(Store.open, root / "data")
        await store.start()
        jobs = Jobs(store)
        diagnostics = root / "data" / "diagnostics"
        try:
            browser = Browser(root / "profile", executable(), headless=True, extra_args=sim.browser_arg_list)
            try:
                await grid_overhead(sim, browser, jobs, diagnostics, args.fetches)
                await launches(sim, root, args.launches)
                await spacing(sim, browser, jobs, diagnostics, args.interval_ms, args.requests)
            finally:
                await browser.close()
        finally:
            await store.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fetches", type=int, default=100)
    parser.add_argument("--launches", type=int, default=3)
    parser.add_argument("--interval-ms", type=int, default=200)
    parser.add_argument("--requests", type=int, default=36)
    asyncio.run(main(parser.parse_args()))
