"""check_references on an in-process App over the backend-level fake CNKI: batching, request counts,
failed lookups, the budget."""

from __future__ import annotations

import asyncio
from pathlib import Path

import msgspec
import pytest

from cnki_mcp.app import App
from cnki_mcp.core.identity import record_ref_for
from cnki_mcp.core.model import Paper
from cnki_mcp.references.reflist import ENTRY_CHARS_MAX
from tests.fake_site import FakeSite, sim_paper
from tests.harness import call_tool


@pytest.fixture
def site() -> FakeSite:
    return FakeSite()


@pytest.fixture
async def app(isolated_data_dir: Path, site: FakeSite):
    application = App(isolated_data_dir, site_factory=lambda: site)
    yield application
    await application.close()


def line(i: int, *, year: int | None = None) -> str:
    paper = sim_paper(i)
    return f"{paper.authors[0]}. {paper.title}[J]. {paper.source}, {year or paper.year}."


def distinct(i: int) -> Paper:
    """A paper whose title shares no phrase with the others."""
    paper = msgspec.structs.replace(sim_paper(500 + i), title=f"违约金{'甲乙丙丁戊己庚辛壬癸'[i % 10]}{'子丑寅'[i // 10]}类型研究")
    paper.record_ref = record_ref_for(paper)
    return paper


async def test_twenty_five_titles_take_three_title_requests_and_one_detail_each(app: App, site: FakeSite) -> None:
    site.extra_papers = [distinct(i) for i in range(25)]
    references = [f"{p.authors[0]}. {p.title}[J]. {p.source}, {p.year}." for p in site.extra_papers]

    reply = await call_tool(app, "check_references", {"references": references})

    assert reply["status"] == "completed"
    assert reply["result"]["summary"] == {"total": 25, "lines": 0, "verified": 25, "differs": 0, "not_found": 0,
                                          "ambiguous": 0, "unparsed": 0, "unchecked": 0}
    assert dict(site.counts) == {"locate": 3, "detail": 25}
    assert reply["requests"] == 28


async def test_a_second_check_reuses_the_details(app: App, site: FakeSite) -> None:
    await call_tool(app, "check_references", {"references": [line(1), line(2)]})

    reply = await call_tool(app, "check_references", {"references": [line(1, year=2000), line(2)]})

    assert [e["status"] for e in reply["result"]["entries"]] == ["differs", "verified"]
    assert dict(site.counts) == {"locate": 2, "detail": 2}


async def test_a_failed_lookup_leaves_its_entries_unchecked_and_says_what_to_do(app: App, site: FakeSite) -> None:
    site.failures["locate"]["自动驾驶产品责任研究"] = "SITE_TEMPORARILY_EMPTY"

    reply = await call_tool(app, "check_references", {"references": [line(3), "见第三章"]})

    entries = reply["result"]["entries"]
    assert [e["status"] for e in entries] == ["unchecked", "unparsed"]
    assert entries[0]["message"].startswith("查找时出错（SITE_TEMPORARILY_EMPTY）")
    assert "再调用一次 check_references" in entries[0]["message"]
    assert reply["result"]["summary"]["unchecked"] == 1


async def test_a_failure_that_stops_every_lookup_ends_the_operation_without_a_result(app: App, site: FakeSite) -> None:
    site.failures["locate"]["自动驾驶产品责任研究"] = "RATE_LIMITED"

    reply = await call_tool(app, "check_references", {"references": [line(3)]})

    assert (reply["status"], reply["errors"][0]["code"], "result" in reply) == ("partial", "RATE_LIMITED", False)


async def test_entries_with_one_phrase_share_one_lookup_and_keep_their_order(app: App, site: FakeSite) -> None:
    reply = await call_tool(app, "check_references", {"text": f"[1] {line(5)}\n[2] {line(5, year=2001)}\n[3] {line(6)}"})

    assert [(e["index"], e["status"]) for e in reply["result"]["entries"]] == [(1, "verified"), (2, "differs"), (3, "verified")]
    assert site.log[0] == ("locate", "自动驾驶产品责任研究")


async def test_a_list_without_any_title_never_reaches_cnki(app: App, site: FakeSite) -> None:
    reply = await call_tool(app, "check_references", {"text": "参考文献\n[1] 见第三章\n[2] 同上，第45页。"})

    assert (reply["status"], reply["requests"], site.log, [e["status"] for e in reply["result"]["entries"]]) == (
        "completed", 0, [], ["unparsed", "unparsed"]
    )


async def test_a_pasted_list_says_how_many_entries_it_read_from_how_many_lines(app: App, site: FakeSite) -> None:
    first, second = line(5), line(6)
    cut = first.index(", ") + 2
    text = f"参考文献\n[1] {first[:cut]}\n{first[cut:]}\n\n见第三章\n{second}\n"

    reply = await call_tool(app, "check_references", {"text": text})

    result = reply["result"]
    assert [(e["input"], e["status"]) for e in result["entries"]] == [
        (f"[1] {first}", "verified"), ("见第三章", "unparsed"), (second, "verified")
    ]
    assert (result["summary"]["total"], result["summary"]["lines"]) == (3, 4)


async def test_the_worst_entry_never_holds_up_the_other_clients(app: App, site: FakeSite) -> None:
    worst = "(2020," * 87_000  # the red team's entry, under the input cap
    stalls: list[float] = []
    running = True

    async def ticker() -> None:  # what a ping alongside waits: how late each 10 ms tick comes
        loop = asyncio.get_running_loop()
        while running:
            before = loop.time()
            await asyncio.sleep(0.01)
            stalls.append(loop.time() - before - 0.01)

    ticks = asyncio.create_task(ticker())
    reply = await call_tool(app, "check_references", {"references": [worst, line(1)]})
    running = False
    await ticks

    entry = reply["result"]["entries"][0]
    assert entry["status"] == "unparsed"
    assert f"上限 {ENTRY_CHARS_MAX} 个字符" in entry["message"]
    assert reply["result"]["entries"][1]["status"] == "verified"
    assert max(stalls) < 0.25, max(stalls)
    print(f"longest event-loop stall beside the worst entry: {max(stalls) * 1000:.0f} ms")
