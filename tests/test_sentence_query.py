"""句子检索's pure rules: the sentence leaf checked (site/grid_query.py), written as senquery's QueryJson and
form, and its answer read (pages/parse.py) with each row's sentence."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cnki_mcp.core.errors import CnkiError
from cnki_mcp.pages.parse import parse_grid
from cnki_mcp.research.query import structured_query
from cnki_mcp.site.grid_query import (
    GridQuery,
    Sentence,
    compile_expression,
    grid_form,
    listing_url,
    rewrite_query_json,
    sentence_of,
)

LEAF = {"field": "sentence", "value": "大语言模型", "value2": "医学影像"}
TEMPLATE = {"QNode": {"QGroup": [{"Key": "Subject", "Items": [], "ChildItems": []}]}, "SearchType": 1}
SAMPLE = Path(__file__).parent / "fixtures" / "cnki-samples" / "azazo1-brief-senquery-fragment.trimmed.html"


def test_sentence_leaf_alone() -> None:
    assert sentence_of(LEAF) == Sentence("大语言模型", "医学影像", "sentence")
    assert sentence_of({**LEAF, "scope": "paragraph"}) == Sentence("大语言模型", "医学影像", "paragraph")
    assert compile_expression(LEAF) == []
    assert sentence_of({"field": "title", "value": "x"}) is None


@pytest.mark.parametrize(("expression", "code"), [
    ({"op": "and", "items": [LEAF, {"field": "title", "value": "模型"}]}, "INVALID_EXPRESSION"),
    ({"op": "or", "items": [LEAF, LEAF]}, "INVALID_EXPRESSION"),
    ({"op": "not", "items": [LEAF]}, "INVALID_EXPRESSION"),
    ({"field": "sentence", "value": "大语言模型"}, "INVALID_CONDITION"),
    ({**LEAF, "value2": "  "}, "INVALID_CONDITION"),
    ({**LEAF, "value": "长" * 121}, "INVALID_CONDITION"),
    ({**LEAF, "scope": "chapter"}, "INVALID_CONDITION"),
    ({**LEAF, "match": "exact"}, "INVALID_CONDITION"),
    ({"field": "title", "value": "x", "value2": "y"}, "INVALID_CONDITION"),
    ({"field": "title", "value": "x", "scope": "sentence"}, "INVALID_CONDITION"),
])
def test_refused_before_any_request(expression: dict[str, Any], code: str) -> None:
    with pytest.raises(CnkiError) as raised:
        structured_query(expression)
    assert raised.value.code == code


def test_senquery_request() -> None:
    sentence = Sentence("大语言模型", "医学影像", "paragraph")
    query_json = rewrite_query_json(TEMPLATE, [], sentence=sentence)
    assert query_json["SearchType"] == 5
    assert query_json["QNode"]["QGroup"][0]["Items"] == [{
        "Key": "sentence0", "Title": "同段", "Logic": 0, "Field": "FT", "Operator": "NEAR",
        "Value": "大语言模型", "Value2": "医学影像"}]
    form = grid_form({"QueryJson": "{}"}, query_json, sentence=True)
    assert form["sentenceSearch"] == "true"
    assert grid_form({"QueryJson": "{}"}, query_json)["sentenceSearch"] == "false"
    grid = "https://kns.cnki.net/kns8s/brief/grid"
    assert listing_url(grid, GridQuery([], sentence=sentence)) == "https://kns.cnki.net/kns8s/brief/senquery"
    assert listing_url(grid, GridQuery([])) == grid


def test_senquery_answer_carries_the_sentence() -> None:
    page = parse_grid(SAMPLE.read_text(encoding="utf-8"), "https://kns.cnki.net/kns8s/brief/senquery")
    (row,) = page.rows
    assert page.total == 79
    assert row.sentence == "大语言模型在数学推理、代码生成、医学影像诊断等领域展现出能力。"
    assert (row.title, row.authors, row.source) == ("人工智能时代人才能力的重构与培育研究", ["何彦杰", "倪凯"], "科技创业月刊")
