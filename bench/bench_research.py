"""Benchmark: the research engine — ranking speed, pacing efficiency and memory of a large search.

Run:  python bench/bench_research.py [--interval-ms 500] [--latency 0.6] [--rank-only] [--smoke]

1. Ranking 3,000 candidates with realistic titles, journal evidence and channel hits (rank +
   select + stored entries), once with an abstract and keywords on every candidate (worst case)
   and once with them on the 120 a real search enriches. Target < 150 ms.
2. A default search (3 channels × 5 pages, feedback, 100 details, 15 journals) against the fake
   site of ``tests/fake_site.py`` with the product's default pacing (500 ms between request starts)
   and a simulated page latency. The pacing floor is requests × interval; target ≤ 1.15×.
3. A 3,000-candidate search (3 overlapping listings of 1,200, 50 rows a page, no pacing): wall time
   and peak RSS (sampled every 10 ms) above the process's baseline.

Everything runs in a temporary data directory; nothing reaches the network.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import msgspec
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cnki_mcp.core.model import Hit, Paper, Quality  # noqa: E402
from cnki_mcp.ops.jobs import Jobs  # noqa: E402
from cnki_mcp.research.enrich import Enrichment, JournalFlights  # noqa: E402
from cnki_mcp.research.pipeline import (  # noqa: E402
    SearchInput,
    SearchSettings,
    SearchState,
    cache_key,
    run_search,
    search_budget,
)
from cnki_mcp.research.query import plan_explicit  # noqa: E402
from cnki_mcp.research.rank import choose, rank, search_entries  # noqa: E402
from cnki_mcp.store.catalog import Catalog  # noqa: E402
from cnki_mcp.store.library import Store  # noqa: E402
from cnki_mcp.tools._searching import SearchOptions  # noqa: E402
from tests.fake_site import FakeSite  # noqa: E402

CONCEPTS = [["自动驾驶", "无人驾驶"], ["产品责任", "产品缺陷"]]
HAN = (
    "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能下过子说产种面而方后多定行学法所民得经"
    "十三之进着等部度家电力里如水化高自二理起小物现实加量都两体制机当使点从业本去把性好应开它合还因由其些然前外天政四日那社义事平形相"
    "全表间样与关各重新线内数正心反你明看原又么利比或但质气第向道命此变条只没结解问意建月公无系军很情者最立代想已通并提直题党程展五果"
)
TIERS = [["CSSCI"], ["北大核心", "CSSCI扩展版"], ["AMI核心"], ["SCI"], [], ["EI"]]
TYPES = ["期刊", "期刊", "期刊", "硕士", "博士", "会议"]


def words(rng: random.Random, low: int, high: int) -> str:
    return "".join(rng.choice(HAN) for _ in range(rng.randint(low, high)))


def candidates(n: int, abstract_share: float = 1.0, seed: int = 7) -> tuple[list[Paper], dict[str, list[Hit]]]:
    """``n`` candidates; ``abstract_share`` of them carry a detail page's abstract and keywords."""
    rng = random.Random(seed)
    papers: list[Paper] = []
    hits: dict[str, list[Hit]] = {}
    for i in range(n):
        concept = rng.choice(["自动驾驶", "无人驾驶", "智能网联汽车", ""])
        liability = rng.choice(["产品责任", "侵权责任", "产品缺陷", ""])
        title = f"{words(rng, 4, 10)}{concept}{words(rng, 0, 6)}{liability}{words(rng, 2, 8)}研究"
        detailed = rng.random() < abstract_share
        abstract = "".join(
            words(rng, 20, 40) + rng.choice([concept, liability, "风险分配", "算法", ""]) for _ in range(rng.randint(5, 10))
        ) if detailed else ""
        quality = None
        if rng.random() < 0.6:
            quality = Quality(
                tiers=rng.choice(TIERS),
                composite_impact=round(rng.uniform(0.2, 6.0), 3),
                state="present",
                parser="5",
                observed_at="2026-11-01T00:00:00.000Z",
            )
        ref = f"rec_{i:024x}"
        papers.append(Paper(
            record_ref=ref,
            title=title,
            abstract=abstract,
            keywords=[concept or "智能交通", liability or "责任", words(rng, 2, 4), words(rng, 2, 4)] if detailed else [],
            source=f"期刊{rng.randint(0, 300)}",
            year=rng.randint(2005, 2026),
            document_type=rng.choice(TYPES),
            cited=rng.randint(0, 300) if rng.random() < 0.8 else None,
            quality=quality,
        ))
        hits[ref] = [
            Hit(channel=channel, position=rng.randint(1, 1000), weight=1.0)
            for channel in ("q1", "q2", "q3")
            if rng.random() < 0.5
        ]
    return papers, hits


