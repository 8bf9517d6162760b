"""How tests talk to the server: a real MCP client over stdio to ``python -m cnki_mcp serve`` (held open
for a whole test module or one test, or from synchronous tests through a thread of its own), raw JSON-RPC
lines on the same process's pipes for what no client would send, or ``call_tool`` on an in-process App,
answering as a client would see it."""

from __future__ import annotations

import abc
import asyncio
import collections
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from pathlib import Path
from typing import IO, Any, Literal, Self

import jsonschema
import msgspec
import psutil
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import get_default_environment, stdio_client
from mcp.types import CallToolResult, TextContent

from cnki_mcp.app import App
from cnki_mcp.core.clock import within
from cnki_mcp.surface.tools import dispatch, listed_tools, parse_arguments

FINAL = ("completed", "partial", "failed", "skipped", "cancelled", "interrupted")
AWAITING = ("awaiting_user", *FINAL)  # a person is asked, or the operation ended
REPO = Path(__file__).resolve().parents[1]
SERVE = (sys.executable, "-m", "cnki_mcp", "serve")

# The last answers this process's sessions read (a repeated one counted, not kept twice): a failed test's report
# shows them (tests/conftest.py), so a CI run that hung or failed says where its operation stood.
RECENT_ANSWERS: collections.deque[list[Any]] = collections.deque(maxlen=16)
ANSWER_CHARACTERS = 600
CHANGING_FIELDS = ("active_seconds", "budget", "updated_at")  # left out, so a wait's repeated view is one line


def remember_answer(tool: str, answer: dict[str, Any]) -> None:
    """Keep ``answer`` (shortened) among RECENT_ANSWERS."""
    kept = {name: value for name, value in answer.items() if name not in CHANGING_FIELDS}
    line = f"{tool}: {json.dumps(kept, ensure_ascii=False)}"
    line = line if len(line) <= ANSWER_CHARACTERS else line[:ANSWER_CHARACTERS] + " …"
    if RECENT_ANSWERS and RECENT_ANSWERS[-1][0] == line:
        RECENT_ANSWERS[-1][1] += 1
    else:
        RECENT_ANSWERS.append([line, 1])


async def call_tool(app: App, tool: str, raw: dict[str, Any], ctx: Any = None) -> Any:
    """One tool call on an in-process App, its answer as JSON values (what the client receives), checked against
    the tool's served output schema."""
    return conforms(tool, msgspec.to_builtins(await dispatch(app, tool, parse_arguments(tool, raw), ctx)))


# Each tool's ``outputSchema`` as ``tools/list`` serves it.
SERVED_OUTPUT = {tool.name: tool.output_schema for tool in listed_tools()}


def conforms(tool: str, answer: Any) -> Any:
    """``answer`` (JSON values) once checked against the output schema ``tools/list`` serves for ``tool``."""
    jsonschema.validate(answer, SERVED_OUTPUT[tool], cls=jsonschema.Draft202012Validator)
    return answer


def served_conforms(tool: str, result: CallToolResult) -> CallToolResult:
    """``result`` once its structured content, an ``isError`` answer's too, is checked as a strict client would
    (mcp's client checks only the others); a tool that does not exist has no schema."""
    if result.structured_content is not None and tool in SERVED_OUTPUT:
        conforms(tool, result.structured_content)
    return result


# --- the browser ------------------------------------------------------------------------------------


def chromium_path() -> str | None:
    """The Chromium the tests drive: CNKI_TEST_BROWSER, else the first one on PATH."""
    found = (shutil.which(name) for name in ("chromium", "chromium-browser", "google-chrome"))
    return os.environ.get("CNKI_TEST_BROWSER") or next((path for path in found if path), None)


def chromium_or_skip() -> str:
    """``chromium_path()``, or skip the test."""
    path = chromium_path()
    if not path:
        pytest.skip("没有可用的 Chromium（CI 会安装 Debian 的 chromium）")
    return path


