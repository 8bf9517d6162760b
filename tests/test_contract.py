"""The MCP surface as a contract: tool schemas, annotations, prompts, guide, and the result envelope.

Everything here runs in-process (mcp's ``Client(server)``) against ``build_server`` with small test
doubles of the app, so the envelope is checked independently of which tools work yet.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, get_args

import msgspec
import pytest
from mcp import Client, MCPError
from mcp.types import (
    CreateMessageRequestParams,
    CreateMessageResult,
    ErrorData,
    ListToolsResult,
    TextContent,
)

from cnki_mcp import __version__
from cnki_mcp.core import model, refcheck_model, tool_args
from cnki_mcp.core.clock import within
from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.model import Problem
from cnki_mcp.site import grid_query
from cnki_mcp.surface import server
from cnki_mcp.surface.tools import REGISTRY
from cnki_mcp.tools import _searching, operation_control, search_results
from cnki_mcp.tools import search as search_tool

CHECKER = Path(__file__).resolve().parents[2] / "shared" / "tools" / "contract_check.py"
# The reference server's tools/list answer: its 13 tools must be served exactly as it serves them.
REFERENCE = Path(__file__).parent / "fixtures" / "contract" / "tool-schema.json"
HINTS = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")
READ_ONLY = {
    "check_references",
    "search",
    "search_facets",
    "structured_search",
    "expert_search",
    "search_results",
    "get_metadata",
    "related_papers",
    "journal_issues",
    "author_papers",
    "read_online_html",
    "link_references",
    "session_status",
    "operation_status",
    "diagnostics",
}
CLOSED_WORLD = {"search_results", "operation_status", "diagnostics"}
REQUIRED = {
    "search": ["query"],
    "structured_search": ["expression"],
    "expert_search": ["expression"],
    "search_results": ["search_id"],
    "link_references": ["text"],
    "operation_control": ["action"],
    "author_papers": ["author"],
    "watch": ["action"],
}


def tools_document() -> dict[str, Any]:
    return ListToolsResult(tools=server.TOOLS).model_dump(mode="json", by_alias=True, exclude_none=True)


def by_name() -> dict[str, dict[str, Any]]:
    return {t["name"]: t for t in tools_document()["tools"]}


# --- the contract check the project is measured by -------------------------------------------------


def schema_differences(path: str, reference: dict[str, Any], served: dict[str, Any]) -> list[str]:
    """Where ``served`` departs from ``reference`` (descriptions aside); a new optional property or a new
    enum value is an addition, not a difference."""
    found = []
    for key in ("type", "additionalProperties"):
        if key in reference and reference[key] != served.get(key):
            found.append(f"{path}: {key} {reference[key]!r} != {served.get(key)!r}")
    if "enum" in reference and not set(reference["enum"]) <= set(served.get("enum") or []):
        found.append(f"{path}: enum {reference['enum']} not all served")
    if sorted(reference.get("required", [])) != sorted(served.get("required", [])):
        found.append(f"{path}: required {reference.get('required', [])} != {served.get('required', [])}")
    ours = served.get("properties", {})
    for name, schema in reference.get("properties", {}).items():
        if name not in ours:
            found.append(f"{path}.{name}: missing")
        else:
            found += schema_differences(f"{path}.{name}", schema, ours[name])
    if "items" in reference:
        found += schema_differences(f"{path}[]", reference["items"], served.get("items", {}))
    return found


def test_the_reference_tools_are_served_exactly() -> None:
    reference = {t["name"]: t for t in json.loads(REFERENCE.read_text(encoding="utf-8"))["tools"]}
    served = by_name()

    differences = []
    for name, tool in reference.items():
        if name not in served:
            differences.append(f"{name}: not served")
            continue
        hints = {hint: tool["annotations"].get(hint) for hint in HINTS}
        if hints != {hint: served[name].get("annotations", {}).get(hint) for hint in HINTS}:
            differences.append(f"{name}: annotations differ")
        differences += schema_differences(name, tool["inputSchema"], served[name]["inputSchema"])

    assert len(reference) == 13
    assert differences == []


@pytest.mark.skipif(not CHECKER.exists(), reason="the shared contract checker is not beside this checkout")
def test_contract_check_reports_no_mismatch(tmp_path: Path) -> None:
    dump = tmp_path / "tools.json"
    dump.write_text(json.dumps(tools_document(), ensure_ascii=False), encoding="utf-8")
    run = subprocess.run([sys.executable, str(CHECKER), str(dump)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"{len(REGISTRY)} served, 0 mismatches" in run.stdout


async def test_schema_document_is_what_tools_list_serves() -> None:
    document = await server.schema_document()
    assert document["tools"] == tools_document()["tools"]
    served_by = {"name": "cnki", "version": __version__, "icons": [server.ICON.model_dump(exclude_none=True)]}
    assert document["_meta"]["io.modelcontextprotocol/serverInfo"] == served_by


# --- the same rules, checked without the reference file --------------------------------------------


def test_tools_sorted_by_name() -> None:
    names = [t.name for t in server.TOOLS]
    assert names == sorted(names) == sorted(REGISTRY)


def test_the_tools_named_here_exist() -> None:
    """The hints and required lists above name real tools (a renamed or removed tool fails here)."""
    assert READ_ONLY | CLOSED_WORLD | set(REQUIRED) <= set(REGISTRY)


def _described(schema: Any, names: set[str], texts: list[str], enums: set[str]) -> None:
    """Every property name, description and enum value within ``schema``."""
    if isinstance(schema, dict):
        for key, value in schema.items():
            if key == "properties" and isinstance(value, dict):
                names |= set(value)
            elif key == "description" and isinstance(value, str):
                texts.append(value)
            elif key == "enum":
                enums |= {str(v) for v in value}
            _described(value, names, texts, enums)
    elif isinstance(schema, list):
        for item in schema:
            _described(item, names, texts, enums)


def test_every_name_a_description_writes_is_defined() -> None:
    """A description names another tool as plain text: every snake_case name in a description or an argument's
    description is a tool, an argument, an enum value, a result field or a structured-search field, so a renamed
    or removed tool cannot linger in another tool's text."""
    names: set[str] = set()
    texts: list[str] = []
    enums: set[str] = set()
    for spec in REGISTRY.values():
        texts.append(spec.description)
        _described(spec.schema, names, texts, enums)
    modules = [model, refcheck_model, *(sys.modules[f"cnki_mcp.tools.{name}"] for name in REGISTRY)]
    results = {
        f.encode_name
        for module in modules
        for kind in vars(module).values()
        if isinstance(kind, type) and issubclass(kind, msgspec.Struct)
        for f in msgspec.structs.fields(kind)
    }
    known = set(REGISTRY) | names | enums | results | set(grid_query.FIELDS)
    written = {name for text in texts for name in re.findall(r"(?<![\w.=])[a-z][a-z0-9]*(?:_[a-z0-9]+)+", text)}
    assert written - known == set()
    assert {"related_papers", "operation_status", "structured_search"} <= written  # the cross-references are read


