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


_CANDIDATES_DEFAULT, _CANDIDATES_MAX = tool_args.OPTION_RANGES["candidate_target"]
_PAGES_DEFAULT, _PAGES_MAX = tool_args.OPTION_RANGES["max_pages"]
_REQUESTS_DEFAULT, _REQUESTS_MAX = tool_args.OPTION_RANGES["max_requests"]
_SECONDS_DEFAULT, _SECONDS_MAX = tool_args.OPTION_RANGES["timeout_seconds"]

_POLICY = _string("遇到验证码等人工验证时：ask（默认）弹出窗口等你处理；skip 跳过该资源", tool_args.POLICIES)
_YEAR_FROM = _integer("起始发表年份（含）；0 或省略表示不限")
_YEAR_TO = _integer("截止发表年份（含）；0 或省略表示不限")
_LIMIT = f"1–{tool_args.LIMIT_MAX}，默认 {tool_args.LIMIT_DEFAULT}"

_OPTION_PROPERTIES: dict[str, Any] = {
    "candidate_target": _integer(
        f"候选文献数量目标，1–{_CANDIDATES_MAX}；{ToolName.SEARCH} 默认 {_CANDIDATES_DEFAULT}，"
        f"{ToolName.STRUCTURED_SEARCH} 和 {ToolName.EXPERT_SEARCH} 默认等于 limit"
    ),
    "expand": _integer(
        f"引文扩展：0–{tool_args.EXPAND_MAX}，默认 0 不扩展；取排名最前的这么多篇筛选结果的参考文献和引证文献，"
        "作为 citation 通道的候选一起排序，被多篇筛选结果引用的文献得到加分；请求计入 max_requests"
    ),
    "freshness": _string(
        "prefer_cache（默认）：10 分钟内参数相同且已完成的检索直接复用，不访问知网；live：重新检索", tool_args.FRESHNESS
    ),
    "max_pages": _integer(f"每个检索通道最多翻几页，{_range(_PAGES_MAX, _PAGES_DEFAULT)}"),
    "max_requests": _integer(f"本次任务最多发出的请求数，{_range(_REQUESTS_MAX, _REQUESTS_DEFAULT)}"),
    "metadata": _string(
        f"读取详情页的范围：ranked（{ToolName.SEARCH} 默认，按初步排序选一部分）、all（全部）、"
        f"basic（只用列表信息，{ToolName.STRUCTURED_SEARCH} 和 {ToolName.EXPERT_SEARCH} 默认）",
        tool_args.METADATA,
    ),
    "on_verification": _POLICY,
    "sort": _string("知网列表排序：relevance、date_desc（发表时间）、cited_desc（被引）、downloaded_desc（下载）", tool_args.SORTS),
    "timeout_seconds": _integer(
        f"任务运行时间上限（秒），{_range(_SECONDS_MAX, _SECONDS_DEFAULT)}；等待你人工处理的时间不计入"
    ),
}
_SEARCH_OPTIONS = _object(_OPTION_PROPERTIES)
# The structured and expert searches keep CNKI's own results: no citation expansion.
_NATIVE_OPTIONS = _object({name: value for name, value in _OPTION_PROPERTIES.items() if name != "expand"})

_FACET_LIST = "、".join(f"{name}（{label}）" for name, label in tool_args.FACETS.items())
_FACET_FILTERS = _object(
    {name: _strings(f"{label}：search_facets 给出的 code，最多 {tool_args.FACET_CODES_MAX} 个") for name, label in tool_args.FACETS.items()}
)
_FACET_FILTERS["description"] = (
    f"按知网左侧分组筛选（如同在结果页左栏勾选）：分组名 → {ToolName.SEARCH_FACETS} 给出的 code 列表；"
    "同一分组的多个 code 为“或”，不同分组为“且”。例：{\"year\":[\"YE=2024\"],\"subject\":[\"CCL=I140\"]}"
)

