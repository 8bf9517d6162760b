"""A topic watch's run: its search read newest first until the papers it already knew, the new ones answered
with their journals' tiers and the listings that found them, and remembered for the next run.

The search is the pipeline's own (``pipeline.Research``) with ``SearchInput.seen``: each listing stops at
the first page that shows a known paper, and only unknown papers get their details. A first run (nothing
known) reads one page of each listing, with list data only, and makes what it found the baseline. A run
that does not complete remembers nothing, so the next one reads the same stretch again. A listing that
reaches ``max_pages`` before a known paper leaves a gap (WATCH_GAP): what that run told is kept apart
(``Watch.told``) and ends no listing, so later runs read on into the gap until they reach the known papers.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from pathlib import Path

import msgspec

from cnki_mcp.core.clock import utc_now_iso
from cnki_mcp.core.errors import CATALOGUE, CnkiError
from cnki_mcp.core.files import safe_folder, write_new_file
from cnki_mcp.core.model import Channel, Hit, Paper, Problem, SearchSummary
from cnki_mcp.core.watch_model import KNOWN_KEPT, Watch
from cnki_mcp.ops.jobs import OperationContext
from cnki_mcp.research.enrich import Enrichment
from cnki_mcp.research.pipeline import Research, SearchState
from cnki_mcp.site.grid_query import FIELDS
from cnki_mcp.store.library import Store

DIGEST_LISTED = 30  # new papers a digest lists per watch


class WatchPaper(msgspec.Struct, omit_defaults=True, kw_only=True):
    """A new paper of a run: its listing data, its journal's tiers and the listings that found it."""

    record_ref: str
    title: str = ""
    authors: list[str] = []
    source: str = ""
    publication_date: str = ""
    url: str = ""
    tiers: list[str] = []
    matched: list[str] = []


class WatchRun(msgspec.Struct, kw_only=True):
    """One run of one watch: on the first (``baseline``) how many papers it found, later the new ones."""

    name: str
    baseline: bool = False
    found: int = 0
    total: int | None = None  # what CNKI's listing said it holds (its first listing)
    new: list[WatchPaper] = []
    warnings: list[Problem] = []  # WATCH_GAP, WATCH_MEMORY_FULL: the run completed, but not everything was seen


async def run_watch(op: OperationContext, engine: Enrichment, store: Store, watch: Watch, state: SearchState) -> WatchRun:
    """Run ``watch``'s search (``state``, with ``seen`` = what it knew) and remember what it found."""
    baseline = not watch.baseline_at
    summary = await Research(engine).run(op, state)
    if summary.status != "completed":
        raise CnkiError("WATCH_INCOMPLETE", details={"watch": watch.name, "search_id": summary.search_id})
    known = {*watch.known, *watch.told}
    papers = store.data.papers
    found = [papers[ref] for ref in state.refs if ref not in known and ref in papers]
    found.sort(key=lambda paper: paper.publication_date or str(paper.year), reverse=True)
    refs = [paper.record_ref for paper in found]
    short = [] if baseline else _cut_short(state)
    warnings = [_gap(watch.name, short, state.input.options.max_pages)] if short else []
    # After a gap what this run told ends no listing, so the next run reads on to the papers known before it.
    kept = refs + watch.told if short else refs + watch.told + watch.known
    forgotten = set(kept[KNOWN_KEPT:])
    if short:
        watch.told = kept[:KNOWN_KEPT]
    else:
        watch.known, watch.told = kept[:KNOWN_KEPT], []
    if not forgotten.isdisjoint(state.refs):  # a listing's newest known papers gone: the next run may pass them
        warnings.append(CnkiError("WATCH_MEMORY_FULL", details={"watch": watch.name, "kept": KNOWN_KEPT, "forgotten": len(forgotten)}).problem())
    now = utc_now_iso()
    watch.baseline_at = watch.baseline_at or now
    watch.last_run_at = now
    if watch.name in store.data.watches:  # removed while it ran: not brought back
        store.data.watches[watch.name] = watch
    total = _total(summary)
    if baseline:
        return WatchRun(name=watch.name, baseline=True, found=len(found), total=total)
    channels = {channel.name: channel for channel in state.plan.channels}
    new = [_paper(paper, state.hits.get(paper.record_ref, []), channels) for paper in found]
    return WatchRun(name=watch.name, found=len(new), total=total, new=new, warnings=warnings)


