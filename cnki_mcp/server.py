"""The MCP surface: the 13 tools with hand-written schemas, the guide resource, two prompts, dispatch.

Built on mcp 2.x's low-level ``Server`` so the advertised input schemas are exactly ours (the SDK
sends them unchanged and validates nothing). Every ``tools/call`` goes through
``arguments.parse`` and then ``app.call(name, args, ctx)``. Results are one compact JSON text block
plus the same object as structured content; any failure before an operation starts is answered
with ``isError: true`` and ``{"status": "failed", "errors": [Problem]}``. The server never dies on
a bad call.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
import warnings
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, Protocol

import anyio
import msgspec
from mcp import Client, ClientSession, MCPError, StdioServerParameters, stdio_client
from mcp.server import Server, ServerRequestContext
from mcp.server.caching import CacheHint
from mcp.server.stdio import stdio_server
from mcp.types import (
    INVALID_PARAMS,
    CallToolRequestParams,
    CallToolResult,
    GetPromptRequestParams,
    GetPromptResult,
    Implementation,
    ListPromptsResult,
    ListResourcesResult,
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
    ToolAnnotations,
)

from cnki_mcp import __version__, arguments
from cnki_mcp.errors import CnkiError, as_cnki_error

log = logging.getLogger(__name__)

SERVER_NAME = "cnki"
GUIDE_URI = "cnki://guide"
GUIDE_MIME_TYPE = "text/plain"


@cache
def guide_text() -> str:
    """The Chinese guide (package resource ``guide.md``): server instructions and ``cnki://guide``."""
    return resources.files("cnki_mcp").joinpath("guide.md").read_text(encoding="utf-8").strip() + "\n"


# --- tool schemas ----------------------------------------------------------------------------------


