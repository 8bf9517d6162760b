"""The search as an MCP App (SEP-1865, extension ``io.modelcontextprotocol/ui``): one page for the hosts that render Apps.

The six tools whose answers are papers, facets or a citation neighbourhood name the page in ``_meta.ui.resourceUri``;
the host reads it with ``resources/read`` and shows it in a sandboxed frame, handing it each call's arguments and
result over the Apps bridge (JSON-RPC over postMessage). The page (package resource ``search_app.html``) needs no
network: everything else it shows it asks for through the host's ``tools/call`` (``search_results`` for the rows,
``related_papers`` for the other half of the graph, ``download_papers``/``export_citations``/``save_to_zotero`` for the
ticked rows, ``structured_search``/``search_facets`` with ``facet_filters`` for a clicked bar). Hosts without Apps ignore
``_meta``: the text and structured content of every answer stay as they are.

The page is not in ``resources/list``: the extension lets a server omit UI-only resources, which hosts find through the
tools' metadata.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

from mcp.server.apps import APP_MIME_TYPE
from mcp.types import TextResourceContents, Tool

APP_URI = "ui://cnki/search.html"
APP_TOOLS = frozenset({"search", "structured_search", "expert_search", "search_results", "search_facets", "related_papers"})
# No domain at all: the host's strictest policy (no connections, no outside scripts, styles or frames) fits the page.
_RESOURCE_META = {"ui": {"csp": {}, "prefersBorder": True}}


@cache
def app_html() -> str:
    """The page: HTML, CSS and plain JS in one file."""
    return resources.files("cnki_mcp.surface").joinpath("search_app.html").read_text(encoding="utf-8")


def app_contents() -> TextResourceContents:
    """``resources/read`` of ``APP_URI``."""
    return TextResourceContents(uri=APP_URI, mime_type=APP_MIME_TYPE, text=app_html(), _meta=_RESOURCE_META)


def with_app(tools: list[Tool]) -> list[Tool]:
    """``tools`` with the page named in the ``_meta`` of the six tools it shows."""
    return [
        tool.model_copy(update={"meta": {**(tool.meta or {}), "ui": {"resourceUri": APP_URI}}}) if tool.name in APP_TOOLS else tool
        for tool in tools
    ]
