"""Benchmark: research.json with 20,000 realistic papers — open time, flush time, file size, RSS.

Run:  python bench/bench_store.py [--papers 20000] [--flushes 7]

Builds the store in a temporary directory (never the user's data directory), then measures
``Store.open`` (lock + read + decode) and ``Store.flush`` (trim + encode + temp write + fsync +
rename) as the server performs them. Targets: open < 1 s, flush < 0.3 s.
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cnki_mcp.core.clock import utc_now_iso  # noqa: E402
from cnki_mcp.core.model import (  # noqa: E402
    Evidence,
    Operation,
    Paper,
    Quality,
    SearchEntry,
    SearchRecord,
)
from cnki_mcp.store.library import Store  # noqa: E402

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


def build(root: Path, papers: int) -> None:
    rng = random.Random(7)
    store = Store.open(root)
    refs = []
    for n in range(papers):
        paper = make_paper(rng, n)
        store.put_paper(paper)
        refs.append(paper.record_ref)
    now = utc_now_iso()
    for s in range(120):
        picked = rng.sample(refs, 150)
        entries = [
            SearchEntry(record_ref=ref, score=rng.random(), eligible=rng.random() < 0.7, selected=i < 50,
                        evidence=Evidence(relevance=rng.random(), quality=rng.random()))
            for i, ref in enumerate(picked)
        ]
        store.put_search(SearchRecord(search_id=f"s_{s:024x}", status="completed", query=words(rng, 4, 20), entries=entries, created_at=now))
    for o in range(200):
        store.put_operation(Operation(operation_id=f"op_{o:024x}", kind="search", status="completed", requests=rng.randint(10, 600),
                                      created_at=now, updated_at=now))
    store.close_sync()


def measure(root: Path, flushes: int) -> None:
    """Runs in a fresh process so RSS reflects a server holding the store, not the generator."""
    process = psutil.Process()
    rss_start = process.memory_info().rss
    opens = []
    for attempt in range(3):
        began = time.perf_counter()
        store = Store.open(root)
        opens.append(time.perf_counter() - began)
        if attempt < 2:
            store.close_sync()
            del store
            gc.collect()
    rss_open = process.memory_info().rss
    flush_times = []
    encode_times = []
    payload = b""
    for _ in range(flushes):
        store.mark_dirty()
        began = time.perf_counter()
        _, payload = store._prepare()
        encode_times.append(time.perf_counter() - began)
        store.mark_dirty()
        began = time.perf_counter()
        assert store.flush()
        flush_times.append(time.perf_counter() - began)
    rss = process.memory_info().rss
    size = (root / "research.json").stat().st_size
    print(f"papers               {len(store.data.papers):,} (+{len(store.data.searches)} searches, {len(store.data.operations)} operations)")
    print(f"research.json        {size / 1e6:.1f} MB")
    print(f"open                 median {statistics.median(opens) * 1000:.0f} ms  (runs: {', '.join(f'{t * 1000:.0f}' for t in opens)})   target < 1000 ms")
    print(f"flush                median {statistics.median(flush_times) * 1000:.0f} ms  (min {min(flush_times) * 1000:.0f}, max {max(flush_times) * 1000:.0f}, n={len(flush_times)})   target < 300 ms")
    print(f"  of which encode    median {statistics.median(encode_times) * 1000:.0f} ms  (on the event loop; the write runs in a thread)")
    print(f"RSS                  {rss_start / 1e6:.0f} MB at start, {rss_open / 1e6:.0f} MB with the store open, {rss / 1e6:.0f} MB after flushing")
    assert len(payload) > 0
    store.close_sync()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--papers", type=int, default=20000)
    parser.add_argument("--flushes", type=int, default=7)
    parser.add_argument("--measure", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        measure(args.measure, args.flushes)
        return
    with tempfile.TemporaryDirectory(prefix="cnki-bench-") as tmp:
        root = Path(tmp)
        began = time.perf_counter()
        build(root, args.papers)
        print(f"built in             {time.perf_counter() - began:.2f} s (not part of the figures)", flush=True)
        subprocess.run([sys.executable, __file__, "--measure", str(root), "--flushes", str(args.flushes)], check=True)


if __name__ == "__main__":
    main()
