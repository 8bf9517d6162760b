"""Hardening, bad input: thousands of generated argument objects through the real MCP client.

One ``python -m cnki_mcp serve`` per module, on a temporary data directory, spoken to over stdio by
the SDK's client. No browser can start (``CNKI_BROWSER_PATH`` names a missing file), so the calls that
would reach CNKI start an operation that ends at once with a coded error. Strategies are derived from
the input schemas the server advertises (``server.TOOLS``):

* schema-valid objects: a well-formed answer (JSON text equal to the structured content) or an
  ``isError`` answer whose codes are all declared in ``errors.CATALOGUE``;
* structurally invalid objects (unknown fields, wrong types, missing required fields): ``INVALID_INPUT``;
* out-of-range numbers and unknown enum values: the precise documented code;
* expression trees, valid and not, shallow and deep: an operation, or an expression code;
* odd Unicode (RTL marks, NUL, emoji, combining marks, CJK) everywhere a string goes.

The raw tests speak JSON-RPC line by line to a second server and feed it garbage, truncated JSON,
invalid UTF-8, lone surrogates, huge lines and over-deep nesting: the server keeps answering, and
every line that is not a usable message gets its JSON-RPC error within a second.
At module end the server must still be alive, exit cleanly on EOF and have logged no unexpected
exception. ``COUNTS`` holds the figures docs/hardening.md quotes.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any, get_args

import psutil
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp.types import CallToolResult

from cnki_mcp.core import tool_args
from cnki_mcp.core.errors import CATALOGUE
from cnki_mcp.core.text import is_blank
from cnki_mcp.site import grid_query
from cnki_mcp.surface import server
from cnki_mcp.tools import _searching, operation_control, search, search_results
from tests.harness import (
    INIT_PARAMS,
    RawServer,
    ThreadedClient,
    offline_params,
    payload,
)

SCHEMAS: dict[str, dict[str, Any]] = {tool.name: tool.input_schema for tool in server.TOOLS}
STATUSES = {"completed", "partial", "failed", "skipped", "cancelled", "running", "awaiting_user", "interrupted", "idle"}
COUNTS: Counter[str] = Counter()  # calls, errors, operations … across the module
SETTINGS = settings(deadline=None, suppress_health_check=list(HealthCheck), database=None)


# --- the server under test -------------------------------------------------------------------------


def stderr_problems(path: Path) -> list[str]:
    """Lines that mean an exception escaped a handler (the server answers, but something was untyped)."""
    text = path.read_text(encoding="utf-8", errors="replace")
    return [line for line in text.splitlines() if "failed unexpectedly" in line or "Traceback" in line]


@pytest.fixture(scope="module")
def mcp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedClient]:
    root = tmp_path_factory.mktemp("hardening-input")
    stderr = root / "stderr.txt"
    instance = ThreadedClient(offline_params(root / "data"), stderr).start()
    yield instance
    assert instance.alive(), "the server died during the generated calls"
    pid = instance.pid
    instance.close()
    COUNTS["calls"] += instance.calls
    with pytest.raises(psutil.NoSuchProcess):
        psutil.Process(pid).wait(10)
    assert stderr_problems(stderr) == []
    assert not (root / "data" / "browser" / "profile").exists()  # no browser ever started
    print(f"\nhardening input: {dict(COUNTS)}")


# --- answers ------------------------------------------------------------------------------------------


def answer(result: CallToolResult) -> dict[str, Any]:
    """The structured answer after checking it is well-formed; records which kind it was."""
    data = payload(result)
    assert isinstance(data, dict)
    if result.is_error:
        COUNTS["isError"] += 1
        assert data["status"] == "failed", data
        assert data["errors"], data
    elif "operation_id" in data:
        COUNTS["operations"] += 1
    status = data.get("status")
    assert status is None or status in STATUSES, data
    for problem in data.get("errors") or []:
        assert problem["code"] in CATALOGUE, problem
        assert isinstance(problem["message"], str), problem
        assert problem["message"].strip(), problem
        assert problem["code"] != "OPERATION_FAILED", problem  # an untyped failure is a bug
    return data


def codes(data: dict[str, Any]) -> list[str]:
    return [problem["code"] for problem in data.get("errors") or []]


def expect_error(result: CallToolResult, *allowed: str) -> str:
    data = answer(result)
    assert result.is_error, data
    (code,) = codes(data)
    assert code in allowed, (code, allowed, data)
    return code


# --- strategies from the schemas --------------------------------------------------------------------

ODD = [
    "\u202e", "\u200f", "\u200e", "\u2066", "\x00", "\x07", "\ufeff", "\u200b", "😀", "👩‍🔬", "🇨🇳",
    "e\u0301", "\u0301", "\u0f0b", "《", "》", "“", "”", "\\", "/", "..", "%00", "{", "}", "\u3000", "\U0002a700",
]
odd_pieces = st.one_of(
    st.characters(blacklist_categories=("Cs",)),
    st.sampled_from(ODD),
    st.characters(min_codepoint=0x4E00, max_codepoint=0x9FFF),
)


def odd_text(min_size: int = 0, max_size: int = 40) -> st.SearchStrategy[str]:
    """Strings made of odd pieces (some pieces are several code points: ZWJ emoji, flags, combining)."""
    return st.lists(odd_pieces, min_size=min_size, max_size=max_size).map("".join)


texts = odd_text()
# A few huge strings around the documented limits (1000 runes, 512 KB), rarely drawn.
big_texts = st.sampled_from(["题" * 1000, "题" * 1001, "a" * 524_288, "\u202e" * 200_000, "😀" * 131_073])
any_text = st.integers(0, 59).flatmap(lambda n: big_texts if n == 0 else texts)  # 1 in 60 is huge
ints = st.one_of(
    st.integers(-5, 130),
    st.sampled_from([0, 1, 55, 56, 99, 100, 101, 900, 901, 2200, 2201, 3000, 5000, 5001, 7200, 7201, 200_000, 200_001]),
    st.integers(-(2**63), 2**63 - 1),
    st.integers(-(2**80), 2**80),
)
json_scalars = st.one_of(st.none(), st.booleans(), ints, st.floats(allow_nan=False, allow_infinity=False), texts)
json_values = st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4), max_leaves=12)


def leaf_node() -> st.SearchStrategy[dict[str, Any]]:
    fields = st.sampled_from(list(grid_query.FIELDS))
    node = st.fixed_dictionaries(
        {"field": fields, "value": texts.filter(lambda v: v.strip())},
        optional={"match": st.sampled_from(["phrase", "exact", ""])},
    )
    return node


def operator_nodes(children: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    return st.one_of(
        st.builds(lambda items, op: {"op": op, "items": items}, st.lists(children, min_size=0, max_size=14), st.sampled_from(["and", "or"])),
        st.builds(lambda items: {"op": "not", "items": items}, st.lists(children, min_size=0, max_size=2)),
    )


expressions = st.recursive(leaf_node(), operator_nodes, max_leaves=40)
odd_expressions = st.one_of(expressions, json_values.filter(lambda v: isinstance(v, dict)))


def schema_value(schema: dict[str, Any], name: str = "") -> st.SearchStrategy[Any]:
    """Values that satisfy ``schema`` (the JSON-schema subset the tool list uses)."""
    if name == "expression" and "object" in str(schema.get("type")):
        return odd_expressions  # structured_search's tree (expert_search's expression is a plain string)
    kinds = schema.get("type")
    kinds = kinds if isinstance(kinds, list) else [kinds]
    options: list[st.SearchStrategy[Any]] = []
    for kind in kinds:
        if kind == "string":
            enum = schema.get("enum")
            options.append(st.sampled_from([*enum, ""]) | any_text if enum else any_text)
        elif kind == "integer":
            options.append(ints)
        elif kind == "boolean":
            options.append(st.booleans())
        elif kind == "null":
            options.append(st.none())
        elif kind == "array":
            options.append(st.lists(schema_value(schema["items"]), max_size=5))
        elif kind == "object":
            options.append(schema_object(schema))
    assert options, schema
    return st.one_of(options)


def schema_object(schema: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    properties = schema.get("properties", {})
    required = set(schema.get("required", ()))
    return st.fixed_dictionaries(
        {name: schema_value(sub, name) for name, sub in properties.items() if name in required},
        optional={name: schema_value(sub, name) for name, sub in properties.items() if name not in required},
    )


def wrong_type(schema: dict[str, Any], name: str) -> st.SearchStrategy[Any]:
    """JSON values whose type the schema does not allow (null excepted: it means "not given")."""
    kinds = schema.get("type")
    kinds = set(kinds if isinstance(kinds, list) else [kinds])
    pool: list[st.SearchStrategy[Any]] = []
    if "string" not in kinds:
        pool.append(texts)
    if "integer" not in kinds:
        pool.append(st.integers(-10, 10))
    if not kinds & {"integer", "boolean"}:
        pool.append(st.booleans())
    if "integer" in kinds:
        pool += [st.floats(allow_nan=False, allow_infinity=False).filter(lambda f: f != int(f)), st.booleans(), st.just(2.0)]
    if "array" not in kinds:
        pool.append(st.lists(st.integers(), max_size=3))
    else:
        pool.append(st.lists(st.one_of(st.integers(), st.booleans(), st.dictionaries(texts, st.integers(), max_size=2)), min_size=1, max_size=3))
    if "object" not in kinds:
        pool.append(st.dictionaries(texts, st.integers(), max_size=2))
    return st.one_of(pool)


TOOL_NAMES = sorted(SCHEMAS)


@st.composite
def structurally_invalid(draw: st.DrawFn) -> tuple[str, dict[str, Any], str]:
    """(tool, arguments, what was broken): each must be refused with INVALID_INPUT."""
    tool = draw(st.sampled_from(TOOL_NAMES))
    schema = SCHEMAS[tool]
    args = draw(schema_object(schema))
    properties = schema.get("properties", {})
    ways = ["unknown"]
    if properties:
        ways.append("type")
    if schema.get("required"):
        ways.append("missing")
    if "options" in properties:
        ways.append("unknown_option")
    way = draw(st.sampled_from(ways))
    if way == "unknown":
        key = draw(texts.filter(lambda k: k not in properties))
        args[key] = draw(json_values)
    elif way == "unknown_option":
        key = draw(texts.filter(lambda k: k not in properties["options"]["properties"]))
        args["options"] = {**(args.get("options") or {}), key: draw(json_values)}
    elif way == "type":
        name = draw(st.sampled_from(sorted(properties)))
        if name == "expression" and "object" in str(properties[name].get("type")):
            args[name] = draw(st.one_of(texts, st.integers(), st.lists(st.integers(), max_size=2), st.booleans()))
        else:
            args[name] = draw(wrong_type(properties[name], name))
    else:
        args.pop(draw(st.sampled_from(sorted(schema["required"]))))
    return tool, args, way


# --- property tests over the MCP client --------------------------------------------------------------


@pytest.mark.slow  # ~5 s: 700 generated calls
@settings(SETTINGS, max_examples=700)
@given(st.sampled_from(TOOL_NAMES).flatmap(lambda tool: st.tuples(st.just(tool), schema_object(SCHEMAS[tool]))))
def test_schema_valid_objects_get_an_answer_or_a_coded_error(mcp: ThreadedClient, case: tuple[str, dict[str, Any]]) -> None:
    tool, args = case
    COUNTS["schema_valid"] += 1
    answer(mcp.call(tool, args))


@pytest.mark.slow  # ~4 s: 500 generated calls
@settings(SETTINGS, max_examples=500)
@given(structurally_invalid())
def test_structurally_invalid_objects_are_invalid_input(mcp: ThreadedClient, case: tuple[str, dict[str, Any], str]) -> None:
    tool, args, way = case
    COUNTS["structurally_invalid"] += 1
    expect_error(mcp.call(tool, args), "INVALID_INPUT")


# (tool, a valid base, field path, inclusive valid range (0 = default), code outside the range)
RANGES: list[tuple[str, dict[str, Any], str, tuple[int, int], str]] = [
    ("search_results", {"search_id": "s"}, "limit", (0, 100), "INVALID_LIMIT"),
    ("search_results", {"search_id": "s"}, "offset", (0, 2**80), "INVALID_OFFSET"),
    ("search", {"query": "q"}, "limit", (0, 100), "INVALID_LIMIT"),
    ("search", {"query": "q"}, "year_from", (0, 2200), "INVALID_YEAR"),
    ("search", {"query": "q"}, "year_to", (0, 2200), "INVALID_YEAR"),
    ("search", {"query": "q"}, "options.candidate_target", (0, 3000), "INVALID_OPTION"),
    ("search", {"query": "q"}, "options.max_pages", (0, 100), "INVALID_OPTION"),
    ("search", {"query": "q"}, "options.max_requests", (0, 5000), "INVALID_OPTION"),
    ("search", {"query": "q"}, "options.timeout_seconds", (0, 7200), "INVALID_OPTION"),
    ("structured_search", {"expression": {"field": "title", "value": "q"}}, "limit", (0, 100), "INVALID_LIMIT"),
    ("structured_search", {"expression": {"field": "title", "value": "q"}}, "year_to", (0, 2200), "INVALID_YEAR"),
    ("get_metadata", {"search_id": "s"}, "offset", (0, 2**80), "INVALID_OFFSET"),
    ("read_online_html", {"record_ref": "r"}, "max_characters", (0, 200_000), "INVALID_LIMIT"),
    ("read_online_html", {"record_ref": "r"}, "offset", (0, 2**80), "INVALID_OFFSET"),
    ("download_paper", {"record_ref": "r"}, "wait_seconds", (0, 900), "INVALID_WAIT"),
    ("operation_control", {"action": "cancel"}, "additional_requests", (-(2**80), 5000), "INVALID_OPTION"),
    ("operation_control", {"action": "cancel"}, "additional_seconds", (-(2**80), 7200), "INVALID_OPTION"),
]


def _put(args: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    out = json.loads(json.dumps(args))
    head, _, leaf = path.rpartition(".")
    (out.setdefault(head, {}) if head else out)[leaf] = value
    return out


@st.composite
def out_of_range(draw: st.DrawFn) -> tuple[str, dict[str, Any], str]:
    tool, base, path, (low, high), code = draw(st.sampled_from(RANGES))
    below = st.integers(-(2**80), low - 1) if low > -(2**80) else st.nothing()
    above = st.integers(high + 1, max(high + 10, 2**80)) if high < 2**80 else st.nothing()
    value = draw(st.one_of(below, above))
    return tool, _put(base, path, value), code


@settings(SETTINGS, max_examples=500)
@given(out_of_range())
def test_out_of_range_numbers_get_their_code(mcp: ThreadedClient, case: tuple[str, dict[str, Any], str]) -> None:
    tool, args, code = case
    COUNTS["out_of_range"] += 1
    expect_error(mcp.call(tool, args), code)


def test_metadata_limit_over_the_batch_is_batch_too_large(mcp: ThreadedClient) -> None:
    expect_error(mcp.call("get_metadata", {"search_id": "s", "limit": 101}), "BATCH_TOO_LARGE")
    expect_error(mcp.call("get_metadata", {"record_refs": ["r"] * 60, "titles": ["t"] * 41}), "BATCH_TOO_LARGE")
    expect_error(mcp.call("export_citations", {"titles": ["t"] * 101}), "BATCH_TOO_LARGE")


# (tool, a valid base, field path, its enum, code for any other non-empty value)
ENUMS: list[tuple[str, dict[str, Any], str, tuple[str, ...], str]] = [
    ("search", {"query": "q"}, "mode", search.MODES, "INVALID_MODE"),
    ("search", {"query": "q"}, "options.on_verification", tool_args.POLICIES, "INVALID_POLICY"),
    ("search", {"query": "q"}, "options.sort", _searching.SORTS, "INVALID_SORT"),
    ("search", {"query": "q"}, "options.metadata", _searching.METADATA, "INVALID_METADATA"),
    ("search", {"query": "q"}, "options.freshness", _searching.FRESHNESS, "INVALID_FRESHNESS"),
    ("structured_search", {"expression": {"field": "title", "value": "q"}}, "sort", _searching.SORTS, "INVALID_SORT"),
    ("search_results", {"search_id": "s"}, "scope", tool_args.SCOPES, "INVALID_SCOPE"),
    ("search_results", {"search_id": "s"}, "view", get_args(search_results.View), "INVALID_VIEW"),
    ("get_metadata", {"search_id": "s"}, "scope", tool_args.SCOPES, "INVALID_SCOPE"),
    ("export_citations", {"search_id": "s"}, "scope", tool_args.SCOPES, "INVALID_SCOPE"),
    ("export_citations", {"search_id": "s"}, "format", tool_args.CITATION_FORMATS, "INVALID_FORMAT"),
    ("download_paper", {"record_ref": "r"}, "format", tool_args.DOWNLOAD_FORMATS, "INVALID_FORMAT"),
    ("download_paper", {"record_ref": "r"}, "on_verification", tool_args.POLICIES, "INVALID_POLICY"),
    ("read_online_html", {"record_ref": "r"}, "on_verification", tool_args.POLICIES, "INVALID_POLICY"),
    ("operation_control", {}, "action", get_args(operation_control.Action), "INVALID_ACTION"),
]


@st.composite
def bad_enum(draw: st.DrawFn) -> tuple[str, dict[str, Any], str]:
    tool, base, path, allowed, code = draw(st.sampled_from(ENUMS))
    variants = st.sampled_from([v.upper() for v in allowed] + [f" {v}" for v in allowed] + [f"{v}\u200b" for v in allowed])
    value = draw(st.one_of(texts, variants).filter(lambda v: v and v not in allowed))
    return tool, _put(base, path, value), code


@settings(SETTINGS, max_examples=400)
@given(bad_enum())
def test_unknown_enum_values_get_their_code(mcp: ThreadedClient, case: tuple[str, dict[str, Any], str]) -> None:
    tool, args, code = case
    COUNTS["bad_enum"] += 1
    expect_error(mcp.call(tool, args), code)


# --- expression trees -----------------------------------------------------------------------------

EXPRESSION_CODES = (
    "QUERY_TOO_COMPLEX", "INVALID_CONDITION", "INVALID_MATCH", "INVALID_EXPRESSION", "INVALID_NOT",
    "INVALID_OPERATOR", "UNBOUNDED_QUERY", "QUERY_UNSUPPORTED",
)


def _dnf(node: Any, depth: int, negated: bool, counter: list[int]) -> list[list[bool]] | None:
    """The tree's DNF as lists of literal polarities when it obeys every documented rule, else None.

    An independent reading of engine.md §10: depth ≤ 8, ≤ 96 nodes, and/or 2–12 items, not exactly
    1, leaves with a known field, a 1–120-rune value and a known match, no both-quotes value, no
    exact subject, ≤ 32 branches (negation pushed to the leaves by De Morgan).
    """
    counter[0] += 1
    if depth > grid_query.MAX_DEPTH or counter[0] > grid_query.MAX_NODES or not isinstance(node, dict):
        return None
    op = node.get("op", "")
    if not op:
        value = node.get("value", "")
        match = node.get("match", "")
        if set(node) - {"field", "value", "match"} or not isinstance(value, str) or not isinstance(match, str):
            return None
        if node.get("field") not in grid_query.FIELDS or is_blank(value) or len(value.strip()) > grid_query.MAX_VALUE_CHARS:
            return None
        if match not in grid_query.MATCHES or ('"' in value and "'" in value):
            return None
        if node["field"] == "subject" and match == "exact":
            return None
        return [[not negated]]
    items = node.get("items")
    if set(node) != {"op", "items"} or not isinstance(items, list):
        return None
    if op == "not":
        return _dnf(items[0], depth + 1, not negated, counter) if len(items) == 1 else None
    if op not in ("and", "or") or not 2 <= len(items) <= 12:
        return None
    as_or = (op == "or") != negated
    out: list[list[bool]] = [] if as_or else [[]]
    for item in items:
        part = _dnf(item, depth + 1, negated, counter)
        if part is None:
            return None
        out = out + part if as_or else [a + b for a in out for b in part]
        if len(out) > grid_query.MAX_BRANCHES:
            return None
    return out


def acceptable(expression: dict[str, Any]) -> bool:
    dnf = _dnf(expression, 0, False, [0])
    return dnf is not None and len(dnf) <= grid_query.MAX_BRANCHES and all(any(branch) for branch in dnf)


@pytest.mark.slow  # ~5 s: 300 generated expressions
@settings(SETTINGS, max_examples=300)
@given(expressions)
def test_expression_trees_start_a_search_or_get_an_expression_code(mcp: ThreadedClient, expression: dict[str, Any]) -> None:
    COUNTS["expressions"] += 1
    result = mcp.call("structured_search", {"expression": expression, "options": {"max_requests": 1}})
    if acceptable(expression):
        data = answer(result)
        assert not result.is_error, data
        assert data["kind"] == "search", data
    else:
        expect_error(result, *EXPRESSION_CODES)


def _chain(depth: int) -> dict[str, Any]:
    node: dict[str, Any] = {"field": "title", "value": "深"}
    for i in range(depth):
        node = {"op": "and", "items": [node, {"field": "keywords", "value": f"k{i}"}]}
    return node


@pytest.mark.parametrize("depth", [9, 12, 20, 45])
def test_deep_trees_are_too_complex(mcp: ThreadedClient, depth: int) -> None:
    expect_error(mcp.call("structured_search", {"expression": _chain(depth)}), "QUERY_TOO_COMPLEX")


def test_wide_trees_are_too_complex(mcp: ThreadedClient) -> None:
    leaves = [{"field": "title", "value": f"v{i}"} for i in range(12)]
    wide = {"op": "and", "items": [{"op": "and", "items": leaves} for _ in range(12)]}  # 157 nodes, one branch
    expect_error(mcp.call("structured_search", {"expression": wide}), "QUERY_TOO_COMPLEX")
    ors = {"op": "and", "items": [{"op": "or", "items": leaves[:6]} for _ in range(2)]}  # 36 branches
    expect_error(mcp.call("structured_search", {"expression": ors}), "QUERY_TOO_COMPLEX")
    assert not mcp.call("structured_search", {"expression": {"op": "and", "items": [leaves[0], _chain(7)]}}).is_error


# --- sizes and odd text -----------------------------------------------------------------------------


def test_the_512_kb_text_limit_is_exact(mcp: ThreadedClient) -> None:
    limit = tool_args.TEXT_BYTES_MAX
    ok = answer(mcp.call("link_references", {"text": "a" * limit}))
    assert ok["status"] == "completed"
    assert len(ok["text"]) == limit
    expect_error(mcp.call("link_references", {"text": "a" * (limit + 1)}), "INPUT_TOO_LARGE")
    # 3-byte runes: 174,762 fit (524,286 bytes), one more does not.
    assert not mcp.call("link_references", {"text": "题" * (limit // 3)}).is_error
    expect_error(mcp.call("link_references", {"text": "题" * (limit // 3 + 1)}), "INPUT_TOO_LARGE")
    expect_error(mcp.call("link_references", {"text": "《题》" * 101}), "TOO_MANY_REFERENCES")
    expect_error(mcp.call("search", {"query": "题" * 1001}), "INVALID_QUERY")
    expect_error(mcp.call("search", {"query": " \u3000\t"}), "INVALID_QUERY")


@settings(SETTINGS, max_examples=150)
@given(odd_text(1, 60))
def test_odd_unicode_round_trips_as_data(mcp: ThreadedClient, text: str) -> None:
    """Text goes back exactly as given (RTL marks, NUL, emoji, combining marks), never rewritten or lost."""
    COUNTS["unicode"] += 1
    sample = f"见{text}与《{text}》"
    data = answer(mcp.call("link_references", {"text": sample}))
    if data["status"] == "completed":
        assert data["text"] == sample
    missing = answer(mcp.call("search_results", {"search_id": text}))
    assert codes(missing) == ["SEARCH_NOT_FOUND"]


def test_error_messages_do_not_echo_huge_values(mcp: ThreadedClient) -> None:
    """A 1 MB search_id comes back twice (text and structured) inside SEARCH_NOT_FOUND's message."""
    for tool, args in [
        ("search_results", {"search_id": "s" * 1_000_000}),
        ("operation_control", {"action": "a" * 1_000_000}),
        ("search_results", {"search_id": "s", "view": "v" * 1_000_000}),
    ]:
        result = mcp.call(tool, args)
        assert result.is_error
        assert len(result.content[0].text) < 64 * 1024  # type: ignore[union-attr]