def _readme_section(name: str, heading: str) -> str:
    text = (Path(__file__).resolve().parents[1] / name).read_text(encoding="utf-8")
    return text.split(heading, 1)[1].split("\n## ", 1)[0]


def test_the_readmes_list_every_tool() -> None:
    """README.md's table and README.en.md's list of tools are written by hand: they name exactly the registry."""
    section = _readme_section("README.md", "## 工具\n")
    assert f"共 {len(REGISTRY)} 个工具" in section
    assert set(re.findall(r"^\| `([a-z_]+)` \|", section, flags=re.MULTILINE)) == set(REGISTRY)
    english = _readme_section("README.en.md", "## Tools\n")
    assert set(REGISTRY) <= set(re.findall(r"`([a-z_]+)`", english))


def test_annotations_carry_all_four_hints() -> None:
    for name, tool in by_name().items():
        hints = tool["annotations"]
        assert hints == {
            "readOnlyHint": name in READ_ONLY,
            "destructiveHint": False,
            "idempotentHint": False,
            "openWorldHint": name not in CLOSED_WORLD,
        }, name


def test_every_tool_has_its_title_output_schema_and_icon() -> None:
    for name, tool in by_name().items():
        assert tool["title"] == REGISTRY[name].title and any("\u4e00" <= ch <= "\u9fff" for ch in tool["title"]), name
        assert tool["outputSchema"] == REGISTRY[name].output_schema, name
        assert tool["icons"] == [{"src": server.ICON.src}], name
    assert server.ICON.src.startswith("data:image/svg+xml,<svg ")


