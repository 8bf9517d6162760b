"""Every tool declares what its ``run`` answers (``Result``), and the output schema generated from it is an object
schema (draft 2020-12) that the answers in progress and from the cache validate against."""

from __future__ import annotations

from typing import Any, get_args

import jsonschema
import msgspec
import pytest

from cnki_mcp.core.model import BudgetView, LocalReply, OperationView, Problem
from cnki_mcp.tools import REGISTRY, output_schema
from tests.harness import conforms

RUNNING = OperationView(
    operation_id="op_1", kind="search", status="running", stage="list", progress={"done": 1, "total": 3},
    requests=2, active_seconds=1.5, budget=BudgetView(max_requests=100, timeout_seconds=600),
)
FAILED = OperationView(
    operation_id="op_2", kind="read", status="failed", requests=0, active_seconds=0.0,
    budget=BudgetView(max_requests=10, timeout_seconds=60, on_verification="ask"),
    errors=[Problem(code="DOCUMENT_NOT_FOUND", message="没有找到")],
)
CACHED = LocalReply(source="cache", requests=0, result={"search_id": "s_1"})


def _members(result: Any) -> tuple[Any, ...]:
    return get_args(result) or (result,)


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_every_tool_has_a_result_and_an_object_output_schema(name: str) -> None:
    spec = REGISTRY[name]
    schema = spec.output_schema
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["type"] == "object"
    assert all(member["type"] == "object" for member in schema.get("anyOf", [schema]))


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_answers_in_progress_and_from_the_cache_validate(name: str) -> None:
    members = _members(REGISTRY[name].result)
    answers = [answer for answer in (RUNNING, FAILED, CACHED) if type(answer) in members]
    for answer in answers:
        conforms(name, msgspec.to_builtins(answer))
    if OperationView in members:
        conforms(name, {**msgspec.to_builtins(RUNNING), "warnings": [msgspec.to_builtins(Problem(code="STORE_SAVE_FAILED", message="未保存"))]})


def test_a_union_is_any_of_its_objects() -> None:
    schema = output_schema(OperationView | LocalReply)
    view, local = schema["anyOf"]
    assert schema["type"] == "object"
    assert view["required"] == ["operation_id", "kind", "status", "requests", "active_seconds", "budget"]
    assert view["properties"]["budget"]["required"] == ["max_requests", "timeout_seconds"]
    assert local["required"] == ["source", "result"]
    assert local["properties"]["requests"] == {"type": "integer"}
    with pytest.raises(jsonschema.ValidationError):
        conforms("search", {"status": "running"})


def test_a_result_that_is_not_an_object_is_refused() -> None:
    with pytest.raises(TypeError):
        output_schema(list[str])
