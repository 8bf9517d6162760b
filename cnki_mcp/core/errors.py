"""Error codes and the one exception type the package raises for user-facing failures.

Hierarchy::

    CnkiError(Exception)          code + Chinese message + retryable + details
      -> model.Problem            the JSON shape clients see ({code, message, retryable?, details?})
      -> Failure                  a tool's isError answer ({status: "failed", errors: [Problem], warnings?})

Every code a user can meet is named in ``ErrorCode`` (so the type checker refuses an undeclared one) and has
its default Chinese message, and whether it is retryable, in ``CATALOGUE``. ``problem_from`` turns any exception into a Problem: cancellation becomes
``CANCELLED``, transport failures ``BROWSER_UNAVAILABLE`` and anything else ``OPERATION_FAILED``.
"""

from __future__ import annotations

import asyncio
from typing import Any, Literal

import msgspec

from cnki_mcp.core.model import Problem
from cnki_mcp.core.text import shortened


class Code:
    """Declared code with its default message; ``retryable`` codes may succeed when tried again."""

    __slots__ = ("message", "retryable")

    def __init__(self, message: str, retryable: bool = False) -> None:
        self.message = message
        self.retryable = retryable


# Every code a user can meet; CATALOGUE gives each its message (a test checks both name the same codes).
ErrorCode = Literal[
    "INVALID_INPUT",
    "INVALID_ARGUMENT",
    "UNKNOWN_TOOL",
    "INVALID_QUERY",
    "INVALID_MODE",
    "INVALID_LIMIT",
    "INVALID_YEAR",
    "INVALID_POLICY",
    "INVALID_SORT",
    "INVALID_OPTION",
    "INVALID_METADATA",
    "INVALID_FRESHNESS",
    "INVALID_PLAN",
    "QUERY_TOO_COMPLEX",
    "INVALID_CONDITION",
    "INVALID_MATCH",
    "INVALID_EXPRESSION",
    "INVALID_NOT",
    "INVALID_OPERATOR",
    "UNBOUNDED_QUERY",
    "QUERY_UNSUPPORTED",
    "INVALID_FACET",
    "INVALID_FACET_FILTER",
    "INVALID_SCOPE",
    "INVALID_VIEW",
    "INVALID_OFFSET",
    "OPERATION_ID_REQUIRED",
    "INVALID_FORMAT",
    "INVALID_TEMPLATE",
    "FORMAT_UNAVAILABLE",
    "INVALID_FIELDS",
    "INVALID_WAIT",
    "INVALID_ACTION",
    "INVALID_SECTION",
    "INVALID_LOGIN_URL",
    "INVALID_INTERVAL",
    "BATCH_TOO_LARGE",
    "INPUT_TOO_LARGE",
    "TOO_MANY_REFERENCES",
    "OUTPUT_TOO_LARGE",
    "NO_DOCUMENTS",
    "REFERENCES_REQUIRED",
    "TOO_MANY_ENTRIES",
    "INVALID_SOURCE",
    "INVALID_RELATION",
    "INVALID_CURSOR",
    "SEARCH_NOT_FOUND",
    "NOTHING_TO_EXPORT",
    "RECORD_NOT_FOUND",
    "REFERENCES_NOT_READ",
    "DOCUMENT_NOT_FOUND",
    "IDENTITY_AMBIGUOUS",
    "OPERATION_NOT_FOUND",
    "OPERATION_NOT_RUNNING",
    "OPERATION_STATE",
    "OPERATION_BUSY",
    "CONTINUE_UNAVAILABLE",
    "WATCH_NOT_FOUND",
    "WATCH_EXISTS",
    "WATCH_INCOMPLETE",
    "WATCH_RUNNING",
    "WATCH_GAP",
    "WATCH_MEMORY_FULL",
    "VERIFICATION_NOT_FOUND",
    "BUDGET_EXHAUSTED",
    "CANCELLED",
    "OPERATION_FAILED",
    "BROWSER_UNAVAILABLE",
    "BROWSER_NOT_FOUND",
    "NETWORK_UNREACHABLE",
    "RATE_LIMITED",
    "SITE_UNAVAILABLE",
    "VERIFICATION_REQUIRED",
    "VERIFICATION_SKIPPED",
    "VERIFICATION_TIMEOUT",
    "VERIFICATION_REPEATED",
    "VERIFICATION_CONTEXT_UNAVAILABLE",
    "LOGIN_REQUIRED",
    "LOGIN_TIMEOUT",
    "REMOTE_ACCESS_UNSUPPORTED",
    "ACCESS_DENIED",
    "LOCATOR_EXPIRED",
    "CONTENT_NOT_READY",
    "PAGE_NAVIGATED",
    "IDENTITY_CONFLICT",
    "QUERY_TEMPLATE_UNAVAILABLE",
    "QUERY_TEMPLATE_UNSUPPORTED",
    "PAGINATION_MISMATCH",
    "PARSER_UNSUPPORTED",
    "SITE_STRUCTURE_CHANGED",
    "SITE_TEMPORARILY_EMPTY",
    "QUERY_REJECTED",
    "SORT_NOT_APPLIED",
    "SOURCE_CATEGORY_NOT_APPLIED",
    "SOURCE_CATEGORY_ABSENT",
    "RELATIONS_UNAVAILABLE",
    "RESPONSE_TOO_LARGE",
    "SOURCE_LOCATOR_MISSING",
    "JOURNAL_NOT_FOUND",
    "JOURNAL_AMBIGUOUS",
    "AUTHOR_NOT_ON_PAPER",
    "ISSUE_NOT_FOUND",
    "SOURCE_IDENTITY_UNCONFIRMED",
    "SOURCE_SCHEMA_UNSUPPORTED",
    "HTML_ENTRY_NOT_FOUND",
    "READER_UNSUPPORTED",
    "READER_REFUSED",
    "SECTION_NOT_FOUND",
    "SECTION_AMBIGUOUS",
    "CONTENT_PARTIAL",
    "DOWNLOAD_ENTRY_NOT_FOUND",
    "DOWNLOAD_REFUSED",
    "DOWNLOAD_CANCELLED",
    "DOWNLOAD_RIGHTS_MISSING",
    "DAILY_LIMIT_REACHED",
    "BROWSER_DEVTOOLS_INTRUDED",
    "INVALID_FILE",
    "PDF_TOO_COMPLEX",
    "ZOTERO_UNAVAILABLE",
    "ZOTERO_COLLECTION_NOT_FOUND",
    "ZOTERO_COLLECTION_AMBIGUOUS",
    "ZOTERO_READ_ONLY",
    "ZOTERO_SAVE_FAILED",
    "ZOTERO_SESSION_FAILED",
    "INVALID_TAGS",
    "NOT_DOWNLOADED",
    "NO_TEXT_LAYER",
    "CAJ_UNSUPPORTED",
    "SIDE_EFFECT_UNCERTAIN",
    "DATA_DIRECTORY_IN_USE",
    "OWNER_CHANGED",
    "OWNER_UNREACHABLE",
    "HTTP_ADDRESS_UNAVAILABLE",
    "CLIENT_HTTP_UNSUPPORTED",
    "CONFIG_INVALID",
    "CONFIG_ROUTE_REFUSED",
    "INVALID_SETTING",
    "STORE_UNAVAILABLE",
    "STORE_NOT_SAVED",
    "STORE_SET_ASIDE",
    "STORE_ENTRIES_DROPPED",
    "STORE_CORRUPT",
    "INVALID_FILENAME",
    "UNSAFE_OUTPUT_PATH",
    "FILE_EXISTS",
    "DISK_WRITE_FAILED",
    "UNKNOWN_CLIENT",
    "CLIENT_IMPORT_REQUIRED",
    "CLIENT_CONFIG_INVALID",
    "CLIENT_NOT_INITIALIZED",
    "CLIENT_UNAVAILABLE",
    "CLIENT_LINK_UNSUPPORTED",
    "CLIENT_REQUIRED",
    "CLIENT_CONFIG_AMBIGUOUS",
    "SETUP_NEEDS_TERMINAL",
    "CONFIG_SYMLINK",
    "CONFIG_CHANGED",
    "PROTOCOL_CHECK_FAILED",
    "REPORT_UNSAFE",
    "BROWSER_CHECK_FAILED",
    "BROWSER_PROFILE_IN_USE",
    "RESOURCE_FAILED",
    "WINDOW_STATE_UNCONFIRMED",
    "CONTROL_NOT_ACTIONABLE",
]