def _walk_objects(schema: dict[str, Any], path: str) -> list[tuple[str, dict[str, Any]]]:
    found = []
    if schema.get("type") == "object":
        found.append((path, schema))
    for key, sub in schema.get("properties", {}).items():
        found += _walk_objects(sub, f"{path}.{key}")
    return found


def test_objects_reject_unknown_properties_except_the_expression() -> None:
    for name, tool in by_name().items():
        for path, obj in _walk_objects(tool["inputSchema"], name):
            # watch.arguments: the watched tool's own arguments, checked by that tool's rules
            expected = path in ("structured_search.expression", "search_facets.expression", "watch.arguments")
            assert obj["additionalProperties"] is expected, path


def test_required_lists_and_chinese_descriptions() -> None:
    for name, tool in by_name().items():
        assert tool["inputSchema"].get("required", []) == REQUIRED.get(name, []), name
        assert any("\u4e00" <= ch <= "\u9fff" for ch in tool["description"]), name


def _struct_shape(kind: type[msgspec.Struct]) -> set[str]:
    return {f.encode_name for f in msgspec.structs.fields(kind)}


def test_schema_properties_match_the_argument_structs() -> None:
    """What the schema advertises is exactly what tools.parse_arguments accepts."""
    for name, tool in by_name().items():
        properties = tool["inputSchema"].get("properties", {})
        assert set(properties) == _struct_shape(REGISTRY[name].arguments), name
        if "options" in properties:
            # Only search expands through the citation graph; the others' validators refuse options.expand.
            expected = _struct_shape(_searching.SearchOptions) - ({"expand"} if name != "search" else set())
            assert set(properties["options"]["properties"]) == expected, name


def test_enums_match_the_validation_rules() -> None:
    tools = by_name()
    search = tools["search"]["inputSchema"]["properties"]
    assert search["mode"]["enum"] == list(search_tool.MODES)
    options = search["options"]["properties"]
    assert options["metadata"]["enum"] == list(_searching.METADATA)
    assert options["freshness"]["enum"] == list(_searching.FRESHNESS)
    assert options["sort"]["enum"] == list(_searching.SORTS)
    assert options["on_verification"]["enum"] == list(tool_args.POLICIES)
    assert tools["export_citations"]["inputSchema"]["properties"]["format"]["enum"] == list(tool_args.CITATION_FORMATS)
    assert tools["export_citations"]["inputSchema"]["properties"]["scope"]["enum"] == list(tool_args.SCOPES)
    assert tools["operation_control"]["inputSchema"]["properties"]["action"]["enum"] == list(get_args(operation_control.Action))
    assert search["concept_groups"]["type"] == ["null", "array"]
    assert search["concept_groups"]["items"]["type"] == ["null", "array"]


def test_every_integer_and_boolean_is_plain() -> None:
    """Ranges live in the handlers, not in the schema (no minimum/maximum/default keywords)."""
    for name, tool in by_name().items():
        for _, obj in _walk_objects(tool["inputSchema"], name):
            for key, prop in obj.get("properties", {}).items():
                assert not {"minimum", "maximum", "default"} & set(prop), f"{name}.{key}"


# --- identity, instructions, guide, prompts --------------------------------------------------------


async def test_identity_instructions_and_guide_resource() -> None:
    async with Client(server.build_server(None), mode="legacy") as client:
        assert client.server_info is not None
        assert (client.server_info.name, client.server_info.version) == ("cnki", __version__)
        assert client.instructions == server.instructions_text()
        assert server.guide_text().startswith(server.instructions_text().strip() + "\n\n---\n")
        assert client.server_info.icons == [server.ICON]
        listed = (await client.list_resources()).resources
        assert [(str(r.uri), r.name, r.mime_type) for r in listed] == [("cnki://guide", "guide", "text/plain")]
        read = await client.read_resource("cnki://guide")
        assert len(read.contents) == 1
        content = read.contents[0]
        assert (str(content.uri), content.mime_type, content.text) == ("cnki://guide", "text/plain", server.guide_text())
        with pytest.raises(MCPError):
            await client.read_resource("cnki://nothing")