# What the structured and expert searches share beside their expressions.
_NATIVE_PROPERTIES = {
    "facet_filters": _FACET_FILTERS,
    "limit": _integer(f"返回条数，{_LIMIT}；未设置 options.candidate_target 时也决定抓取多少条"),
    "options": _NATIVE_OPTIONS,
    "sort": _string("relevance（默认）、date_desc、cited_desc、downloaded_desc", tool_args.SORTS),
    "year_from": _YEAR_FROM,
    "year_to": _YEAR_TO,
}

# --- the tools ---------------------------------------------------------------------------------------

register(
    ToolName.AUTHOR_PAPERS,
    "一位作者在知网的其他论文（作者 AND 作者单位的检索，按发表时间从新到旧）：给出 author 和该作者一篇论文的 record_ref 时，"
    "按那篇论文详情页上这位作者的单位检索，从而区分同名作者；或给出 author 和 institution（作者单位）；只给姓名时同名作者的论文"
    "可能混在一起，结果带 ambiguous: true 和说明。结果 records（存入本地并带 record_ref，可用于 "
    f"{ToolName.GET_METADATA}、{ToolName.DOWNLOAD_PAPERS}、{ToolName.EXPORT_CITATIONS}），institutions（知网写法的单位），"
    "years（覆盖的年份），用 limit/offset 分页。",
    _object(
        {
            "author": _string("作者姓名（与知网的写法一致）"),
            "institution": _string("作者单位（可选，与 record_ref 二选一）"),
            "limit": _integer(f"每页条数，{_LIMIT}"),
            "offset": _integer(f"从第几篇开始（取上次返回的 next_offset，最多 {a.AUTHOR_OFFSET_MAX}）"),
            "on_verification": _POLICY,
            "record_ref": _string("该作者一篇论文的 record_ref（可选，与 institution 二选一）"),
        },
        required=("author",),
    ),
    tool_args.AuthorPapersArgs,
    a.validate_author_papers,
    handler=App.author_papers,
    read_only=True,
    open_world=True,
)

register(
    ToolName.CHECK_REFERENCES,
    "核对参考文献列表：逐条拆分、识别（GB/T 7714 顺序编码制或著者-出版年制、APA、MLA、Chicago、Vancouver 或随手写的条目，"
    "中英文混排均可），按题名到知网查找，逐项比对年份、页码、作者、题名、来源、卷、期、DOI。每条给出 verified（一致）、"
    "differs（有出入，列出 differences）、not_found（知网没有，这不证明是编造的）、ambiguous（多篇同名，列出 candidates）、"
    "unparsed（无法识别）之一，并给出按知网记录重写的 corrected 条目；summary.total 是读出的条目数，summary.lines 是"
    "它们所在的行数。用户要检查论文、AI 草稿或手抄的参考文献时使用。"
    f"一次最多 {tool_args.CHECK_ENTRIES_MAX} 条。",
    _object(
        {
            "on_verification": _POLICY,
            "references": _strings(f"参考文献条目列表，每条一个字符串（与 text 二选一），最多 {tool_args.CHECK_ENTRIES_MAX} 条"),
            "style": _string(
                f"corrected 条目使用的格式：{'、'.join(tool_args.CHECK_STYLES)}；默认 gbt7714（GB/T 7714—2015 顺序编码制）",
                tool_args.CHECK_STYLES,
            ),
            "text": _string(
                f"粘贴的参考文献列表（与 references 二选一）：带 [1]、1.、1、、（1）编号或不带编号（可混用），一行一条或空行分隔，"
                "折行的条目自动接回，不成条目的行单独列为 unparsed；"
                f"最大 {tool_args.TEXT_BYTES_MAX // 1024} KB、最多 {tool_args.CHECK_ENTRIES_MAX} 条"
            ),
        }
    ),
    tool_args.CheckReferencesArgs,
    a.validate_check_references,
    handler=App.check_references,
    read_only=True,
    open_world=True,
)