CATALOGUE: dict[ErrorCode, Code] = {
    # --- input validation -------------------------------------------------------------------
    "INVALID_INPUT": Code("参数无效。"),
    "INVALID_ARGUMENT": Code("命令行参数无效。"),
    "UNKNOWN_TOOL": Code("没有这个工具。"),
    "INVALID_QUERY": Code("query 须为 1–1000 字的检索词或研究问题。"),
    "INVALID_MODE": Code("mode 只能是 precise、balanced 或 broad。"),
    "INVALID_LIMIT": Code("limit 须在 1–100 之间。"),
    "INVALID_YEAR": Code("年份须在 0–2200 之间，且 year_from 不能大于 year_to。"),
    "INVALID_POLICY": Code("on_verification 只能是 ask 或 skip。"),
    "INVALID_SORT": Code("sort 只能是 relevance、date_desc、cited_desc 或 downloaded_desc。"),
    "INVALID_OPTION": Code("options 中的数值超出允许范围。"),
    "INVALID_METADATA": Code("options.metadata 只能是 ranked、all 或 basic。"),
    "INVALID_FRESHNESS": Code("options.freshness 只能是 live 或 prefer_cache。"),
    "INVALID_PLAN": Code("concept_groups 最多 8 组，每组 1–6 个词，每个词 1–80 字。"),
    "QUERY_TOO_COMPLEX": Code("检索条件过于复杂：最多 96 个节点、8 层，展开后最多 32 组。"),
    "INVALID_CONDITION": Code("检索条件无效：字段未知、检索词为空或超过 120 字。"),
    "INVALID_MATCH": Code("match 只能是 phrase 或 exact。"),
    "INVALID_EXPRESSION": Code("expression 的结构无效。"),
    "INVALID_NOT": Code("not 条件必须恰好包含 1 个子条件。"),
    "INVALID_OPERATOR": Code("op 只能是 and、or、not；and/or 需要 2–12 个子条件。"),
    "UNBOUNDED_QUERY": Code("展开后的每一组条件都必须至少有一个肯定条件。"),
    "QUERY_UNSUPPORTED": Code("知网不支持这个检索条件。"),
    "INVALID_FACET": Code("分组名只能是 year、subject、topic、source、author、institution、fund、doc_type、source_category。"),
    "INVALID_FACET_FILTER": Code(
        "facet_filters 无效：每个分组给 1–20 个 code，取自 search_facets 结果中的 code（如 YE=2024）；请先调用 search_facets。"
    ),
    "INVALID_SCOPE": Code("scope 只能是 selected、eligible 或 candidates。"),
    "INVALID_VIEW": Code("view 只能是 titles、compact 或 records。"),
    "INVALID_OFFSET": Code("offset 不能为负数。"),
    "OPERATION_ID_REQUIRED": Code("有多个任务正在运行，请用 operation_id 指定其中一个。"),
    "INVALID_FORMAT": Code("format 不是支持的格式。"),
    "INVALID_TEMPLATE": Code("custom 模板无效。"),
    "FORMAT_UNAVAILABLE": Code("这种导出格式不可用。"),
    "INVALID_FIELDS": Code("fields 中有未知字段。"),
    "INVALID_WAIT": Code("wait_seconds 超出允许范围。"),
    "INVALID_ACTION": Code("action 只能是 cancel、continue、resume、show 或 recover。"),
    "INVALID_SECTION": Code("section 无效。"),
    "INVALID_LOGIN_URL": Code(
        "remote_access_url 不是可用的远程访问地址：须为 https:// 开头、不含账号密码的完整网址。"
        "请从学校图书馆或 VPN 页面复制地址后重试。"
    ),
    "INVALID_INTERVAL": Code("interval_seconds 须在 5–600 秒之间。"),
    "BATCH_TOO_LARGE": Code("一次最多处理 100 篇文献。"),
    "INPUT_TOO_LARGE": Code("文本超过 512 KB。"),
    "TOO_MANY_REFERENCES": Code("文本中的《题名》超过 100 个。"),
    "OUTPUT_TOO_LARGE": Code("导出内容超过 512 KB，请指定 filename 保存为文件。"),
    "NO_DOCUMENTS": Code("请至少提供 record_refs、titles 或 search_id 之一。"),
    "REFERENCES_REQUIRED": Code("请提供 text（粘贴的参考文献列表）或 references（每条一个字符串）之一，不能同时提供。"),
    "TOO_MANY_ENTRIES": Code("一次最多核对 200 条参考文献；请分成几次调用。"),
    "INVALID_SOURCE": Code("source 只能是 online（在线阅读）、download（读已下载的文件）或 auto。"),
    "INVALID_RELATION": Code("relation 只能是 references（参考文献）、citing（引证文献）或 similar（相似文献）。"),
    "INVALID_CURSOR": Code("cursor 无效：请原样传入上一页结果中的 next_cursor，并使用同一篇文献和同一种 relation。"),
    # --- lookups ----------------------------------------------------------------------------
    "SEARCH_NOT_FOUND": Code("没有找到这个 search_id 对应的检索记录。"),
    "NOTHING_TO_EXPORT": Code("这次检索还没有可以导出的文献（结果是空的）；请先用 search_results 查看检索的状态和原因。"),
    "RECORD_NOT_FOUND": Code("没有找到这个 record_ref 对应的本地记录。"),
    "REFERENCES_NOT_READ": Code("这篇文献的参考文献表还没有读取过；请先调用 related_papers（relation=references），再导出。"),
    "DOCUMENT_NOT_FOUND": Code("知网上没有找到这个完整题名的文献。"),
    "IDENTITY_AMBIGUOUS": Code("有多篇同名文献，请根据作者、年份、来源选择 record_ref。"),
    "OPERATION_NOT_FOUND": Code("没有找到这个任务。"),
    "OPERATION_NOT_RUNNING": Code("这个任务没有在运行。"),
    "OPERATION_STATE": Code("任务当前的状态不允许这个操作。"),
    "OPERATION_BUSY": Code("任务仍在运行，不能继续。"),
    "CONTINUE_UNAVAILABLE": Code("只有中断、失败或预算用完的检索任务和批量下载任务可以继续；其他任务请重新调用原工具。"),
    "WATCH_NOT_FOUND": Code("没有这个关注；用 watch 的 list 查看已有的关注。"),
    "WATCH_EXISTS": Code("已有同名的关注；换一个名称，或先 remove 再 add。"),
    "WATCH_INCOMPLETE": Code(
        "这次关注运行没有读完知网的列表（见任务的 errors），没有记下任何论文；处理好问题后再次 run 会重新读取同一段。", True
    ),
    "WATCH_RUNNING": Code("这个关注正在运行（details 的 operation_id）；同一关注同时只能运行一次，请用 operation_status 等它的结果，不要再次 run。", True),
    "WATCH_GAP": Code(
        "有列表读满 max_pages 页仍没读到上次已知的论文，其间更早的新论文这次没有读到；已记下这段缺口，之后的 run 会继续往下读，"
        "读到时作为新论文报告。请更常运行，或 run 时给 arguments: {\"options\": {\"max_pages\": 更大的页数}}。"
    ),
    "WATCH_MEMORY_FULL": Code(
        "关注记住的论文已达上限，最早的一些被忘记，其中有这次列表里读到的；以后的 run 可能把它们当作新论文再报告一次。"
    ),
    "VERIFICATION_NOT_FOUND": Code("当前没有等待人工处理的页面。"),
    # --- operations -------------------------------------------------------------------------
    "BUDGET_EXHAUSTED": Code("任务预算已用完；可用 operation_control 的 continue 增加预算后继续。", True),
    "CANCELLED": Code("任务已取消。"),
    "OPERATION_FAILED": Code("任务执行失败。"),
    "BROWSER_UNAVAILABLE": Code(
        "浏览器连接不可用（这不代表没有访问权限）。请调用 operation_control 的 recover，然后重试或 continue。",
        True,
    ),
    "BROWSER_NOT_FOUND": Code("没有找到 Chrome、Edge 或 Chromium；请用 cnki-mcp setup 或 CNKI_BROWSER_PATH 指定浏览器。"),
    # --- site ---------------------------------------------------------------------------------
    "NETWORK_UNREACHABLE": Code(
        "连不上知网（网络不通、域名解析失败、代理出错，或知网的 CDN 拒绝了这个网络）。"
        "请确认本机能在浏览器里打开 kns.cnki.net；用代理或 VPN 时让 cnki.net 直连（代理软件里设为直连，"
        "或设置环境变量 NO_PROXY=cnki.net,.cnki.net），然后重试。",
        True,
    ),
    "RATE_LIMITED": Code("知网限制了访问频率（HTTP 429）；请稍后再试，或调大 CNKI_REQUEST_INTERVAL_MS。", True),
    "SITE_UNAVAILABLE": Code("知网暂时不可用（HTTP 5xx），请稍后再试。", True),
    "VERIFICATION_REQUIRED": Code("知网要求人工验证。", True),
    "VERIFICATION_SKIPPED": Code("按 on_verification=skip 跳过了需要人工验证的资源。"),
    "VERIFICATION_TIMEOUT": Code("等待人工验证超过 20 分钟。", True),
    "VERIFICATION_REPEATED": Code("验证后知网仍然反复要求验证。", True),
    "VERIFICATION_CONTEXT_UNAVAILABLE": Code("没有可以显示给你处理的验证页面。"),
    "LOGIN_REQUIRED": Code("需要登录知网；请在弹出的浏览器窗口中登录。", True),
    "LOGIN_TIMEOUT": Code("等待登录超过 20 分钟。", True),
    # --- remote access (site/route.py): the university's WebVPN, proxy or CARSI login -------
    "REMOTE_ACCESS_UNSUPPORTED": Code(
        "无法识别这个学校 VPN（远程访问）的网址格式。请先在浏览器里通过学校 VPN 打开知网任意页面，"
        "把地址栏中的完整网址作为 remote_access_url 传入；仍然不行时，请把网址的格式（不含票据）附在 issue 中。"
    ),
    "ACCESS_DENIED": Code("知网拒绝了访问（无权限）。"),
    "LOCATOR_EXPIRED": Code("论文链接已失效。", True),
    "CONTENT_NOT_READY": Code("页面内容没有加载出来。", True),
    "PAGE_NAVIGATED": Code("页面在操作进行中跳转了（例如转到了验证页面）。", True),
    "IDENTITY_CONFLICT": Code("页面上的论文与要求的论文不一致。"),
    "QUERY_TEMPLATE_UNAVAILABLE": Code("无法从知网检索页取得检索请求格式。", True),
    "QUERY_TEMPLATE_UNSUPPORTED": Code("知网检索请求的格式与预期不符。"),
    "PAGINATION_MISMATCH": Code("知网返回的页码与请求不一致。"),
    "PARSER_UNSUPPORTED": Code("页面结构不受支持。"),
    "SITE_STRUCTURE_CHANGED": Code(
        "知网页面的结构与预期不符（可能是知网改版）；请运行 cnki-mcp doctor --report，把生成的报告附在 issue 中。"
    ),
    "SITE_TEMPORARILY_EMPTY": Code(
        "知网暂时只返回空白结果（通常是访问过于频繁被限流）；这不代表没有文献。请稍后用 operation_control 的 continue 继续"
        "（检索任务）或再调用一次原工具，或调大 CNKI_REQUEST_INTERVAL_MS。",
        True,
    ),
    "QUERY_REJECTED": Code("知网拒绝了这次检索（检索条件的结构或长度不被接受）；请简化检索条件后重试。"),
    "SORT_NOT_APPLIED": Code("知网返回的结果没有按要求的方式排序。"),
    "SOURCE_CATEGORY_NOT_APPLIED": Code(
        "知网返回的结果比所选来源类别在分组中的篇数还多，说明知网没有按来源类别筛选；结果没有返回。"
        "请稍后重试，或改用 search_facets 查看 source_category 分组后用 facet_filters 筛选。"
    ),
    "SOURCE_CATEGORY_ABSENT": Code(
        "知网的来源类别分组中没有所选类别（该检索的结果里没有这类文献，或知网换了名称），没有检索；"
        "可用 search_facets 的 source_category 分组查看知网给出的类别。"
    ),
    "RELATIONS_UNAVAILABLE": Code(
        "知网没有给出可用的参考文献、引证文献或相似文献数据（接口和详情页都不可用），这不代表没有；"
        "请稍后重试，或调大 CNKI_REQUEST_INTERVAL_MS。",
        True,
    ),
    "RESPONSE_TOO_LARGE": Code("页面超过 8 MB。"),
    "SOURCE_LOCATOR_MISSING": Code("详情页没有期刊链接。"),
    "JOURNAL_NOT_FOUND": Code("知网期刊导航中没有找到这种期刊；请核对刊名，或改用 ISSN、CN 或其中一篇论文的 record_ref。"),
    "JOURNAL_AMBIGUOUS": Code("知网有不止一种期刊与给出的刊名相符；请改用 ISSN、CN 或其中一篇论文的 record_ref。"),
    "AUTHOR_NOT_ON_PAPER": Code("这篇论文的作者中没有这个名字，或详情页没有给出其单位；请核对 author 是否与详情页的写法一致。"),
    "ISSUE_NOT_FOUND": Code("该刊在知网没有这一年或这一期；请先不带 year 调用，查看知网列出的年份与刊期。"),
    "SOURCE_IDENTITY_UNCONFIRMED": Code("期刊页面的名称与论文来源对不上。"),
    "SOURCE_SCHEMA_UNSUPPORTED": Code("期刊页面没有可识别的期刊信息。"),
    "HTML_ENTRY_NOT_FOUND": Code("详情页没有“HTML阅读”入口，可以改用 download_paper。"),
    "READER_UNSUPPORTED": Code("阅读页结构不受支持。"),
    "READER_REFUSED": Code("知网不提供这篇文献的在线阅读；可以用 get_metadata 查看题录和摘要。"),
    "SECTION_NOT_FOUND": Code("没有这个章节；章节名见返回结果中的 sections。"),
    "SECTION_AMBIGUOUS": Code("有多个同名章节。"),
    "CONTENT_PARTIAL": Code("正文不完整。"),
    "DOWNLOAD_ENTRY_NOT_FOUND": Code("详情页没有所需格式的下载入口。"),
    "DOWNLOAD_REFUSED": Code("知网拒绝了下载。"),
    "DOWNLOAD_CANCELLED": Code("下载被取消。"),
    "DOWNLOAD_RIGHTS_MISSING": Code(
        "连续几篇论文都因没有全文权限被知网拒绝（未订购、余额不足或未登录），批量下载已停止，其余论文没有尝试。"
        "请先登录个人或机构账号（login），在校外时用机构的远程访问地址登录（login 的 remote_access_url），"
        "然后用 operation_control 的 continue 继续。"
    ),
    "DAILY_LIMIT_REACHED": Code(
        "今天成功下载的论文已达到每日上限，下载已停止，以免知网把账号标记为异常；批量下载的其余论文见 remaining。"
        "北京时间次日零点后用 operation_control 的 continue 继续；上限可在 config.json 的 daily_download_limit "
        "或环境变量 CNKI_DAILY_DOWNLOAD_LIMIT 中调整（0 表示不限）。"
    ),
    "BROWSER_DEVTOOLS_INTRUDED": Code(
        "本机另一个程序连上了浏览器的调试端口，可能在操控已登录知网的标签页；为安全起见已关闭浏览器。"
        "请检查本机有没有不认识的程序或其他用户在运行，确认安全后再调用一次（浏览器会重新启动，可能需要重新登录）。",
        True,
    ),
    "INVALID_FILE": Code("下载的文件不是有效的 PDF/CAJ。"),
    "PDF_TOO_COMPLEX": Code("这个 PDF 的页面过于复杂（字符太多或解析太久），已停止读取；请改用 source=online 在线阅读，或换一个文件。"),
    "ZOTERO_UNAVAILABLE": Code(
        "连不上 Zotero：请先打开 Zotero 桌面版再重试；它不在本机默认端口 23119 时用 CNKI_ZOTERO_URL 指定地址。", True
    ),
    "ZOTERO_COLLECTION_NOT_FOUND": Code("Zotero 中没有这个分类；请先在 Zotero 里建好，或写出从文库根开始的完整路径。"),
    "ZOTERO_COLLECTION_AMBIGUOUS": Code("Zotero 中有多个同名分类；请用完整路径（如 法学/2024）指定。"),
    "ZOTERO_READ_ONLY": Code("Zotero 当前的文库是只读的；请选中“我的文库”或可编辑的分类后重试。"),
    "ZOTERO_SAVE_FAILED": Code("Zotero 没有保存这条记录；其他记录不受影响，可以稍后单独重试。", True),
    "ZOTERO_SESSION_FAILED": Code("条目已存入 Zotero，但没能放进指定分类或加上标签；请在 Zotero 里手动整理。"),
    "INVALID_TAGS": Code("tags 中每个标签须为 1–100 字，且不含英文逗号。"),
    "NOT_DOWNLOADED": Code("本地没有这篇论文完好的下载文件；请先下载（download_paper），或改用 source=online 在线阅读。"),
    "NO_TEXT_LAYER": Code(
        "下载的 PDF 是扫描图像，没有文字层，读不出正文；可以改用 source=online 在线阅读，或先用 OCR 软件识别后自行阅读。"
    ),
    "CAJ_UNSUPPORTED": Code(
        "下载的 CAJ 文件不是内含 PDF 的那一种，无法直接读取；可以用 CAJViewer 打开后另存或打印为 PDF，或重新下载 PDF 格式。"
    ),
    "SIDE_EFFECT_UNCERTAIN": Code(
        "上一次下载结果不明确；再次调用会先检查已有文件，确认需要重新下载时传入 retry=true。"
    ),
    # --- local files --------------------------------------------------------------------------
    "DATA_DIRECTORY_IN_USE": Code("另一个 MCP 服务进程正在使用同一数据目录。"),
    # --- one owner, many clients (owner.py, relay.py, endpoint.py) ------------------------------
    "OWNER_CHANGED": Code(
        "负责这个数据目录的服务进程刚刚结束，已由另一个服务进程接替；这次调用没有得到回答。"
        "请再调用一次；正在运行的任务已标记为 interrupted，可以用 operation_control 的 continue 继续。",
        True,
    ),
    "OWNER_UNREACHABLE": Code(
        "数据目录由另一个 cnki-mcp 进程负责，但无法连接到它。请稍后重试；仍然不行时结束那个进程（diagnostics 的 owner_pid），"
        "或用 CNKI_DATA_DIR 指定其他目录。",
        True,
    ),
    "HTTP_ADDRESS_UNAVAILABLE": Code("无法在这个地址和端口上监听；请换一个端口（--port，0 表示任选空闲端口）或地址（--host）。"),
    "CLIENT_HTTP_UNSUPPORTED": Code("这个客户端的配置只支持 stdio；请用 cnki-mcp config <客户端>（不带 --http），它会自动加入正在运行的服务。"),
    "CONFIG_INVALID": Code("config.json 无法解析。"),
    "CONFIG_ROUTE_REFUSED": Code(
        "config.json 里保存的学校 VPN（远程访问）入口不是可用的网关，没有使用，现在直接访问知网。请经学校 VPN 重新调用 login"
        "（传入 remote_access_url），或运行 cnki-mcp setup --remote-access <网址>；不再用学校 VPN 时，可删去 config.json 中的 route 项。"
    ),
    "INVALID_SETTING": Code("一项设置（环境变量或 config.json）的值无效；请按消息中的设置名改正后重试。"),
    "STORE_UNAVAILABLE": Code("本地数据无法读写。"),
    "STORE_NOT_SAVED": Code(
        "最近的更改没能写入本地数据库 research.db，目前只在内存中；服务会自动重试。请释放磁盘空间或检查数据目录的写权限，"
        "保存成功之前不要关闭服务，否则这些更改会丢失。",
        True,
    ),
    "STORE_SET_ASIDE": Code("本地数据（research.db 或旧版的 research.json）无法读取，已改名保留，本次从空的本地数据开始；原文件没有删除。"),
    "STORE_ENTRIES_DROPPED": Code("本地数据（research.db 或旧版的 research.json）中有条目无法读取，已跳过，其余记录照常载入；原文件另存了一份。"),
    "STORE_CORRUPT": Code(
        "本地数据库 research.db 读取时出错（文件损坏或磁盘故障）。请先用 cnki-mcp store --dump 备份，再重新启动服务："
        "启动时会检查数据库，损坏的文件改名保留，能读出的记录搬到新数据库。"
    ),
    "INVALID_FILENAME": Code("文件名无效。"),
    "UNSAFE_OUTPUT_PATH": Code("输出路径不安全，只能写入数据目录内。"),
    "FILE_EXISTS": Code("同名文件已存在，未覆盖。"),
    "DISK_WRITE_FAILED": Code("写入文件失败。", True),
    # --- CLI and setup ------------------------------------------------------------------------
    "UNKNOWN_CLIENT": Code("未知的客户端；用 cnki-mcp help 查看全部选项。"),
    "CLIENT_IMPORT_REQUIRED": Code("这个客户端不能自动写入配置，请使用导入链接或粘贴配置。"),
    "CLIENT_CONFIG_INVALID": Code("客户端配置文件无法解析，未做改动。"),
    "CLIENT_NOT_INITIALIZED": Code("客户端的配置目录还不存在，请先打开一次该客户端。"),
    "CLIENT_UNAVAILABLE": Code("这个客户端在这台电脑的系统上没有；请在装有它的电脑上运行 cnki-mcp setup，或选择其他客户端。"),
    "CLIENT_LINK_UNSUPPORTED": Code("这个客户端没有一键安装链接；请用 cnki-mcp config <客户端> 输出配置片段。"),
    "CLIENT_REQUIRED": Code("--install-client 需要同时用 --client 指定要接入的客户端（见 cnki-mcp help）。"),
    "CLIENT_CONFIG_AMBIGUOUS": Code("这个客户端有多个安装，各有自己的配置文件；请不带参数运行 cnki-mcp setup 并选择其一。"),
    "SETUP_NEEDS_TERMINAL": Code(
        "标准输入不是终端，setup 无法逐项询问，也不会擅自采用默认选择；请用 --browser、--client、--install-client、"
        "--headless 或 --no-headless 说明要做什么（见 cnki-mcp help）。"
    ),
    "CONFIG_SYMLINK": Code("客户端配置文件是符号链接，为安全起见未做改动。"),
    "CONFIG_CHANGED": Code("客户端配置文件在写入期间被其他程序修改，未做改动，请重试。"),
    "PROTOCOL_CHECK_FAILED": Code("MCP 通信检查未通过。"),
    "REPORT_UNSAFE": Code(
        "诊断报告中发现像 Cookie、票据或你的姓名、机构名称的内容，为避免泄露，没有写入报告；"
        "请删除 diagnostics/ 下那个快照后重新运行 cnki-mcp doctor --report。"
    ),
    "BROWSER_CHECK_FAILED": Code("浏览器检查未通过：无法以无界面方式启动浏览器并打开空白页。"),
    "BROWSER_PROFILE_IN_USE": Code("专用浏览器配置目录正被另一个浏览器进程使用；请关闭那个浏览器窗口后重试。", True),
    "RESOURCE_FAILED": Code("浏览器没能取回页面（网络错误或超时，这不代表没有访问权限）。", True),
    "WINDOW_STATE_UNCONFIRMED": Code("浏览器窗口没有按要求切换显示状态。", True),
    "CONTROL_NOT_ACTIONABLE": Code("页面上的目标入口一直无法点击（被遮挡、禁用或仍在移动）。", True),
}

