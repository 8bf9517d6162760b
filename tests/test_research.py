"""The research engine against the backend-level fake site (engine.md §16.1–§16.3, §16.5)."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from pathlib import Path
from typing import Any

import msgspec
import pytest

from cnki_mcp.core.clock import within
from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.model import PARSER_VERSION, Budget, Paper, Quality
from cnki_mcp.ops.jobs import Jobs, OperationContext
from cnki_mcp.pages.parse import GridPage
from cnki_mcp.research.backend import grid_page
from cnki_mcp.research.enrich import Enrichment, JournalFlights
from cnki_mcp.research.pipeline import (
    SearchInput,
    SearchSettings,
    SearchState,
    cache_key,
    search_budget,
)
from cnki_mcp.research.pipeline import run_search as search_operation
from cnki_mcp.research.query import plan_explicit
from cnki_mcp.site.grid_query import GridQuery, compile_expression
from cnki_mcp.site.listings import Waiting
from cnki_mcp.store.catalog import Catalog, merge
from cnki_mcp.store.library import Store
from cnki_mcp.tools import export_citations, get_metadata
from cnki_mcp.tools._searching import SearchOptions
from tests.fake_site import ABSTRACT, FakeSite, sim_paper

CONCEPTS = [["自动驾驶"], ["产品责任"]]
FULL_RUN = 17 + 100 + 15  # grids + details + distinct journals of the reference scenario


def search_request(**options: Any) -> SearchInput:
    years = {k: options.pop(k) for k in ("year_from", "year_to") if k in options}
    return SearchInput(query="自动驾驶 产品责任", concept_groups=CONCEPTS, options=SearchSettings.of(SearchOptions(**options)), **years)


@pytest.fixture
async def store(tmp_path: Path):
    opened = Store.open(tmp_path / "data")
    yield opened
    await opened.close()


@pytest.fixture
def jobs(store: Store) -> Jobs:
    return Jobs(store)


def engine(store: Store, site: FakeSite, *, workers: int | None = None) -> Enrichment:
    return Enrichment(Catalog(store), site, JournalFlights(), workers=workers)


async def run_search(
    jobs: Jobs, store: Store, site: FakeSite, request: SearchInput | None = None, budget: Budget | None = None
) -> tuple[dict[str, Any], str]:
    request = request or search_request()
    plan = plan_explicit(request.concept_groups)
    state = SearchState(search_id="", input=request, plan=plan, cache_key=cache_key(request, plan))
    job = jobs.start("search", budget or search_budget(request), lambda op: search_operation(op, engine(store, site), state))
    await within(job.done.wait(), 30)
    return msgspec.to_builtins(jobs.view(job)), job.record.operation_id


async def continue_run(jobs: Jobs, store: Store, site: FakeSite, op_id: str, more: int = 0) -> dict[str, Any]:
    prior, budget = jobs.continuation(op_id, more, 0)
    job = jobs.start("search", budget, lambda op: search_operation(op, engine(store, site), None), resume_from=prior)
    await within(job.done.wait(), 30)
    return msgspec.to_builtins(jobs.view(job))


async def in_operation(jobs: Jobs, work: Any, kind: str = "metadata", budget: Budget | None = None) -> dict[str, Any]:
    job = jobs.start(kind, budget or get_metadata.BUDGET.of(), work)
    await within(job.done.wait(), 30)
    return msgspec.to_builtins(jobs.view(job))


def no_repeats(log: list[tuple[str, str]]) -> None:
    repeated = {entry: n for entry, n in Counter(log).items() if n > 1}
    assert not repeated


# --- §16.2 pipeline tests ------------------------------------------------------------------------


async def test_coverage_feedback_and_dedup(jobs: Jobs, store: Store) -> None:
    site = FakeSite()
    view, _ = await run_search(jobs, store, site)
    result = view["result"]
    assert view["status"] == "completed" and not view.get("errors")
    assert site.counts["grid"] == 17
    assert result["candidate_count"] == 200
    assert [c["channel"] for c in result["coverage"]] == ["q1", "q2", "q3", "feedback1", "feedback2"]
    assert site.counts["detail"] == 100 and result["enhanced_count"] == 100
    journals = Counter(key for kind, key in site.log if kind == "journal")
    assert len(journals) == 15 and set(journals.values()) == {1}
    assert view["requests"] == len(site.log) == FULL_RUN
    assert result["selected_count"] > 0 and result["quality_source_count"] > 0
    assert result["plan"]["method"] == "explicit"
    assert len(result["results"]) == min(result["selected_count"], 50)

    # The same search again: details and journals are reused, only the 17 listings are asked for.
    again = FakeSite()
    view, _ = await run_search(jobs, store, again)
    assert view["status"] == "completed"
    assert view["requests"] == 17 and again.counts == Counter({"grid": 17})


async def test_resume_without_repeated_work(jobs: Jobs, store: Store) -> None:
    site = FakeSite()
    first, op_id = await run_search(jobs, store, site, budget=Budget(max_requests=50, timeout_seconds=60))
    assert first["status"] == "partial"
    assert first["errors"][-1]["code"] == "BUDGET_EXHAUSTED"
    assert first["result"]["status"] == "partial"
    assert store.data.searches[op_id].status == "partial" and not store.data.search_cache
    second = await continue_run(jobs, store, site, op_id, more=450)
    assert second["status"] == "completed" and second["operation_id"] == op_id
    assert second["budget"]["max_requests"] == 500
    assert second["result"]["search_id"] == op_id
    assert second["requests"] == len(site.log) == FULL_RUN
    no_repeats(site.log)
    assert second["result"]["enhanced_count"] == 100
    assert store.data.search_cache  # completed now, so it answers prefer_cache


async def test_rate_bound_not_latency_bound(jobs: Jobs, store: Store) -> None:
    # Requests last three intervals: when the limiter spaces starts instead of waiting for answers, several are
    # out at once. (How fast a search runs is measured in bench/, not here.)
    site = FakeSite(interval_ms=10, latency=0.03)
    view, _ = await run_search(jobs, store, site)
    assert view["status"] == "completed"
    assert site.peak >= 3


async def test_limiter_spacing(jobs: Jobs) -> None:
    from cnki_mcp.site.limiter import Limiter

    limiter = Limiter(10, 4)
    starts: list[float] = []
    inflight = peak = 0

    async def cycle() -> None:
        nonlocal inflight, peak
        async with limiter.slot():
            starts.append(time.monotonic())
            inflight += 1
            peak = max(peak, inflight)
            await asyncio.sleep(0.005)
            inflight -= 1

    await asyncio.gather(*(cycle() for _ in range(10)))
    gaps = [later - earlier for earlier, later in zip(starts, starts[1:], strict=False)]
    assert len(starts) == 10
    assert min(gaps) >= 0.0095  # starts are spaced by the interval, however loaded the machine
    assert peak <= 4


async def test_store_identity_and_persistence(tmp_path: Path) -> None:
    root = tmp_path / "identity"
    store = Store.open(root)
    (original,) = Catalog(store).upsert([sim_paper(1)])
    copy = msgspec.structs.replace(sim_paper(1), record_ref="", abstract="新的摘要")
    (merged,) = Catalog(store).upsert([copy])
    assert merged.record_ref == original.record_ref and merged.abstract == "新的摘要"
    other = msgspec.structs.replace(sim_paper(1), record_ref="", filename="SIM9999", authors=["另一作者"])
    (second,) = Catalog(store).upsert([other])
    assert second.record_ref != original.record_ref
    assert len(Catalog(store).by_title(sim_paper(1).title)) == 2
    with pytest.raises(CnkiError) as busy:
        Store.open(root)
    assert busy.value.code == "DATA_DIRECTORY_IN_USE"
    store.close_sync()
    reopened = Store.open(root)
    assert reopened.data.papers[original.record_ref].abstract == "新的摘要"
    assert len(Catalog(reopened).by_title(sim_paper(1).title)) == 2
    reopened.close_sync()


async def test_journal_single_flight(jobs: Jobs, store: Store) -> None:
    site = FakeSite(latency=0.02)
    paper = msgspec.structs.replace(sim_paper(3), source_url="https://navi.cnki.net/x")

    async def work(op: OperationContext) -> list[Quality | None]:
        research = engine(store, site)
        return await asyncio.gather(*(research.quality(op, paper) for _ in range(20)))

    view = await in_operation(jobs, work)
    assert view["status"] == "completed" and len(view["result"]) == 20
    assert site.counts == Counter({"journal": 1})
    assert view["requests"] == 1


# --- §16.3 identity and merge ------------------------------------------------------------------------


def test_a_checkpoint_with_an_option_this_version_does_not_know_still_loads() -> None:
    stored = msgspec.json.decode(msgspec.json.encode(search_request(max_pages=7)))
    stored["options"]["option_from_a_newer_version"] = True

    loaded = msgspec.convert(stored, SearchInput)

    assert loaded == search_request(max_pages=7)


def test_the_checkpoint_keeps_settings_not_the_tools_argument_struct() -> None:
    request = search_request()

    assert type(request.options) is SearchSettings


def test_listing_never_overrides_a_detail() -> None:
    detail = Paper(record_ref="r", title="题名", abstract="摘要", keywords=["关键词"], year=2023,
                   publication_date="2023-01-05", detail_observed_at="2026-01-01T00:00:00.000Z", detail_parser=PARSER_VERSION)
    listing = Paper(record_ref="x", title="题名", publication_date="2022-12-28", year=2022, cited=9,
                    listed_at="2026-02-01T00:00:00.000Z")
    merged = merge(detail, listing)
    assert merged.record_ref == "r" and merged.abstract == "摘要" and merged.keywords == ["关键词"]
    assert merged.year == 2023 and merged.publication_date == "2023-01-05"
    assert merged.cited == 9 and merged.listed_at == listing.listed_at
    assert merged.detail_observed_at == detail.detail_observed_at
    # A listing before any detail does fill the bibliography; a later detail wins again.
    fresh = merge(Paper(record_ref="r", title="旧题名", year=2020), listing)
    assert fresh.title == "题名" and fresh.year == 2022
    newer = msgspec.structs.replace(detail, year=2024, detail_observed_at="2026-03-01T00:00:00.000Z")
    assert merge(merged, newer).year == 2024


@pytest.mark.parametrize(
    ("listed", "detailed", "kept"),
    [
        ("2026-11-14", "2026", "2026-11-14"),  # the detail's 2026(11) says less: the listing's day stays
        ("2026-06-23 14:43", "2026-06", "2026-06-23 14:43"),
        ("2026-06-23 14:43", "2026-06-23", "2026-06-23"),  # as precise: the detail's
        ("2025-12-30", "2026", "2026"),  # another date: the detail's
        ("", "2026", "2026"),
    ],
)
def test_a_detail_date_that_says_less_keeps_the_listings(listed: str, detailed: str, kept: str) -> None:
    listing = Paper(record_ref="r", title="题名", publication_date=listed, year=2026, listed_at="2026-12-01T00:00:00.000Z")
    detail = Paper(record_ref="x", title="题名", publication_date=detailed, year=2026,
                   detail_observed_at="2026-12-01T00:00:01.000Z", detail_parser=PARSER_VERSION)
    assert merge(listing, detail).publication_date == kept


def test_upsert_keeps_refs_and_never_merges_by_title_alone(store: Store) -> None:
    a = Paper(title="同名论文", authors=["甲"], source="某刊", year=2020, url="https://kns.cnki.net/a")
    b = Paper(title="同名论文", authors=["乙"], source="某刊", year=2020, url="https://kns.cnki.net/b")
    first, second = Catalog(store).upsert([a, b])
    assert first.record_ref != second.record_ref
    (again,) = Catalog(store).upsert([msgspec.structs.replace(a, cited=4)])
    assert again.record_ref == first.record_ref and again.cited == 4
    # A stored ref whose paper is a different one is never reused.
    clash = Paper(record_ref=first.record_ref, title="完全不同", authors=["丙"], source="他刊", year=2021)
    (separate,) = Catalog(store).upsert([clash])
    assert separate.record_ref != first.record_ref and separate.record_ref.startswith("rec_")
    assert store.data.papers[first.record_ref].title == "同名论文"


# --- §16.5 retrieval rules ---------------------------------------------------------------------------


async def test_target_is_checked_only_when_channels_are_level(jobs: Jobs, store: Store) -> None:
    site = FakeSite()
    site.failures["grid"]["keywords#1"] = "RATE_LIMITED"  # fatal, once
    request = search_request(candidate_target=20, metadata="basic")
    first, op_id = await run_search(jobs, store, site, request)
    assert first["status"] == "partial" and first["errors"][-1]["code"] == "RATE_LIMITED"
    coverage = {c["channel"]: c for c in first["result"]["coverage"]}
    assert coverage["q1"]["pages"] == 1 and coverage["q3"]["pages"] == 0 and not coverage["q3"].get("failed")
    assert first["result"]["candidate_count"] >= 20
    before = len(site.log)
    second = await continue_run(jobs, store, site, op_id)
    assert second["status"] == "completed"
    # 40 candidates already exceed the target, but the round is not level: only the lagging q3 is fetched.
    assert site.log[before:] == [("grid", "keywords#1")]
    assert [c["pages"] for c in second["result"]["coverage"]] == [1, 1, 1]


async def test_failed_channel_is_never_fetched_again(jobs: Jobs, store: Store) -> None:
    site = FakeSite()
    site.failures["grid"]["title#2"] = "PARSER_UNSUPPORTED"  # non-fatal
    request = search_request(max_pages=3, metadata="basic")
    view, op_id = await run_search(jobs, store, site, request)
    assert view["status"] == "partial" and view["result"]["status"] == "partial"
    q2 = view["result"]["coverage"][1]
    assert q2["failed"] is True and q2["pages"] == 1 and q2["error"]
    assert [e["code"] for e in view["errors"]] == ["PARSER_UNSUPPORTED"]
    assert view["errors"][0]["details"]["channel"] == "q2"
    grids = [key for _, key in site.log]
    assert "title#3" not in grids and grids.count("title#2") == 1
    assert grids.count("subject#3") == 1 and grids.count("keywords#3") == 1
    before = len(site.log)
    await continue_run(jobs, store, site, op_id)
    assert all(not key.startswith("title#") for _, key in site.log[before:])


async def test_a_listing_stopped_by_throttling_is_said_and_a_continue_finishes_it(jobs: Jobs, store: Store) -> None:
    site = FakeSite()
    site.failures["grid"]["title#2"] = "SITE_TEMPORARILY_EMPTY"  # non-fatal, once: the site throttled page 2
    request = search_request(max_pages=3, metadata="basic")
    view, op_id = await run_search(jobs, store, site, request)
    q2 = view["result"]["coverage"][1]
    assert view["status"] == "partial"
    assert view["result"]["incomplete_channels"] == ["q2"]
    assert (q2["pages"], q2["failed"], q2["error_code"], q2["exhausted"]) == (1, True, "SITE_TEMPORARILY_EMPTY", False)
    assert q2["total"] == 120  # page 1's total is kept, never overwritten with a zero
    before = len(site.log)
    second = await continue_run(jobs, store, site, op_id)
    assert second["status"] == "completed"
    assert site.log[before:] == [("grid", "title#2"), ("grid", "title#3")]
    assert "incomplete_channels" not in second["result"]
    assert [c["pages"] for c in second["result"]["coverage"]] == [3, 3, 3]


async def test_page_ones_total_stands_when_a_later_page_states_another(
    jobs: Jobs, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = FakeSite()
    listed = site.grid

    async def restated(op: OperationContext, query: Any, page: int) -> Any:
        async for answer in listed(op, query, page):
            yield msgspec.structs.replace(answer, total=7) if page > 1 else answer

    monkeypatch.setattr(site, "grid", restated)
    view, _ = await run_search(jobs, store, site, search_request(max_pages=2, metadata="basic"))
    coverage = view["result"]["coverage"]
    assert [(c["pages"], c["rows"], c["total"], c["exhausted"]) for c in coverage] == [(2, 40, 120, False)] * 3


async def test_year_filter_positions_and_rows(jobs: Jobs, store: Store) -> None:
    site = FakeSite()
    request = search_request(max_pages=1, metadata="basic", year_from=2023, year_to=2025)
    view, op_id = await run_search(jobs, store, site, request)
    coverage = view["result"]["coverage"]
    assert [c["rows"] for c in coverage] == [20, 20, 20]
    checkpoint = store.data.operations[op_id].checkpoint
    papers = [store.data.papers[ref] for ref in checkpoint["refs"]]
    assert papers and all(2023 <= p.year <= 2025 for p in papers)
    # Paper 3 is row 4 of q1's listing: rows 0–2 (years 2020–2022) were filtered but still count.
    hits = checkpoint["hits"][sim_paper(3).record_ref]
    assert hits == [{"channel": "q1", "position": 4, "weight": 1.0}]
    assert sim_paper(0).record_ref not in checkpoint["hits"]


async def test_metadata_basic_has_no_detail_and_no_feedback(jobs: Jobs, store: Store) -> None:
    site = FakeSite()
    view, _ = await run_search(jobs, store, site, search_request(metadata="basic"))
    assert site.counts == Counter({"grid": 15})
    result = view["result"]
    assert len(result["coverage"]) == 3 and result["selected_count"] == min(100, result["candidate_count"])


async def test_precise_mode_skips_feedback(jobs: Jobs, store: Store) -> None:
    site = FakeSite()
    request = msgspec.structs.replace(search_request(), mode="precise")
    view, _ = await run_search(jobs, store, site, request)
    assert site.counts["grid"] == 15 and site.counts["detail"] == 60
    assert len(view["result"]["coverage"]) == 3


async def test_candidate_target_stops_after_a_complete_round(jobs: Jobs, store: Store) -> None:
    site = FakeSite()
    view, _ = await run_search(jobs, store, site, search_request(candidate_target=50, metadata="basic"))
    assert [c["pages"] for c in view["result"]["coverage"]] == [1, 1, 1]
    assert view["result"]["candidate_count"] == 60


async def test_cancelled_search_stores_a_partial_record(jobs: Jobs, store: Store) -> None:
    site = FakeSite(latency=0.05)
    request = search_request()
    plan = plan_explicit(CONCEPTS)
    state = SearchState(search_id="", input=request, plan=plan, cache_key=cache_key(request, plan))
    job = jobs.start("search", search_budget(request), lambda op: search_operation(op, engine(store, site), state))
    while not site.log:
        await asyncio.sleep(0.01)
    view = await jobs.cancel(job.record.operation_id)
    assert view.status == "cancelled"
    record = store.data.searches[job.record.operation_id]
    assert record.status == "partial"
    assert not store.data.search_cache


# --- enrichment details ----------------------------------------------------------------------------


async def test_detail_freshness_refresh_and_relocation(jobs: Jobs, store: Store) -> None:
    site = FakeSite()
    stored = Catalog(store).upsert([sim_paper(i) for i in range(3)])
    refs = [p.record_ref for p in stored]

    async def work(op: OperationContext) -> dict[str, Any]:
        return await engine(store, site).metadata(op, refs, [], quality=False, refresh=False)

    view = await in_operation(jobs, work)
    assert view["status"] == "completed" and site.counts == Counter({"detail": 3})
    assert all(r["abstract"] == ABSTRACT for r in view["result"]["records"])
    assert all("locator" not in r for r in view["result"]["records"])

    await in_operation(jobs, work)  # fresh details: nothing asked
    assert site.counts == Counter({"detail": 3})

    site.failures["detail"][sim_paper(1).filename] = "LOCATOR_EXPIRED"

    async def refresh(op: OperationContext) -> dict[str, Any]:
        return await engine(store, site).metadata(op, refs[1:2], [], quality=False, refresh=True)

    view = await in_operation(jobs, refresh)
    assert view["status"] == "completed"
    # The failed load is relocated once by exact title and retried.
    assert [kind for kind, _ in site.log[3:]] == ["detail", "locate", "detail"]


@pytest.mark.parametrize("code", ["ACCESS_DENIED", "VERIFICATION_SKIPPED", "PARSER_UNSUPPORTED"])
async def test_failures_a_new_link_cannot_cure_are_not_relocated(jobs: Jobs, store: Store, code: str) -> None:
    site = FakeSite()
    refs = [p.record_ref for p in Catalog(store).upsert([sim_paper(i) for i in range(4)])]
    site.failures["detail"][sim_paper(2).filename] = code

    async def work(op: OperationContext) -> dict[str, Any]:
        return await engine(store, site).metadata(op, refs, [], quality=True, refresh=False)

    view = await in_operation(jobs, work)
    assert view["status"] == "partial" and len(view["result"]["records"]) == 4
    (error,) = view["errors"]
    assert error["code"] == code
    assert error["details"]["record_ref"] == refs[2] and error["details"]["stage"] == "detail"
    assert site.counts["locate"] == 0 and site.counts["detail"] == 4 and site.counts["journal"] == 3


async def test_journal_mismatch_is_remembered_for_an_hour(jobs: Jobs, store: Store) -> None:
    site = FakeSite()
    # Papers 0 and 15 share 法学期刊0, whose page shows another name.
    site.journal_titles["法学期刊0"] = "另一份期刊"
    refs = [p.record_ref for p in Catalog(store).upsert([sim_paper(0), sim_paper(15), sim_paper(1)])]

    async def work(op: OperationContext) -> dict[str, Any]:
        return await engine(store, site, workers=1).metadata(op, refs, [], quality=True, refresh=False)

    view = await in_operation(jobs, work)
    codes = [(e["code"], e["details"]["stage"]) for e in view["errors"]]
    assert codes == [("SOURCE_IDENTITY_UNCONFIRMED", "journal")] * 2
    assert Counter(key for kind, key in site.log if kind == "journal") == Counter({"法学期刊0": 1, "法学期刊1": 1})
    records = {r["record_ref"]: r for r in view["result"]["records"]}
    assert "quality" not in records[refs[0]] and records[refs[2]]["quality"]["tiers"] == ["CSSCI"]


async def test_journal_needs_a_locator_and_only_journals_have_one(jobs: Jobs, store: Store) -> None:
    thesis = msgspec.structs.replace(sim_paper(5), document_type="硕士")
    research = engine(store, FakeSite())

    async def work(op: OperationContext) -> Any:
        assert await research.quality(op, thesis) is None
        with pytest.raises(CnkiError) as missing:
            await research.quality(op, sim_paper(5))
        return missing.value.code

    view = await in_operation(jobs, work)
    assert view["result"] == "SOURCE_LOCATOR_MISSING" and view["requests"] == 0


async def test_budget_exhaustion_lets_requests_in_flight_land(jobs: Jobs, store: Store) -> None:
    site = FakeSite(latency=0.02)
    refs = [p.record_ref for p in Catalog(store).upsert([sim_paper(i) for i in range(30)])]

    async def work(op: OperationContext) -> Any:
        fatal = await engine(store, site).enrich(op, refs, "metadata", quality=False)
        return fatal and fatal.code

    job = jobs.start("metadata", Budget(max_requests=10, timeout_seconds=60), work)
    await within(job.done.wait(), 10)
    assert jobs.view(job).result == "BUDGET_EXHAUSTED"
    assert site.counts["detail"] == 10
    enriched = [ref for ref in refs if store.data.papers[ref].abstract]
    assert len(enriched) == 10  # every admitted request landed and was stored


# --- title resolution ------------------------------------------------------------------------------


async def test_resolve_titles_local_first_then_batches_of_ten(jobs: Jobs, store: Store) -> None:
    site = FakeSite()
    (local,) = Catalog(store).upsert([sim_paper(7)])
    twin = msgspec.structs.replace(sim_paper(8), record_ref="", filename="SIM8888", authors=["别人"])
    site.extra_papers.append(twin)
    titles = [sim_paper(7).title] + [sim_paper(i).title for i in range(8, 30)] + ["不存在的论文"]

    async def work(op: OperationContext) -> Any:
        refs, problems = await engine(store, site).resolve_titles(op, titles)
        return {"refs": refs, "problems": [msgspec.to_builtins(p) for p in problems]}

    view = await in_operation(jobs, work)
    result = view["result"]
    assert site.counts == Counter({"locate": 3})  # 23 remote titles → 10 + 10 + 3
    assert result["refs"][0] == local.record_ref and len(result["refs"]) == 1 + 21
    assert [(p["code"], p["details"]["title"]) for p in result["problems"]] == [
        ("IDENTITY_AMBIGUOUS", sim_paper(8).title),
        ("DOCUMENT_NOT_FOUND", "不存在的论文"),
    ]
    assert len(result["problems"][0]["details"]["record_refs"]) == 2


async def test_repeated_rows_of_one_paper_resolve_to_it(jobs: Jobs, store: Store) -> None:
    site = FakeSite()
    site.extra_papers.append(msgspec.structs.replace(sim_paper(9), record_ref="", cited=3))

    async def work(op: OperationContext) -> Any:
        refs, problems = await engine(store, site).resolve_titles(op, [sim_paper(9).title, sim_paper(9).title + " "])
        return {"refs": refs, "problems": len(problems)}

    view = await in_operation(jobs, work)
    assert view["result"] == {"refs": [sim_paper(9).record_ref], "problems": 0}
    assert store.data.papers[sim_paper(9).record_ref].cited == 3 and site.counts == Counter({"locate": 1})


async def test_best_effort_refresh_drops_record_errors(jobs: Jobs, store: Store) -> None:
    site = FakeSite()
    refs = [p.record_ref for p in Catalog(store).upsert([sim_paper(i) for i in range(3)])]
    site.failures["detail"][sim_paper(0).filename] = "ACCESS_DENIED"

    async def work(op: OperationContext) -> Any:
        fatal = await engine(store, site).enrich(op, refs, "metadata", quality=False, refresh=True, record_errors=False)
        return fatal is None

    view = await in_operation(jobs, work, kind="export", budget=export_citations.BUDGET.of())
    assert view["status"] == "completed" and view["result"] is True and site.counts == Counter({"detail": 3})


class _Ctx:
    client_supports_sampling = True

    def __init__(self, reply: str | None) -> None:
        self.reply = reply
        self.asked: list[tuple[str, str, int, float]] = []

    async def sample(self, system: str, user: str, max_tokens: int, timeout: float) -> str | None:
        self.asked.append((system, user, max_tokens, timeout))
        if self.reply == "never":
            raise TimeoutError
        return self.reply


@pytest.mark.parametrize(
    ("reply", "method", "concepts"),
    [
        ('[["自动驾驶", "无人驾驶"], ["产品责任"]]', "sampling", [["自动驾驶", "无人驾驶"], ["产品责任"]]),
        (None, "lexical", [["自动驾驶"], ["产品责任"]]),
        ("[]", "lexical", [["自动驾驶"], ["产品责任"]]),
        ('[["' + "长" * 81 + '"]]', "lexical", [["自动驾驶"], ["产品责任"]]),
    ],
)
async def test_planning_at_the_tool_entry(
    reply: str | None, method: str, concepts: list[list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    from cnki_mcp.research.pipeline import plan_search
    from cnki_mcp.surface.tools import parse_arguments

    monkeypatch.delenv("CNKI_INLINE_WAIT_SECONDS", raising=False)  # the default 40 s: planning waits 15 s
    args = parse_arguments("search", {"query": "自动驾驶 产品责任"})
    ctx = _Ctx(reply)
    plan = await plan_search(args.asked(), ctx)
    assert plan.method == method and plan.concepts == concepts
    assert bool(plan.warnings) == (method == "lexical")
    assert len(ctx.asked) == 1 and ctx.asked[0][1:] == ("自动驾驶 产品责任", 1200, 15.0)
    explicit = parse_arguments("search", {"query": "x", "concept_groups": [["甲"]]})
    assert (await plan_search(explicit.asked(), ctx)).method == "explicit" and len(ctx.asked) == 1


async def test_a_sampling_timeout_falls_back_to_lexical_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    from cnki_mcp.research.pipeline import plan_search
    from cnki_mcp.surface.tools import parse_arguments

    monkeypatch.setenv("CNKI_INLINE_WAIT_SECONDS", "10")
    ctx = _Ctx("never")
    plan = await plan_search(parse_arguments("search", {"query": "自动驾驶 产品责任"}).asked(), ctx)
    assert plan.method == "lexical"
    assert plan.concepts == [["自动驾驶"], ["产品责任"]]
    assert "4 秒内没有回复" in plan.warnings[0]
    assert ctx.asked[0][3] == 4.0


async def test_a_wait_for_a_throttled_site_is_shown_until_the_next_step_and_a_problem_beside_the_rows_recorded(
    jobs: Jobs,
) -> None:
    seen: list[tuple[str, dict[str, Any]]] = []

    class Throttled:
        async def grid(self, op: OperationContext, query: GridQuery, page: int) -> Any:
            yield Waiting(page, 5.0, 0.0)
            seen.append((job.record.stage, dict(job.record.progress)))  # the site waits here
            yield GridPage(problems=[CnkiError("SORT_NOT_APPLIED").problem()])

    async def work(op: OperationContext) -> GridPage:
        op.stage("retrieval", {"round": 1})
        page = await grid_page(Throttled(), op, GridQuery(compile_expression({"field": "title", "value": "x"})), 2)  # type: ignore[arg-type]
        seen.append((job.record.stage, dict(job.record.progress)))
        return page

    job = jobs.start("search", Budget(), work)
    await within(job.done.wait(), 5)
    assert seen == [
        ("waiting_for_site", {"page": 2, "wait_seconds": 5.0, "waited_seconds": 0.0}),
        ("retrieval", {"round": 1}),
    ]
    assert [e.code for e in job.record.errors] == ["SORT_NOT_APPLIED"]