register(
    ToolName.EXPERT_SEARCH,
    "知网专业检索：直接使用知网的专业检索表达式，如 SU=('数字经济'+'数字化转型') AND AU='张三' NOT TI='综述'。"
    "表达式先在本地检查，有误时返回 INVALID_EXPRESSION（details.position 为出错的第几个字符），不访问知网；"
    "混用 OR 与 AND/NOT 而没有括号时按知网帮助从左到右组合并给出提示。"
    f"年份、排序、结果形式、翻页与 {ToolName.STRUCTURED_SEARCH} 相同，结果保持知网原有顺序；"
    "expert_expression 是实际发给知网的规范写法。用户给出或从知网帮助复制了检索式时使用。",
    _object(
        {
            "expression": _string(
                f"专业检索表达式，最多 {tool_args.EXPRESSION_MAX_CHARS} 字。字段 SU 主题、TKA 篇关摘、KY 关键词、TI 篇名、FT 全文、AU 作者、"
                "FI 第一作者、RP 通讯作者、AF 作者单位、FU 基金、AB 摘要、CO 小标题、RF 参考文献、CLC 分类号、LY 文献来源、"
                "DOI、SN ISSN、CN 统一刊号、YE 年、CF 被引频次等；匹配 =（精确）、%（模糊）、%=（相关）；"
                "同一字段内 *（与）、+（或）、-（非）；条件之间 AND、OR、NOT；检索词用单引号或双引号括起；"
                "YE、CF 可用 >、<、>=、<= 和 BETWEEN ('2020','2024')。年份范围最好用 year_from、year_to"
            ),
            **_NATIVE_PROPERTIES,
        },
        required=("expression",),
    ),
    tool_args.ExpertSearchArgs,
    a.validate_native_search,
    handler=App.expert_search,
    read_only=True,
    open_world=True,
)

register(
    ToolName.EXPORT_CITATIONS,
    "把文献导出为参考文献或题录数据：GB/T 7714（gbt7714 为 2015 顺序编码制，gbt7714_2025 为 2025 顺序编码制，"
    "gbt7714_author_date 为著者-出版年制）、APA、MLA、Chicago、Vancouver、BibTeX、RIS、EndNote、CSL-JSON、"
    f"JSON、CSV、Markdown 或自定义模板，共 {len(tool_args.CITATION_FORMATS)} 种格式；缺少作者、来源、年份的文献会列出。"
    "用户要参考文献列表或导入文献管理软件时使用；给 filename 时保存到 exports/ 目录。",
    _object(
        {
            "filename": _string("保存到数据目录 exports/ 下的文件名；同名文件已存在时不覆盖"),
            "format": _string(f"{'、'.join(tool_args.CITATION_FORMATS)}；默认 gbt7714", tool_args.CITATION_FORMATS),
            "offset": _integer(
                f"配合 search_id：从第几篇开始导出，默认 0；一次最多导出 {tool_args.EXPORT_MAX} 篇，结果的 next_offset 给出下一批的起点"
            ),
            "record_refs": _strings(f"要导出的 record_ref 列表，最多 {tool_args.EXPORT_MAX} 个"),
            "references_of": _string(
                f"导出这篇文献（record_ref）的参考文献表：先用 {ToolName.RELATED_PAPERS} 读取过；知网没有链接到记录的条目原样列在 unlinked 中"
            ),
            "scope": _string("配合 search_id：selected（默认）、eligible 或 candidates", tool_args.SCOPES),
            "search_id": _string(f"导出某次检索的结果（每次最多 {tool_args.EXPORT_MAX} 篇）"),
            "template": _string(
                f"format=custom 时的模板，占位符有 {' '.join('{' + f + '}' for f in tool_args.TEMPLATE_FIELDS)}；字面花括号写成 {{{{ }}}}"
            ),
            "titles": _strings(f"完整题名列表，会访问知网定位并读取详情，最多 {tool_args.BATCH_MAX} 个"),
        }
    ),
    tool_args.ExportCitationsArgs,
    a.validate_export_citations,
    handler=App.export_citations,
    read_only=False,
    open_world=True,
)

