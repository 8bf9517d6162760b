"""The official MCP conformance suite (``@modelcontextprotocol/conformance``, pinned in tests/conformance) runs
its generic server checks against ``cnki-mcp serve --http``: the ones any server must pass whatever its
tools, prompts and resources. tools-list among them reads the tool list we serve (every tool with its title,
icon and output schema) through the suite's client, the official TypeScript SDK, which parses the list
against the spec's schema and compiles each output schema.

The suite's CLI cannot send headers, so a loopback proxy in front of the endpoint adds the bearer token. It
rewrites ``Host``/``Origin`` only where they name the proxy itself (to the endpoint's own address, as a
client talking to the endpoint directly would send); any other value goes through untouched, so
dns-rebinding-protection still meets the endpoint's own Host/Origin guard.

Excluded scenarios:
- logging-set-level: for a server that declares the ``logging`` capability; ours does not (its log goes to
  stderr and the log file), so ``logging/setLevel`` is rightly "method not found".

and those needing what only the suite's reference server has:
- tools-call-* (simple-text, image, audio, embedded-resource, mixed-content, with-logging, error,
  with-progress, sampling, elicitation), elicitation-sep1034-defaults, elicitation-sep1330-enums,
  json-schema-2020-12: call or list the suite's own test tools (``test_simple_text``, ``test_image_content``,
  ``json_schema_2020_12_tool`` …).
- resources-read-text, resources-read-binary, resources-templates-read, resources-subscribe,
  resources-unsubscribe: read or subscribe to the suite's test resources (``test://static-text`` …).
- prompts-get-simple, prompts-get-with-args, prompts-get-embedded-resource, prompts-get-with-image: get the
  suite's test prompts (``test_simple_prompt`` …).
- completion-complete: completes an argument of the suite's ``test_prompt_with_arguments``.
- server-sse-polling, server-sse-multiple-streams: call the suite's ``test_reconnection`` tool.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cnki_mcp.core.clock import within
from cnki_mcp.surface.tools import listed_tools
from tests.harness import REPO
from tests.test_http_serve import _token, http_server

pytestmark = pytest.mark.slow

FOLDER = REPO / "tests" / "conformance"
NODE_DIR = FOLDER / "node_modules" / "node" / "bin"
CLI = FOLDER / "node_modules" / ".bin" / ("conformance.cmd" if sys.platform == "win32" else "conformance")

# The generic server checks: a server with no test-specific tools, prompts or resources must pass these.
GENERIC = (
    "server-initialize", "ping", "tools-list", "resources-list", "prompts-list", "dns-rebinding-protection",
)

HEADER_LIMIT = 64 * 1024
SCENARIO_SECONDS = 60


def _rewrite(value: bytes, proxy: bytes, target: bytes) -> bytes:
    """``value`` (a Host or an Origin) with the proxy's own address swapped for the endpoint's; anything else as is."""
    for scheme in (b"", b"http://"):
        for name in (b"127.0.0.1", b"localhost"):
            if value.lower() == scheme + name + b":" + proxy:
                return scheme + name + b":" + target
    return value


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Bytes from ``reader`` to ``writer`` until end of file, then a half close (the other way may still run)."""
    try:
        while chunk := await reader.read(65536):
            writer.write(chunk)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except ConnectionError:
        pass


async def _serve_proxy(token: str, target_port: int) -> asyncio.Server:
    """A loopback proxy to ``127.0.0.1:target_port`` that adds ``Authorization: Bearer <token>``. One request per
    connection (``Connection: close``), so every request's head passes through here; bodies and SSE streams
    are piped as they come."""

    async def handle(client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        proxy_port = str(client_writer.get_extra_info("sockname")[1]).encode()
        try:
            head = await within(client_reader.readuntil(b"\r\n\r\n"), 10)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ConnectionError):
            client_writer.close()
            return
        request_line, *lines = head[:-4].split(b"\r\n")
        kept = [request_line]
        for line in lines:
            name, _, value = line.partition(b":")
            key = name.strip().lower()
            if key in (b"authorization", b"connection", b"keep-alive"):
                continue
            if key in (b"host", b"origin"):
                line = name + b": " + _rewrite(value.strip(), proxy_port, str(target_port).encode())
            kept.append(line)
        kept += [b"Authorization: Bearer " + token.encode(), b"Connection: close"]
        server_reader, server_writer = await asyncio.open_connection("127.0.0.1", target_port, limit=HEADER_LIMIT)
        try:
            server_writer.write(b"\r\n".join(kept) + b"\r\n\r\n")
            await asyncio.gather(_pipe(client_reader, server_writer), _pipe(server_reader, client_writer))
        finally:
            server_writer.close()
            client_writer.close()

    return await asyncio.start_server(handle, "127.0.0.1", 0, limit=HEADER_LIMIT)


def _conformance(url: str, scenario: str, output: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{NODE_DIR}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run(
        [str(CLI), "server", "--url", url, "--scenario", scenario, "-o", str(output)],
        capture_output=True, text=True, timeout=SCENARIO_SECONDS, env=env, stdin=subprocess.DEVNULL,
    )


async def test_the_generic_server_checks_pass(tmp_path: Path) -> None:
    if not CLI.exists():
        pytest.skip("没有 MCP conformance 命令行工具：运行 npm ci --prefix tests/conformance（scripts/bootstrap.sh --test 会安装）")
    data = tmp_path / "data"
    async with http_server(data) as (url, _proc, _lines):
        port = int(url.rsplit(":", 1)[1].split("/", 1)[0])
        proxy = await _serve_proxy(_token(data), port)
        proxy_port = proxy.sockets[0].getsockname()[1]
        outputs: dict[str, str] = {}
        try:
            for scenario in GENERIC:
                done = await asyncio.to_thread(
                    _conformance, f"http://127.0.0.1:{proxy_port}/mcp", scenario, tmp_path / "results" / scenario
                )
                outputs[scenario] = done.stdout[-3000:] + done.stderr[-2000:]
        finally:
            proxy.close()
    checks = {
        scenario: [check for found in (tmp_path / "results" / scenario).glob("*/checks.json")
                   for check in json.loads(found.read_text(encoding="utf-8"))]
        for scenario in GENERIC
    }
    failed = {scenario: outputs[scenario] for scenario, ran in checks.items()
              if not ran or any(check["status"] != "SUCCESS" for check in ran)}
    assert not failed, failed
    # tools-list saw our whole list, and that list carries what the check is meant to cover.
    tools = listed_tools()
    assert checks["tools-list"][0]["details"]["tools"] == [tool.name for tool in tools]
    assert all(tool.title and tool.icons and tool.output_schema for tool in tools)