# Errors that stop a whole batch or round instead of being recorded against one record.
FATAL_CODES = frozenset(
    {
        "BUDGET_EXHAUSTED",
        "RATE_LIMITED",
        "SITE_UNAVAILABLE",
        "VERIFICATION_TIMEOUT",
        "LOGIN_REQUIRED",
        "QUERY_TEMPLATE_UNAVAILABLE",
        "QUERY_TEMPLATE_UNSUPPORTED",
        "BROWSER_UNAVAILABLE",
        "NETWORK_UNREACHABLE",
        "CANCELLED",
        "SOURCE_CATEGORY_NOT_APPLIED",
    }
)

_TRANSPORT_MARKERS = (
    "session with given id not found",
    "connection closed",
    "closed network connection",
    "websocket",
    "target closed",
    "browser has been closed",
    "connection reset",
    "broken pipe",
    "no target with given id",
    "connection refused",
)


# Messages quote what the caller sent; a huge value must not come back whole (twice, in text and structure).
MESSAGE_MAX_CHARS = 600


def _clip(message: str) -> str:
    return shortened(message, MESSAGE_MAX_CHARS)


# The site was never reached, for want of the network or of the browser that would reach it (none found, or
# one that cannot start, say without a screen): an operation that ends so has failed (it looked at nothing),
# even though the same call may succeed once the network or the browser is fixed.
UNREACHED_CODES = frozenset({"NETWORK_UNREACHABLE", "BROWSER_UNAVAILABLE", "BROWSER_NOT_FOUND"})