def _cut_short(state: SearchState) -> list[Channel]:
    """The listings that ended at ``max_pages`` before a known paper or their end: papers below were not read."""
    stopped = {entry.channel for entry in state.coverage if not entry.exhausted and not entry.failed}
    return [channel for channel in state.plan.channels if channel.name in stopped]


def _gap(name: str, channels: list[Channel], max_pages: int) -> Problem:
    details = {"watch": name, "listings": len(channels), "channels": [channel.name for channel in channels], "max_pages": max_pages}
    what = "、".join(dict.fromkeys(_why(channel) for channel in channels))
    stopped = f"这次有 {len(channels)} 个列表（{what}）读到 max_pages={max_pages} 页就停了。"
    return CnkiError("WATCH_GAP", stopped + CATALOGUE["WATCH_GAP"].message, details=details).problem()


def _total(summary: SearchSummary) -> int | None:
    return summary.coverage[0].total if summary.coverage else None


def _paper(paper: Paper, hits: Iterable[Hit], channels: dict[str, Channel]) -> WatchPaper:
    quality = paper.quality
    return WatchPaper(
        record_ref=paper.record_ref, title=paper.title, authors=paper.authors, source=paper.source,
        publication_date=paper.publication_date or (str(paper.year) if paper.year else ""), url=paper.url,
        tiers=list(quality.tiers) if quality is not None and quality.state == "present" else [],
        matched=list(dict.fromkeys(_why(channels[hit.channel]) for hit in hits if hit.channel in channels)),
    )


def _why(channel: Channel) -> str:
    """What a listing asked: 篇名含 A（或 B）且 C; a structured or expert search: its expression."""
    if not channel.field:
        return "符合检索式"
    label = FIELDS[channel.field][1] if channel.field in FIELDS else channel.field
    return f"{label}含 " + " 且 ".join("（或）".join(group) for group in channel.groups)


def digest_file(exports: Path, runs: list[WatchRun], failures: dict[str, str]) -> Path:
    """The digest written as ``exports/watch-<local time>.md`` (never over an earlier one: a second run in the
    same second adds its microseconds)."""
    now = datetime.now().astimezone()
    text = digest(runs, failures, now.strftime("%Y-%m-%d %H:%M")).encode()
    folder = safe_folder(exports)
    name = f"watch-{now:%Y%m%d-%H%M%S}.md"
    if (folder / name).exists():
        name = f"watch-{now:%Y%m%d-%H%M%S-%f}.md"
    return Path(write_new_file(folder, name, text).path)


def digest(runs: list[WatchRun], failures: dict[str, str], at: str) -> str:
    """The Markdown digest of a scheduled run (``cnki-mcp watch run``): per watch, its new papers."""
    lines = [f"# 知网关注摘要 {at}", ""]
    for run in runs:
        if run.baseline:
            lines += [f"## {run.name}", "", f"首次运行，建立基线：记下 {run.found} 篇（知网列表共 {run.total if run.total is not None else '未知'} 篇）。", ""]
            continue
        lines += [f"## {run.name}：{run.found} 篇新论文", ""]
        if run.warnings:  # before the papers: what this run could not see
            lines += [*(f"> ⚠ {problem.code}：{problem.message}" for problem in run.warnings), ""]
        for paper in run.new[:DIGEST_LISTED]:
            tiers = f"〔{'、'.join(paper.tiers)}〕" if paper.tiers else ""
            head = f"[{paper.title}]({paper.url})" if paper.url else paper.title
            lines.append(f"- {head}　{'、'.join(paper.authors[:3])}　{paper.source} {paper.publication_date}{tiers}")
            if paper.matched:
                lines.append(f"  - 命中：{'；'.join(paper.matched)}")
        if run.found > DIGEST_LISTED:
            lines.append(f"- ……另有 {run.found - DIGEST_LISTED} 篇")
        lines.append("")
    for name, why in failures.items():
        lines += [f"## {name}：未完成", "", why, ""]
    return "\n".join(lines)