def launch_chromium(exe: str, profile: str, extra: list[str]) -> tuple[subprocess.Popen[bytes], int]:
    """``exe`` headless on the profile ``profile`` with ``extra`` arguments, CDP on a loopback port of its choosing."""
    args = [exe, f"--user-data-dir={profile}", "--remote-debugging-port=0", "--remote-debugging-address=127.0.0.1",
            "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
            "--disable-background-networking", "--disable-component-update", "--disable-sync", *extra, "about:blank"]
    proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    port_file = os.path.join(profile, "DevToolsActivePort")
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"chromium exited early ({proc.returncode})")
        try:
            with open(port_file) as fh:
                return proc, int(fh.read().splitlines()[0])
        except (FileNotFoundError, IndexError, ValueError):
            time.sleep(0.05)
    proc.kill()
    raise TimeoutError("DevToolsActivePort was not written")


@contextlib.asynccontextmanager
async def chromium_on_cdp(exe: str, extra: list[str], prefix: str) -> AsyncIterator[int]:
    """A headless Chromium of its own (a fresh profile named ``prefix``…): its CDP port. The test closes it (CDP
    Browser.close); on leaving, the process is waited for, killed after 5 s, and its profile removed."""
    profile = tempfile.mkdtemp(prefix=prefix)
    proc, port = await asyncio.to_thread(launch_chromium, exe, profile, extra)
    try:
        yield port
    finally:
        try:
            await asyncio.to_thread(proc.wait, 5)
        except subprocess.TimeoutExpired:
            proc.kill()
            await asyncio.to_thread(proc.wait, 5)
        shutil.rmtree(profile, ignore_errors=True)


def processes_on(marker: Path | str) -> list[psutil.Process]:
    """Live processes whose command line names ``marker`` (a data directory's browser profile, say)."""
    found = []
    for process in psutil.process_iter(["cmdline", "status"]):
        with contextlib.suppress(psutil.Error):
            if process.info["status"] != psutil.STATUS_ZOMBIE and any(str(marker) in arg for arg in process.info["cmdline"] or []):
                found.append(process)
    return found


def process_tree(roots: list[psutil.Process]) -> list[psutil.Process]:
    """``roots`` and all their live children, each once."""
    tree: dict[int, psutil.Process] = {}
    for root in roots:
        with contextlib.suppress(psutil.Error):
            for member in [root, *root.children(recursive=True)]:
                tree[member.pid] = member
    return list(tree.values())


def tcp_ports(processes: list[psutil.Process], *, listening: bool) -> list[int]:
    """The local TCP ports of ``processes``: those they listen on, or all their sockets'."""
    ports: set[int] = set()
    for process in processes:
        with contextlib.suppress(psutil.Error):
            ports |= {c.laddr.port for c in process.net_connections(kind="tcp") if c.status == psutil.CONN_LISTEN or not listening}
    return sorted(ports)


# --- the server's parameters ------------------------------------------------------------------------


def serve_params(data: Path, browser_args: str | None = None, *, command: Sequence[str] = SERVE, **env: str) -> StdioServerParameters:
    """``command`` (``python -m cnki_mcp serve``) on ``data``, with ``env`` over what the SDK passes on (PATH,
    HOME …). With ``browser_args``: a headless Chromium pointed at the simulator, 10 ms between requests."""
    base = {"CNKI_DATA_DIR": str(data)}
    if browser_args is not None:
        base |= {
            "CNKI_HEADLESS": "1",
            "CNKI_BROWSER_PATH": chromium_or_skip(),
            "CNKI_BROWSER_ARGS": browser_args,
            "CNKI_REQUEST_INTERVAL_MS": "10",
        }
    return StdioServerParameters(command=command[0], args=list(command[1:]), env=base | env, cwd=REPO)


def offline_params(data: Path, *, command: Sequence[str] = SERVE, **env: str) -> StdioServerParameters:
    """A server that cannot start a browser (its path names no file), so it never reaches the network."""
    defaults = {
        "CNKI_BROWSER_PATH": str(data.parent / "no-such-browser"),
        "CNKI_INLINE_WAIT_SECONDS": "5",
        "CNKI_LOG_LEVEL": "INFO",
    }
    return serve_params(data, command=command, **(defaults | env))


# --- answers and operations -------------------------------------------------------------------------


def reply_text(result: CallToolResult) -> str:
    """The answer's one text content."""
    assert len(result.content) == 1
    assert isinstance(result.content[0], TextContent)
    return result.content[0].text