async def test_resource_templates_are_an_empty_list_since_resources_are_advertised() -> None:
    async with Client(server.build_server(None), mode="legacy") as client:
        templates = await client.list_resource_templates()
    assert templates.resource_templates == []


def test_search_results_names_every_tool_that_returns_a_search_id() -> None:
    described = by_name()["search_results"]["inputSchema"]["properties"]["search_id"]["description"]
    assert described == "search、structured_search 或 expert_search 返回的 search_id"


def test_guide_covers_the_workflow() -> None:
    guide = server.guide_text()
    for topic in (
        "structured_search",
        "concept_groups",
        "search_results",
        "get_metadata",
        "read_online_html",
        "download_paper",
        "export_citations",
        "link_references",
        "check_references",
        "operation_status",
        "wait_seconds=55",
        "awaiting_user",
        "record_ref",
        'action="recover"',
        'action="continue"',
        'action="show"',
        "BROWSER_UNAVAILABLE",
        "SIDE_EFFECT_UNCERTAIN",
        "isError",
        "warnings",
        "STORE_NOT_SAVED",
        "CONFIG_INVALID",
    ):
        assert topic in guide, topic
    assert "不是指令" in guide  # page and paper content are evidence, never instructions


async def test_prompts_are_exact() -> None:
    async with Client(server.build_server(None)) as client:
        prompts = {p.name: p for p in (await client.list_prompts()).prompts}
        assert set(prompts) == {"research_topic", "literature_review"}
        for prompt in prompts.values():
            assert [(a.name, a.required) for a in prompt.arguments or []] == [("topic", True)]
        research = await client.get_prompt("research_topic", {"topic": "竞业限制违约金"})
        review = await client.get_prompt("literature_review", {"topic": "分层作业"})
        with pytest.raises(MCPError):
            await client.get_prompt("research_topic", {})
        with pytest.raises(MCPError):
            await client.get_prompt("summary", {"topic": "x"})
    assert len(research.messages) == 1 and research.messages[0].role == "user"
    assert research.messages[0].content.text == "深度检索以下研究问题：竞业限制违约金"
    assert review.messages[0].content.text == "基于实际取得的论文摘要和来源写文献综述，逐项链接证据：分层作业"
    assert prompts["research_topic"].description == "深度检索以下研究问题"


# --- the result envelope -----------------------------------------------------------------------------


