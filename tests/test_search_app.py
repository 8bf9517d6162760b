"""The search as an MCP App, as the protocol sees it: the six tools name the page, the page reads back as an App
resource, and it needs nothing from the network. tests/test_e2e_app.py runs it in Chromium inside a test host."""

from __future__ import annotations

import re
from pathlib import Path

from mcp import Client
from mcp.server.apps import APP_MIME_TYPE

from cnki_mcp.surface import server
from cnki_mcp.surface.apps import APP_TOOLS, APP_URI, app_html
from tests.harness import RawServer, offline_params

SIX = {"search", "structured_search", "expert_search", "search_results", "search_facets", "related_papers"}


async def test_the_six_search_tools_and_only_they_name_the_page() -> None:
    async with Client(server.build_server(None), mode="legacy") as client:
        tools = (await client.list_tools()).tools
    named = {tool.name: (tool.meta or {}).get("ui") for tool in tools if tool.meta}
    assert APP_TOOLS == SIX
    assert named == dict.fromkeys(SIX, {"resourceUri": APP_URI})


async def test_the_page_reads_back_as_an_app_resource_with_the_strictest_policy() -> None:
    async with Client(server.build_server(None), mode="legacy") as client:
        read = await client.read_resource(APP_URI)
        listed = [str(r.uri) for r in (await client.list_resources()).resources]
    (content,) = read.contents
    assert (str(content.uri), content.mime_type) == (APP_URI, APP_MIME_TYPE) == ("ui://cnki/search.html", "text/html;profile=mcp-app")
    assert content.text == app_html() and content.text.startswith("<!DOCTYPE html>")
    assert content.meta == {"ui": {"csp": {}, "prefersBorder": True}}
    assert listed == [server.GUIDE_URI]  # a UI-only resource may stay out of resources/list (SEP-1865)


def test_the_page_loads_nothing_from_anywhere() -> None:
    html = app_html()
    assert re.findall(r"https?://[^\s\"'<>]+", html) == ["http://www.w3.org/2000/svg"]  # a namespace, never fetched
    for loader in ("<script src", "<link", "<img", "<iframe", "fetch(", "XMLHttpRequest", "WebSocket", "import(", "@import", "url("):
        assert loader not in html, loader


def test_the_page_speaks_the_bridge_by_its_message_names() -> None:
    html = app_html()
    for method in ("ui/initialize", "ui/notifications/initialized", "ui/notifications/tool-input", "ui/notifications/tool-result",
                   "ui/notifications/host-context-changed", "ui/notifications/size-changed", "tools/call", "ui/open-link"):
        assert f'"{method}"' in html, method
    for tool in ("download_papers", "export_citations", "save_to_zotero", "search_results", "related_papers"):
        assert f'"{tool}"' in html, tool


async def test_a_host_that_negotiates_apps_is_served_the_page_over_stdio(tmp_path: Path) -> None:
    """What an Apps host sends (the extension in its capabilities, as SEP-1865 words it) is accepted; the listing
    names the page and resources/read hands it over, the same as for any other client."""
    apps = {"extensions": {"io.modelcontextprotocol/ui": {"mimeTypes": [APP_MIME_TYPE]}}}
    hello = {"protocolVersion": "2025-06-18", "capabilities": apps, "clientInfo": {"name": "apps-host", "version": "1"}}
    with (tmp_path / "server.log").open("w") as errlog:
        raw = await RawServer.spawn(offline_params(tmp_path / "data"), errlog)
        try:
            assert "result" in await raw.request("initialize", hello)
            raw.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
            listed = (await raw.request("tools/list"))["result"]["tools"]
            read = (await raw.request("resources/read", {"uri": APP_URI}))["result"]["contents"]
        finally:
            await raw.close()
    assert {t["name"] for t in listed if t.get("_meta", {}).get("ui") == {"resourceUri": APP_URI}} == SIX
    assert [(c["uri"], c["mimeType"], c["_meta"]) for c in read] == [(APP_URI, APP_MIME_TYPE, {"ui": {"csp": {}, "prefersBorder": True}})]
    assert read[0]["text"] == app_html()
