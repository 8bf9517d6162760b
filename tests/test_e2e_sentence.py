"""End to end: 句子检索 through structured_search's sentence leaf, the real MCP client over stdio, a headless
Chromium and the simulator's ``kns8s/brief/senquery`` (tests/kns/senquery.py, whose ``matches`` is the oracle)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.harness import chromium_path
from tests.kns import senquery
from tests.kns.server import KnsSimulator
from tests.test_e2e_documents import error_code, serve

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.timeout(300),
    pytest.mark.skipif(chromium_path() is None, reason="没有可用的 Chromium"),
]

TERMS = ("大语言模型", "显著影响")


def oracle(sim: KnsSimulator, operator: str) -> list[tuple[str, str]]:
    item = {"Value": TERMS[0], "Value2": TERMS[1], "Operator": operator}
    return [(p.title, text.strip()) for p, text in senquery.matches(sim.corpus, item)]


async def test_sentence_search(kns: KnsSimulator, isolated_data_dir: Path) -> None:
    same_sentence, same_paragraph = oracle(kns, "SENTENCE"), oracle(kns, "NEAR")
    assert senquery.PAGE_SIZE < len(same_sentence) <= 2 * senquery.PAGE_SIZE < len(same_paragraph)
    leaf = {"field": "sentence", "value": TERMS[0], "value2": TERMS[1]}
    async with serve(isolated_data_dir, kns) as session:
        # Combined with another leaf: refused before any request.
        combined = await session.call("structured_search", {
            "expression": {"op": "and", "items": [leaf, {"field": "title", "value": "模型"}]}})
        assert error_code(combined) == "INVALID_EXPRESSION", combined
        assert kns.counts == {}

        # One sentence (the default scope): both pages of senquery, each row with its sentence.
        reply = await session.wait(await session.call("structured_search", {
            "expression": leaf, "limit": 100, "options": {"metadata": "basic", "freshness": "live"}}))
        assert reply["status"] == "completed", reply
        result = reply["result"]
        assert [(r["title"], r["sentence"]) for r in result["results"]] == same_sentence
        assert "expert_expression" not in result  # no professional-search form is claimed for it
        posts = [r for r in kns.requests if r.endpoint == "senquery"]
        assert [p.form["pageNum"] for p in posts] == ["1", "2"]
        assert kns.count("grid") == 1  # only the template click's own listing
        assert all(p.form["sentenceSearch"] == "true" for p in posts)
        query = json.loads(posts[0].form["QueryJson"])
        assert query["SearchType"] == 5
        (subject,) = [g for g in query["QNode"]["QGroup"] if g["Key"] == "Subject"]
        assert subject["Items"] == [{"Key": "sentence0", "Title": "同一句", "Logic": 0, "Field": "FT",
                                     "Operator": "SENTENCE", "Value": TERMS[0], "Value2": TERMS[1]}]
        assert reply["requests"] == 1 + 1 + 2  # the search page, the template click, two senquery pages

        # The records carry it too (search_results), and one paragraph finds more.
        rows = await session.call("search_results", {"search_id": result["search_id"], "view": "records", "limit": 100})
        assert [r["record"]["sentence"] for r in rows["results"]] == [text for _, text in same_sentence]
        wide = await session.wait(await session.call("structured_search", {
            "expression": {**leaf, "scope": "paragraph"}, "limit": 100,
            "options": {"metadata": "basic", "freshness": "live"}}))
        assert [(r["title"], r["sentence"]) for r in wide["result"]["results"]] == same_paragraph