def payload(result: CallToolResult) -> dict[str, Any]:
    """The answer's JSON text, which must equal its structured content."""
    data = json.loads(reply_text(result))
    assert data == result.structured_content
    return data


class Operations(abc.ABC):
    """Calls tools for their JSON answers and follows operations to the status a test waits for."""

    wait_timeout: float = 60

    @abc.abstractmethod
    async def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]: ...

    async def wait(self, view: dict[str, Any], until: tuple[str, ...] = FINAL, timeout: float | None = None) -> dict[str, Any]:
        deadline = time.monotonic() + (self.wait_timeout if timeout is None else timeout)
        while view.get("status") not in until:
            assert time.monotonic() < deadline, view
            assert view.get("status") in ("running", "awaiting_user"), view
            view = await self.call("operation_status", {"operation_id": view["operation_id"], "wait_seconds": 5})
        return view


# --- the MCP client ---------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def held_client(
    params: StdioServerParameters,
    *,
    read_timeout: float | None = 90,
    mode: Literal["auto", "legacy"] = "auto",
    errlog: IO[Any] | None = None,
) -> AsyncIterator[Client]:
    """The SDK client on a server of its own (its stderr to ``errlog`` if given). The client's task group
    must be entered and left by one task: a task of its own holds it, so a module-scoped fixture can hand
    the client to every test and close it at the end."""
    ready: asyncio.Future[Client] = asyncio.get_running_loop().create_future()
    stop = asyncio.Event()
    server = params if errlog is None else stdio_client(params, errlog=errlog)  # type: ignore[arg-type]

    async def hold() -> None:
        try:
            async with Client(server, mode=mode, read_timeout_seconds=read_timeout) as client:
                ready.set_result(client)
                await stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc)
            raise

    holder = asyncio.create_task(hold())
    client = await within(asyncio.shield(ready), 60)
    try:
        yield client
    finally:
        stop.set()
        await within(holder, 30)


class McpSession(Operations):
    """The client on a server whose data directory is ``data``; ``check`` reads every answer ``call`` returns."""

    def __init__(
        self,
        client: Client,
        data: Path,
        *,
        check: Callable[[CallToolResult], dict[str, Any]] = payload,
        wait_timeout: float = 60,
    ) -> None:
        self.client = client
        self.data = data
        self.check = check
        self.wait_timeout = wait_timeout

    @classmethod
    @contextlib.asynccontextmanager
    async def serving(
        cls,
        params: StdioServerParameters,
        *,
        check: Callable[[CallToolResult], dict[str, Any]] = payload,
        wait_timeout: float = 60,
        read_timeout: float | None = 90,
        mode: Literal["auto", "legacy"] = "auto",
        errlog: IO[Any] | None = None,
    ) -> AsyncIterator[Self]:
        """A session on the server ``params`` start, its client held by ``held_client``."""
        assert params.env is not None
        async with held_client(params, read_timeout=read_timeout, mode=mode, errlog=errlog) as client:
            yield cls(client, Path(params.env["CNKI_DATA_DIR"]), check=check, wait_timeout=wait_timeout)

    async def result(self, tool: str, arguments: dict[str, Any]) -> CallToolResult:
        """The answer as the client receives it (``is_error``, content, structured content), unread but checked
        against the tool's output schema."""
        return served_conforms(tool, await self.client.call_tool(tool, arguments))

    async def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        answer = self.check(await self.result(tool, arguments))
        remember_answer(tool, answer)
        return answer