class FakeApp:
    """Answers with whatever ``answer`` returns; records every call it receives."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.calls: list[tuple[str, msgspec.Struct]] = []
        self.contexts: list[server.CallContext] = []

    async def call(self, handler: Any, args: msgspec.Struct, ctx: server.CallContext, *, needs_config: bool = True) -> Any:
        # The App method the registry names, or a tool module's run.
        tool = handler.__module__.rpartition(".")[2] if handler.__name__ == "run" else handler.__name__
        self.calls.append((tool, args))
        self.contexts.append(ctx)
        return await self.answer(tool, args, ctx)


def decoded(result: Any) -> dict[str, Any]:
    assert len(result.content) == 1 and isinstance(result.content[0], TextContent)
    data = json.loads(result.content[0].text)
    assert data == result.structured_content
    return data


async def test_success_is_compact_json_text_plus_the_same_structured_object() -> None:
    async def answer(tool: str, args: Any, ctx: Any) -> Any:
        page = {"search_id": "op_1", "scope": "selected", "total": 0, "offset": 0, "next_offset": None, "results": []}
        return {**page, "status": "completed", "title": "论《民法典》违约金 <b>&", "n": 3, "args": msgspec.to_builtins(args)}

    app = FakeApp(answer)
    async with Client(server.build_server(app)) as client:
        result = await client.call_tool("search_results", {"search_id": "op_1"})
    assert result.is_error is False
    text = result.content[0].text
    assert " " not in text.replace("论《民法典》违约金 <b>&", "")  # compact separators
    assert "论《民法典》违约金" in text  # UTF-8 kept, not \u-escaped
    data = decoded(result)
    assert data["args"] == {"search_id": "op_1", "scope": "selected", "view": "titles", "offset": 0, "limit": 50}
    tool, args = app.calls[0]
    assert tool == "search_results" and isinstance(args, search_results.Args)


async def test_struct_results_are_encoded_with_their_field_names() -> None:
    async def answer(tool: str, args: Any, ctx: Any) -> Any:
        return Problem(code="X", message="结构体")

    # session_status may answer any object (a dict): the client's check of its output schema lets a Problem by.
    async with Client(server.build_server(FakeApp(answer))) as client:
        result = await client.call_tool("session_status", {})
    assert decoded(result) == {"code": "X", "message": "结构体"}


async def test_invalid_arguments_never_reach_the_app() -> None:
    async def answer(tool: str, args: Any, ctx: Any) -> Any:
        raise AssertionError("the app must not be called")

    app = FakeApp(answer)
    async with Client(server.build_server(app)) as client:
        result = await client.call_tool("search", {"query": "物理", "options": {"metadata": "full"}})
        with pytest.raises(MCPError) as unknown:
            await client.call_tool("no_such_tool", {})
    assert result.is_error is True
    data = decoded(result)
    assert data["status"] == "failed"
    assert [e["code"] for e in data["errors"]] == ["INVALID_METADATA"]
    assert "options.metadata" in data["errors"][0]["message"]
    # An unknown tool is a JSON-RPC error (-32602), as the specification asks, not a tool result.
    assert unknown.value.error.code == -32602
    assert unknown.value.error.data == {"code": "UNKNOWN_TOOL", "details": {"tool": "no_such_tool"}}
    assert app.calls == []


async def test_app_errors_become_failed_results() -> None:
    async def answer(tool: str, args: Any, ctx: Any) -> Any:
        if tool == "search_results":
            raise CnkiError("SEARCH_NOT_FOUND", details={"search_id": args.search_id})
        if tool == "operation_status":
            raise ConnectionResetError("connection reset by peer")
        if tool == "session_status":
            return ["not", "an", "object"]
        raise ValueError("unexpected 内部错误")

    async with Client(server.build_server(FakeApp(answer))) as client:
        missing = decoded(await client.call_tool("search_results", {"search_id": "missing"}))
        transport = decoded(await client.call_tool("operation_status", {}))
        shape = decoded(await client.call_tool("session_status", {}))
        crash = await client.call_tool("diagnostics", {})
        again = await client.call_tool("search_results", {"search_id": "still-up"})
    assert missing == {
        "status": "failed",
        "errors": [{"code": "SEARCH_NOT_FOUND", "message": "没有找到这个 search_id 对应的检索记录。", "details": {"search_id": "missing"}}],
    }
    assert transport["errors"][0]["code"] == "BROWSER_UNAVAILABLE" and transport["errors"][0]["retryable"] is True
    assert shape["errors"][0]["code"] == "OPERATION_FAILED"
    assert crash.is_error is True
    assert decoded(crash)["errors"][0] == {"code": "OPERATION_FAILED", "message": "任务执行失败：unexpected 内部错误"}
    assert decoded(again)["errors"][0]["details"] == {"search_id": "still-up"}


async def test_unexpected_exceptions_are_logged_with_traceback(caplog: pytest.LogCaptureFixture) -> None:
    async def answer(tool: str, args: Any, ctx: Any) -> Any:
        raise KeyError("lost")

    with caplog.at_level(logging.ERROR, logger="cnki_mcp.surface.server"):
        async with Client(server.build_server(FakeApp(answer))) as client:
            result = await client.call_tool("diagnostics", {})
    assert result.is_error is True
    record = next(r for r in caplog.records if r.name == "cnki_mcp.surface.server")
    assert record.exc_info is not None and "diagnostics" in record.getMessage()


async def test_unserialisable_error_details_still_answer() -> None:
    async def answer(tool: str, args: Any, ctx: Any) -> Any:
        raise CnkiError("OPERATION_STATE", details={"handle": object()})

    async with Client(server.build_server(FakeApp(answer))) as client:
        result = await client.call_tool("diagnostics", {})
    assert decoded(result)["errors"] == [{"code": "OPERATION_STATE", "message": "任务当前的状态不允许这个操作。"}]


async def test_discovery_only_server_refuses_calls_after_validating() -> None:
    async with Client(server.build_server(None)) as client:
        invalid = decoded(await client.call_tool("search", {"query": ""}))
        refused = decoded(await client.call_tool("diagnostics", {}))
    assert invalid["errors"][0]["code"] == "INVALID_QUERY"
    assert refused["errors"][0]["code"] == "OPERATION_FAILED"


# --- CallContext: progress and sampling --------------------------------------------------------------


async def test_progress_reaches_the_client_increasing_and_stops_after_the_call() -> None:
    async def answer(tool: str, args: Any, ctx: server.CallContext) -> Any:
        await ctx.report_progress(1, 3, "列表")
        await ctx.report_progress(1, 3, "重复的不发")
        await ctx.report_progress(2, 3, "详情")
        return {"status": "completed"}

    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    app = FakeApp(answer)
    for mode in ("auto", "legacy"):
        seen.clear()
        async with Client(server.build_server(app), mode=mode) as client:
            await client.call_tool("session_status", {}, progress_callback=on_progress)
        assert seen == [(1, 3, "列表"), (2, 3, "详情")], mode
    # A job that outlives its call must not write into a finished request.
    await app.contexts[-1].report_progress(3, 3, "之后")
    assert seen == [(1, 3, "列表"), (2, 3, "详情")]


async def test_context_without_request_is_inert() -> None:
    ctx = server.CallContext(None)
    assert ctx.client_supports_sampling is False
    await ctx.report_progress(1)
    assert await ctx.sample("system", "user", 10, 1.0) is None


async def test_sampling_through_a_legacy_client() -> None:
    requests: list[CreateMessageRequestParams] = []

    async def sampling(context: Any, params: CreateMessageRequestParams) -> CreateMessageResult:
        requests.append(params)
        return CreateMessageResult(role="assistant", content=TextContent(type="text", text='[["违约金"]]'), model="m")

    async def answer(tool: str, args: Any, ctx: server.CallContext) -> Any:
        reply = await ctx.sample("你是检索规划助手", args.query, 1200, 5.0)
        return {"source": "cache", "result": {"supported": ctx.client_supports_sampling, "reply": reply}}

    async with Client(server.build_server(FakeApp(answer)), mode="legacy", sampling_callback=sampling) as client:
        data = decoded(await client.call_tool("search", {"query": " 违约金调整 "}))["result"]
    assert data == {"supported": True, "reply": '[["违约金"]]'}
    (params,) = requests
    assert params.system_prompt == "你是检索规划助手" and params.max_tokens == 1200
    assert params.include_context == "none"
    assert [m.content.text for m in params.messages] == ["违约金调整"]


async def test_sampling_falls_back_to_none() -> None:
    async def refuse(context: Any, params: CreateMessageRequestParams) -> ErrorData:
        return ErrorData(code=-32600, message="用户拒绝")

    async def answer(tool: str, args: Any, ctx: server.CallContext) -> Any:
        return {"supported": ctx.client_supports_sampling, "reply": await ctx.sample("s", "u", 10, 5.0)}

    app = FakeApp(answer)
    async with Client(server.build_server(app), mode="legacy", sampling_callback=refuse) as client:
        refused = decoded(await client.call_tool("session_status", {}))
    async with Client(server.build_server(app), mode="legacy") as client:
        undeclared = decoded(await client.call_tool("session_status", {}))
    assert refused == {"supported": True, "reply": None}
    assert undeclared == {"supported": False, "reply": None}


async def test_sampling_that_is_never_answered_times_out_with_progress() -> None:
    async def never(context: Any, params: CreateMessageRequestParams) -> CreateMessageResult:
        await asyncio.sleep(3600)
        raise AssertionError("unreachable")

    async def answer(tool: str, args: Any, ctx: server.CallContext) -> Any:
        ctx.SAMPLING_PROGRESS_SECONDS = 0.2
        try:
            await ctx.sample("s", "u", 10, 1.0)
        except TimeoutError:
            return {"timed_out": True}
        return {"timed_out": False}

    seen: list[str | None] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(message)

    async with Client(server.build_server(FakeApp(answer)), mode="legacy", sampling_callback=never) as client:
        data = decoded(await within(client.call_tool("session_status", {}, progress_callback=on_progress), 10))
    assert data == {"timed_out": True}
    assert len(seen) >= 2
    assert all("等待客户端模型" in (message or "") for message in seen)
