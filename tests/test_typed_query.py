"""The typed query (research.query.Query): what a search asks, read and compiled once at the tool's entry
(through the tools: tests/test_search_tool.py)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from cnki_mcp.core.errors import CnkiError
from cnki_mcp.research.query import (
    ConceptQuery,
    ExpertQuery,
    Query,
    SentenceQuery,
    StructuredQuery,
    compiled_of,
)
from cnki_mcp.site.grid_query import CompiledQuery, Condition, GridQuery, Sentence
from cnki_mcp.tools.expert_search import Args as ExpertSearchArgs
from cnki_mcp.tools.search import Args as SearchArgs
from cnki_mcp.tools.structured_search import Args as StructuredSearchArgs

TITLES = {"op": "and", "items": [{"field": "title", "value": "自动驾驶"}, {"field": "title", "value": "产品责任"}]}
SENTENCE = {"field": "sentence", "value": "大语言模型", "value2": "医学影像", "scope": "paragraph"}


def test_each_tool_reads_its_own_kind() -> None:
    concepts = SearchArgs(query="自动驾驶 产品责任", concept_groups=[["自动驾驶"]]).asked()
    assert concepts == ConceptQuery(text="自动驾驶 产品责任", groups=[["自动驾驶"]])
    assert compiled_of(concepts) is None  # each of its channels is compiled by the run

    structured = StructuredSearchArgs(expression=TITLES).asked()
    assert structured == StructuredQuery(
        expression=TITLES, branches=[[Condition("title", "自动驾驶"), Condition("title", "产品责任")]]
    )
    assert compiled_of(structured) == CompiledQuery(branches=structured.branches)

    sentence = StructuredSearchArgs(expression=SENTENCE).asked()
    assert sentence == SentenceQuery(expression=SENTENCE, sentence=Sentence("大语言模型", "医学影像", "paragraph"))
    assert compiled_of(sentence) == CompiledQuery(sentence=Sentence("大语言模型", "医学影像", "paragraph"))

    professional = ExpertSearchArgs(expression="ti=a or ti=b and au=c").asked()
    assert isinstance(professional, ExpertQuery)
    assert professional.canonical == "(TI='a' OR TI='b') AND AU='c'" and len(professional.warnings) == 1
    assert compiled_of(professional) == CompiledQuery(expert=professional.canonical)


@pytest.mark.parametrize(("args", "code", "details"), [
    (ExpertSearchArgs(expression="TI='a' AND"), "INVALID_EXPRESSION", {"position": 8}),
    (StructuredSearchArgs(expression={"field": "title", "value": "x", "fields": "y"}), "INVALID_EXPRESSION", None),
    (StructuredSearchArgs(expression={"op": "or", "items": [{"field": "title", "value": "a"},
                                                            {"op": "not", "items": [{"field": "title", "value": "b"}]}]}),
     "UNBOUNDED_QUERY", None),
    (StructuredSearchArgs(expression={"op": "and", "items": [SENTENCE, {"field": "title", "value": "x"}]}),
     "INVALID_EXPRESSION", {"field": "sentence"}),
])
def test_a_bad_expression_is_refused_with_the_same_error(args: Any, code: str, details: dict[str, Any] | None) -> None:
    with pytest.raises(CnkiError) as raised:
        args.asked()
    assert raised.value.code == code
    assert raised.value.details == details


@pytest.mark.parametrize("query", [
    ConceptQuery(text="自动驾驶"),
    StructuredSearchArgs(expression=TITLES).asked(),
    StructuredSearchArgs(expression=SENTENCE).asked(),
    ExpertSearchArgs(expression="TI=a NOT AU=b").asked(),
])
def test_the_query_round_trips_through_json_and_builtins(query: Query) -> None:
    encoded = msgspec.json.encode(query)
    assert msgspec.json.decode(encoded)["kind"] in {"concepts", "structured", "sentence", "expert"}
    assert msgspec.json.decode(encoded, type=Query) == query  # type: ignore[arg-type]
    assert msgspec.convert(msgspec.to_builtins(query), Query) == query  # type: ignore[arg-type]  # the checkpoint's way


def test_the_grid_query_of_a_compiled_query_carries_it_whole() -> None:
    compiled = CompiledQuery(sentence=Sentence("a", "b"))
    assert GridQuery.of(compiled, 2020, 2024, "date_desc") == GridQuery([], 2020, 2024, "date_desc", sentence=Sentence("a", "b"))
    assert GridQuery.of(CompiledQuery(expert="TI='a'")).expert == "TI='a'"
