"""The MCP surface: the tools of the registry (``tools.py``), the guide resource, two prompts, dispatch.

Built on mcp 2.x's low-level ``Server`` so the advertised input schemas are exactly ours (the SDK
sends them unchanged and validates nothing). Every ``tools/call`` goes through
``tools.parse_arguments`` and then ``tools.dispatch(app, name, args, ctx)``. Results are one compact JSON text block
plus the same object as structured content; any failure before an operation starts is answered
with ``isError: true`` and ``{"status": "failed", "errors": [Problem]}`` (``core.errors.Failure``, which every
tool's ``outputSchema`` admits), and so is an operation whose status is failed (its view unchanged); a tool that
does not exist is the JSON-RPC error -32602. The instructions are the head of ``guide.md``, the whole of it is the
resource ``cnki://guide``. The server never dies on a bad call.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import os
import re
import shutil
import tempfile
import time
import warnings
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import anyio
import msgspec
from mcp import Client, ClientSession, MCPError, StdioServerParameters, stdio_client
from mcp.server import Server, ServerRequestContext
from mcp.server.caching import CacheHint
from mcp.server.context import CallNext, HandlerResult
from mcp.types import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    CallToolRequestParams,
    CallToolResult,
    GetPromptRequestParams,
    GetPromptResult,
    ImageContent,
    Implementation,
    InputRequiredResult,
    ListPromptsResult,
    ListResourcesResult,
    ListResourceTemplatesResult,
    ListToolsResult,
    PaginatedRequestParams,
    Prompt,
    PromptArgument,
    PromptMessage,
    ReadResourceRequestParams,
    ReadResourceResult,
    Resource,
    SamplingMessage,
    TextContent,
    TextResourceContents,
    Tool,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from cnki_mcp import __version__
from cnki_mcp.core.call import PersonAnswer
from cnki_mcp.core.clock import Deadline
from cnki_mcp.core.errors import CnkiError, Failure, as_cnki_error
from cnki_mcp.core.model import Problem
from cnki_mcp.surface import elicit
from cnki_mcp.surface.apps import APP_URI, app_contents, with_app
from cnki_mcp.surface.tools import ICON, ToolApp, dispatch, listed_tools, parse_arguments
from cnki_mcp.surface.wire import stdio_streams, usable_id
from cnki_mcp.tools._parse import an_object

log = logging.getLogger(__name__)

SERVER_NAME = "cnki"
GUIDE_URI = "cnki://guide"
GUIDE_MIME_TYPE = "text/plain"


@cache
def guide_text() -> str:
    """The Chinese guide (package resource ``guide.md``), served whole as ``cnki://guide``."""
    return resources.files("cnki_mcp").joinpath("guide.md").read_text(encoding="utf-8").strip() + "\n"


def instructions_text() -> str:
    """The server's instructions: the guide up to its rule (``---``); the rest is read from ``cnki://guide``."""
    return guide_text().split("\n---\n", 1)[0].strip() + "\n"


TOOLS: list[Tool] = with_app(listed_tools())

# Prompt name -> description; the message is the description, a full-width colon, then the topic.
PROMPTS: dict[str, str] = {
    "literature_review": "基于实际取得的论文摘要和来源写文献综述，逐项链接证据",
    "research_topic": "深度检索以下研究问题",
}


# --- the app side ------------------------------------------------------------------------------------