register(
    ToolName.JOURNAL_ISSUES,
    "一种期刊在知网的刊期与目录（期刊导航的刊期浏览）：用 journal（刊名）、issn、cn 或其中一篇论文的 record_ref "
    "指明期刊（四者取一）。不带 year 时返回知网列出的全部年份与各期（years：[{year, issues:[{issue, code}]}]，新的在前）；"
    "带 year 和 issue（取 years 中的 issue 或 code）时返回这一期的目录：records 按刊内顺序给出题名、作者、页码和所在栏目"
    f"（section），用 limit/offset 分页。目录中的论文都存入本地并带 record_ref，可直接用于 {ToolName.GET_METADATA}、"
    f"{ToolName.DOWNLOAD_PAPERS}、{ToolName.EXPORT_CITATIONS} 和 {ToolName.SAVE_TO_ZOTERO}。",
    _object(
        {
            "cn": _string("期刊的国内统一刊号，如 11-1234/D"),
            "issn": _string("期刊的 ISSN，如 1000-1234"),
            "issue": _string("配合 year：哪一期，取 years 中的 issue（如 06）或 code"),
            "journal": _string("期刊名称（须与知网的刊名完全一致；重名时改用 issn 或 cn）"),
            "limit": _integer(f"配合 year 和 issue：每页条数，{_LIMIT}"),
            "offset": _integer("配合 year 和 issue：从目录的第几篇开始（取上次返回的 next_offset）"),
            "on_verification": _POLICY,
            "record_ref": _string("该刊一篇论文的 record_ref"),
            "year": _integer("读哪一年的一期目录（与 issue 一起给出）；省略时列出年份与刊期"),
        }
    ),
    tool_args.JournalIssuesArgs,
    a.validate_journal_issues,
    handler=App.journal_issues,
    read_only=True,
    open_world=True,
)

register(
    ToolName.LINK_REFERENCES,
    "把文本里的《完整论文题名》改写为指向知网的 Markdown 链接；支持嵌套书名号，已有的链接和代码不改动。"
    "用户给出草稿、综述需要补链接时使用。默认只用本地记录，lookup_missing=true 时才到知网查找。",
    _object(
        {
            "lookup_missing": _boolean("本地没有记录的题名到知网按篇名精确查找"),
            "text": _string(
                f"含《完整论文题名》的文本，最大 {tool_args.TEXT_BYTES_MAX // 1024} KB、最多 {tool_args.REFERENCES_MAX} 个题名"
            ),
        },
        required=("text",),
    ),
    tool_args.LinkReferencesArgs,
    a.validate_link_references,
    handler=App.link_references,
    read_only=True,
    open_world=True,
)

register(
    ToolName.RELATED_PAPERS,
    "一篇论文的参考文献（references，默认）、引证文献（citing，引用它的论文）或相似文献（similar），按知网的顺序分页返回。"
    "从关键论文出发扩展文献综述时使用。返回的论文都存入本地并带 record_ref，可直接用于 get_metadata、download_paper、"
    "export_citations；知网没有链接到记录的参考文献（图书、外文等）以引文文本给出，record_ref 为 null。"
    "读过的列表保存在本地（参考文献 30 天，引证与相似文献 7 天），再次调用和翻页不重复访问知网。",
    _object(
        {
            "cursor": _string("翻页：传入上一页结果中的 next_cursor（其余参数可省略）"),
            "limit": _integer(f"每页条数，{_LIMIT}"),
            "on_verification": _POLICY,
            "record_ref": _string("论文的 record_ref（与 title 二选一）"),
            "refresh": _boolean("忽略本地保存的列表，重新从知网读取"),
            "relation": _string("references（默认，参考文献）、citing（引证文献）、similar（相似文献）", tool_args.RELATIONS),
            "title": _string("论文的完整题名（与 record_ref 二选一）"),
            "wait_seconds": _integer(
                f"本次调用最多等待的秒数，1–{tool_args.STATUS_WAIT_MAX}，默认 {tool_args.RELATED_WAIT_DEFAULT}；未完成时返回 operation_id，"
                f"用 {ToolName.OPERATION_STATUS} 继续等待"
            ),
        }
    ),
    tool_args.RelatedPapersArgs,
    a.validate_related_papers,
    handler=App.related_papers,
    read_only=True,
    open_world=True,
)

