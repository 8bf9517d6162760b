"""The tool registry: the tool modules of ``cnki_mcp.tools`` (discovered there), and one ``register`` call per
tool not yet moved to a module (issue 38 moves them all; both paths coexist meanwhile).

A registered entry holds the tool's name (``ToolName``), its Chinese description, its hand-written input
schema (names, types, enums and required fields equal to the reference contract), its argument
Struct (``core.tool_args``) and validator (``arguments.py``), its annotations and its handler, the ``App``
method itself (a missing one fails at import).
Numbers in descriptions come from the constants the validators use, so a default or a range is
stated once. ``server.py`` lists from ``REGISTRY`` and calls ``dispatch``; a new tool is a module of
``cnki_mcp.tools`` (see its docstring), never a ``register`` call.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from mcp.types import Tool, ToolAnnotations

from cnki_mcp.app import App, Reply
from cnki_mcp.core import tool_args
from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.model import DAILY_DOWNLOAD_LIMIT_DEFAULT
from cnki_mcp.core.tool_args import ToolName
from cnki_mcp.surface import arguments as a
from cnki_mcp.tools import REGISTRY as MODULES
from cnki_mcp.tools import ToolSpec as ModuleSpec
from cnki_mcp.tools import parse_arguments as parse_module_arguments


@dataclass(frozen=True)
class ToolSpec:
    """A tool not yet moved to its own module of ``cnki_mcp.tools`` (see ``register``)."""

    name: ToolName
    description: str
    schema: dict[str, Any]
    arguments: type[tool_args.ToolArgs]
    validate: a.Validator
    handler: Handler
    read_only: bool
    open_world: bool


# A tool's handler: the App method that runs it, given the parsed arguments and the call's context.
Handler = Callable[[App, Any, Any], Awaitable[Reply]]

# Every tool: the modules of ``cnki_mcp.tools`` (discovered) and those still registered below.
REGISTRY: dict[ToolName, ToolSpec | ModuleSpec] = dict(MODULES)


class ToolApp(Protocol):
    """What dispatching needs of the App (the server's tests serve a stand-in)."""

    async def call(self, handler: Handler, args: Any, ctx: Any, *, needs_config: bool = True) -> Any: ...


def register(
    name: ToolName,
    description: str,
    schema: dict[str, Any],
    arguments: type[tool_args.ToolArgs],
    validate: Callable[[Any, dict[str, Any]], None],
    handler: Handler,
    *,
    read_only: bool,
    open_world: bool,
) -> None:
    REGISTRY[name] = ToolSpec(name, description, schema, arguments, validate, handler, read_only, open_world)


def spec_of(name: str) -> ToolSpec | ModuleSpec:
    """The registered tool called ``name``; UNKNOWN_TOOL otherwise."""
    try:
        return REGISTRY[ToolName(name)]
    except ValueError:
        raise CnkiError("UNKNOWN_TOOL", f"没有名为 {name!r} 的工具。", details={"tool": name}) from None


def parse_arguments(name: str, raw: dict[str, Any] | None) -> tool_args.ToolArgs:
    """The arguments of a call to ``name``, converted, checked and with every default filled."""
    spec = spec_of(name)
    if isinstance(spec, ModuleSpec):
        return parse_module_arguments(spec, raw)
    return a.parse(spec.arguments, spec.validate, raw)


async def dispatch(app: ToolApp, name: str, args: tool_args.ToolArgs, ctx: Any) -> Reply:
    """Run the tool ``name`` on ``app`` with arguments from ``parse_arguments``."""
    spec = spec_of(name)
    if isinstance(spec, ModuleSpec):
        return await app.call(spec.run, args, ctx, needs_config=spec.needs_config)
    return await app.call(spec.handler, args, ctx)


def _tool(spec: ToolSpec | ModuleSpec) -> Tool:
    return Tool(
        name=spec.name,
        description=spec.description,
        input_schema=spec.schema,
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


# --- schema pieces ---------------------------------------------------------------------------------


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


def _range(maximum: int, default: int, unit: str = "") -> str:
    return f"1–{maximum}{unit}，默认 {default}{unit}"


_POLICY = _string("遇到验证码等人工验证时：ask（默认）弹出窗口等你处理；skip 跳过该资源", tool_args.POLICIES)
_SCOPE = _string(
    "search_id 取哪一部分：selected（默认，筛选结果）、eligible（相关文献）、candidates（全部候选）", tool_args.SCOPES
)
_LIMIT = f"1–{tool_args.LIMIT_MAX}，默认 {tool_args.LIMIT_DEFAULT}"

# --- the tools ---------------------------------------------------------------------------------------

register(
    ToolName.DOWNLOAD_PAPER,
    "把一篇论文的 PDF 或 CAJ 文件下载到数据目录 downloads/ 下，并校验文件。只在用户明确要文件时使用；"
    f"只想了解内容请用 {ToolName.READ_ONLINE_HTML}。点击前先登记，结果不明确的点击不会自动重放，确需再点时传 retry=true。",
    _object(
        {
            "filename": _string("保存的文件名，扩展名须与格式一致；省略时用“题名_编号前 8 位”"),
            "format": _string("auto（默认，有 PDF 用 PDF，否则 CAJ）、pdf、caj", tool_args.DOWNLOAD_FORMATS),
            "on_verification": _POLICY,
            "record_ref": _string("论文的 record_ref（与 title 二选一）"),
            "retry": _boolean("上次下载结果不明确（SIDE_EFFECT_UNCERTAIN）时，确认允许再点击一次"),
            "subdirectory": _string("保存到 downloads/ 下的这个子目录"),
            "title": _string("论文的完整题名（与 record_ref 二选一）"),
            "wait_seconds": _integer(
                f"点击后等待文件下载完成的秒数，{_range(tool_args.DOWNLOAD_WAIT_MAX, tool_args.DOWNLOAD_WAIT_DEFAULT)}；人工验证的时间不计入"
            ),
        }
    ),
    tool_args.DownloadPaperArgs,
    a.validate_download_paper,
    handler=App.download_paper,
    read_only=False,
    open_world=True,
)

register(
    ToolName.DOWNLOAD_PAPERS,
    f"批量下载一组论文的 PDF/CAJ（后台任务，与 {ToolName.SEARCH} 一样先等待一段时间再返回 operation_id，用 "
    f"{ToolName.OPERATION_STATUS} 跟进）：record_refs，或某次检索 search_id 的 scope 中从 offset 起的 limit 篇"
    f"（默认 {tool_args.PAPERS_LIMIT_DEFAULT} 篇，一次最多 {tool_args.PAPERS_MAX} 篇）。每篇走 {ToolName.DOWNLOAD_PAPER} 的同一流程，"
    f"轮到它时才打开详情页；两次下载点击之间至少间隔 interval_seconds（默认 {tool_args.INTERVAL_DEFAULT} 秒，上下浮动 "
    f"{round(tool_args.INTERVAL_JITTER * 100)}%）。已下载过的论文不再点击；服务中断后用 {ToolName.OPERATION_CONTROL} 的 continue "
    "接着下载，已点击的论文先检查文件，不会重复点击；cancel 在当前这篇结束后停止。遇到验证码时整批暂停等你处理。"
    f"连续 {tool_args.RIGHTS_STREAK} 篇因没有全文权限被拒绝时停止（DOWNLOAD_RIGHTS_MISSING）；"
    f"当天成功下载达到每日上限（默认 {DAILY_DOWNLOAD_LIMIT_DEFAULT} 篇，"
    "config.json 的 daily_download_limit 或环境变量 CNKI_DAILY_DOWNLOAD_LIMIT，0 表示不限）时停止（DAILY_LIMIT_REACHED）。"
    f"结果逐篇给出状态、文件路径和 SHA-256，remaining 是没有轮到的论文。下载完可用 {ToolName.SAVE_TO_ZOTERO} 传同一个 search_id 连同附件存入 Zotero。",
    _object(
        {
            "format": _string("auto（默认，有 PDF 用 PDF，否则 CAJ）、pdf、caj", tool_args.DOWNLOAD_FORMATS),
            "interval_seconds": _integer(
                f"两次下载点击之间至少间隔的秒数，{tool_args.INTERVAL_MIN}–{tool_args.INTERVAL_MAX}，默认 {tool_args.INTERVAL_DEFAULT}；"
                f"每次在 ±{round(tool_args.INTERVAL_JITTER * 100)}% 内随机浮动"
            ),
            "limit": _integer(f"配合 search_id：下载多少篇，1–{tool_args.PAPERS_MAX}，默认 {tool_args.PAPERS_LIMIT_DEFAULT}"),
            "offset": _integer("配合 search_id：从第几条开始，默认 0"),
            "on_verification": _POLICY,
            "wait_seconds": _integer(
                f"每篇点击后等待文件下载完成的秒数，{_range(tool_args.DOWNLOAD_WAIT_MAX, tool_args.DOWNLOAD_WAIT_DEFAULT)}；人工验证的时间不计入"
            ),
            "record_refs": _strings(f"要下载的 record_ref 列表（与 search_id 二选一），最多 {tool_args.PAPERS_MAX} 个"),
            "search_id": _string("下载某次检索的结果（与 record_refs 二选一）"),
            "subdirectory": _string("保存到 downloads/ 下的这个子目录"),
            "scope": _SCOPE,
        }
    ),
    tool_args.DownloadPapersArgs,
    a.validate_download_papers,
    handler=App.download_papers,
    read_only=False,
    open_world=True,
)

register(
    ToolName.GET_METADATA,
    "批量取得完整题录：作者、单位、来源、卷期页、DOI、摘要、关键词、基金、中图分类号；quality=true 时附带期刊收录（CSSCI、"
    "北大核心等）与影响因子。检索后需要摘要、判断来源或核对书目信息时使用。"
    f"用 record_refs、完整题名或 search_id 指定文献，一次最多 {tool_args.BATCH_MAX} 篇。",
    _object(
        {
            "fields": _strings("只返回这些字段，如 abstract、keywords、doi、clc_codes、quality；record_ref 和 title 总会返回"),
            "limit": _integer(f"配合 search_id：最多取几篇，{_LIMIT}"),
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
    tool_args.GetMetadataArgs,
    a.validate_get_metadata,
    handler=App.get_metadata,
    read_only=True,
    open_world=True,
)

register(
    ToolName.READ_ONLINE_HTML,
    "读取论文的 HTML 全文，可按章节（section）或按字符分页（offset、max_characters）。需要核对论文的具体论证、"
    "方法或数据时使用。全文在本地缓存 30 分钟，翻页和切换章节不再访问知网；试读或不完整的正文缓存 10 分钟，只供翻页和切换章节。"
    "trial=true 表示只有试读内容，complete_article=true 表示已确认是完整全文。"
    "source=download 读本地已下载的 PDF（章节取自书签或编号标题，去掉页眉页脚和页码），结果形式相同，coverage 给出页码。",
    _object(
        {
            "max_characters": _integer(
                f"本次最多返回的字符数，{_range(tool_args.READ_CHARACTERS_MAX, tool_args.READ_CHARACTERS_DEFAULT)}"
            ),
            "offset": _integer("从第几个字符开始，用于翻页（取上次返回的 next_offset）"),
            "on_verification": _POLICY,
            "record_ref": _string("论文的 record_ref（与 title 二选一）"),
            "section": _string("只读这一章节（取返回的 sections 中的标题）"),
            "source": _string(
                f"online（默认，知网在线阅读）；download（读已用 {ToolName.DOWNLOAD_PAPER} 下载的 PDF 或内含 PDF 的 CAJ，"
                "不访问知网）；auto（有可读的下载文件时读文件，没有或读不出文字时在线阅读）",
                tool_args.READ_SOURCES,
            ),
            "title": _string("论文的完整题名（与 record_ref 二选一）"),
        }
    ),
    tool_args.ReadOnlineHtmlArgs,
    a.validate_read_online_html,
    handler=App.read_online_html,
    read_only=True,
    open_world=True,
)
