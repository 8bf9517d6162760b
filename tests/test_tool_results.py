"""Every tool declares what its ``run`` answers (``Result``), and the output schema generated from it, served in
``tools/list``, is an object schema (draft 2020-12) that the answers in progress, from the cache and of a failure
validate against (the e2e tests check every answer they receive against it too: ``harness.served_conforms``)."""

from __future__ import annotations

from typing import Any, get_args

import jsonschema
import msgspec
import msgspec.inspect as mi
import pytest

from cnki_mcp.core.errors import CnkiError, Failure
from cnki_mcp.core.model import BudgetView, LocalReply, OperationView, Problem
from cnki_mcp.surface import server
from cnki_mcp.tools import REGISTRY, output_schema
from tests.harness import SERVED_OUTPUT, conforms

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
    schema = SERVED_OUTPUT[name]
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["type"] == "object"
    assert schema == REGISTRY[name].output_schema


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_answers_in_progress_and_from_the_cache_validate(name: str) -> None:
    members = _members(REGISTRY[name].result)
    answers = [answer for answer in (RUNNING, FAILED, CACHED) if type(answer) in members]
    for answer in answers:
        conforms(name, msgspec.to_builtins(answer))
    if OperationView in members:
        conforms(name, {**msgspec.to_builtins(RUNNING), "warnings": [msgspec.to_builtins(Problem(code="STORE_SAVE_FAILED", message="未保存"))]})


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_every_failure_validates(name: str) -> None:
    """The ``isError`` answers, as ``server.failure`` writes them (some clients check those too)."""
    error = CnkiError("INVALID_INPUT", "参数不对", details={"field": "limit"})
    conforms(name, server.failure(error).structured_content)
    error.warnings = [Problem(code="STORE_NOT_SAVED", message="未保存")]
    conforms(name, server.failure(error).structured_content)
    with pytest.raises(jsonschema.ValidationError):
        conforms(name, {"status": "failed", "errors": [{"code": "X"}]})  # a problem has a message


def test_a_union_is_one_object_with_each_members_required_fields() -> None:
    schema = output_schema(OperationView | LocalReply)
    assert schema["type"] == "object"
    view, local = schema["anyOf"]
    assert view["required"] == ["operation_id", "kind", "status", "requests", "active_seconds", "budget"]
    assert schema["properties"]["budget"]["required"] == ["max_requests", "timeout_seconds"]
    assert local["required"] == ["source", "result"]
    assert schema["properties"]["requests"] == {"type": "integer"}
    assert "result" not in schema["properties"]  # any value: nothing to say
    # A Struct met twice (Problem: both members' errors) is written once.
    assert schema["properties"]["errors"] == {"type": "array", "items": {"$ref": "#/$defs/Problem"}}
    assert schema["$defs"]["Problem"]["required"] == ["code", "message"]
    with pytest.raises(jsonschema.ValidationError):
        conforms("search", {"status": "running"})


def test_a_name_two_members_type_differently_accepts_both() -> None:
    class Counted(msgspec.Struct):
        n: int

    class Named(msgspec.Struct):
        n: str | None

    schema = output_schema(Counted | Named | dict[str, Any])
    assert schema == {"type": "object", "properties": {"n": {"anyOf": [{"type": "integer"}, {"type": ["string", "null"]}]}}}


def test_a_result_that_is_not_an_object_is_refused() -> None:
    with pytest.raises(TypeError):
        output_schema(list[str])


def _example(kind: mi.Type, *, full: bool, option: int = 0) -> Any:
    """A value of ``kind``: every field (``full``) or only the required ones, a union's ``option``-th type."""
    if isinstance(kind, mi.Metadata):
        return _example(kind.type, full=full, option=option)
    scalars = {mi.StrType: "字", mi.IntType: 1, mi.FloatType: 1.5, mi.BoolType: True, mi.NoneType: None}
    if type(kind) in scalars:
        return scalars[type(kind)]
    if isinstance(kind, mi.LiteralType):
        return kind.values[option % len(kind.values)]
    if isinstance(kind, mi.ListType | mi.VarTupleType | mi.SetType | mi.FrozenSetType):
        return [_example(kind.item_type, full=full, option=option)]
    if isinstance(kind, mi.DictType):
        return {"k": _example(kind.value_type, full=full, option=option)}
    if isinstance(kind, mi.StructType):
        return {f.encode_name: _example(f.type, full=full, option=option) for f in kind.fields if full or f.required}
    if isinstance(kind, mi.UnionType):
        return _example(kind.types[option % len(kind.types)], full=full, option=option)
    return {"any": ["value"]}


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_every_member_of_every_result_validates_with_all_or_only_its_required_fields(name: str) -> None:
    """Answers made from each member's type (each union option in turn), checked by msgspec against the Struct
    first so that they are answers ``run`` could give."""
    for member in (*_members(REGISTRY[name].result), Failure):
        info = mi.type_info(member)
        for full in (True, False):
            for option in range(3):
                answer = _example(info, full=full, option=option)
                msgspec.convert(answer, member)
                conforms(name, answer)