register(
    ToolName.SAVE_TO_ZOTERO,
    "把文献存入 Zotero 桌面版（通过它在本机的连接器，与 Zotero 浏览器插件的方式相同，不经过系统代理）："
    "题名、作者（中文姓名不拆分）、日期、来源、卷期页、DOI、摘要、关键词（作为标签）、语言、网址、中图分类号（在 extra 中），"
    "期刊论文、学位论文（学校与博士/硕士）、会议论文、报纸文章各用对应的条目类型；attach=true（默认）时把已用 "
    f"{ToolName.DOWNLOAD_PAPER} 下载的 PDF/CAJ 作为附件一并存入（不会自行下载）。同一分类中已存过的文献不重复保存；"
    f"一条失败不影响其他条目，结果逐条给出状态。需要先打开 Zotero。一次最多 {tool_args.ZOTERO_MAX} 篇。",
    _object(
        {
            "attach": _boolean("附上已下载的 PDF/CAJ 文件（默认 true）；没有下载过的文献只存题录"),
            "collection": _string(
                "存入的 Zotero 分类：唯一的分类名，或从文库根开始的路径（如 法学/2024）；省略时存入 Zotero 当前选中的分类"
            ),
            "record_refs": _strings(f"要保存的 record_ref 列表，最多 {tool_args.ZOTERO_MAX} 个"),
            "scope": _string("配合 search_id：selected（默认）、eligible 或 candidates", tool_args.SCOPES),
            "search_id": _string(f"保存某次检索的结果（最多 {tool_args.ZOTERO_MAX} 篇）"),
            "tags": _strings(f"给这些条目加上的标签，每个 1–{tool_args.TAG_CHARS} 字，不含英文逗号"),
        }
    ),
    tool_args.SaveToZoteroArgs,
    a.validate_save_to_zotero,
    handler=App.save_to_zotero,
    read_only=False,
    open_world=True,  # Zotero is outside the server: its library changes
)

register(
    ToolName.SEARCH,
    "研究检索：只需给出研究问题。自动规划检索概念，在主题、篇名、关键词三个字段并发检索，去重后读取详情与期刊信息，"
    "再按相关文献的共同关键词补充检索，最后按相关性和来源质量排序筛选。适合开放的主题调研与综述准备；"
    f"有明确的字段、作者、来源或排序要求时改用 {ToolName.STRUCTURED_SEARCH}。limit 只决定返回条数，不影响检索范围。",
    _object(
        {
            "concept_groups": {
                "description": (
                    f"自己指定必要概念：组与组之间为 AND，组内同义词为 OR；最多 {tool_args.PLAN_GROUPS_MAX} 组，"
                    f"每组 1–{tool_args.PLAN_TERMS_MAX} 个词，每词不超过 {tool_args.PLAN_TERM_CHARS} 字"
                ),
                "items": _strings(),
                "type": ["null", "array"],
            },
            "limit": _integer(f"返回多少条筛选结果，{_LIMIT}；不影响检索与筛选本身"),
            "mode": _string("precise 不做补充检索；balanced（默认）；broad 目前与 balanced 相同", tool_args.MODES),
            "options": _SEARCH_OPTIONS,
            "query": _string(f"研究问题或检索词，1–{tool_args.QUERY_MAX} 字"),
            "year_from": _YEAR_FROM,
            "year_to": _YEAR_TO,
        },
        required=("query",),
    ),
    tool_args.SearchArgs,
    a.validate_search,
    handler=App.search,
    read_only=True,
    open_world=True,
)

