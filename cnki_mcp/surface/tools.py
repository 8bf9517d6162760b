"""The tools as the MCP surface serves them: the modules of ``cnki_mcp.tools`` (discovered there, one module per
tool), listed as MCP ``Tool``s, their arguments parsed and their handlers dispatched on the ``App``.

``server.py`` lists from ``listed_tools`` and calls ``parse_arguments`` then ``dispatch``; a new tool is a module of
``cnki_mcp.tools`` (see its docstring) and nothing here changes.
"""

from __future__ import annotations

from typing import Any, Protocol

from mcp.types import Icon, Tool, ToolAnnotations

from cnki_mcp.app import Reply
from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.tool_args import ToolArgs
from cnki_mcp.tools import REGISTRY, ToolSpec
from cnki_mcp.tools import parse_arguments as parse_tool_arguments

__all__ = ["ICON", "REGISTRY", "ToolApp", "dispatch", "listed_tools", "parse_arguments", "spec_of"]


class ToolApp(Protocol):
    """What dispatching needs of the App (the server's tests serve a stand-in)."""

    async def call(self, handler: Any, args: Any, ctx: Any, *, needs_config: bool = True) -> Any: ...


def spec_of(name: str) -> ToolSpec:
    """The tool called ``name``; UNKNOWN_TOOL otherwise."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise CnkiError("UNKNOWN_TOOL", f"没有名为 {name!r} 的工具。", details={"tool": name}) from None


def parse_arguments(name: str, raw: dict[str, Any] | None) -> ToolArgs:
    """The arguments of a call to ``name``, converted, checked and with every default filled."""
    return parse_tool_arguments(spec_of(name), raw)


async def dispatch(app: ToolApp, name: str, args: ToolArgs, ctx: Any) -> Reply:
    """Run the tool ``name`` on ``app`` with arguments from ``parse_arguments``."""
    spec = spec_of(name)
    return await app.call(spec.run, args, ctx, needs_config=spec.needs_config)


# The server's and every tool's icon: the glyph 知 as an SVG, small since every listed tool repeats it.
ICON = Icon(src="data:image/svg+xml,<svg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 16 16'><text y='14'>知</text></svg>")


def _tool(spec: ToolSpec) -> Tool:
    return Tool(
        name=spec.name,
        title=spec.title,
        description=spec.description,
        input_schema=spec.schema,
        output_schema=spec.output_schema,
        icons=[ICON],
        annotations=ToolAnnotations(
            read_only_hint=spec.read_only,
            destructive_hint=False,
            idempotent_hint=False,
            open_world_hint=spec.open_world,
        ),
    )


def listed_tools() -> list[Tool]:
    """``tools/list``: every tool, sorted by name."""
    return [_tool(REGISTRY[name]) for name in sorted(REGISTRY)]
