"""expert_search end to end: the real MCP client, `python -m cnki_mcp serve`, headless Chromium, the simulator.

One server process (and so one browser) serves the whole module. Expected lists come from the simulator's
oracle applied to advanced-form QueryJsons written by hand from each expression's meaning (AND, OR and NOT
left to right, as CNKI's help says), so neither the product's reader nor the simulator's is the judge of
itself.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from mcp.types import TextContent

from tests.harness import held_client, serve_params
from tests.kns.server import KnsSimulator, SimRequest
from tests.test_e2e_structured import NARROW, NARROW_ORACLE, SURNAMES, Mcp, _item, grid_posts, oracle_query

pytestmark = [pytest.mark.browser, pytest.mark.asyncio(loop_scope="module")]

SURNAME_WORDS = "+".join(f"'{name}'" for name in SURNAMES)
# NARROW of the structured tests, written as CNKI's own expression by hand: 18 rows, one page.
NARROW_EXPRESSION = f"(TI % '知识图谱' OR TI % '数字经济') AND AU % ({SURNAME_WORDS}) NOT TI % '研究'"
# OR then AND without brackets: read left to right it is 62 rows (two pages of 50); the other
# reading (AND first) would be 296.
FIVE = SURNAMES[:5]
MIXED_EXPRESSION = "TI % '的' OR TI % '数字经济' AND AU % ('王'+'张'+'李'+'刘'+'陈') NOT TI % '违约金'"
MIXED_ORACLE = oracle_query(
    [[_item("TI", topic), _item("AU", name), _item("TI", "违约金", 2)] for topic in ("的", "数字经济") for name in FIVE],
    1900,
    2100,
)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def mcp(kns_server: KnsSimulator, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Mcp]:
    data = tmp_path_factory.mktemp("expert") / "data"
    async with held_client(serve_params(data, kns_server.browser_args)) as client:
        yield Mcp(client, data)


async def expert_search(mcp: Mcp, arguments: dict[str, Any]) -> dict[str, Any]:
    return await mcp.wait(await mcp.call("expert_search", {"options": {"freshness": "live"}, **arguments}))


async def filenames(mcp: Mcp, search_id: str) -> list[str]:
    return [record["filename"] for record in await mcp.records(search_id)]


def sent_query(request: SimRequest) -> dict[str, Any]:
    return json.loads(request.form["QueryJson"])


async def test_an_expression_lists_the_oracle_records_in_order(mcp: Mcp, kns: KnsSimulator) -> None:
    expected = [paper.filename for paper in kns.expected(NARROW_ORACLE, "PT")]

    view = await expert_search(mcp, {"expression": NARROW_EXPRESSION, "year_from": 2015, "year_to": 2025, "sort": "date_desc"})
    result = view["result"]
    (request,) = grid_posts(kns)
    subject = sent_query(request)["QNode"]["QGroup"][0]

    assert view["status"] == "completed"
    assert await filenames(mcp, result["search_id"]) == expected
    assert len(expected) == 18
    assert result["expert_expression"] == NARROW_EXPRESSION
    assert result["plan"]["method"] == "expert"
    assert "warnings" not in result["plan"]
    assert subject["Items"][0]["Field"] == "EXPERT"
    assert subject["Items"][0]["Value"] == NARROW_EXPRESSION
    assert sent_query(request)["SearchType"] == 4
    assert request.form["aside"] == "(" + NARROW_EXPRESSION.replace("'", "&#39;") + ")"
    assert request.form["sortField"] == "PT"


async def test_or_before_and_reads_left_to_right_over_two_pages(mcp: Mcp, kns: KnsSimulator) -> None:
    expected = [paper.filename for paper in kns.expected(MIXED_ORACLE)]

    view = await expert_search(mcp, {"expression": MIXED_EXPRESSION, "limit": 100})
    result = view["result"]
    pages = [request.form["pageNum"] for request in grid_posts(kns)]

    assert view["status"] == "completed"
    assert await filenames(mcp, result["search_id"]) == expected
    assert len(expected) == 62
    assert pages == ["1", "2"]
    assert result["expert_expression"] == (
        "(TI % '的' OR TI % '数字经济') AND AU % ('王'+'张'+'李'+'刘'+'陈') NOT TI % '违约金'"
    )
    assert len(result["plan"]["warnings"]) == 1
    assert "第 1 个字符" in result["plan"]["warnings"][0]


async def test_an_invalid_expression_is_refused_without_a_request(mcp: Mcp, kns: KnsSimulator) -> None:
    reply = await mcp.client.call_tool("expert_search", {"expression": "SU=('数字经济'+'数字化转型') AND (AU='张三'"})
    error = json.loads("".join(part.text for part in reply.content if isinstance(part, TextContent)))["errors"][0]

    assert reply.is_error
    assert error["code"] == "INVALID_EXPRESSION"
    assert error["details"] == {"position": 25}
    assert "第 25 个字符" in error["message"]
    assert "括号" in error["message"]
    assert kns.requests == []


async def test_an_expression_the_site_refuses_comes_back_in_its_words(mcp: Mcp, kns: KnsSimulator) -> None:
    kns.configure(expert_year="refused")

    view = await expert_search(mcp, {"expression": "SU %= '法' AND YE = '2020'"})
    (error,) = view["errors"]
    snapshot = mcp.data / "diagnostics" / error["details"]["cause"]["snapshot"]

    assert view["status"] == "partial"
    assert error["code"] == "QUERY_REJECTED"
    assert "专业检索表达式有误：不支持的检索字段 YE" in error["message"]
    assert "不支持的检索字段 YE" in snapshot.read_text(encoding="utf-8")
    assert view["result"]["candidate_count"] == 0
    assert len(grid_posts(kns)) == 1


async def test_structured_searches_give_an_expression_that_finds_the_same_records(mcp: Mcp, kns: KnsSimulator) -> None:
    structured = await mcp.search({"expression": NARROW, "year_from": 2015, "year_to": 2025, "sort": "cited_desc"})
    expression = structured["result"]["expert_expression"]

    view = await expert_search(mcp, {"expression": expression, "year_from": 2015, "year_to": 2025, "sort": "cited_desc"})

    assert view["status"] == "completed"
    assert await filenames(mcp, view["result"]["search_id"]) == await filenames(mcp, structured["result"]["search_id"])
    assert view["result"]["expert_expression"] == expression
    assert expression.startswith("(TI % '知识图谱' OR TI % '数字经济') AND (AU % '王' OR AU % '张'")

