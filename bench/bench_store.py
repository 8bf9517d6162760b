"""Benchmark: research.db with 20,000, 100,000 and 300,000 realistic records — open, save, a page of
search_results, database size, RSS.

Run:  python bench/bench_store.py [--records 20000 100000 300000] [--saves 300] [--pages 50]
      python bench/bench_store.py --smoke                 # a few hundred records: the test suite runs this
      python bench/bench_store.py --build-json DIR --records 20000   # a research.json of an earlier version

For each size a library is built in a temporary directory (never the user's data directory): the records,
120 stored searches of 150 entries and 200 operations. Then a fresh process (so RSS is the server's, not the
generator's) measures, as the server performs them:

* open: ``Store.open`` (lock, schema, singletons, retention stamps), median of 3, and when SQLite's quick
  check of the whole file, which runs in a thread beside it, has ended;
* save: a changed record put on the event loop and ``Store.settle`` (what a tool's answer waits for: the
  writer thread's transaction and fsync), p50/p99/max of ``--saves``; and the longest the event loop was held
  by a put (the encoding happens in the writer thread);
* search_results: one page of 20 through ``App.search_results`` (the stored search, then each record by key),
  p50/p99 of ``--pages`` random pages of random stored searches, full view;
* the database's bytes, and RSS with the store open and after the saves and pages.

Targets at 100,000 records (issue 34): open < 300 ms, save p99 < 20 ms (none of it on the event loop),
search_results of a page < 50 ms, RSS < 150 MB.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import msgspec  # noqa: E402

from cnki_mcp.core.clock import utc_now_iso  # noqa: E402
from cnki_mcp.core.model import (  # noqa: E402
    Evidence,
    Operation,
    Paper,
    Quality,
    SearchEntry,
    SearchRecord,
    StoreData,
)
from cnki_mcp.store import db, migrate  # noqa: E402
from cnki_mcp.store.library import Store  # noqa: E402
from cnki_mcp.store.tables import make_row  # noqa: E402

# Common characters of Chinese academic prose, so sizes and UTF-8 widths match real abstracts.
HAN = (
    "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能下过子说产种面而方后多定行学法所民得经"
    "十三之进着等部度家电力里如水化高自二理起小物现实加量都两体制机当使点从业本去把性好应开它合还因由其些然前外天政四日那社义事平形相全表间样与关各重新线内数正心反你明看原又么利比或但质气第向道命此变条只没结解问意建月公无系军很情者最立代想已通并提直题党程展五果料象员革位入常文总次品式活设及管特件长求老头基资边流路级少图山统接知较将组见计别她手角期根论运农指几九区强放决西被干做必战先回则任取据处队南给色光门即保治北造百规热领七海口东导器压志世金增争济阶油思术极交受联什认六共权收证改清己美再采转更单风切打白教速花带安场身车例真务具万每目至达走积示议声报斗完类八离华名确才科张信马节话米整空元况今集温传土许步群广石记需段研界拉林律叫且究观越织装影算低持音众书布复容儿须际商非验连断深难近矿千周委素技备半办青省列习响约支般史感劳便团往酸历市克何除消构府称太准精值号率族维划选标写存候毛亲快效斯院查江型眼王按格养易置派层片始却专状育厂京识适属圆包火住调满县局照参红细引听该铁价严"
)
SOURCES = ["计算机学报", "软件学报", "中国图书馆学报", "情报学报", "管理世界", "经济研究", "中国社会科学", "心理学报", "教育研究", "地理学报"]
TYPES = ["期刊", "期刊", "期刊", "硕士", "博士", "会议"]
SURNAMES = "王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗郑梁谢宋唐许韩冯邓曹彭曾肖田董袁潘于蒋蔡余杜叶程苏魏吕丁任沈姚卢姜崔钟谭陆汪范金石廖贾夏韦付方白邹孟熊秦邱江尹薛闫段雷侯龙史陶黎贺顾毛郝龚邵万钱严覃武戴莫孔向汤"


def words(rng: random.Random, low: int, high: int) -> str:
    return "".join(rng.choice(HAN) for _ in range(rng.randint(low, high)))


def make_paper(rng: random.Random, n: int) -> Paper:
    doc_type = rng.choice(TYPES)
    source = rng.choice(SOURCES) if doc_type == "期刊" else words(rng, 4, 8) + "大学"
    year = rng.randint(1995, 2025)
    now = utc_now_iso()
    enriched = rng.random() < 0.6
    quality = None
    if enriched and doc_type == "期刊":
        quality = Quality(
            canonical_title=source,
            identity_basis="current_title",
            tiers=["北大核心", "CSSCI"],
            composite_impact=round(rng.uniform(0.5, 12), 3),
            aggregate_impact=round(rng.uniform(0.3, 8), 3),
            metric_year=2025,
            source_url=f"https://navi.cnki.net/knavi/journals/{n % 900:04d}/detail",
            state="present",
            observed_at=now,
            parser="5",
        )
    filename = f"JSJX{year}{n:06d}"
    return Paper(
        record_ref=f"rec_{n:024x}",
        title=words(rng, 12, 32) + "研究",
        authors=[rng.choice(SURNAMES) + words(rng, 1, 2) for _ in range(rng.randint(1, 6))],
        source=source,
        source_url=f"https://navi.cnki.net/knavi/journals/{n % 900:04d}/detail",
        year=year,
        publication_date=f"{year}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
        document_type=doc_type,
        dbcode="CJFD",
        dbname=f"CJFDLAST{year}",
        filename=filename,
        url=f"https://kns.cnki.net/kcms2/article/abstract?v=3uoqIhG8C44Y{n:x}&uniplatform=NZKPT",
        locator=f"https://kns.cnki.net/kcms2/article/abstract?v=Xq{n:x}{'A' * 120}",
        abstract=(words(rng, 180, 420) + "。") if enriched else "",
        keywords=[words(rng, 2, 6) for _ in range(rng.randint(3, 7))],
        institutions=[words(rng, 4, 10) + "大学" for _ in range(rng.randint(1, 3))] if enriched else [],
        funds=[f"国家自然科学基金({rng.randint(61000000, 62999999)})"] if enriched and rng.random() < 0.5 else [],
        volume=str(rng.randint(1, 60)),
        issue=str(rng.randint(1, 12)),
        pages=f"{rng.randint(1, 200)}-{rng.randint(201, 260)}",
        cited=rng.randint(0, 3000),
        downloaded=rng.randint(0, 90000),
        quality=quality,
        listed_at=now,
        detail_observed_at=now if enriched else "",
        detail_parser="5" if enriched else "",
    )


SEARCHES = 120
OPERATIONS = 200


def library(records: int) -> Iterator[tuple[str, str, object]]:
    """(section, key, value) of a library of ``records`` papers with its searches and operations."""
    rng = random.Random(7)
    refs = []
    for n in range(records):
        paper = make_paper(rng, n)
        refs.append(paper.record_ref)
        yield "papers", paper.record_ref, paper
    now = utc_now_iso()
    for s in range(SEARCHES):
        picked = rng.sample(refs, min(150, len(refs)))
        entries = [
            SearchEntry(record_ref=ref, score=rng.random(), eligible=rng.random() < 0.7, selected=i < 50,
                        evidence=Evidence(relevance=rng.random(), quality=rng.random()))
            for i, ref in enumerate(picked)
        ]
        search = SearchRecord(search_id=f"s_{s:024x}", status="completed", query=words(rng, 4, 20), entries=entries, created_at=now)
        yield "searches", search.search_id, search
    for o in range(OPERATIONS):
        op = Operation(operation_id=f"op_{o:024x}", kind="search", status="completed", requests=rng.randint(10, 600), created_at=now, updated_at=now)
        yield "operations", op.operation_id, op


def build(root: Path, records: int) -> None:
    """research.db of ``records`` papers, written in one transaction (as a migration writes it)."""
    root.mkdir(parents=True, exist_ok=True)
    migrate.build(root / db.DB_FILE, (make_row(table, key, value) for table, key, value in library(records)))


def build_json(root: Path, records: int) -> None:
    """research.json of ``records`` papers, as versions before the database wrote it."""
    data = StoreData()
    for table, key, value in library(records):
        getattr(data, table)[key] = value
    root.mkdir(parents=True, exist_ok=True)
    (root / migrate.RESEARCH_FILE).write_bytes(msgspec.json.encode(data))


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(share * (len(ordered) - 1))))]


async def _saves_and_pages(root: Path, saves: int, pages: int) -> dict[str, float]:
    from cnki_mcp.app import App
    from cnki_mcp.tools import search_results

    process = psutil.Process()
    app = App(root)
    store = await app.store()
    await asyncio.to_thread(store.check_done, 120)  # the check at start reads the whole file: not during the saves
    rng = random.Random(11)
    refs = [entry.record_ref for entry in store.data.searches[f"s_{0:024x}"].entries]
    save_ms, hold_ms = [], []
    for n in range(saves):
        paper = store.data.papers[rng.choice(refs)]
        began = time.perf_counter()
        store.put_paper(msgspec.structs.replace(paper, cited=(paper.cited or 0) + n))
        held = time.perf_counter()
        await store.settle()
        save_ms.append((time.perf_counter() - began) * 1000)
        hold_ms.append((held - began) * 1000)
    searches = list(store.data.searches)
    page_ms = []
    for _ in range(pages):
        args = msgspec.convert({"search_id": rng.choice(searches), "scope": "candidates", "offset": rng.randrange(0, 130), "limit": 20, "view": "records"},
                               search_results.Args)
        began = time.perf_counter()
        reply = await search_results.run(app, args, None)
        page_ms.append((time.perf_counter() - began) * 1000)
        assert len(reply.results) == 20
    rss = process.memory_info().rss
    await app.close()
    return {
        "save_p50": percentile(save_ms, 0.5), "save_p99": percentile(save_ms, 0.99), "save_max": max(save_ms),
        "hold_max": max(hold_ms), "page_p50": percentile(page_ms, 0.5), "page_p99": percentile(page_ms, 0.99), "rss_after": rss / 1e6,
    }



def measure(root: Path, saves: int, pages: int) -> None:
    """Runs in a fresh process so RSS reflects a server holding the store, not the generator."""
    process = psutil.Process()
    rss_start = process.memory_info().rss
    opens, checks = [], []
    for _ in range(3):
        began = time.perf_counter()
        store = Store.open(root)
        opens.append((time.perf_counter() - began) * 1000)
        assert store.check_done(120) and not store.damage
        checks.append((time.perf_counter() - began) * 1000)
        records = len(store.data.papers)
        store.close_sync()
        del store
        gc.collect()
    store = Store.open(root)
    store.check_done(120)
    rss_open = process.memory_info().rss
    store.close_sync()
    figures = asyncio.run(_saves_and_pages(root, saves, pages))
    size = migrate.db_size(root / db.DB_FILE)
    print(f"records              {records:,} (+{SEARCHES} searches of 150 entries, {OPERATIONS} operations)")
    print(f"research.db          {size / 1e6:.1f} MB")
    print(f"open                 median {statistics.median(opens):.0f} ms  (runs: {', '.join(f'{t:.0f}' for t in opens)})   target < 300 ms")
    print(f"  integrity check    median {statistics.median(checks):.0f} ms after the open began (SQLite's quick check, in a thread beside the open)")
    print(f"save                 p50 {figures['save_p50']:.1f} ms  p99 {figures['save_p99']:.1f} ms  max {figures['save_max']:.1f} ms  (n={saves})"
          "   target p99 < 20 ms")
    print(f"  on the event loop  at most {figures['hold_max']:.2f} ms per put (the commit runs in the writer thread)")
    print(f"search_results page  p50 {figures['page_p50']:.1f} ms  p99 {figures['page_p99']:.1f} ms  (20 records, n={pages})   target < 50 ms")
    print(f"RSS                  {rss_start / 1e6:.0f} MB at start, {rss_open / 1e6:.0f} MB with the store open, "
          f"{figures['rss_after']:.0f} MB after the saves and pages (App loaded)   target < 150 MB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, nargs="+", default=[20_000, 100_000, 300_000])
    parser.add_argument("--saves", type=int, default=300)
    parser.add_argument("--pages", type=int, default=50)
    parser.add_argument("--smoke", action="store_true", help="300 records, 20 saves, 5 pages")
    parser.add_argument("--build-json", type=Path, help="write a research.json of --records[0] papers here and stop")
    parser.add_argument("--measure", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.smoke:
        args.records, args.saves, args.pages = [300], 20, 5
    if args.build_json:
        build_json(args.build_json, args.records[0])
        return
    if args.measure:
        measure(args.measure, args.saves, args.pages)
        return
    for records in args.records:
        with tempfile.TemporaryDirectory(prefix="cnki-bench-") as tmp:
            root = Path(tmp)
            began = time.perf_counter()
            build(root, records)
            print(f"--- {records:,} records: built in {time.perf_counter() - began:.1f} s (not part of the figures)", flush=True)
            subprocess.run([sys.executable, __file__, "--measure", str(root), "--saves", str(args.saves), "--pages", str(args.pages)], check=True)


if __name__ == "__main__":
    main()