def unreached_with_nothing(error: CnkiError | None, found: int) -> bool:
    """The site was never reached and nothing was found: the operation must fail with that error, never
    answer an empty result a client would read as "no papers"."""
    return error is not None and error.code in UNREACHED_CODES and found == 0


# Chrome's net errors that mean the host was not reached at all (name resolution, proxy, no route, refused,
# closed before any answer), as opposed to an answer cut short or refused by the page's own rules (CORS).
_UNREACHABLE_NET_ERRORS = {
    "dns": ("NAME_NOT_RESOLVED", "NAME_RESOLUTION_FAILED", "DNS_"),
    "proxy": ("PROXY_", "TUNNEL_CONNECTION_FAILED", "SOCKS_", "MANDATORY_PROXY", "PAC_"),
    "offline": ("INTERNET_DISCONNECTED", "ADDRESS_UNREACHABLE", "NETWORK_CHANGED", "NETWORK_ACCESS_DENIED"),
    "connection": (
        "CONNECTION_REFUSED", "CONNECTION_TIMED_OUT", "CONNECTION_FAILED", "CONNECTION_CLOSED",
        "CONNECTION_RESET", "EMPTY_RESPONSE", "TIMED_OUT", "ADDRESS_INVALID",
    ),
}
_UNREACHABLE_WHY = {
    "dns": "域名解析失败",
    "proxy": "代理服务器连接失败",
    "offline": "本机没有联网",
    "connection": "连接被拒绝或中断",
    "blocked": "知网的 CDN 拒绝了来自这个网络的访问（HTTP 418，常见于代理、VPN 或服务器的 IP）",
}
BLOCKED_STATUS = 418  # TencentEdgeOne's answer to addresses it will not serve