class CallContext:
    """What a tool call may use of its MCP request: progress notifications, client sampling, the person asked.

    All are tied to the request: once the call has returned (a job may outlive it), progress is
    dropped, sampling answers None and the person is not asked. ``CallContext(None)`` is a context without a
    client. ``started`` (monotonic) is when the call arrived: the inline wait counts from it. In the 2026-07-28
    era sampling is not used (deprecated there) and the person is asked by the call's ``input_required``
    answer: ``asking`` holds the question, ``answered`` the answer a retry brought.
    """

    SAMPLING_PROGRESS_SECONDS = 3.0

    def __init__(self, request: ServerRequestContext[Any, Any] | None = None) -> None:
        self._request = request
        self._open = request is not None
        self._last_progress: float | None = None
        self.started = time.monotonic()
        caps = request.session.client_capabilities if request is not None else None
        self.modern = request is not None and request.protocol_version in MODERN_PROTOCOL_VERSIONS
        can_send = request is not None and request.session.can_send_request and not self.modern
        self.client_supports_sampling: bool = bool(can_send and caps is not None and caps.sampling is not None)
        self.client_supports_elicitation: bool = (can_send or self.modern) and elicit.supports_form(caps)
        self.asking: tuple[str, str] | None = None  # (operation_id, message): the 2026 era's question to answer with
        self.answered: list[PersonAnswer | None] = []  # a 2026 retry's answer, used by the first question

    async def ask_person(self, operation_id: str, message: str) -> PersonAnswer | None:
        """The person's answer, asked in the client (form elicitation); None when it cannot ask or no answer came.

        2025 era: an ``elicitation/create`` on this request, awaited (``Jobs`` bounds the wait and withdraws the
        question when the operation stops waiting). 2026 era: the answer a retry brought, else the question is
        kept in ``asking`` for the call's ``input_required`` answer, and ``later`` returned at once.
        """
        if not self._open or self._request is None or not self.client_supports_elicitation:
            return None
        if self.modern:
            if self.answered:
                return self.answered.pop()
            self.asking = (operation_id, message)
            return "later"
        try:
            reply = await self._request.session.elicit_form(
                elicit.question(message), elicit.SCHEMA, related_request_id=self._request.request_id
            )
        except MCPError as exc:
            if exc.error.code != METHOD_NOT_FOUND:
                raise
            # Declared, yet not implemented (some hosts answer so): this call goes on as one that cannot ask.
            self.client_supports_elicitation = False
            return None
        return elicit.answer_of(reply)

    def close(self) -> None:
        self._open = False

    async def report_progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """Send ``notifications/progress`` when the client asked for it; never fails the caller."""
        if not self._open or self._request is None:
            return
        if self._last_progress is not None and progress <= self._last_progress:
            return  # the protocol requires strictly increasing progress
        self._last_progress = progress
        try:
            await self._request.session.report_progress(progress, total, message)
        except Exception:  # a closed stream must not break the job reporting progress
            log.debug("progress notification not delivered", exc_info=True)

    async def sample(self, system_prompt: str, user_text: str, max_tokens: int, timeout: float) -> str | None:
        """Ask the client's model (MCP sampling) for at most ``timeout`` seconds.

        The reply's text, or None when sampling is unavailable, refused or failed. Raises
        TimeoutError when the client has not answered in time; the request is then cancelled. While
        it waits, progress says so every few seconds, as fractions below 1 so that the operation's
        own progress, which counts from 1, still rises after it.
        """
        if not self._open or self._request is None or not self.client_supports_sampling:
            return None
        asking = asyncio.ensure_future(self._create_message(system_prompt, user_text, max_tokens))
        deadline = Deadline(timeout)
        try:
            while not asking.done() and not deadline.passed:
                await asyncio.wait({asking}, timeout=min(self.SAMPLING_PROGRESS_SECONDS, deadline.remaining()))
                if not asking.done() and not deadline.passed:
                    waited = timeout - deadline.remaining()
                    await self.report_progress(waited / timeout, None, f"正在等待客户端模型回复（{waited:.0f}/{timeout:.0f} 秒）")
        finally:
            if not asking.done():
                asking.cancel()
        if not asking.done():
            await asyncio.wait({asking}, timeout=1.0)  # lets the SDK tell the client the request is cancelled
            raise TimeoutError(f"the client did not answer sampling within {timeout:g} s")
        try:
            return asking.result()
        except (Exception, asyncio.CancelledError):  # cancelled by the SDK (connection closing), not by us
            log.info("sampling failed; continuing without it", exc_info=True)
            return None

    async def _create_message(self, system_prompt: str, user_text: str, max_tokens: int) -> str | None:
        assert self._request is not None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # sampling is deprecated in the 2026 protocol, still fine for 2025 hosts
            reply = await self._request.session.create_message(
                [SamplingMessage(role="user", content=TextContent(type="text", text=user_text))],
                max_tokens=max_tokens,
                system_prompt=system_prompt,
                include_context="none",
                related_request_id=self._request.request_id,
            )
        blocks = reply.content if isinstance(reply.content, list) else [reply.content]
        text = "".join(block.text for block in blocks if isinstance(block, TextContent))
        return text or None


