"""The schema generator of ``cnki_mcp.tools`` and the Meta rules of its argument parsing."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
import pytest
from msgspec import Meta

from cnki_mcp.core.errors import CnkiError
from cnki_mcp.tools import REGISTRY, Budget, input_schema, output_schema
from cnki_mcp.tools._parse import parse


class Inner(msgspec.Struct):
    label: str


class Options(msgspec.Struct, forbid_unknown_fields=True):
    pages: Annotated[int, Meta(ge=1, le=4, extra={"code": "INVALID_OPTION"})] = 2


class Example(msgspec.Struct, forbid_unknown_fields=True):
    name: Annotated[str, Meta(description="名称")]
    mode: Annotated[Literal["b", "a"], Meta(description="方式", extra={"code": "INVALID_MODE", "empty_means_default": True})] = "b"
    count: Annotated[int, Meta(ge=1, le=9, extra={"code": "INVALID_LIMIT", "empty_means_default": True})] = 5
    wait: Annotated[int, Meta(ge=0, le=3, extra={"clamp": "both"})] = 0
    extra: Annotated[int, Meta(ge=0, le=7, extra={"code": "INVALID_OPTION", "clamp": "low"})] = 0
    offset: Annotated[int, Meta(ge=0, extra={"code": "INVALID_OFFSET"})] = 0
    tags: list[str] = []
    flag: bool = False
    tree: Annotated[dict[str, Any], Meta(description="条件树")] = {}
    options: Options = msgspec.field(default_factory=Options)


class Result(msgspec.Struct):
    total: int
    items: list[Inner]
    note: str | None = None


def test_input_schema_of_a_struct() -> None:
    schema = input_schema(Example)
    properties = schema["properties"]
    assert schema["additionalProperties"] is False
    assert schema["type"] == "object"
    assert schema["required"] == ["name"]
    assert list(properties) == sorted(properties)
    assert properties["name"] == {"description": "名称", "type": "string"}
    assert properties["mode"] == {"description": "方式", "enum": ["b", "a"], "type": "string"}
    assert properties["count"] == {"type": "integer"}
    assert properties["tags"] == {"items": {"type": "string"}, "type": ["null", "array"]}
    assert properties["flag"] == {"type": "boolean"}
    assert properties["options"] == {"additionalProperties": False, "properties": {"pages": {"type": "integer"}}, "type": "object"}
    assert properties["tree"] == {"additionalProperties": True, "description": "条件树", "type": "object"}


def test_output_schema_of_a_result_struct() -> None:
    schema = output_schema(Result)
    assert schema["type"] == "object"
    assert "additionalProperties" not in schema
    assert schema["required"] == ["total", "items"]
    assert schema["properties"]["total"] == {"type": "integer"}
    assert schema["properties"]["items"] == {"items": {"properties": {"label": {"type": "string"}}, "required": ["label"], "type": "object"}, "type": "array"}
    assert schema["properties"]["note"] == {"type": ["string", "null"]}  # nullable scalars as a type list


def _error(raw: dict[str, object]) -> CnkiError:
    with pytest.raises(CnkiError) as caught:
        parse(Example, None, raw)
    return caught.value


def test_meta_rules_fill_defaults_and_clamp() -> None:
    args = parse(Example, None, {"name": "n", "mode": "", "count": 0, "wait": 9, "extra": -4, "tags": None})
    assert args == Example(name="n", mode="b", count=5, wait=3, extra=0, tags=[])


def test_meta_rules_raise_the_field_code_with_a_chinese_message() -> None:
    assert (_error({"name": "n", "mode": "c"}).code, _error({"name": "n", "mode": "c"}).message) == ("INVALID_MODE", "mode 只能是 b、a，收到的是 'c'。")
    assert _error({"name": "n", "count": 10}).message == "count 须在 1–9 之间，收到的是 10。"
    assert _error({"name": "n", "count": 10}).code == "INVALID_LIMIT"
    assert _error({"name": "n", "extra": 8}).message == "extra 最多 7，收到的是 8。"
    assert _error({"name": "n", "offset": -1}).message == "offset 不能为负数，收到的是 -1。"
    assert _error({"name": "n", "offset": -1}).details == {"field": "offset"}


def test_rules_run_in_field_order_after_the_types() -> None:
    assert _error({"name": "n", "offset": -1, "mode": "c"}).code == "INVALID_MODE"
    assert _error({"name": "n", "mode": "c", "flag": "yes"}).code == "INVALID_INPUT"
    assert _error({"mode": "a"}).message == "缺少必填参数 name。"


def test_a_nested_struct_is_checked_with_its_path() -> None:
    assert parse(Example, None, {"name": "n", "options": {"pages": None}}).options == Options(pages=2)
    assert parse(Example, None, {"name": "n"}).options == Options(pages=2)
    assert _error({"name": "n", "options": {"pages": 5}}).message == "options.pages 须在 1–4 之间，收到的是 5。"
    assert _error({"name": "n", "options": {"pages": 5}}).code == "INVALID_OPTION"
    assert _error({"name": "n", "options": {"size": 5}}).message == "未知参数 options.size。可用参数：pages。"


def test_tools_are_discovered_with_their_budget() -> None:
    assert {"diagnostics", "login", "operation_control", "operation_status", "search_results", "session_status"} <= set(REGISTRY)
    assert REGISTRY["login"].budget == Budget(requests=20, seconds=1800)
    assert REGISTRY["login"].budget.of("ask").on_verification == "ask"
    assert REGISTRY["diagnostics"].needs_config is False