def unreachable_kind(net_error: str) -> str:
    """``dns``, ``proxy``, ``offline`` or ``connection`` for a Chrome net error (``net::ERR_…``) that means the
    host was never reached; "" for any other error."""
    name = net_error.strip().removeprefix("net::").removeprefix("ERR_").upper()
    if not name:
        return ""
    for kind, prefixes in _UNREACHABLE_NET_ERRORS.items():
        if any(name.startswith(prefix) for prefix in prefixes):
            return kind
    return ""


_NOT_NONE = "这不代表没有文献"
_GO_ON = "网络恢复后可以用 operation_control 的 continue 继续这次{}"


def for_its_tool(error: CnkiError, *, a_list: bool, resumable: str = "") -> CnkiError:
    """``error`` as the tool that met it says it, when the site was never reached: a tool asked for a list
    (``a_list``: a search, related papers, an author's papers, a journal's issues, facets) says that is no
    empty answer; an operation that keeps a checkpoint (``resumable`` names it: 检索, 批量下载) says it can go on.
    Other tools (the field check, get_metadata) leave the catalogue's message as it is."""
    go_on = resumable and error.code == "NETWORK_UNREACHABLE"  # the browser's own message says how to go on
    said = "；".join([*([_NOT_NONE] if a_list else []), *([_GO_ON.format(resumable)] if go_on else [])])
    if said and error.code in UNREACHED_CODES and said not in error.message:
        error.message = _clip(f"{error.message}{said}。")
    return error