# --- results -----------------------------------------------------------------------------------------


def _result(value: Any, *, is_error: bool = False) -> CallToolResult:
    data = msgspec.json.encode(value)
    structured = msgspec.json.decode(data)
    if not isinstance(structured, dict):
        raise TypeError(f"tool result must be a JSON object, not {type(structured).__name__}")
    return CallToolResult(
        content=[TextContent(type="text", text=data.decode("utf-8"))],
        structured_content=structured,
        # An operation that failed is a failure to the client too (clients validate no output schema then).
        is_error=is_error or structured.get("status") == "failed",
    )


def _chart_path(structured: dict[str, Any]) -> Path | None:
    """The PNG a result names in ``chart.path`` (search_facets, inline or in operation_status's result)."""
    for holder in (structured, structured.get("result")):
        chart = holder.get("chart") if isinstance(holder, dict) else None
        if isinstance(chart, dict) and chart.get("mime_type") == "image/png" and isinstance(chart.get("path"), str):
            return Path(chart["path"])
    return None


async def with_images(result: CallToolResult) -> CallToolResult:
    """The result with the chart it names as MCP image content after its text; a chart file that went
    missing leaves the text alone (the path in it says where it was)."""
    path = _chart_path(result.structured_content or {})
    if path is None or result.is_error:
        return result
    try:
        data = await asyncio.to_thread(path.read_bytes)
    except OSError:
        log.warning("chart %s could not be read", path)
        return result
    image = ImageContent(type="image", data=base64.b64encode(data).decode("ascii"), mime_type="image/png")
    return result.model_copy(update={"content": [*result.content, image]})


def failure(error: CnkiError) -> CallToolResult:
    """The ``isError`` answer for a failure before (or instead of) an operation, with the app's warnings."""
    body = Failure(errors=[error.problem()], warnings=error.warnings or msgspec.UNSET)
    try:
        return _result(body, is_error=True)
    except (TypeError, ValueError, msgspec.EncodeError):
        log.exception("error details of %s are not serialisable; dropping them", error.code)
        return _result(Failure(errors=[Problem(code=error.code, message=error.message)]), is_error=True)


# A JSON escape of a surrogate (``\\ud83d``): only then may a body hold half a pair.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def lone_surrogate_answer(body: bytes) -> bytes | None:
    """The JSON-RPC answer to an HTTP body that is a ``tools/call`` whose arguments hold half a surrogate pair:
    the transport's own parser would refuse the whole body (``-32700``, id null), so the call is answered
    INVALID_INPUT naming the field, as a tool's refusal. None for every other body (the transport reads it)."""
    if not _SURROGATE_ESCAPE.search(body):
        return None
    try:
        message = json.loads(body)  # Python's parser keeps lone surrogates
    except (ValueError, RecursionError):
        return None
    if not (isinstance(message, dict) and message.get("method") == "tools/call" and usable_id(message.get("id"))):
        return None
    params = message.get("params")
    try:
        an_object(params.get("arguments") if isinstance(params, dict) else None)
        return None
    except CnkiError as exc:
        result = failure(exc).model_dump(mode="json", by_alias=True, exclude_none=True)
    return json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}, ensure_ascii=False).encode("utf-8")


async def _dispatch(
    app: ToolApp | None, request: ServerRequestContext[Any, Any], params: CallToolRequestParams
) -> CallToolResult | InputRequiredResult:
    ctx = CallContext(request)
    name, raw = params.name, params.arguments
    try:
        if params.request_state is not None:  # a 2026 retry bringing the person's answer
            name, raw = elicit.retried(params, ctx.answered)
        args = parse_arguments(name, raw)
        if app is None:
            raise CnkiError("OPERATION_FAILED", "这个服务实例只用于导出工具清单，不能执行工具。")
        return elicit.asked(await with_images(_result(await dispatch(app, name, args, ctx))), ctx.asking)
    except CnkiError as exc:
        if exc.code == "UNKNOWN_TOOL":  # the spec answers an unknown tool with a JSON-RPC error, not a result
            raise MCPError(INVALID_PARAMS, exc.message, data={"code": exc.code, "details": exc.details}) from None
        return failure(exc)
    except Exception as exc:
        log.exception("tool %s failed unexpectedly", name)
        return failure(as_cnki_error(exc))
    finally:
        ctx.close()