register(
    ToolName.SEARCH_FACETS,
    "一个检索在知网左侧分组中的分布：发表年度、学科、主题、文献来源（期刊/学位授予单位）、作者、机构、基金、文献类型，"
    "每项给出 value（名称）、code（用于 facet_filters 筛选）和 count（篇数），按知网的顺序（年度按年份升序）；total 是结果总数。"
    f"用 search_id 复用 {ToolName.SEARCH}、{ToolName.STRUCTURED_SEARCH} 或 {ToolName.EXPERT_SEARCH} 的检索条件，"
    f"或给 expression（与 {ToolName.STRUCTURED_SEARCH} 相同的条件树）加 year_from/year_to。"
    "chart=true 时另附一张 PNG 图（每年发文量，以及其他分组的前 "
    f"{tool_args.CHART_BARS} 项），chart_table 给出图中的同样数字。想知道某领域逐年增长、谁在研究、哪些期刊在发时使用。",
    _object(
        {
            "chart": _boolean("同时画图（PNG，作为图片内容返回并保存在数据目录 charts/ 下）"),
            "expression": {
                "additionalProperties": True,
                "description": f"条件树，写法同 {ToolName.STRUCTURED_SEARCH} 的 expression（与 search_id 二选一）",
                "type": "object",
            },
            "facet_filters": _FACET_FILTERS,
            "facets": {
                "description": f"要哪些分组（默认全部）：{_FACET_LIST}",
                "items": {"enum": list(tool_args.FACET_NAMES), "type": "string"},
                "type": ["null", "array"],
            },
            "freshness": _string(
                "prefer_cache（默认）：10 分钟内同一检索的分组结果直接复用，不访问知网；live：重新读取", tool_args.FRESHNESS
            ),
            "limit": _integer(f"每个分组返回几项，{_range(tool_args.FACET_LIMIT_MAX, tool_args.FACET_LIMIT_DEFAULT)}"),
            "on_verification": _POLICY,
            "search_id": _string("复用这次检索的条件、年份和分组筛选（与 expression 二选一）"),
            "year_from": _YEAR_FROM,
            "year_to": _YEAR_TO,
        }
    ),
    tool_args.SearchFacetsArgs,
    a.validate_search_facets,
    handler=App.search_facets,
    read_only=True,
    open_world=True,
)

register(
    ToolName.STRUCTURED_SEARCH,
    "知网高级检索：用字段条件和 and/or/not 精确组合（主题、篇名、关键词、摘要、作者、第一作者、通讯作者、单位、来源、"
    "DOI、基金、全文、参考文献、分类号、小标题、篇关摘），可限定年份，按相关度、发表时间、被引或下载排序。"
    "条件明确时使用，例如某作者某年以后篇名含某词的论文；结果保持知网原有顺序。"
    f"结果中的 expert_expression 是同一检索的知网专业检索式（不含年份），可粘贴到知网或交给 {ToolName.EXPERT_SEARCH}。",
    _object(
        {
            "expression": {
                "additionalProperties": True,
                "description": (
                    "条件树。单个条件 {field, value, match}：field 取 subject、title、keywords、abstract、"
                    "title_keywords_abstract、fulltext、authors、first_author、corresponding_author、institutions、"
                    "source、doi、funds、references、classification、subtitle；match 为 phrase（默认，模糊）或 exact。"
                    "组合 {op: and|or|not, items: [...]}，and/or 需 2–12 项，not 恰好 1 项。"
                    '例：{"op":"and","items":[{"field":"title","value":"违约金"},{"field":"authors","value":"王利明"}]}。'
                    "句子检索（知网的句子检索，在全文中找同时含两个词的句子或段落）：单个条件 "
                    "{field: sentence, value, value2, scope}，value 与 value2 为两个检索词，scope 为 sentence（同一句，默认）"
                    "或 paragraph（同段）；它必须单独构成整个 expression（知网不允许与其他条件组合，组合时返回 INVALID_EXPRESSION，"
                    "不访问知网），不能再带 match；每条结果的 sentence 是匹配到的那句（或那段）原文。"
                    '例：{"field":"sentence","value":"大语言模型","value2":"医学影像","scope":"sentence"}'
                ),
                "type": "object",
            },
            **_NATIVE_PROPERTIES,
        },
        required=("expression",),
    ),
    tool_args.StructuredSearchArgs,
    a.validate_native_search,
    handler=App.structured_search,
    read_only=True,
    open_world=True,
)