def network_unreachable(url: str, kind: str, *, net_error: str = "", status: int = 0) -> CnkiError:
    """NETWORK_UNREACHABLE for a request that never reached CNKI (``kind`` from ``unreachable_kind``) or that
    its CDN turned away (``blocked``, HTTP 418), saying why."""
    details: dict[str, Any] = {"reason": kind, "url": url}
    if net_error:
        details["net_error"] = net_error
    if status:
        details["status"] = status
    why = _UNREACHABLE_WHY[kind]
    return CnkiError("NETWORK_UNREACHABLE", f"{why}：{CATALOGUE['NETWORK_UNREACHABLE'].message}", details=details)


def net_failure(url: str, net_error: str) -> CnkiError | None:
    """NETWORK_UNREACHABLE when Chrome's ``net_error`` means the host was never reached, else None."""
    kind = unreachable_kind(net_error)
    return network_unreachable(url, kind, net_error=net_error) if kind else None


class CnkiError(Exception):
    """A failure with a declared code; the message defaults to the catalogue's Chinese text."""

    def __init__(
        self,
        code: ErrorCode,
        message: str | None = None,
        *,
        details: Any = None,
        retryable: bool | None = None,
    ) -> None:
        known = CATALOGUE.get(code)
        if known is None:
            raise ValueError(f"undeclared error code {code!r}")
        self.code = code
        self.message = _clip(message or known.message)
        self.retryable = known.retryable if retryable is None else retryable
        self.details = details
        # Set by the app on the way out: what the client should know besides this failure (unsaved changes …).
        self.warnings: list[Problem] = []
        super().__init__(f"{code}: {self.message}")

    @property
    def fatal(self) -> bool:
        return self.code in FATAL_CODES

    def problem(self) -> Problem:
        return Problem(code=self.code, message=self.message, retryable=self.retryable, details=self.details)