def _string(description: str | None = None, enum: tuple[str, ...] | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    if description:
        schema["description"] = description
    if enum:
        schema["enum"] = list(enum)
    return schema


def _integer(description: str | None = None) -> dict[str, Any]:
    return {"description": description, "type": "integer"} if description else {"type": "integer"}


def _boolean(description: str | None = None) -> dict[str, Any]:
    return {"description": description, "type": "boolean"} if description else {"type": "boolean"}


def _strings(description: str | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"items": {"type": "string"}, "type": ["null", "array"]}
    if description:
        schema["description"] = description
    return schema


def _object(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    schema: dict[str, Any] = {"additionalProperties": False, "type": "object"}
    if properties:
        schema["properties"] = dict(sorted(properties.items()))
    if required:
        schema["required"] = list(required)
    return schema


def _tool(name: str, description: str, schema: dict[str, Any], *, read_only: bool, open_world: bool) -> Tool:
    return Tool(
        name=name,
        description=description,
        input_schema=schema,
        annotations=ToolAnnotations(
            read_only_hint=read_only,
            destructive_hint=False,
            idempotent_hint=False,
            open_world_hint=open_world,
        ),
    )


_POLICY = _string("遇到验证码等人工验证时：ask（默认）弹出窗口等你处理；skip 跳过该资源", arguments.POLICIES)
_YEAR_FROM = _integer("起始发表年份（含）；0 或省略表示不限")
_YEAR_TO = _integer("截止发表年份（含）；0 或省略表示不限")
_SCOPE = _string("search_id 取哪一部分：selected（默认，筛选结果）、eligible（相关文献）、candidates（全部候选）", arguments.SCOPES)

_SEARCH_OPTIONS = _object(
    {
        "candidate_target": _integer("候选文献数量目标，1–3000；search 默认 300，structured_search 默认等于 limit"),
        "freshness": _string(
            "prefer_cache（默认）：10 分钟内参数相同且已完成的检索直接复用，不访问知网；live：重新检索",
            arguments.FRESHNESS,
        ),
        "max_pages": _integer("每个检索通道最多翻几页，1–100，默认 5"),
        "max_requests": _integer("本次任务最多发出的请求数，1–5000，默认 600"),
        "metadata": _string(
            "读取详情页的范围：ranked（search 默认，按初步排序选一部分）、all（全部）、basic（只用列表信息，structured_search 默认）",
            arguments.METADATA,
        ),
        "on_verification": _POLICY,
        "sort": _string("知网列表排序：relevance、date_desc（发表时间）、cited_desc（被引）、downloaded_desc（下载）", arguments.SORTS),
        "timeout_seconds": _integer("任务运行时间上限（秒），1–7200，默认 900；等待你人工处理的时间不计入"),
    }
)

TOOLS: list[Tool] = sorted(
    [
        _tool(
            "diagnostics",
            "本地自检：版本、运行环境、数据目录、限速设置，数据已加载时还有数据量、浏览器状态和当前任务。"
            "不启动浏览器，也不访问知网；安装后或排查问题时先调用它。",
            _object({}),
            read_only=True,
            open_world=False,
        ),
        _tool(
            "download_paper",
            "把一篇论文的 PDF 或 CAJ 文件下载到数据目录 downloads/ 下，并校验文件。只在用户明确要文件时使用；"
            "只想了解内容请用 read_online_html。点击前先登记，结果不明确的点击不会自动重放，确需再点时传 retry=true。",
            _object(
                {
                    "filename": _string("保存的文件名，扩展名须与格式一致；省略时用“题名_编号前 8 位”"),
                    "format": _string("auto（默认，有 PDF 用 PDF，否则 CAJ）、pdf、caj", arguments.DOWNLOAD_FORMATS),
                    "on_verification": _POLICY,
                    "record_ref": _string("论文的 record_ref（与 title 二选一）"),
                    "retry": _boolean("上次下载结果不明确（SIDE_EFFECT_UNCERTAIN）时，确认允许再点击一次"),
                    "subdirectory": _string("保存到 downloads/ 下的这个子目录"),
                    "title": _string("论文的完整题名（与 record_ref 二选一）"),
                    "wait_seconds": _integer("点击后等待文件下载完成的秒数，1–900，默认 120；人工验证的时间不计入"),
                }
            ),
            read_only=False,
            open_world=True,
        ),
        _tool(
            "export_citations",
            "把文献导出为参考文献或题录数据：GB/T 7714、APA、MLA、Chicago、Vancouver、BibTeX、RIS、EndNote、CSL-JSON、"
            "JSON、CSV、Markdown 或自定义模板，共 13 种格式；缺少作者、来源、年份的文献会列出。"
            "用户要参考文献列表或导入文献管理软件时使用；给 filename 时保存到 exports/ 目录。",
            _object(
                {
                    "filename": _string("保存到数据目录 exports/ 下的文件名；同名文件已存在时不覆盖"),
                    "format": _string(
                        "gbt7714（默认）、apa、mla、chicago、vancouver、bibtex、ris、endnote、csl_json、json、csv、markdown、custom",
                        arguments.CITATION_FORMATS,
                    ),
                    "record_refs": _strings("要导出的 record_ref 列表"),
                    "scope": _string("配合 search_id：selected（默认）、eligible 或 candidates"),
                    "search_id": _string("导出某次检索的结果"),
                    "template": _string(
                        "format=custom 时的模板，占位符有 {title} {authors} {source} {journal} {year} {volume} {issue} "
                        "{pages} {doi} {url} {record_ref} {type}；字面花括号写成 {{ }}"
                    ),
                    "titles": _strings("完整题名列表，会访问知网定位并读取详情，最多 100 个"),
                }
            ),
            read_only=False,
            open_world=True,
        ),
        _tool(
            "get_metadata",
            "批量取得完整题录：作者、单位、来源、卷期页、DOI、摘要、关键词、基金；quality=true 时附带期刊收录（CSSCI、"
            "北大核心等）与影响因子。检索后需要摘要、判断来源或核对书目信息时使用。"
            "用 record_refs、完整题名或 search_id 指定文献，一次最多 100 篇。",
            _object(
                {
                    "fields": _strings("只返回这些字段，如 abstract、keywords、doi、quality；record_ref 和 title 总会返回"),
                    "limit": _integer("配合 search_id：最多取几篇，1–100，默认 50"),
                    "local_only": _boolean("只用本地已有的数据，不访问知网"),
                    "offset": _integer("配合 search_id：从第几篇开始，默认 0"),
                    "quality": _boolean("同时读取来源期刊的收录情况与影响因子"),
                    "record_refs": _strings("record_ref 列表"),
                    "refresh": _boolean("忽略 30 天内读取过的详情，重新读取"),
                    "scope": _SCOPE,
                    "search_id": _string("取某次检索的结果"),
                    "titles": _strings("完整题名列表，先查本地，本地没有的到知网按篇名精确查找"),
                }
            ),
            read_only=True,
            open_world=True,
        ),
        _tool(
            "link_references",
            "把文本里的《完整论文题名》改写为指向知网的 Markdown 链接；支持嵌套书名号，已有的链接和代码不改动。"
            "用户给出草稿、综述需要补链接时使用。默认只用本地记录，lookup_missing=true 时才到知网查找。",
            _object(
                {
                    "lookup_missing": _boolean("本地没有记录的题名到知网按篇名精确查找"),
                    "text": _string("含《完整论文题名》的文本，最大 512 KB、最多 100 个题名"),
                },
                required=("text",),
            ),
            read_only=True,
            open_world=True,
        ),
        _tool(
            "login",
            "在专用浏览器窗口中打开知网登录页，由用户本人完成个人或机构登录（也支持 CARSI、WebVPN 等机构远程入口）；"
            "账号密码只在浏览器中输入，不经过 MCP。用户要求登录，或任务提示需要登录时使用。",
            _object(
                {
                    "force": _boolean("已经识别到登录身份时也打开登录窗口，例如切换账号"),
                    "remote_access_url": _string("机构远程访问入口（https，不含账号信息）；省略时使用知网的登录入口"),
                }
            ),
            read_only=False,
            open_world=True,
        ),
        _tool(
            "operation_control",
            "管理后台任务：cancel 取消；continue 让预算用完、失败或中断的检索接着跑（可追加预算，已取得的内容不重复请求）；"
            "resume 告诉任务人工步骤已完成；show 把等待人工处理的窗口重新放到前台；recover 在 BROWSER_UNAVAILABLE 后重启浏览器连接。",
            _object(
                {
                    "action": _string(
                        "cancel 取消；continue 继续检索；resume 人工步骤已完成；show 重新显示人工窗口；recover 重启浏览器",
                        arguments.ACTIONS,
                    ),
                    "additional_requests": _integer("continue 时追加的请求数；省略且预算已用完时自动追加 200"),
                    "additional_seconds": _integer("continue 时追加的秒数；省略且时间已用完时自动追加 300"),
                    "operation_id": _string("任务编号；省略时作用于当前任务"),
                },
                required=("action",),
            ),
            read_only=False,
            open_world=True,
        ),
        _tool(
            "operation_status",
            "查看后台任务的进度与结果。其他工具返回 operation_id 且状态为 running 时，用 wait_seconds=55 继续等待；"
            "任务完成或需要用户在浏览器中操作时会提前返回。",
            _object(
                {
                    "operation_id": _string("任务编号；省略时返回当前任务，没有任务时返回 idle"),
                    "wait_seconds": _integer("最多等待的秒数，0–55（超出按边界处理）；完成或需要人工操作时提前返回"),
                }
            ),
            read_only=True,
            open_world=False,
        ),
        _tool(
            "read_online_html",
            "读取论文的 HTML 全文，可按章节（section）或按字符分页（offset、max_characters）。需要核对论文的具体论证、"
            "方法或数据时使用。正文在本地缓存 30 分钟，翻页和切换章节不再访问知网；trial=true 表示只有试读内容。",
            _object(
                {
                    "max_characters": _integer("本次最多返回的字符数，1–200000，默认 20000"),
                    "offset": _integer("从第几个字符开始，用于翻页（取上次返回的 next_offset）"),
                    "on_verification": _POLICY,
                    "record_ref": _string("论文的 record_ref（与 title 二选一）"),
                    "section": _string("只读这一章节（取返回的 sections 中的标题）"),
                    "title": _string("论文的完整题名（与 record_ref 二选一）"),
                }
            ),
            read_only=True,
            open_world=True,
        ),
        _tool(
            "search",
            "研究检索：只需给出研究问题。自动规划检索概念，在主题、篇名、关键词三个字段并发检索，去重后读取详情与期刊信息，"
            "再按相关文献的共同关键词补充检索，最后按相关性和来源质量排序筛选。适合开放的主题调研与综述准备；"
            "有明确的字段、作者、来源或排序要求时改用 structured_search。limit 只决定返回条数，不影响检索范围。",
            _object(
                {
                    "concept_groups": {
                        "description": "自己指定必要概念：组与组之间为 AND，组内同义词为 OR；最多 8 组，每组 1–6 个词，每词不超过 80 字",
                        "items": _strings(),
                        "type": ["null", "array"],
                    },
                    "limit": _integer("返回多少条筛选结果，1–100，默认 50；不影响检索与筛选本身"),
                    "mode": _string("precise 不做补充检索；balanced（默认）；broad 目前与 balanced 相同", arguments.MODES),
                    "options": _SEARCH_OPTIONS,
                    "query": _string("研究问题或检索词，1–1000 字"),
                    "year_from": _YEAR_FROM,
                    "year_to": _YEAR_TO,
                },
                required=("query",),
            ),
            read_only=True,
            open_world=True,
        ),
        _tool(
            "search_results",
            "按 search_id 分页读取已保存的检索结果，不访问知网。可切换范围（selected 筛选结果、eligible 相关文献、"
            "candidates 全部候选）和详细程度（titles、compact 含摘要与评分、records 完整题录）。",
            _object(
                {
                    "limit": _integer("每页条数，1–100，默认 50"),
                    "offset": _integer("从第几条开始，默认 0；取上次返回的 next_offset 翻页"),
                    "scope": _string("selected（默认）、eligible、candidates", arguments.SCOPES),
                    "search_id": _string("search 或 structured_search 返回的 search_id"),
                    "view": _string("titles（默认）、compact（加作者、年份、来源、摘要、评分）、records（完整题录与评分明细）", arguments.VIEWS),
                },
                required=("search_id",),
            ),
            read_only=True,
            open_world=False,
        ),
        _tool(
            "session_status",
            "查看已识别到的个人或机构登录状态。默认返回最近一次的识别结果，不访问知网；refresh=true 时在后台页面重新识别。"
            "显示机构名称不代表该机构订购了全部资源。",
            _object({"refresh": _boolean()}),
            read_only=True,
            open_world=True,
        ),
        _tool(
            "structured_search",
            "知网高级检索：用字段条件和 and/or/not 精确组合（主题、篇名、关键词、摘要、作者、第一作者、通讯作者、单位、来源、"
            "DOI、基金、全文、参考文献、分类号、小标题、篇关摘），可限定年份，按相关度、发表时间、被引或下载排序。"
            "条件明确时使用，例如某作者某年以后篇名含某词的论文；结果保持知网原有顺序。",
            _object(
                {
                    "expression": {
                        "additionalProperties": True,
                        "description": (
                            "条件树。单个条件 {field, value, match}：field 取 subject、title、keywords、abstract、"
                            "title_keywords_abstract、fulltext、authors、first_author、corresponding_author、institutions、"
                            "source、doi、funds、references、classification、subtitle；match 为 phrase（默认，模糊）或 exact。"
                            "组合 {op: and|or|not, items: [...]}，and/or 需 2–12 项，not 恰好 1 项。"
                            '例：{"op":"and","items":[{"field":"title","value":"违约金"},{"field":"authors","value":"王利明"}]}'
                        ),
                        "type": "object",
                    },
                    "limit": _integer("返回条数，1–100，默认 50；未设置 options.candidate_target 时也决定抓取多少条"),
                    "options": _SEARCH_OPTIONS,
                    "sort": _string("relevance（默认）、date_desc、cited_desc、downloaded_desc", arguments.SORTS),
                    "year_from": _YEAR_FROM,
                    "year_to": _YEAR_TO,
                },
                required=("expression",),
            ),
            read_only=True,
            open_world=True,
        ),
    ],
    key=lambda tool: tool.name,
)

# Prompt name -> description; the message is the description, a full-width colon, then the topic.
PROMPTS: dict[str, str] = {
    "literature_review": "基于实际取得的论文摘要和来源写文献综述，逐项链接证据",
    "research_topic": "深度检索以下研究问题",
}


# --- the app side ------------------------------------------------------------------------------------


class ToolApp(Protocol):
    async def call(self, tool: str, args: msgspec.Struct, ctx: CallContext) -> dict[str, Any] | msgspec.Struct: ...


class CallContext:
    """What a tool call may use of its MCP request: progress notifications and client sampling.

    Both are tied to the request: once the call has returned (a job may outlive it), progress is
    dropped and sampling answers None. ``CallContext(None)`` is a context without a client.
    """

    SAMPLING_TIMEOUT = 120.0

    def __init__(self, request: ServerRequestContext[Any, Any] | None = None) -> None:
        self._request = request
        self._open = request is not None
        self._last_progress: float | None = None
        caps = request.session.client_capabilities if request is not None else None
        self.client_supports_sampling: bool = bool(
            request is not None and caps is not None and caps.sampling is not None and request.session.can_send_request
        )

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

    async def sample(self, system_prompt: str, user_text: str, max_tokens: int) -> str | None:
        """Ask the client's model (MCP sampling); the reply's text, or None when unavailable or failed."""
        if not self._open or self._request is None or not self.client_supports_sampling:
            return None
        session = self._request.session
        try:
            with anyio.fail_after(self.SAMPLING_TIMEOUT), warnings.catch_warnings():
                warnings.simplefilter("ignore")  # sampling is deprecated in the 2026 protocol, still fine for 2025 hosts
                reply = await session.create_message(
                    [SamplingMessage(role="user", content=TextContent(type="text", text=user_text))],
                    max_tokens=max_tokens,
                    system_prompt=system_prompt,
                    include_context="none",
                    related_request_id=self._request.request_id,
                )
        except Exception:
            log.info("sampling failed; continuing without it", exc_info=True)
            return None
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
        is_error=is_error,
    )


def failure(error: CnkiError) -> CallToolResult:
    """The ``isError`` answer for a failure before (or instead of) an operation."""
    try:
        return _result({"status": "failed", "errors": [error.problem()]}, is_error=True)
    except (TypeError, ValueError, msgspec.EncodeError):
        log.exception("error details of %s are not serialisable; dropping them", error.code)
        return _result({"status": "failed", "errors": [{"code": error.code, "message": error.message}]}, is_error=True)


async def _dispatch(app: ToolApp | None, request: ServerRequestContext[Any, Any], name: str, raw: Any) -> CallToolResult:
    ctx = CallContext(request)
    try:
        args = arguments.parse(name, raw)
        if app is None:
            raise CnkiError("OPERATION_FAILED", "这个服务实例只用于导出工具清单，不能执行工具。")
        return _result(await app.call(name, args, ctx))
    except CnkiError as exc:
        return failure(exc)
    except Exception as exc:
        log.exception("tool %s failed unexpectedly", name)
        return failure(as_cnki_error(exc))
    finally:
        ctx.close()


# --- the server --------------------------------------------------------------------------------------


def build_server(app: ToolApp | None) -> Server[Any]:
    """The MCP server for ``app``. ``None`` serves discovery only (tools, resource, prompts)."""

    async def list_tools(ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None) -> ListToolsResult:
        return ListToolsResult(tools=TOOLS)

    async def call_tool(ctx: ServerRequestContext[Any, Any], params: CallToolRequestParams) -> CallToolResult:
        return await _dispatch(app, ctx, params.name, params.arguments)

    async def list_resources(
        ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None
    ) -> ListResourcesResult:
        return ListResourcesResult(resources=[Resource(uri=GUIDE_URI, name="guide", mime_type=GUIDE_MIME_TYPE)])

    async def read_resource(ctx: ServerRequestContext[Any, Any], params: ReadResourceRequestParams) -> ReadResourceResult:
        uri = str(params.uri)
        if uri != GUIDE_URI:
            raise MCPError(INVALID_PARAMS, f"没有这个资源：{uri}；可用资源只有 {GUIDE_URI}。", data={"uri": uri})
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

    return Server(
        SERVER_NAME,
        version=__version__,
        instructions=guide_text(),
        # The same lists for every caller.
        cache_hints={method: CacheHint(scope="public") for method in ("tools/list", "resources/list", "prompts/list")},
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_read_resource=read_resource,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
    )


async def serve_stdio(app: ToolApp) -> None:
    """Serve MCP on stdin/stdout until the client closes stdin."""
    server = build_server(app)
    async with stdio_server() as (read_stream, write_stream):
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