# --- the server --------------------------------------------------------------------------------------

# What the SDK answers to a request that comes before ``initialize`` (it keeps the shape of its old
# union validation); the same words also mean malformed params, so only the state tells them apart.
_SDK_GATE_MESSAGE = "Invalid request parameters"


async def _initialize_first(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """A request before the handshake is told that ``initialize`` must come first."""
    try:
        return await call_next(ctx)
    except MCPError as exc:
        gate = exc.error.code == INVALID_PARAMS and exc.error.message == _SDK_GATE_MESSAGE
        if gate and ctx.session.client_params is None and ctx.method != "initialize":
            message = f"请先发送 initialize 请求完成握手，再发送 {ctx.method}（MCP 连接的第一条请求必须是 initialize）。"
            raise MCPError(INVALID_REQUEST, message, data={"method": ctx.method}) from None
        raise


def build_server(app: ToolApp | None) -> Server[Any]:
    """The MCP server for ``app``. ``None`` serves discovery only (tools, resource, prompts)."""

    async def list_tools(ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None) -> ListToolsResult:
        return ListToolsResult(tools=TOOLS)

    async def call_tool(
        ctx: ServerRequestContext[Any, Any], params: CallToolRequestParams
    ) -> CallToolResult | InputRequiredResult:
        return await _dispatch(app, ctx, params)

    async def list_resources(
        ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None
    ) -> ListResourcesResult:
        return ListResourcesResult(resources=[Resource(uri=GUIDE_URI, name="guide", mime_type=GUIDE_MIME_TYPE)])

    async def list_resource_templates(
        ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None
    ) -> ListResourceTemplatesResult:
        # Resources are advertised, so clients ask for templates too; there are none.
        return ListResourceTemplatesResult(resource_templates=[])

    async def read_resource(ctx: ServerRequestContext[Any, Any], params: ReadResourceRequestParams) -> ReadResourceResult:
        uri = str(params.uri)
        if uri == APP_URI:
            return ReadResourceResult(contents=[app_contents()])
        if uri != GUIDE_URI:
            raise MCPError(INVALID_PARAMS, f"没有这个资源：{uri}；可用资源只有 {GUIDE_URI} 和 {APP_URI}。", data={"uri": uri})
        return ReadResourceResult(contents=[TextResourceContents(uri=uri, mime_type=GUIDE_MIME_TYPE, text=guide_text())])

    async def list_prompts(ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None) -> ListPromptsResult:
        return ListPromptsResult(
            prompts=[
                Prompt(name=name, description=text, arguments=[PromptArgument(name="topic", required=True)])
                for name, text in PROMPTS.items()
            ]
        )

    async def get_prompt(ctx: ServerRequestContext[Any, Any], params: GetPromptRequestParams) -> GetPromptResult:
        text = PROMPTS.get(params.name)
        if text is None:
            raise MCPError(INVALID_PARAMS, f"没有这个提示词：{params.name}；可用的有 {'、'.join(PROMPTS)}。")
        topic = (params.arguments or {}).get("topic")
        if topic is None:
            raise MCPError(INVALID_PARAMS, "缺少参数 topic。")
        return GetPromptResult(
            messages=[PromptMessage(role="user", content=TextContent(type="text", text=f"{text}：{topic}"))]
        )

    server = Server(
        SERVER_NAME,
        version=__version__,
        instructions=instructions_text(),
        icons=[ICON],
        # The same lists for every caller.
        cache_hints={method: CacheHint(scope="public") for method in ("tools/list", "resources/list", "prompts/list")},
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_resource_templates,
        on_read_resource=read_resource,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
    )
    server.middleware.append(_initialize_first)
    server.middleware.append(elicit.boundary())  # seals the 2026 era's requestState (the person asked)
    return server


async def serve_stdio(app: ToolApp, answered: asyncio.Event | None = None) -> None:
    """Serve MCP on stdin/stdout until the client closes stdin; ``answered`` is set once a first request
    has been handled (what can wait, such as the owner's endpoint, starts then)."""
    server = build_server(app)
    if answered is not None:

        async def handled(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
            try:
                return await call_next(ctx)
            finally:
                answered.set()

        server.middleware.append(handled)
    async with stdio_streams() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


async def schema_document() -> dict[str, Any]:
    """The ``tools/list`` result as served, fetched through an in-memory client named ``cnki-contract``."""
    client_info = Implementation(name="cnki-contract", version=__version__)
    async with Client(build_server(None), client_info=client_info) as client:
        listing = await client.list_tools()
    return listing.model_dump(mode="json", by_alias=True, exclude_none=True)


# --- protocol probe (doctor --protocol, end of setup) ---------------------------------------------


async def protocol_probe(command: list[str], timeout: float = 15.0) -> dict[str, Any]:
    """Spawn ``command serve`` on a fresh data directory and check a real stdio MCP round trip.

    ``command`` may already end with ``serve`` (as a client configuration's argv does). Raises
    CnkiError("PROTOCOL_CHECK_FAILED") with the cause when any step fails.
    """
    data_dir = Path(tempfile.mkdtemp(prefix="cnki-protocol-"))
    try:
        with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as child_log:
            try:
                with anyio.fail_after(timeout):
                    return await _probe(command, data_dir, child_log)
            except Exception as exc:
                cause = _first_cause(exc)
                if isinstance(cause, CnkiError):
                    raise cause from None
                if isinstance(cause, TimeoutError):
                    raise _probe_failure(f"{timeout:g} 秒内没有完成", child_log) from None
                raise _probe_failure(f"{type(cause).__name__}: {cause}", child_log) from exc
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


def _first_cause(exc: BaseException) -> BaseException:
    """Task groups wrap failures in exception groups; report the first real one."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _probe_failure(cause: str, child_log: Any) -> CnkiError:
    with contextlib.suppress(OSError, ValueError):
        child_log.flush()
        child_log.seek(0)
        tail = child_log.read()[-800:].strip()
        if tail:
            cause = f"{cause}；子进程输出：{tail}"
    return CnkiError("PROTOCOL_CHECK_FAILED", f"MCP 通信检查未通过：{cause}", details={"cause": cause})


async def _probe(command: list[str], data_dir: Path, child_log: Any) -> dict[str, Any]:
    argv = command if command[-1:] == ["serve"] else [*command, "serve"]
    params = StdioServerParameters(
        command=argv[0],
        args=argv[1:],
        env={**os.environ, "CNKI_DATA_DIR": str(data_dir)},
    )
    client_info = Implementation(name="cnki-doctor", version=__version__)
    async with stdio_client(params, errlog=child_log) as (read_stream, write_stream):
        async with ClientSession(read_stream, write_stream, client_info=client_info) as session:
            await session.initialize()
            tools = (await session.list_tools()).tools
            if not tools:
                raise _probe_failure("子进程没有提供任何工具", child_log)
            resources_listed = [str(r.uri) for r in (await session.list_resources()).resources]
            if GUIDE_URI not in resources_listed:
                raise _probe_failure(f"子进程没有提供资源 {GUIDE_URI}", child_log)
            prompts_listed = {p.name for p in (await session.list_prompts()).prompts}
            if not set(PROMPTS) <= prompts_listed:
                raise _probe_failure("子进程缺少提示词 research_topic 或 literature_review", child_log)
            result = await session.call_tool("diagnostics", {})
            if result.is_error:
                text = result.content[0].text if result.content and isinstance(result.content[0], TextContent) else ""
                raise _probe_failure(f"diagnostics 返回错误 {text}", child_log)
            version = (result.structured_content or {}).get("version")
            if version != __version__:
                raise _probe_failure(f"版本不一致：子进程 {version!r}，本程序 {__version__!r}", child_log)
    if (data_dir / "browser").exists():
        raise _probe_failure("列出工具和调用 diagnostics 时创建了浏览器目录", child_log)
    return {"passed": True, "transport": "stdio", "tools": len(tools), "version": __version__, "browser_started": False}