def error_from(problem: Problem) -> CnkiError:
    """The failure a Problem reports, raised again (its code is one of the catalogue's)."""
    if problem.code not in CATALOGUE:
        raise ValueError(f"undeclared error code {problem.code!r}")
    return CnkiError(problem.code, problem.message, details=problem.details, retryable=problem.retryable)


def is_transport_failure(exc: BaseException) -> bool:
    if isinstance(exc, CnkiError):
        return exc.code == "BROWSER_UNAVAILABLE"
    if isinstance(exc, (ConnectionError, EOFError, BrokenPipeError)):
        return True
    text = str(exc).lower()
    return any(marker in text for marker in _TRANSPORT_MARKERS)


def as_cnki_error(exc: BaseException) -> CnkiError:
    """Classify any exception the way operations and tool results report it."""
    if isinstance(exc, CnkiError):
        return exc
    if isinstance(exc, asyncio.CancelledError):
        return CnkiError("CANCELLED")
    if isinstance(exc, (TimeoutError, asyncio.TimeoutError)):
        return CnkiError("BROWSER_UNAVAILABLE", "浏览器在规定时间内没有响应（这不代表没有访问权限）。请调用 operation_control 的 recover 后重试。")
    if is_transport_failure(exc):
        return CnkiError("BROWSER_UNAVAILABLE")
    return CnkiError("OPERATION_FAILED", f"任务执行失败：{exc}")


def is_fatal(exc: BaseException) -> bool:
    return as_cnki_error(exc).fatal


def problem_from(exc: BaseException) -> Problem:
    return as_cnki_error(exc).problem()


class Failure(msgspec.Struct, kw_only=True):
    """The ``isError`` answer of any tool: why no operation started or the call failed, with the store's warnings
    (every tool's output schema admits it; other answers may carry ``warnings`` too)."""

    status: str = "failed"
    errors: list[Problem]
    warnings: list[Problem] | msgspec.UnsetType = msgspec.UNSET
