"""The typed query (research.query.Query): what a search asks, read and compiled once at the tool's entry,
kept in the search's checkpoint, and a checkpoint from before it was kept still continuing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest

from cnki_mcp.app import App
from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.tool_args import ExpertSearchArgs, SearchArgs, StructuredSearchArgs
from cnki_mcp.research import expert
from cnki_mcp.research.pipeline import SearchState
from cnki_mcp.research.query import (
    ConceptQuery,
    ExpertQuery,
    Query,
    SentenceQuery,
    StructuredQuery,
    compiled_of,
    query_of,
)
from cnki_mcp.site import grid_query
from cnki_mcp.site.grid_query import CompiledQuery, Condition, GridQuery, Sentence
from tests.fake_site import FakeSite
from tests.harness import call_tool

TITLES = {"op": "and", "items": [{"field": "title", "value": "自动驾驶"}, {"field": "title", "value": "产品责任"}]}
SENTENCE = {"field": "sentence", "value": "大语言模型", "value2": "医学影像", "scope": "paragraph"}


def test_each_tool_reads_its_own_kind() -> None:
    concepts = query_of(SearchArgs(query="自动驾驶 产品责任", concept_groups=[["自动驾驶"]]))
    assert concepts == ConceptQuery(text="自动驾驶 产品责任", groups=[["自动驾驶"]])
    assert compiled_of(concepts) is None  # each of its channels is compiled by the run

    structured = query_of(StructuredSearchArgs(expression=TITLES))
    assert structured == StructuredQuery(
        expression=TITLES, branches=[[Condition("title", "自动驾驶"), Condition("title", "产品责任")]]
    )
    assert compiled_of(structured) == CompiledQuery(branches=structured.branches)

    sentence = query_of(StructuredSearchArgs(expression=SENTENCE))
    assert sentence == SentenceQuery(expression=SENTENCE, sentence=Sentence("大语言模型", "医学影像", "paragraph"))
    assert compiled_of(sentence) == CompiledQuery(sentence=Sentence("大语言模型", "医学影像", "paragraph"))

    professional = query_of(ExpertSearchArgs(expression="ti=a or ti=b and au=c"))
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
        query_of(args)
    assert raised.value.code == code
    assert raised.value.details == details


@pytest.mark.parametrize("query", [
    ConceptQuery(text="自动驾驶"),
    query_of(StructuredSearchArgs(expression=TITLES)),
    query_of(StructuredSearchArgs(expression=SENTENCE)),
    query_of(ExpertSearchArgs(expression="TI=a NOT AU=b")),
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


# --- through the tools: compiled once, kept, and an old checkpoint still continuing ------------------------


@pytest.fixture
async def site() -> FakeSite:
    return FakeSite()


@pytest.fixture
async def app(isolated_data_dir: Path, site: FakeSite):
    application = App(isolated_data_dir, site_factory=lambda: site)
    yield application
    await application.close()


@pytest.fixture
def compiles(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every condition tree compiled (grid_query's DNF walk), every professional expression read."""
    seen: list[Any] = []
    tree, parse = grid_query._compile_tree, expert.parse

    def counted_tree(node: Any) -> Any:
        seen.append(node)
        return tree(node)

    def counted_parse(text: str) -> Any:
        seen.append(text)
        return parse(text)

    monkeypatch.setattr(grid_query, "_compile_tree", counted_tree)
    monkeypatch.setattr(expert, "parse", counted_parse)
    return seen


async def test_structured_search_compiles_its_tree_once(app: App, site: FakeSite, compiles: list[Any]) -> None:
    # A NOT inside an OR has no structured professional form: the summary's one comes from the compiled branches.
    either = {"op": "or", "items": [{"field": "title", "value": "自动驾驶"}, {"op": "not", "items": [{"field": "title", "value": "综述"}]}]}
    expression = {"op": "and", "items": [either, {"field": "title", "value": "产品责任"}]}
    view = await call_tool(app, "structured_search", {"expression": expression, "year_from": 2021, "limit": 50})
    assert view["status"] == "completed" and len(site.queries) > 1  # several pages, one compilation
    assert len(compiles) == 1
    assert view["result"]["expert_expression"] == expert.from_structured(expression) != ""
    checkpoint = (await app.store()).data.operations[view["operation_id"]].checkpoint
    assert msgspec.convert(checkpoint, SearchState).query == query_of(StructuredSearchArgs(expression=expression))


async def test_expert_search_reads_its_expression_once(
    app: App, site: FakeSite, compiles: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(site, "_listing", lambda query: ("expert", site.lists["title"]))  # the fake lists branches only
    view = await call_tool(app, "expert_search", {"expression": "TI=自动驾驶", "limit": 50})
    assert view["status"] == "completed" and {q.expert for q in site.queries} == {"TI='自动驾驶'"}
    assert compiles == ["TI=自动驾驶"]


async def test_a_checkpoint_without_the_query_still_continues(app: App, site: FakeSite, compiles: list[Any]) -> None:
    first = await call_tool(app, "structured_search", {"expression": TITLES, "year_from": 2021, "limit": 50,
                                                       "options": {"max_requests": 2}})
    op_id = first["operation_id"]
    assert first["status"] == "partial" and len(compiles) == 1
    store = await app.store()
    record = store.data.operations[op_id]
    record.checkpoint.pop("query")  # as a version before the typed query wrote it
    store.put_operation(record)
    before = list(site.queries)
    done = await call_tool(app, "operation_control", {"action": "continue", "operation_id": op_id})
    assert done["status"] == "completed" and done["result"]["search_id"] == op_id
    assert len(compiles) == 2  # the resumed run compiled its one channel once, from the stored plan
    assert {(q.branches[0][0].value, q.year_from) for q in site.queries[len(before):]} == {("自动驾驶", 2021)}
