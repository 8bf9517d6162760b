"""`cnki-mcp serve --http`: streamable HTTP at /mcp with the official MCP client, behind a bearer token and
Host/Origin checks; `config <client> --http` and `config --rotate-token`. Loopback only."""

from __future__ import annotations

import asyncio
import json
import os
import re
import resource
import stat
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx2
import psutil
import pytest
from click.testing import CliRunner
from mcp import Client, ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from cnki_mcp.cli import cli
from cnki_mcp.core.clock import within
from cnki_mcp.serving import endpoint
from tests.harness import REPO

FIGURES: dict[str, float] = {}

URL_LINE = re.compile(r"HTTP 服务：(http://[^\s/]+:(\d+)/mcp)")
INIT = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
ACCEPT = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


def _env(data: Path) -> dict[str, str]:
    return {**os.environ, "CNKI_DATA_DIR": str(data), "CNKI_BROWSER_PATH": str(data.parent / "no-such-browser"), "CNKI_LOG_LEVEL": "INFO"}


@asynccontextmanager
async def http_server(
    data: Path, *args: str, descriptors: int = 0
) -> AsyncIterator[tuple[str, asyncio.subprocess.Process, list[str]]]:
    """``cnki-mcp serve --http --port 0 …`` on ``data``; its URL (read from stderr), the process and stderr lines.
    ``descriptors``: the server's descriptor limit (soft and hard), as on a machine with a low one."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (descriptors, descriptors))

    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "cnki_mcp", "serve", "--http", "--port", "0", *args,
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env=_env(data), cwd=REPO, preexec_fn=limit if descriptors else None,
    )
    lines: list[str] = []
    assert proc.stderr is not None
    try:
        async with asyncio.timeout(30):
            while not (found := URL_LINE.search(lines[-1] if lines else "")):
                line = (await proc.stderr.readline()).decode("utf-8", "replace")
                assert line, "".join(lines)
                lines.append(line)

        async def drain() -> None:
            assert proc.stderr is not None
            while line := await proc.stderr.readline():
                lines.append(line.decode("utf-8", "replace"))

        drainer = asyncio.create_task(drain())
        yield found.group(1), proc, lines
    finally:
        if proc.returncode is None:
            proc.terminate()
            await within(proc.wait(), 20)
        if "drainer" in locals():
            await within(drainer, 5)


def _token(data: Path) -> str:
    return (data / endpoint.TOKEN_FILE).read_text().strip()


async def test_the_official_client_needs_the_token_and_a_local_host(tmp_path: Path) -> None:
    data = tmp_path / "data"
    async with http_server(data) as (url, proc, lines):
        token = _token(data)
        assert stat.S_IMODE((data / endpoint.TOKEN_FILE).stat().st_mode) == 0o600
        owner = json.loads((data / "owner.json").read_text())
        assert owner["pid"] == proc.pid and url.endswith(f":{owner['port']}/mcp")
        async with httpx2.AsyncClient(timeout=10) as http:
            missing = await http.post(url, json=INIT, headers=ACCEPT)
            wrong = await http.post(url, json=INIT, headers={**ACCEPT, "authorization": "Bearer nope"})
            port = url.rsplit(":", 1)[1].split("/")[0]
            foreign = await http.post(url, json=INIT, headers={**ACCEPT, "authorization": f"Bearer {token}", "host": f"attacker.example:{port}"})
            origin = await http.post(url, json=INIT, headers={**ACCEPT, "authorization": f"Bearer {token}", "origin": "http://attacker.example"})
            good = await http.post(url, json=INIT, headers={**ACCEPT, "authorization": f"Bearer {token}"})
        assert (missing.status_code, wrong.status_code) == (401, 401)
        assert missing.headers["www-authenticate"].startswith("Bearer")
        assert foreign.status_code == 421 and origin.status_code == 403
        assert good.status_code == 200

        async with create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}) as client:
            async with streamable_http_client(url, http_client=client) as (read, write):
                async with ClientSession(read, write) as session:
                    await within(session.initialize(), 20)
                    tools = (await session.list_tools()).tools
                    diagnostics = await within(session.call_tool("diagnostics", {}), 20)
                    stored = await within(session.call_tool("search_results", {"search_id": "nope"}), 20)
        assert len(tools) >= 13
        assert not diagnostics.is_error
        assert diagnostics.structured_content["owner_pid"] == proc.pid
        assert diagnostics.structured_content["data_dir"] == str(data)
        assert stored.is_error and stored.structured_content["errors"][0]["code"] == "SEARCH_NOT_FOUND"

        async with create_mcp_http_client(headers={"Authorization": "Bearer wrong"}) as client:
            with pytest.raises(BaseException):  # noqa: B017 - the client's own error for a 401, wrapped by its task groups
                async with streamable_http_client(url, http_client=client) as (read, write):
                    async with ClientSession(read, write) as session:
                        await within(session.initialize(), 10)
    assert proc.returncode == 0, "".join(lines)
    assert not (data / "owner.json").exists()


async def test_both_eras_are_served(tmp_path: Path) -> None:
    """A 2026-07-28 client (``server/discover``, single exchanges) and a 2025 one (the handshake) on one endpoint."""
    data = tmp_path / "data"
    async with http_server(data) as (url, proc, _lines):
        for mode, era in (("auto", "2026-07-28"), ("legacy", "2025-11-25")):
            async with create_mcp_http_client(headers={"Authorization": f"Bearer {_token(data)}"}) as http:
                async with Client(streamable_http_client(url, http_client=http), mode=mode) as client:
                    assert client.session.protocol_version == era
                    diagnostics = await within(client.call_tool("diagnostics", {}), 20)
            assert diagnostics.structured_content["owner_pid"] == proc.pid, mode


async def test_a_rotated_token_takes_effect_at_once(tmp_path: Path) -> None:
    data = tmp_path / "data"
    async with http_server(data) as (url, _, _lines):
        old = _token(data)
        rotated = CliRunner().invoke(cli, ["config", "--rotate-token"], env={"CNKI_DATA_DIR": str(data)})
        assert rotated.exit_code == 0, rotated.output
        new = _token(data)
        assert new != old
        async with httpx2.AsyncClient(timeout=10) as http:
            refused = await http.post(url, json=INIT, headers={**ACCEPT, "authorization": f"Bearer {old}"})
            accepted = await http.post(url, json=INIT, headers={**ACCEPT, "authorization": f"Bearer {new}"})
        assert (refused.status_code, accepted.status_code) == (401, 200)


async def test_a_non_loopback_host_is_warned_about(tmp_path: Path) -> None:
    data = tmp_path / "data"
    async with http_server(data, "--host", "0.0.0.0") as (url, _, lines):
        assert any("警告" in line and "令牌" in line for line in lines)
        async with httpx2.AsyncClient(timeout=10) as http:
            good = await http.post(url, json=INIT, headers={**ACCEPT, "authorization": f"Bearer {_token(data)}"})
            foreign = await http.post(url, json=INIT, headers={**ACCEPT, "authorization": f"Bearer {_token(data)}", "host": "evil.example"})
        assert good.status_code == 200 and foreign.status_code == 421


async def test_a_second_http_owner_on_the_same_directory_is_refused(tmp_path: Path) -> None:
    data = tmp_path / "data"
    async with http_server(data):
        second = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "cnki_mcp", "serve", "--http", "--port", "0",
            stdin=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE, env=_env(data), cwd=REPO,
        )
        _, err = await within(second.communicate(), 30)
        assert second.returncode == 1
        assert "DATA_DIRECTORY_IN_USE" in err.decode()


def test_config_http_prints_the_url_and_the_same_token_until_rotated(tmp_path: Path) -> None:
    env = {"CNKI_DATA_DIR": str(tmp_path / "data")}
    runner = CliRunner()
    first = runner.invoke(cli, ["config", "claude-code", "--http"], env=env)
    again = runner.invoke(cli, ["config", "cursor", "--http", "--port", "9001"], env=env)
    codex = runner.invoke(cli, ["config", "codex", "--http"], env=env)
    assert first.exit_code == 0 and again.exit_code == 0 and codex.exit_code == 0
    entry = json.loads(first.stdout)["mcpServers"]["cnki"]
    token = _token(tmp_path / "data")
    assert entry == {"type": "http", "url": "http://127.0.0.1:8765/mcp", "headers": {"Authorization": f"Bearer {token}"}}
    assert json.loads(again.stdout)["mcpServers"]["cnki"]["url"] == "http://127.0.0.1:9001/mcp"
    assert f'Bearer {token}' in again.stdout and f'Bearer {token}' in codex.stdout
    assert 'url = "http://127.0.0.1:8765/mcp"' in codex.stdout
    yaml = runner.invoke(cli, ["config", "dsh-web", "--http"], env=env)
    assert yaml.exit_code == 1 and "CLIENT_HTTP_UNSUPPORTED" in yaml.output
    rotated = runner.invoke(cli, ["config", "--rotate-token"], env=env)
    assert rotated.exit_code == 0 and _token(tmp_path / "data") != token
    serve_help = runner.invoke(cli, ["serve", "--help"])
    assert all(flag in serve_help.output for flag in ("--http", "--host", "--port"))
    alone = runner.invoke(cli, ["serve", "--port", "9000"], env=env)
    assert alone.exit_code == 1 and "INVALID_ARGUMENT" in alone.output


def test_allowed_hosts() -> None:
    assert endpoint.allowed_hosts("127.0.0.1", 8765) == {"127.0.0.1:8765", "localhost:8765", "[::1]:8765"}
    assert "10.1.2.3:80" in endpoint.allowed_hosts("10.1.2.3", 80)
    assert "localhost:80" not in endpoint.allowed_hosts("10.1.2.3", 80)


def test_a_token_file_loosened_at_run_time_is_tightened_again(tmp_path: Path) -> None:
    tokens = endpoint._TokenFile(tmp_path)
    path = tmp_path / endpoint.TOKEN_FILE
    expected = path.read_bytes().strip()
    path.chmod(0o644)

    assert tokens.current() == expected
    assert stat.S_IMODE(path.stat().st_mode) == 0o600



async def test_a_thousand_idle_connections_without_the_token_never_keep_a_real_call_out(tmp_path: Path) -> None:
    data = tmp_path / "data"
    async with http_server(data, descriptors=1024) as (url, proc, lines):
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        held: list[asyncio.StreamWriter] = []
        for n in range(1000):  # idle ones, and ones that stop in the middle of their headers
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            if n % 2:
                writer.write(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Le")
            held.append(writer)
        try:
            started = time.monotonic()
            async with httpx2.AsyncClient(timeout=10) as http:
                answer = await http.post(url, json=INIT, headers={**ACCEPT, "authorization": f"Bearer {_token(data)}"})
            FIGURES["real_call_seconds"] = time.monotonic() - started
            await asyncio.sleep(endpoint.STALL_SECONDS + 2)  # connections over the cap are judged stalled after STALL_SECONDS
            open_now = len(psutil.Process(proc.pid).net_connections("tcp"))
        finally:
            for writer in held:
                writer.close()
        assert answer.status_code == 200
        assert FIGURES["real_call_seconds"] < 2.0, FIGURES
        assert open_now <= 1024 // 4 + 8  # the cap: a quarter of 1,024 descriptors, the listener and the call
    text = "".join(lines)
    assert "Traceback" not in text
    assert len(lines) < 40, text[-2000:]
    print(f"real call behind 1,000 idle connections: {FIGURES['real_call_seconds'] * 1000:.0f} ms")


def _answers(response: httpx2.Response) -> list[dict[str, object]]:
    """The JSON-RPC messages of a streamable-HTTP answer (a JSON body or server-sent events)."""
    if response.headers.get("content-type", "").startswith("application/json"):
        return [response.json()]
    return [json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:") and line[5:].strip()]


async def test_a_lone_surrogate_in_http_arguments_is_invalid_input(tmp_path: Path) -> None:
    """JSON over HTTP may escape half a surrogate pair (stdio's line layer refuses such a line): the tool
    answers INVALID_INPUT naming the field, and the server goes on answering."""
    data = tmp_path / "data"
    async with http_server(data) as (url, proc, lines):
        auth = {**ACCEPT, "authorization": f"Bearer {_token(data)}", "mcp-protocol-version": "2025-06-18"}
        async with httpx2.AsyncClient(timeout=20) as http:
            opened = await http.post(url, json=INIT, headers=auth)
            session = {**auth, "mcp-session-id": opened.headers["mcp-session-id"]}
            await http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
            answers = []
            for args in ('{"search_id": "s_\\ud83d"}', '{"search_id": "s_1", "view": "x\\udc00y"}'):
                body = '{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "search_results", "arguments": ' + args + "}}"
                answers.append(_answers(await http.post(url, content=body.encode(), headers=session))[-1])
            after = await http.post(url, json={"jsonrpc": "2.0", "id": 8, "method": "tools/call",
                                               "params": {"name": "diagnostics", "arguments": {}}}, headers=session)
        for answer, field in zip(answers, ("search_id", "view")):
            result = answer.get("result")
            assert isinstance(result, dict) and result["isError"], answer
            (error,) = result["structuredContent"]["errors"]
            assert error["code"] == "INVALID_INPUT" and error["details"]["field"] == field  # before: SEARCH_NOT_FOUND, INVALID_VIEW
        assert "error" not in _answers(after)[-1]
    assert proc.returncode == 0, "".join(lines)


DISCOVER = {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}}}
ERA = {**ACCEPT, "mcp-protocol-version": "2026-07-28", "mcp-method": "server/discover"}


async def _post_all(url: str, count: int, headers: dict[str, str]) -> list[int | str]:
    """``count`` POSTs at once, each on a connection of its own: each one's status, or the error it met."""
    limits = httpx2.Limits(max_connections=count, max_keepalive_connections=0)
    async with httpx2.AsyncClient(timeout=60, limits=limits) as http:

        async def one() -> int | str:
            try:
                answer = await http.post(url, json=DISCOVER, headers=headers)
            except httpx2.HTTPError as exc:
                return type(exc).__name__
            if answer.status_code == 503:
                assert answer.json()["error"]["data"]["code"] == "SERVER_BUSY", answer.text
                assert answer.headers["retry-after"]
            return answer.status_code

        return list(await asyncio.gather(*(one() for _ in range(count))))


async def test_a_flood_without_the_token_never_resets_a_token_carrying_call(tmp_path: Path) -> None:
    """Issue 42 item 5: 2,000 unauthenticated requests at once, 16 authorised calls among them."""
    data = tmp_path / "data"
    async with http_server(data) as (url, _proc, lines):
        authorised = {**ERA, "authorization": f"Bearer {_token(data)}"}
        flood = asyncio.ensure_future(_post_all(url, 2000, ERA))


        async def later(k: int) -> list[int | str]:
            await asyncio.sleep(0.05 * k)  # spread over the flood's arrival
            return await _post_all(url, 1, authorised)

        real = await asyncio.gather(*(later(k) for k in range(16)))
        anonymous = await flood
    outcomes = Counter(status for (status,) in real)
    FIGURES["flood_real_calls_answered"] = outcomes[200]
    print(f"16 authorised calls inside 2,000 unauthenticated ones: {dict(outcomes)}; the flood: {dict(Counter(anonymous))}")
    assert outcomes == {200: 16}, (outcomes, Counter(anonymous))
    FIGURES["flood_refused_401"] = Counter(anonymous)[401]  # the rest were closed: refused without an answer
    assert "Traceback" not in "".join(lines)


async def test_a_flood_of_authorised_calls_is_answered_busy_never_reset(tmp_path: Path) -> None:
    """Issue 42 item 5: 2,000 authorised 2026-era calls at once: each answered, the ones beyond the limit 503."""
    data = tmp_path / "data"
    async with http_server(data) as (url, _proc, lines):
        statuses = await _post_all(url, 2000, {**ERA, "authorization": f"Bearer {_token(data)}"})
    outcomes = Counter(statuses)
    print(f"2,000 authorised calls at once: {dict(outcomes)}")
    assert set(outcomes) <= {200, 503}, outcomes
    assert outcomes[200] >= endpoint.AUTHORISED_INFLIGHT, outcomes
    assert "Traceback" not in "".join(lines)