def test_the_server_is_still_whole(mcp: ThreadedClient) -> None:
    diagnostics = answer(mcp.call("diagnostics", {}))
    assert diagnostics["process_id"] == mcp.pid
    assert diagnostics["store"]["papers"] == 0
    listed = mcp.run(mcp.client.list_tools())  # type: ignore[union-attr]
    assert sorted(t.name for t in listed.tools) == TOOL_NAMES


# --- raw JSON-RPC on stdin ---------------------------------------------------------------------------


def _call_line(ident: Any, name: str, arguments_json: str) -> bytes:
    return (
        f'{{"jsonrpc":"2.0","id":{json.dumps(ident)},"method":"tools/call",'
        f'"params":{{"name":"{name}","arguments":{arguments_json}}}}}\n'
    ).encode()


def _nots(depth: int) -> str:
    return '{"op":"not","items":[' * depth + '{"field":"title","value":"x"}' + "]}" * depth


# Lines a broken or hostile client might write. None of them may stop the server.
GARBAGE: list[tuple[str, bytes]] = [
    ("empty line", b"\n"),
    ("whitespace", b"   \t \r\n"),
    ("prose", b"hello, is anybody there?\n"),
    ("truncated request", b'{"jsonrpc":"2.0","id":7,"method":"tools/ca\n'),
    ("truncated arguments", b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"search","arguments":{"query":"\n'),
    ("invalid utf-8 bytes", b"\xff\xfe\xfd\x80\n"),
    ("invalid utf-8 inside a string", _call_line(7, "search_results", '{"search_id":"@"}').replace(b"@", b"\xc3\x28\xa0\xa1")),
    ("lone surrogate", _call_line(7, "search_results", '{"search_id":"\\ud800x"}')),
    ("lone low surrogate", _call_line(7, "link_references", '{"text":"\\udfff"}')),
    ("nul escape", _call_line(7, "search_results", '{"search_id":"a\\u0000b"}')),
    ("json array batch", b'[{"jsonrpc":"2.0","id":7,"method":"ping"}]\n'),
    ("json scalar", b"42\n"),
    ("json null", b"null\n"),
    ("wrong jsonrpc version", b'{"jsonrpc":"1.0","id":7,"method":"ping"}\n'),
    ("no method", b'{"jsonrpc":"2.0","id":7}\n'),
    ("unknown method", b'{"jsonrpc":"2.0","id":7,"method":"tools/explode","params":{}}\n'),
    ("params not an object", b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":[1,2]}\n'),
    ("arguments not an object", b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"search","arguments":"q"}}\n'),
    ("unknown tool", _call_line(7, "rm_rf", "{}")),
    ("float id", _call_line(7.5, "diagnostics", "{}")),
    ("huge id", _call_line(10**40, "diagnostics", "{}")),
    ("null id", _call_line(None, "diagnostics", "{}")),
    ("object id", b'{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}\n'),
    ("duplicate keys", b'{"jsonrpc":"2.0","id":7,"method":"ping","method":"tools/list"}\n'),
    ("response from the client nobody asked for", b'{"jsonrpc":"2.0","id":999,"result":{}}\n'),
    ("notification of an unknown kind", b'{"jsonrpc":"2.0","method":"notifications/whatever","params":{"x":1}}\n'),
    ("cancel an unknown request", b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":12345}}\n'),
    ("nesting past the parser's limit", _call_line(7, "structured_search", '{"expression":' + _nots(150) + "}")),
    ("deep array", _call_line(7, "search", '{"query":"x","concept_groups":' + "[" * 50_000 + "]" * 50_000 + "}")),
    ("8 MB line of prose", b"x" * (8 * 1024 * 1024) + b"\n"),
    ("8 MB string argument", _call_line(7, "search_results", json.dumps({"search_id": "s" * (8 * 1024 * 1024)}))),
    ("many lines at once", b'{"jsonrpc":"2.0","id":7,"method":"ping"}\n' * 500),
]


@pytest.mark.slow  # ~3 s: a server per garbage input
async def test_garbage_on_stdin_never_stops_the_server(tmp_path: Path) -> None:
    """Each hostile line is followed by a ping: the ping is always answered, the process stays up.

    Lines that carry ``"id":7`` get an id of their own (1000 + case number) so late answers to
    tool calls, which run concurrently with the pings, are still attributed to their case.
    """
    with open(tmp_path / "stderr.txt", "wb") as errlog:
        raw = await RawServer.start(offline_params(tmp_path / "data"), errlog)
        for n, (_name, line) in enumerate(GARBAGE):
            raw.send(line.replace(b'"id":7', b'"id":%d' % (1000 + n)))
            await raw.drain(10_000 + n)  # raises if the server stops answering or closes stdout
            COUNTS["raw_lines"] += 1
        result = (await raw.request("tools/call", {"name": "search_results", "arguments": {"search_id": "x"}}))["result"]
        assert result["isError"]
        assert result["structuredContent"]["errors"][0]["code"] == "SEARCH_NOT_FOUND"
        assert await raw.close() == 0
    # Every answer the server wrote, by case (a clean exit flushed them all before EOF).
    answered: dict[str, list[dict[str, Any]]] = {name: [] for name, _ in GARBAGE}
    for message in raw.seen:
        ident = message.get("id")
        if isinstance(ident, int) and 1000 <= ident < 1000 + len(GARBAGE):
            answered[GARBAGE[ident - 1000][0]].append(message)

    def tool_code(name: str) -> str:
        (reply,) = answered[name]
        return reply["result"]["structuredContent"]["errors"][0]["code"]

    assert answered["unknown method"][0]["error"]["code"] == -32601
    assert answered["arguments not an object"][0]["error"]["code"] == -32602
    assert answered["unknown tool"][0]["error"]["code"] == -32602  # the specification's answer to an unknown tool
    assert answered["unknown tool"][0]["error"]["data"]["code"] == "UNKNOWN_TOOL"
    assert tool_code("nul escape") == "SEARCH_NOT_FOUND"
    assert tool_code("8 MB string argument") == "SEARCH_NOT_FOUND"
    assert len(answered["many lines at once"]) == 500
    assert answered["duplicate keys"][0]["result"]["tools"]  # the last key wins, as in most parsers
    stderr = (tmp_path / "stderr.txt").read_text(encoding="utf-8", errors="replace")
    assert "failed unexpectedly" not in stderr


def _nested_argument(levels: int) -> bytes:
    """A search_results call whose search_id is an array nested ``levels`` deep (the line is 3 more)."""
    return _call_line(7, "search_results", '{"search_id":' + "[" * levels + "]" * levels + "}")


# Lines the SDK's own reader dropped without an answer (all but two, before the line layer), each
# with what it gets now: a JSON-RPC error (code, and whether the id is the line's own or null), or
# the tool's code when the line is a well-formed call.
HOSTILE: list[tuple[str, bytes, str]] = [
    ("float id", b'{"jsonrpc":"2.0","id":7.5,"method":"ping"}\n', "-32600 null"),
    ("bool id", b'{"jsonrpc":"2.0","id":true,"method":"ping"}\n', "-32600 null"),
    ("array id", b'{"jsonrpc":"2.0","id":[7],"method":"ping"}\n', "-32600 null"),
    ("object id", b'{"jsonrpc":"2.0","id":{"a":7},"method":"ping"}\n', "-32600 null"),
    ("null id", _call_line(None, "diagnostics", "{}"), "-32600 null"),
    ("batch", b'[{"jsonrpc":"2.0","id":7,"method":"ping"}]\n', "-32600 null"),
    ("empty batch", b"[]\n", "-32600 null"),
    ("scalar", b"42\n", "-32600 null"),
    ("lone high surrogate", _call_line(7, "search_results", '{"search_id":"\\ud800x"}'), "-32700 own"),
    ("lone low surrogate", _call_line(7, "link_references", '{"text":"\\udfff"}'), "-32700 own"),
    ("invalid utf-8 in a string", _call_line(7, "search_results", '{"search_id":"@"}').replace(b"@", b"\xc3\x28"), "-32700 own"),
    ("invalid utf-8 line", b"\xff\xfe\xfd\x80\n", "-32700 null"),
    ("utf-16 surrogate as utf-8", _call_line(7, "search_results", '{"search_id":"@"}').replace(b"@", b"\xed\xa0\x80"), "-32700 own"),
    ("raw CR inside a string", _call_line(7, "search_results", '{"search_id":"a\rb"}'), "-32700 null"),
    ("raw CR between tokens", b'{"jsonrpc":"2.0",\r"id":7,"method":"tools/call","params":{"name":"search_results","arguments":{"search_id":"x"}}}\n', "SEARCH_NOT_FOUND"),
    ("prose", b"hello, is anybody there?\n", "-32700 null"),
    ("truncated request", b'{"jsonrpc":"2.0","id":7,"method":"tools/ca\n', "-32700 null"),
    ("wrong jsonrpc version", b'{"jsonrpc":"1.0","id":7,"method":"ping"}\n', "-32600 own"),
    ("no method", b'{"jsonrpc":"2.0","id":7}\n', "-32600 own"),
    ("params not an object", b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":[1,2]}\n', "-32600 own"),
    ("120 nested nots", _call_line(7, "structured_search", '{"expression":' + _nots(120) + "}"), "QUERY_TOO_COMPLEX"),
    ("260-level expression", _call_line(7, "structured_search", '{"expression":' + _nots(130) + "}"), "QUERY_TOO_COMPLEX"),
    ("260-level argument", _nested_argument(257), "INVALID_INPUT"),
    ("50,000-deep array", _nested_argument(50_000), "-32700 null"),
]


async def _outcome(raw: RawServer, ident: int, seconds: float) -> str:
    """What the server answered to the line sent with ``ident`` (or with an unusable id), within ``seconds``."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            message = await raw.read(max(0.0, deadline - time.monotonic()))
        except TimeoutError:
            return f"no answer within {seconds:g} s"
        if "error" in message and message.get("id") in (ident, None):
            return f"{message['error']['code']} {'null' if message['id'] is None else 'own'}"
        if message.get("id") == ident:
            return message["result"]["structuredContent"]["errors"][0]["code"]


async def test_every_hostile_line_is_answered_within_a_second(tmp_path: Path) -> None:
    """Each line gets its JSON-RPC error (or its tool's answer) within 1 s; the server keeps serving."""
    with open(tmp_path / "stderr.txt", "wb") as errlog:
        raw = await RawServer.start(offline_params(tmp_path / "data"), errlog)
        outcomes: dict[str, str] = {}
        for n, (name, line, _) in enumerate(HOSTILE):
            raw.send(line.replace(b'"id":7', b'"id":%d' % (3000 + n)))
            outcomes[name] = await _outcome(raw, 3000 + n, 1.0)
        listed = await raw.request("tools/list")
        status = await raw.close()
    COUNTS["hostile_lines_answered"] = sum(not got.startswith("no answer") for got in outcomes.values())
    assert outcomes == {name: expected for name, _, expected in HOSTILE}
    assert len(listed["result"]["tools"]) == len(TOOL_NAMES)
    assert status == 0


async def test_a_byte_order_mark_before_initialize_is_read_as_its_start(tmp_path: Path) -> None:
    with open(tmp_path / "stderr.txt", "wb") as errlog:
        raw = await RawServer.spawn(offline_params(tmp_path / "data"), errlog)
        raw.send(b"\xef\xbb\xbf" + json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT_PARAMS}).encode() + b"\n")
        init = await raw.until(1, timeout=10)
        status = await raw.close()
    assert init["result"]["serverInfo"]["name"] == "cnki"
    assert status == 0


async def test_a_request_before_initialize_is_told_to_initialize_first(tmp_path: Path) -> None:
    with open(tmp_path / "stderr.txt", "wb") as errlog:
        raw = await RawServer.spawn(offline_params(tmp_path / "data"), errlog)
        early = await raw.request("tools/list")
        call = await raw.request("tools/call", {"name": "diagnostics", "arguments": {}})
        pong = await raw.request("ping")
        init = await raw.request("initialize", INIT_PARAMS)
        status = await raw.close()
    assert early["error"]["code"] == -32600
    assert "initialize" in early["error"]["message"]
    assert "initialize" in call["error"]["message"]
    assert pong["result"] == {}
    assert init["result"]["serverInfo"]["name"] == "cnki"
    assert status == 0


async def test_a_client_that_vanishes_mid_call_leaves_no_server_behind(tmp_path: Path) -> None:
    """stdin closed while calls are in flight: the server exits on its own, cleanly."""
    with open(tmp_path / "stderr.txt", "wb") as errlog:
        raw = await RawServer.start(offline_params(tmp_path / "data"), errlog)
        for n in range(20):
            raw.send(_call_line(n, "search", json.dumps({"query": f"题{n}"})))
        raw.send(_call_line(99, "link_references", json.dumps({"text": "《题》" * 50})))
        started = time.monotonic()
        assert await raw.close() == 0
        assert time.monotonic() - started < 20


def test_an_unknown_field_is_refused_even_when_null(mcp: ThreadedClient) -> None:
    """Found by the generator above: a null unknown field used to be dropped like an unset optional one."""
    expect_error(mcp.call("diagnostics", {"": None}), "INVALID_INPUT")
    expect_error(mcp.call("search", {"query": "q", "options": {"shadow": None}}), "INVALID_INPUT")
    assert not mcp.call("search_results", {"search_id": "s", "limit": None}).structured_content["errors"][0]["code"] == "INVALID_INPUT"  # type: ignore[index]