def bench_rank(n: int, repeats: int, abstract_share: float) -> float:
    papers, hits = candidates(n, abstract_share)
    timings = []
    for _ in range(repeats):
        gc.collect()
        started = time.perf_counter()
        ranked = rank(papers, CONCEPTS, hits, 2026)
        selected = choose(ranked, method="explicit", metadata="ranked")
        search_entries(ranked, selected)
        timings.append(time.perf_counter() - started)
    median = statistics.median(timings)
    print(f"rank {n} candidates ({abstract_share:.0%} with abstracts): median {median * 1000:.1f} ms, best {min(timings) * 1000:.1f} ms "
          f"(target < 150 ms, {median / 0.150:.2f}× of target); selected {len(selected)}")
    return median


async def one_search(site: FakeSite, request: SearchInput) -> tuple[dict, float]:
    with tempfile.TemporaryDirectory(prefix="cnki-bench-") as folder:
        store = Store.open(Path(folder))
        jobs = Jobs(store)
        plan = plan_explicit(request.concept_groups)
        state = SearchState(search_id="", input=request, plan=plan, cache_key=cache_key(request, plan))
        started = time.perf_counter()
        engine = Enrichment(Catalog(store), site, JournalFlights())
        job = jobs.start("search", search_budget(request), lambda op: run_search(op, engine, state))
        await job.done.wait()
        elapsed = time.perf_counter() - started
        view = msgspec.to_builtins(jobs.view(job))
        await store.close()
    return view, elapsed


async def bench_pacing(interval_ms: int, latency: float) -> float:
    site = FakeSite(interval_ms=interval_ms, latency=latency)
    request = SearchInput(query="自动驾驶 产品责任", concept_groups=[["自动驾驶"], ["产品责任"]], options=SearchSettings.of(SearchOptions()))
    view, elapsed = await one_search(site, request)
    floor = view["requests"] * interval_ms / 1000
    ratio = elapsed / floor
    print(f"default search: {view['status']}, {view['requests']} requests ({dict(site.counts)}), "
          f"interval {interval_ms} ms, latency {latency * 1000:.0f} ms, peak in flight {site.peak}")
    print(f"  wall {elapsed:.2f} s vs pacing floor {floor:.2f} s: {ratio:.3f}× (target ≤ 1.15×)")
    return ratio


async def bench_large(size: int = 3000) -> None:
    third = size // 3
    lists = {"subject": range(0, third + third // 4), "title": range(third, 2 * third + third // 4), "keywords": range(2 * third, size)}
    site = FakeSite(latency=0.0, page_size=50, lists=lists, feedback_lists=(range(5000, 5020), range(6000, 6020)))
    request = SearchInput(
        query="自动驾驶 产品责任",
        concept_groups=[["自动驾驶"], ["产品责任"]],
        options=SearchSettings.of(SearchOptions(candidate_target=size, max_pages=100, max_requests=5000)),
    )
    process = psutil.Process()
    gc.collect()
    baseline = process.memory_info().rss
    peak = baseline
    stop = asyncio.Event()

    async def sample() -> None:
        nonlocal peak
        while not stop.is_set():
            peak = max(peak, process.memory_info().rss)
            await asyncio.sleep(0.01)

    sampler = asyncio.create_task(sample())
    view, elapsed = await one_search(site, request)
    stop.set()
    await sampler
    result = view["result"]
    print(f"{size:,}-candidate search: {view['status']}, {result['candidate_count']} candidates, "
          f"{view['requests']} requests, {elapsed:.2f} s without pacing")
    print(f"  RSS baseline {baseline / 2**20:.1f} MiB, peak {peak / 2**20:.1f} MiB "
          f"(+{(peak - baseline) / 2**20:.1f} MiB during the search)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--candidates", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--interval-ms", type=int, default=500)
    parser.add_argument("--latency", type=float, default=0.6)
    parser.add_argument("--rank-only", action="store_true")
    parser.add_argument("--smoke", action="store_true", help="small sizes and fast pacing: the test suite runs this")
    args = parser.parse_args()
    if args.smoke:
        args.candidates, args.repeats, args.interval_ms, args.latency = 200, 1, 20, 0.01
    # Worst case: every candidate has a ~250-character abstract. In a real 3,000-candidate search
    # only the detail pools (80 + 40) have one; the rest carry list data only.
    bench_rank(args.candidates, args.repeats, 1.0)
    bench_rank(args.candidates, args.repeats, 120 / args.candidates)
    if args.rank_only:
        return
    asyncio.run(bench_large(300 if args.smoke else 3000))
    asyncio.run(bench_pacing(args.interval_ms, args.latency))


if __name__ == "__main__":
    main()