class ThreadedClient:
    """``held_client`` for synchronous tests (hypothesis): the client lives in an event loop on a thread of
    its own, speaks the legacy handshake and writes the server's stderr to ``stderr``."""

    def __init__(self, params: StdioServerParameters, stderr: Path) -> None:
        self.params = params
        self.stderr = stderr
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="mcp-client", daemon=True)
        self.stack = contextlib.AsyncExitStack()
        self.client: Client | None = None
        self.calls = 0
        self.pid = 0

    def start(self) -> ThreadedClient:
        self.thread.start()
        errlog = self.stack.enter_context(open(self.stderr, "ab"))
        held = held_client(self.params, read_timeout=None, mode="legacy", errlog=errlog)
        self.client = self.run(self.stack.enter_async_context(held), 60)
        self.pid = self.call("diagnostics", {}).structured_content["process_id"]  # type: ignore[index]
        return self

    def run(self, coro: Coroutine[Any, Any, Any], timeout: float = 60) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def call(self, name: str, args: Any, timeout: float = 60) -> CallToolResult:
        assert self.client is not None
        self.calls += 1
        return served_conforms(name, self.run(self.client.call_tool(name, args), timeout))

    def alive(self) -> bool:
        try:
            return psutil.Process(self.pid).status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False

    def close(self) -> None:
        """Close stdin (the client's context exits) and wait for the server process to end."""
        self.run(self.stack.aclose(), 60)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


# --- raw JSON-RPC -----------------------------------------------------------------------------------


INIT_PARAMS = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}


class RawServer(Operations):
    """The server spoken to as JSON-RPC lines on its pipes: to send what no SDK client would, or to kill
    it, signal it or close its stdin at will. Every read waits ``read_timeout`` seconds at most."""

    def __init__(self, proc: asyncio.subprocess.Process, read_timeout: float) -> None:
        self.proc = proc
        self.read_timeout = read_timeout
        self.next_id = 100
        self.seen: list[dict[str, Any]] = []

    @classmethod
    async def spawn(cls, params: StdioServerParameters, errlog: IO[Any], read_timeout: float = 20) -> RawServer:
        """The process ``params`` name, with the environment the SDK would give it; no handshake yet."""
        proc = await asyncio.create_subprocess_exec(
            params.command, *params.args, cwd=params.cwd, env=get_default_environment() | (params.env or {}),
            limit=64 * 1024 * 1024, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=errlog,
        )
        return cls(proc, read_timeout)

    @classmethod
    async def start(cls, params: StdioServerParameters, errlog: IO[Any], read_timeout: float = 20) -> RawServer:
        """Spawned and initialised."""
        raw = await cls.spawn(params, errlog, read_timeout)
        await raw.initialize()
        return raw

    async def initialize(self) -> None:
        """The 2025-06-18 handshake: initialize, then the initialized notification."""
        await self.request("initialize", INIT_PARAMS)
        self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)

    def post(self, message: dict[str, Any]) -> None:
        """One JSON-RPC message, as one line."""
        self.send(json.dumps(message, ensure_ascii=False).encode() + b"\n")

    async def read(self, timeout: float | None = None) -> dict[str, Any]:
        """The next message; waits ``timeout`` seconds (default ``read_timeout``) at most."""
        assert self.proc.stdout is not None
        line = await within(self.proc.stdout.readline(), self.read_timeout if timeout is None else timeout)
        assert line, "the server closed stdout"
        message = json.loads(line)
        self.seen.append(message)
        return message

    async def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """The whole answer (``result`` or ``error``) to a request with an id of its own."""
        self.next_id += 1
        ident = self.next_id
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": ident, "method": method}
        if params is not None:
            message["params"] = params
        self.post(message)
        return await self.until(ident)

    async def until(self, ident: Any, timeout: float | None = None) -> dict[str, Any]:
        while True:
            message = await self.read(timeout)
            if message.get("id") == ident:
                return message

    async def drain(self, ident: int) -> list[dict[str, Any]]:
        """Everything answered up to a ping with ``ident`` (sent now): what the preceding input caused."""
        self.post({"jsonrpc": "2.0", "id": ident, "method": "ping"})
        seen = []
        while True:
            message = await self.read()
            if message.get("id") == ident:
                return seen
            seen.append(message)

    async def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """A tool's structured content."""
        return (await self.request("tools/call", {"name": tool, "arguments": arguments}))["result"]["structuredContent"]

    async def close(self, timeout: float = 20) -> int:
        """EOF on stdin; read what is still on its way, then the exit status. A server that does not
        end within ``timeout`` seconds of each step is killed (and its status is the kill's)."""
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        self.proc.stdin.close()
        try:
            while line := await within(self.proc.stdout.readline(), timeout):
                self.seen.append(json.loads(line))
            return await within(self.proc.wait(), timeout)
        except TimeoutError:
            self.proc.kill()
            return await self.proc.wait()
