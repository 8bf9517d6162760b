"""Generate docs/tools.md, the tool reference, from the tool list the server really serves.

    .venv/bin/python packaging/gen_tool_docs.py            rewrite docs/tools.md
    .venv/bin/python packaging/gen_tool_docs.py --check    exit 1 if docs/tools.md is out of date
    cnki-mcp schema > s.json && python packaging/gen_tool_docs.py --schema s.json --output -

The document is the same `tools/list` result `cnki-mcp schema` prints (by default it is taken
in-process from `cnki_mcp.surface.server.schema_document`), rendered as Markdown tables.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TARGET = ROOT / "docs" / "tools.md"

_HINTS = (
    ("readOnlyHint", "只读"),
    ("destructiveHint", "破坏性"),
    ("idempotentHint", "幂等"),
    ("openWorldHint", "访问外部（知网）"),
)


def served_schema() -> dict[str, Any]:
    """The `tools/list` result, exactly as `cnki-mcp schema` prints it."""
    sys.path.insert(0, str(ROOT))
    from cnki_mcp.surface.server import schema_document

    document: dict[str, Any] = asyncio.run(schema_document())
    return document


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _type(schema: dict[str, Any]) -> str:
    raw = schema.get("type", "any")
    kinds = [raw] if isinstance(raw, str) else list(raw)
    nullable = "null" in kinds
    names = []
    for kind in kinds:
        if kind == "null":
            continue
        if kind == "array":
            items = schema.get("items") or {}
            names.append(f"{_type(items)}[]" if items else "array")
        else:
            names.append(kind)
    text = " 或 ".join(names) or "null"
    return f"{text}（可为 null）" if nullable else text


def _rows(properties: dict[str, Any], required: list[str], prefix: str = "") -> list[str]:
    rows = []
    for name, schema in properties.items():
        path = f"{prefix}{name}"
        note = _cell(schema.get("description", ""))
        if "enum" in schema:
            values = "、".join(f"`{value}`" for value in schema["enum"])
            note = f"{note}<br>可选值：{values}" if note else f"可选值：{values}"
        rows.append(f"| `{path}` | {_type(schema)} | {'是' if name in required else '否'} | {note} |")
        nested = schema.get("properties")
        if isinstance(nested, dict) and nested:
            rows.extend(_rows(nested, list(schema.get("required", [])), f"{path}."))
    return rows


def _yes(value: object) -> str:
    return "是" if value else "否"


def render(document: dict[str, Any]) -> str:
    tools: list[dict[str, Any]] = sorted(document["tools"], key=lambda tool: tool["name"])
    lines = [
        "# 工具参考",
        "",
        "本文件由 `packaging/gen_tool_docs.py` 根据服务实际提供的工具列表（`cnki-mcp schema`，与 MCP `tools/list`",
        "完全一致）生成，请勿手工修改；工具定义变化后重新运行该脚本。以运行中的 `cnki-mcp schema` 输出为准。",
        "",
        f"共 {len(tools)} 个工具。部分客户端会给工具名加前缀（如 `mcp__cnki__search`）。参数不接受未列出的字段。",
        "",
        "| 工具 | " + " | ".join(label for _, label in _HINTS) + " |",
        "| --- | " + " | ".join("---" for _ in _HINTS) + " |",
    ]
    for tool in tools:
        hints = tool.get("annotations") or {}
        lines.append(f"| [`{tool['name']}`](#{tool['name']}) | " + " | ".join(_yes(hints.get(key)) for key, _ in _HINTS) + " |")
    for tool in tools:
        schema = tool.get("inputSchema") or {}
        lines += ["", f"## {tool['name']}", ""]
        if tool.get("title"):
            lines += [f"**{_cell(tool['title'])}**", ""]
        lines += [_cell(tool.get("description", "")), ""]
        properties = schema.get("properties") or {}
        if not properties:
            lines.append("没有参数。")
            continue
        lines += ["| 参数 | 类型 | 必填 | 说明 |", "| --- | --- | --- | --- |"]
        lines += _rows(properties, list(schema.get("required", [])))
    lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--schema", type=Path, help="read the tools/list JSON from this file instead of the server")
    parser.add_argument("--output", default=str(TARGET), help="file to write, or - for stdout")
    parser.add_argument("--check", action="store_true", help="compare with the file instead of writing it")
    options = parser.parse_args(argv)
    document = json.loads(options.schema.read_text(encoding="utf-8")) if options.schema else served_schema()
    text = render(document)
    if options.output == "-":
        sys.stdout.write(text)
        return 0
    target = Path(options.output)
    if options.check:
        current = target.read_text(encoding="utf-8") if target.exists() else ""
        if current != text:
            print(f"{target} is out of date: run packaging/gen_tool_docs.py", file=sys.stderr)
            return 1
        return 0
    target.write_text(text, encoding="utf-8")
    print(f"wrote {target}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
