"""Every line `setup`, `config`, `doctor`, `uninstall`, `help` and bare `cnki-mcp` print, in both languages.

One table, keyed by id, each entry a (Chinese, English) pair with the same ``{named}`` fields; ``text``
(``msg``) picks the pair's side by ``cli_words.language()`` at the moment the line is printed (Chinese by default,
English with ``LANG=en_*`` or ``CNKI_LANG=en``). A test checks every entry has both sides, the same
fields and no Han character in its English, and that the command modules hold no Chinese literal of
their own, so a line cannot be added in one language only. Tool texts and the error catalogue are not
here: they stay Chinese whatever the terminal's language.
"""

from __future__ import annotations

import string

from cnki_mcp.setup.cli_words import language

Words = str | tuple[str, str]  # a name that is the same in both languages, or a (Chinese, English) pair


def english() -> bool:
    return language() == "en"


def pick(words: Words) -> str:
    """One side of a pair (a plain string is the same in both languages)."""
    if isinstance(words, str):
        return words
    return words[1] if english() else words[0]


def msg(key: str, /, **values: object) -> str:
    """The line ``key`` in the CLI's language, its fields filled in."""
    return pick(LINES[key]).format(**values)


def fields(template: str) -> set[str]:
    """The ``{named}`` fields of one side of an entry."""
    return {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}


LINES: dict[str, tuple[str, str]] = {
    # --- bare cnki-mcp on a terminal, and the top level ---------------------------------------------
    "cli.terminal_hint": (
        "cnki-mcp 是一个 MCP 服务，由 AI 客户端（Claude Code、Cursor 等）启动，不在终端里直接使用。\n"
        "  接入客户端：cnki-mcp setup（逐步询问）\n"
        "  检查安装：  cnki-mcp doctor\n"
        "  全部命令：  cnki-mcp help\n"
        "  确实要在终端里启动 stdio 服务：cnki-mcp serve",
        "cnki-mcp is an MCP server: an AI client (Claude Code, Cursor, ...) starts it; it is not used in a terminal.\n"
        "  Connect a client: cnki-mcp setup (asks step by step)\n"
        "  Check the install: cnki-mcp doctor\n"
        "  Every command:    cnki-mcp help\n"
        "  Really serve stdio in this terminal: cnki-mcp serve",
    ),
    "cli.http_only": ("{flags} 只能和 --http 一起使用。", "{flags} can only be used with --http."),
    "cli.site_in_client": (
        " 也可以在客户端中调用 diagnostics（参数 site_check=true），做同样的检查。",
        " The same check runs from the client too: call diagnostics with site_check=true.",
    ),
    "cli.report_written": ("诊断报告已写入 {path}", "Diagnostic report written: {path}"),
    # --- help ------------------------------------------------------------------------------------------
    "help.usage": ("用法：", "Usage:"),
    "help.commands": (
        "  cnki-mcp serve [--http [--host <地址>] [--port <端口>]]\n"
        "  cnki-mcp setup [--browser <浏览器路径>] [--client <客户端>]... [--install-client] [--headless | --no-headless]\n"
        "        [--http [--host <地址>] [--port <端口>]] [--remote-access <网址>] [--site auto|mainland|oversea]\n"
        "  cnki-mcp config [<客户端>] [--http [--host <地址>] [--port <端口>]] [--link] [--rotate-token]\n"
        "  cnki-mcp doctor [--protocol] [--json] [--site] [--report]\n"
        "  cnki-mcp store --dump <文件.json> | --check\n"
        "  cnki-mcp uninstall [--data] [--yes]\n"
        "  cnki-mcp watch run [<名称>...]\n"
        "  cnki-mcp schema | version | --version | help | <命令> --help",
        "  cnki-mcp serve [--http [--host <host>] [--port <port>]]\n"
        "  cnki-mcp setup [--browser <browser path>] [--client <client>]... [--install-client] [--headless | --no-headless]\n"
        "        [--http [--host <host>] [--port <port>]] [--remote-access <URL>] [--site auto|mainland|oversea]\n"
        "  cnki-mcp config [<client>] [--http [--host <host>] [--port <port>]] [--link] [--rotate-token]\n"
        "  cnki-mcp doctor [--protocol] [--json] [--site] [--report]\n"
        "  cnki-mcp store --dump <FILE.json> | --check\n"
        "  cnki-mcp uninstall [--data] [--yes]\n"
        "  cnki-mcp watch run [<name>...]\n"
        "  cnki-mcp schema | version | --version | help | <command> --help",
    ),
    "help.clients": ("可选客户端：", "Clients:"),
    "help.not_on_this_os": ("（这台电脑的系统上没有）", " (not on this OS)"),
    # --- setup ---------------------------------------------------------------------------------------
    "setup.banner_frozen": (
        "cnki-mcp 安装设置（本程序自带运行环境，不需要安装 Python 或 Node）",
        "cnki-mcp setup (this program carries its own runtime: no Python or Node needed)",
    ),
    "setup.banner_source": (
        "cnki-mcp 安装设置（从源码或 pip 安装运行：需要 Python 3.11 或更新版本）",
        "cnki-mcp setup (installed from source or pip: needs Python 3.11 or newer)",
    ),
    "setup.warning": ("⚠ {problem}", "⚠ {problem}"),
    "setup.checking_browser": ("正在以无界面方式启动浏览器做检查……", "Starting the browser headless to check it..."),
    "setup.browser_ok": ("浏览器检查通过。", "The browser check passed."),
    "setup.browser_saved": ("已保存浏览器设置：{path}", "Browser setting saved: {path}"),
    "setup.route": ("访问方式：{route}", "Access: {route}"),
    "setup.site": ("知网站点：{site}", "CNKI site: {site}"),
    "setup.snippet_saved": ("配置片段已保存：{path}", "Config snippet saved: {path}"),
    "setup.one_more_step": ("还差一步：{note}。", "One more step: {note}."),
    "setup.install_ok": (
        "安装检查通过：共 {tools} 个 MCP 工具。请重启或重新连接 {client}。",
        "Install check passed: {tools} MCP tools. Restart or reconnect {client}.",
    ),
    "setup.protocol_ok_not_connected": (
        "MCP 通信检查通过：共 {tools} 个 MCP 工具；{client} 还没有接入（见上文）。",
        "MCP check passed: {tools} MCP tools; {client} is not connected yet (see above).",
    ),
    "setup.protocol_skipped": ("已跳过 MCP 通信检查。", "MCP check skipped."),
    "setup.no_screen_reminder": (
        "⚠ 这台电脑没有图形界面：第一次检索前请按上面 ⚠ 的提示处理（有桌面的会话、CNKI_HEADLESS=1 或 serve --http）。",
        "⚠ This computer has no screen: before the first search follow the ⚠ advice above (a desktop session, "
        "CNKI_HEADLESS=1 or serve --http).",
    ),
    "setup.http_needs_client": (
        "--http 需要同时用 --client 指定要接入的客户端，例如 --client cursor --http。",
        "--http needs --client to name the client to connect, e.g. --client cursor --http.",
    ),
    "setup.install_needs_client": (
        "--install-client 需要同时用 --client 指定要接入的客户端，例如 "
        "--client claude-code --install-client；cnki-mcp help 列出全部客户端。",
        "--install-client needs --client to name the client to connect, e.g. "
        "--client claude-code --install-client; cnki-mcp help lists every client.",
    ),
    "setup.http_cannot_write": (
        "{client} 不能自动写入配置文件；请运行 cnki-mcp config {id} --http，把输出粘贴到：{hint}。",
        "{client}'s config file cannot be written automatically; run cnki-mcp config {id} --http and paste "
        "the output into: {hint}.",
    ),
    "setup.http_what": ("{client} 的 HTTP 配置", "{client}'s HTTP config"),
    "setup.http_written": ("已写入 {client} 连接 {address} 的配置：{path}", "Wrote {client}'s config for {address}: {path}"),
    "setup.http_current": ("{client} 的 HTTP 配置已是最新，未改动：{path}", "{client}'s HTTP config is up to date, unchanged: {path}"),
    "setup.http_next": (
        "请在服务所在的电脑上运行 cnki-mcp serve --http（地址 {address}），然后重启或重新连接 {client}。",
        "Run cnki-mcp serve --http on the server's computer (address {address}), then restart or reconnect {client}.",
    ),
    "setup.change_backup": ("{what} {path}（原文件备份为 {backup}）", "{what} {path} (the old file backed up as {backup})"),
    "setup.change": ("{what} {path}", "{what} {path}"),
    "setup.nothing_changed": ("本次没有改动任何文件。", "No file was changed."),
    "setup.changed": ("本次改动：写入了 {items}{tail}。", "Changed: wrote {items}{tail}."),
    "setup.changed_separator": ("；", "; "),
    "setup.no_client_file": ("；没有改动任何客户端的配置文件", "; no client's config file was changed"),
    "setup.what_browser": ("浏览器设置", "the browser setting"),
    "setup.what_snippet": ("配置片段", "the config snippet"),
    "setup.what_client": ("{client} 的配置", "{client}'s config"),
    "setup.link_heading": (
        "一键导入链接（请在装有 {client} 的电脑上打开，{client} 会请你确认）：",
        "One-click import link (open it on the computer with {client}; {client} asks you to confirm):",
    ),
    "setup.ask_open_link": ("现在打开这个链接吗？[Y/n] ", "Open this link now? [Y/n] "),
    "setup.link_opened": ("已交给系统打开导入链接；请在 {client} 中确认导入。", "The import link was handed to the system; confirm the import in {client}."),
    "setup.link_not_opened": (
        "未打开导入链接，{client} 的配置未写入：请在 {client} 中打开上面的链接，或把配置片段粘贴到：{hint}。",
        "The import link was not opened and {client}'s config was not written: open the link above in {client}, "
        "or paste the config snippet into: {hint}.",
    ),
    "setup.paste_required": (
        "{client} 不能自动写入配置文件，请把上面的配置片段粘贴到：{hint}。",
        "{client}'s config file cannot be written automatically; paste the config snippet above into: {hint}.",
    ),
    "setup.not_written_paste": (
        "未写入 {client} 的配置（它需要手动粘贴）：请把上面的配置片段粘贴到：{hint}。",
        "{client}'s config was not written (it is pasted by hand): paste the config snippet above into: {hint}.",
    ),
    "setup.not_written_no_folder": (
        "未写入 {client} 的配置：配置目录 {folder} 还不存在，{hint}。",
        "{client}'s config was not written: its config folder {folder} does not exist yet; {hint}.",
    ),
    "setup.ask_write": ("写入 {path} 并备份原文件？[Y/n] ", "Write {path}, backing up the old file? [Y/n] "),
    "setup.not_written_merge": (
        "未写入 {client} 的配置：请把上面的配置片段合并到 {path}，或运行 {rerun} 自动写入。",
        "{client}'s config was not written: merge the config snippet above into {path}, or run {rerun} to write it.",
    ),
    "setup.written_via": ("（通过 {via}）", " (through {via})"),
    "setup.client_written": ("已更新客户端配置{how}：{path}", "Client config updated{how}: {path}"),
    "setup.backup": ("原文件已备份为：{path}", "The old file was backed up as: {path}"),
    "setup.client_current": ("客户端配置已是最新，未改动：{path}", "The client config is up to date, unchanged: {path}"),
    "setup.ask_enable": (
        "{client} 中已有的 cnki 条目被停用了，要重新启用吗？[Y/n] ",
        "The cnki entry in {client} is disabled; enable it again? [Y/n] ",
    ),
    "setup.will_enable": ("将重新启用 cnki 条目。", "The cnki entry will be enabled again."),
    "setup.stays_disabled": ("cnki 条目保持停用。", "The cnki entry stays disabled."),
    "setup.several_installs": (
        "发现 {client} 的多个安装，各有自己的配置文件：",
        "Found several installs of {client}, each with its own config file:",
    ),
    "setup.ask_install": (
        "请输入正在使用的那一个的编号（1–{count}）：",
        "Enter the number of the one in use (1-{count}): ",
    ),
    "setup.no_install_chosen": (
        "没有选择 {client} 的配置文件，未写入。", "No config file of {client} was chosen; nothing was written."
    ),
    "setup.no_such_choice": ("没有这个选项：{answer}", "No such choice: {answer}"),
    "setup.no_such_client_guess": ("没有这个选项：{answer}；是不是 {suggestion}？", "No such choice: {answer}; did you mean {suggestion}?"),
    "setup.browsers_found": ("找到以下浏览器：", "Browsers found:"),
    "setup.no_browser": (
        "没有找到 Chrome、Edge 或 Chromium；请用 --browser 指定浏览器的可执行文件。",
        "No Chrome, Edge or Chromium found; name the browser's executable with --browser.",
    ),
    "setup.ask_browser": (
        "请输入编号选择浏览器（回车 = 1），或输入浏览器可执行文件的完整路径：",
        "Enter a number to choose the browser (Enter = 1), or the full path of a browser executable: ",
    ),
    "setup.ask_browser_path": (
        "没有找到 Chrome、Edge 或 Chromium，请输入浏览器可执行文件的完整路径：",
        "No Chrome, Edge or Chromium found; enter the full path of a browser executable: ",
    ),
    "setup.browser_not_given": (
        "没有指定浏览器；请用 --browser 指定 Chrome、Edge 或 Chromium 的可执行文件。",
        "No browser given; name the Chrome, Edge or Chromium executable with --browser.",
    ),
    "setup.browser_empty": (
        "浏览器路径为空；请用 --browser 指定浏览器的可执行文件。",
        "The browser path is empty; name the browser's executable with --browser.",
    ),
    "setup.browser_is_folder": (
        "{path} 是文件夹，不是浏览器的可执行文件{app}。",
        "{path} is a folder, not a browser executable{app}.",
    ),
    "setup.browser_app_hint": (
        "（macOS 上请指定 .app/Contents/MacOS/ 里的文件）",
        " (on macOS name the file inside .app/Contents/MacOS/)",
    ),
    "setup.browser_version": ("浏览器：{path}（{version}）", "Browser: {path} ({version})"),
    "setup.clients_heading": ("可以接入的客户端：", "Clients you can connect:"),
    "setup.clients_heading_installed": (
        "可以接入的客户端（这台电脑上已安装的排在前面）：", "Clients you can connect (those installed here first):"
    ),
    "setup.installed_mark": ("（已安装）", " (installed)"),
    "setup.ask_client": (
        "请输入客户端编号或选项名（回车 = {number}，{client}；可多选，如 1,3 或 1 3；all 或 全部 = 上面列出的全部）：",
        "Enter a client number or name (Enter = {number}, {client}; several at once: 1,3 or 1 3; all = every one "
        "listed): ",
    ),
    "setup.names_separator": ("、", ", "),
    "setup.needs_terminal": (
        "标准输入不是终端，setup 无法逐项询问，也不会擅自采用默认选择。请用参数说明要做什么："
        "--client <客户端>（可多次给出）加 --install-client 写入客户端配置；--browser <浏览器路径> 指定浏览器"
        "（不写时用找到的第一个）；--headless 或 --no-headless 决定是否在客户端配置中写入 CNKI_HEADLESS=1。"
        "例如 cnki-mcp setup --client claude-code --client codex --install-client；客户端名称见 cnki-mcp help。",
        "Standard input is not a terminal, so setup cannot ask, and it will not take every default unseen. Say what "
        "to do with flags: --client <client> (may be given several times) with --install-client writes the client "
        "config; --browser <browser path> names the browser (left out: the first one found); --headless or "
        "--no-headless decides whether the client config gets CNKI_HEADLESS=1. For example cnki-mcp setup --client "
        "claude-code --client codex --install-client; cnki-mcp help lists the clients.",
    ),
    "setup.http_no_headless": (
        "--headless 和 --no-headless 不能与 --http 一起使用：HTTP 配置连接的服务在另一台电脑上运行浏览器，"
        "是否无界面由那台电脑决定。",
        "--headless and --no-headless cannot be used with --http: the server an HTTP entry connects to runs the "
        "browser on the other computer, which decides whether it is headless.",
    ),
    "setup.ask_headless": (
        "要在客户端配置的 env 中写入 CNKI_HEADLESS=1 吗？写入后能检索和阅读，但遇到验证码或登录时需要图形界面"
        "（或在有桌面的电脑上运行 cnki-mcp serve --http，让这个客户端连接它）。[Y/n] ",
        "Write CNKI_HEADLESS=1 into the env of the client config? Searching and reading then work, but a captcha or "
        "a login needs a screen (or cnki-mcp serve --http on a computer with a desktop, which this client connects "
        "to). [Y/n] ",
    ),
    "setup.headless_tail": (
        "；客户端配置的 env 含 CNKI_HEADLESS=1（无界面浏览器）", "; the client config's env has CNKI_HEADLESS=1 (a headless browser)"
    ),
    "setup.no_headless_tail": ("；客户端配置的 env 不含 CNKI_HEADLESS", "; the client config's env has no CNKI_HEADLESS"),
    "setup.headless_reminder": (
        "⚠ 这台电脑没有图形界面，客户端配置已设 CNKI_HEADLESS=1：检索和阅读可用；遇到验证码或登录时需要图形界面"
        "（或在有桌面的电脑上运行 cnki-mcp serve --http，让客户端连接它）。",
        "⚠ This computer has no screen and the client config sets CNKI_HEADLESS=1: searching and reading work; a "
        "captcha or a login needs a screen (or cnki-mcp serve --http on a computer with a desktop, which the client "
        "connects to).",
    ),
    "setup.not_connected_yet": ("{clients} 还没有接入（见上文）。", "Not connected yet (see above): {clients}."),
    "setup.write_failed": ("无法写入 {path}：{reason}。", "Could not write {path}: {reason}."),
    "setup.link_open_failed": (
        "无法自动打开链接（{reason}）；请手动复制上面的链接打开。",
        "Could not open the link ({reason}); copy the link above and open it yourself.",
    ),
    "setup.link_open_exit": (
        "无法自动打开链接（{program} 退出码 {code}）；请手动复制上面的链接打开。",
        "Could not open the link ({program} exit code {code}); copy the link above and open it yourself.",
    ),
    "setup.browser_start_failed": ("无法启动 {path}：{reason}", "could not start {path}: {reason}"),
    "setup.browser_exited": ("浏览器启动后立即退出（退出码 {code}）", "the browser exited at once (exit code {code})"),
    "setup.browser_no_page": ("{seconds} 秒内没有打开空白页", "no blank page within {seconds} s"),
    "setup.browser_cause": ("{cause}：{named}", "{cause}: {named}"),
    "setup.browser_output": ("{cause}；浏览器输出：{tail}", "{cause}; the browser said: {tail}"),
    "setup.browser_check_failed": ("浏览器检查未通过：{cause}", "The browser check failed: {cause}"),
    # --- config --------------------------------------------------------------------------------------
    "config.token_rotated": (
        "已更换 HTTP 访问令牌；旧令牌已失效。用 cnki-mcp config <客户端> --http 输出新的配置。",
        "The HTTP token was replaced; the old one no longer works. Print the new config with cnki-mcp config <client> --http.",
    ),
    "config.one_client": (
        "config 只接受一个客户端名称，不认识：{extra}。用法：cnki-mcp config <客户端>（见 cnki-mcp help）。",
        "config takes one client name; not understood: {extra}. Usage: cnki-mcp config <client> (see cnki-mcp help).",
    ),
    "config.no_link": (
        "{client} 没有一键安装链接；请用 cnki-mcp config {id} 输出配置片段（{where}）。",
        "{client} has no install link; print its config snippet with cnki-mcp config {id} ({where}).",
    ),
    "config.open_link": (
        "在装有 {client} 的电脑上打开这个链接，{client} 会请你确认安装。",
        "Open this link on the computer with {client}; {client} asks you to confirm the install.",
    ),
    "config.belongs_http": (
        "这段连接 HTTP 服务（cnki-mcp serve --http）的配置属于 {client}：{where}。",
        "This config for the HTTP server (cnki-mcp serve --http) belongs to {client}: {where}.",
    ),
    "config.belongs": ("这段配置属于 {client}：{where}。", "This config belongs to {client}: {where}."),
    "config.also": ("另外：{note}。", "Also: {note}."),
    "config.where_link": (
        "在 {client} 中打开导入链接（cnki-mcp setup --client {id} 会显示它），或粘贴到：{hint}",
        "open the import link in {client} (cnki-mcp setup --client {id} shows it), or paste it into: {hint}",
    ),
    "config.where_merge": ("合并到 {paths}（或运行 {rerun} 自动写入）", "merge it into {paths} (or run {rerun} to write it)"),
    "config.where_or": (" 或 ", " or "),
    "config.where_paste": ("粘贴到：{hint}", "paste it into: {hint}"),
    "config.generic_hint": ("客户端的 MCP 设置", "the client's MCP settings"),
    # --- clients ---------------------------------------------------------------------------------------
    # --- cnki-mcp store ------------------------------------------------------------------------------
    "store.need_option": ("请指定 --dump FILE.json 或 --check。", "Give --dump FILE.json or --check."),
    "store.dumped": ("已导出到 {path}（{size} MB）：{counts}。", "Written to {path} ({size} MB): {counts}."),
    "store.head": ("{path}（{size} MB，结构版本 {version}）", "{path} ({size} MB, schema version {version})"),
    "store.check_passed": ("✓ {head} 完整性检查通过：{counts}。", "✓ {head} passed the integrity check: {counts}."),
    "store.check_failed": (
        "✗ {head} 未通过完整性检查：\n{problems}\n"
        "请先用 cnki-mcp store --dump 导出能读出的记录，再重新启动服务：启动时会把损坏的数据库改名保留，把能读出的记录搬到新数据库。",
        "✗ {head} failed the integrity check:\n{problems}\n"
        "First export what can be read with cnki-mcp store --dump, then start the server again: at start it keeps the damaged "
        "database under another name and carries what can be read into a new one.",
    ),
    "store.count": ("{kind} {count}", "{kind}: {count}"),
    "store.kind.papers": ("文献记录", "papers"),
    "store.kind.sources": ("期刊", "journals"),
    "store.kind.searches": ("检索", "searches"),
    "store.kind.search_cache": ("检索缓存", "cached searches"),
    "store.kind.operations": ("任务", "operations"),
    "store.kind.artifacts": ("下载台账", "download ledger"),
    "store.kind.relations": ("引文列表", "relation lists"),
    "store.kind.facets": ("分组缓存", "cached facet panels"),
    "store.kind.watches": ("关注", "watches"),
    "watch.none": ("还没有关注；请在 AI 客户端里用 watch 工具的 add 添加。", "No watches yet; add one with the watch tool's add in your AI client."),
    "watch.baseline": ("{name}：首次运行，建立基线，记下 {found} 篇。", "{name}: first run, a baseline of {found} papers."),
    "watch.new": ("{name}：{count} 篇新论文。", "{name}: {count} new papers."),
    "watch.warning": ("  ⚠ {code}：{message}", "  ⚠ {code}: {message}"),
    "watch.paper": ("  · {title}（{source} {date}）", "  · {title} ({source} {date})"),
    "watch.failed": ("{name}：未完成：{why}", "{name}: not done: {why}"),
    "watch.needs_person": (
        "知网要求人工验证或登录，这次没有等待；请在 AI 客户端里运行一次 watch 的 run，处理弹出的窗口。",
        "CNKI asks for a check or a login, which this run did not wait for; run the watch once from your AI client and handle the window.",
    ),
    "watch.digest": ("摘要已写入 {path}", "Digest written: {path}"),
    "clients.list_separator": ("、", ", "),
    "clients.full_stop": ("。", "."),
    "clients.unavailable": (
        "{client} 只有 {systems} 版，这台电脑上没有；请在装有它的电脑上运行 cnki-mcp setup，或选择其他客户端。",
        "{client} exists only for {systems}, not on this computer; run cnki-mcp setup on a computer that has it, "
        "or choose another client.",
    ),
    "clients.unknown": (
        "未知的客户端“{name}”。{guess}可选的客户端：{ids}（cnki-mcp help 列出它们的名称）。",
        "Unknown client '{name}'. {guess}Clients: {ids} (cnki-mcp help lists their names).",
    ),
    "clients.unknown_guess": ("是不是 {suggestion}？", "Did you mean {suggestion}? "),
    "clients.http_stdio_only": (
        "{client} 的配置只支持 stdio。请用 cnki-mcp config {id}（不带 --http）：同一台电脑上它会自动加入正在运行的服务。",
        "{client}'s config supports stdio only. Use cnki-mcp config {id} (without --http): on the same computer it "
        "joins the running server by itself.",
    ),
    "clients.ambiguous": (
        "发现 {client} 的多个安装，各有自己的配置文件：{paths}。请不带参数运行 cnki-mcp setup，在询问时选择正在使用的那一个。",
        "Found several installs of {client}, each with its own config file: {paths}. Run cnki-mcp setup without "
        "flags and choose the one in use when asked.",
    ),
    "clients.ambiguous_separator": ("；", "; "),
    "clients.how_link": ("一键导入链接", "one-click import link"),
    "clients.how_write_after_run": ("可自动写入（需先运行过一次）", "written automatically (after its first run)"),
    "clients.how_write": ("可自动写入", "written automatically"),
    "clients.how_paste": ("粘贴配置", "paste the config"),
    "clients.unreadable": ("无法读取或解析：{reason}", "cannot be read or parsed: {reason}"),
    "clients.disabled": (
        "cnki 条目在 {client} 中已停用；运行 cnki-mcp setup --client {id} --install-client 可以重新启用。",
        "the cnki entry is disabled in {client}; cnki-mcp setup --client {id} --install-client enables it again.",
    ),
    "clients.different": (
        "cnki 条目指向另一个程序或数据目录；重新运行 cnki-mcp setup 可以更新。",
        "the cnki entry points at another program or data directory; run cnki-mcp setup again to update it.",
    ),
    "clients.symlink": (
        "{path} 是符号链接，为安全起见未做改动；请把配置片段手动粘贴到它指向的文件中。",
        "{path} is a symbolic link, left alone to be safe; paste the config snippet by hand into the file it points to.",
    ),
    "clients.not_initialized": (
        "{client} 的配置目录 {folder} 还不存在：{hint}。", "{client}'s config folder {folder} does not exist yet: {hint}."
    ),
    "clients.cannot_read": ("无法读取：{reason}", "cannot be read: {reason}"),
    "clients.not_utf8": ("不是 UTF-8 文本", "not UTF-8 text"),
    "clients.http_not_written": (
        "setup 不会为 {client} 写入 HTTP 配置；请运行 cnki-mcp config {id} --http，把输出合并到 {path}。",
        "setup does not write an HTTP config for {client}; run cnki-mcp config {id} --http and merge the output into {path}.",
    ),
    "clients.write_failed": ("写入 {path} 失败：{reason}。", "Writing {path} failed: {reason}."),
    "clients.changed_meanwhile": (
        "{path} 在写入期间被其他程序修改，未覆盖；请关闭该客户端后重新执行 setup。",
        "{path} was changed by another program meanwhile and was not overwritten; close that client and run setup again.",
    ),
    # --- client config files (config_edit.py) --------------------------------------------------------
    "edit.invalid": (
        "客户端配置文件 {path} 无法处理（{why}），未做改动；请修正后重试，或手动粘贴配置片段。",
        "The client config file {path} cannot be handled ({why}) and was left unchanged; fix it and try again, "
        "or paste the config snippet by hand.",
    ),
    "edit.top_not_object": ("顶层不是对象", "the top level is not an object"),
    "edit.not_object": ("“{key}”不是对象，结构不兼容", "'{key}' is not an object: the structure does not fit"),
    "edit.too_deep": ("嵌套层数过多", "nested too deeply"),
    "edit.trailing": ("文档结束后还有多余内容", "extra content after the document"),
    "edit.open_comment": ("注释 /* 没有结束", "a /* comment is not closed"),
    "edit.incomplete": ("内容不完整", "the content is incomplete"),
    "edit.bad_char": ("无法识别的字符 {char}", "unexpected character {char}"),
    "edit.bad_string": ("字符串无效", "invalid string"),
    "edit.comma": ("缺少逗号", "a comma is missing"),
    "edit.key_quotes": ("对象的键必须是双引号字符串", "an object key must be a double-quoted string"),
    "edit.colon": ("缺少冒号", "a colon is missing"),
    "edit.where": ("第 {line} 行第 {column} 列", "line {line}, column {column}"),
    "edit.json_syntax": ("JSON 语法错误，{where}：{error}", "JSON syntax error at {where}: {error}"),
    "edit.unparsable_after": ("自动修改后无法解析（{error}）", "the edited text no longer parses ({error})"),
    "edit.unexpected_result": ("自动修改的结果与预期不一致", "the edited document is not the one intended"),
    "edit.toml_syntax": ("TOML 语法错误：{error}", "TOML syntax error: {error}"),
    "edit.toml_form": ("无法自动修改这种写法（{error}），请手动修改", "this form cannot be edited automatically ({error}); edit it by hand"),
    "edit.yaml_syntax": ("YAML 语法错误：{error}", "YAML syntax error: {error}"),
    "edit.yaml_not_list": ("顶层不是补丁列表", "the top level is not a list of patches"),
    "edit.dsh_no_config": ("已有的 {id} 条目没有 config 映射，请手动修改", "the existing {id} entry has no config mapping; edit it by hand"),
    "edit.dsh_form": (
        "已有的 {id} 条目格式无法自动更新（{error}），请手动修改",
        "the existing {id} entry cannot be updated automatically ({error}); edit it by hand",
    ),
    # --- doctor ----------------------------------------------------------------------------------------
    "doctor.heading": ("cnki-mcp {version} 本地检查（数据目录：{data_dir}）", "cnki-mcp {version} local checks (data directory: {data_dir})"),
    "doctor.config_bad": ("config.json 有问题：{message}", "config.json has a problem: {message}"),
    "doctor.config_ok": ("config.json 可以读取：{path}", "config.json reads: {path}"),
    "doctor.never_set_up": (
        "这个数据目录还没有设置过（没有 {path}）：请运行 cnki-mcp setup，它会选择并检查浏览器、接入客户端。",
        "This data directory was never set up ({path} is missing): run cnki-mcp setup, which chooses and checks the "
        "browser and connects a client.",
    ),
    "doctor.site": ("；知网站点：{site}", "; CNKI site: {site}"),
    "doctor.route_direct": ("访问方式：{route}", "Access: {route}"),
    "doctor.route_gateway": (
        "访问方式：{route}；学校 VPN 会话是否有效，用 doctor --site 检查",
        "Access: {route}; whether the university's VPN session is alive: doctor --site checks it",
    ),
    "doctor.route_refused": ("；{code}：{message}", "; {code}: {message}"),
    "doctor.diagnostics_failed": ("本地诊断失败：{message}", "The local diagnostics failed: {message}"),
    "doctor.browser_missing": (
        "浏览器：{gone}没有可以启动的 Chrome、Edge 或 Chromium；请运行 cnki-mcp setup --browser <浏览器路径>，或设置 CNKI_BROWSER_PATH。",
        "Browser: {gone}no Chrome, Edge or Chromium to launch; run cnki-mcp setup --browser <browser path>, or set CNKI_BROWSER_PATH.",
    ),
    "doctor.browser_gone_from": ("{source} 指向的 {path} 不存在；", "{path}, named by {source}, does not exist; "),
    "doctor.browser_gone": (
        "浏览器：config.json 里的 {configured} 已不存在，现在改用自动找到的 {path}；运行 cnki-mcp setup --browser <浏览器路径> 重新选择。",
        "Browser: {configured} in config.json is gone; {path}, found automatically, is used instead; run "
        "cnki-mcp setup --browser <browser path> to choose again.",
    ),
    "doctor.browser": ("浏览器：{path}（{source}）", "Browser: {path} ({source})"),
    "doctor.source_env": ("来自 CNKI_BROWSER_PATH", "from CNKI_BROWSER_PATH"),
    "doctor.source_config": ("来自 config.json", "from config.json"),
    "doctor.source_detected": ("自动找到", "found automatically"),
    "doctor.screen": ("有图形界面：登录和验证码的浏览器窗口可以显示", "A screen: the browser window for login and captchas can show"),
    "doctor.headless": (
        "没有图形界面，CNKI_HEADLESS=1：浏览器以无界面方式运行，可以检索和读取，但遇到登录或验证码时无法处理",
        "No screen, CNKI_HEADLESS=1: the browser runs headless, so searching and reading work, but a login or a "
        "captcha cannot be handled",
    ),
    "doctor.client_headless": (
        "没有图形界面，{client} 的配置设置了 CNKI_HEADLESS=1（{path}）：可以检索和阅读；遇到验证码或登录时需要图形界面"
        "（或在有桌面的电脑上运行 cnki-mcp serve --http，让这个客户端连接它）",
        "No screen, and {client}'s config sets CNKI_HEADLESS=1 ({path}): searching and reading work; a captcha or a "
        "login needs a screen (or cnki-mcp serve --http on a computer with a desktop, which this client connects to)",
    ),
    "doctor.client_not_headless": (
        "没有图形界面，而 {client} 的配置没有设置 CNKI_HEADLESS（{path}）：它启动的浏览器要打开窗口，会失败。"
        "运行 cnki-mcp setup --client {id} --install-client --headless 写入 CNKI_HEADLESS=1（之后能检索和阅读，"
        "但验证码和登录仍需要图形界面）；或在有桌面的电脑上运行 cnki-mcp serve --http，"
        "再用 cnki-mcp setup --client {id} --http --host <那台电脑的地址> 让这个客户端连接它。",
        "No screen, and {client}'s config does not set CNKI_HEADLESS ({path}): the browser it starts needs a window "
        "and will fail. Run cnki-mcp setup --client {id} --install-client --headless to write CNKI_HEADLESS=1 "
        "(searching and reading then work, captchas and login still need a screen); or run cnki-mcp serve --http "
        "on a computer with a desktop and connect this client to it with cnki-mcp setup --client {id} --http "
        "--host <that computer's address>.",
    ),
    "doctor.ignored_setting": (
        "环境变量 {name}={value} 不是正整数，已改用默认值 {default}；请在客户端配置的 env 中改正或删除它。",
        "The environment value {name}={value} is not a positive integer, so the default {default} is used; correct "
        "or remove it in the env of the client's config.",
    ),
    "doctor.no_client": (
        "还没有客户端接入：没有发现写有 cnki 的客户端配置文件。运行 cnki-mcp setup --client "
        "<客户端> --install-client 接入（手动粘贴或导入链接接入的客户端无法在这里检查）。",
        "No client is connected yet: no client config file holds cnki. Run cnki-mcp setup --client <client> "
        "--install-client to connect one (clients set up by pasting or an import link cannot be checked here).",
    ),
    "doctor.client_current": ("{client} 已接入本程序（{path}）", "{client} is connected to this program ({path})"),
    "doctor.client_problem": ("{client}：{message}（{path}）", "{client}: {message} ({path})"),
    "doctor.log": (
        "日志级别 {level}，服务的日志写到标准错误输出和 {path}",
        "Log level {level}; the server logs to standard error and {path}",
    ),
    "doctor.protocol_failed": ("MCP 通信检查未通过：{message}", "The MCP check failed: {message}"),
    "doctor.protocol_ok": ("MCP 通信正常：{tools} 个工具，版本 {version}", "MCP works: {tools} tools, version {version}"),
    "doctor.all_well": ("结论：一切正常。", "Verdict: all is well."),
    "doctor.warnings_only": (
        "结论：可以运行，但有 {warnings} 处需要注意，请按上面标 ⚠ 的提示处理。",
        "Verdict: it runs, with warnings: {warnings}; follow the lines marked ⚠ above.",
    ),
    "doctor.problems": (
        "结论：发现 {problems} 个问题，请按上面标 ✗ 的提示处理{tail}。",
        "Verdict: problems found: {problems}; follow the lines marked ✗ above{tail}.",
    ),
    "doctor.problems_tail": ("，另有 {warnings} 处需要注意（⚠）", ", and the warnings (⚠): {warnings}"),
    # --- uninstall -------------------------------------------------------------------------------------
    "uninstall.toml": ("删除 [mcp_servers.cnki] 一节", "remove [mcp_servers.cnki]"),
    "uninstall.comments": ("文件含注释，请手动删除其中的 {key} 条目", "has comments: remove the {key} entry by hand"),
    "uninstall.json": ("删除 {key} 条目", "remove {key}"),
    "uninstall.yaml": ("请手动删除 id 为 mcp-cnki 的补丁项", "remove the mcp-cnki patch item by hand"),
    "uninstall.changed_meanwhile": (
        "{path} 在修改期间被其他程序改动，未覆盖；请关闭 {client} 后重新运行 cnki-mcp uninstall。",
        "{path} was changed by another program meanwhile and was not overwritten; close {client} and run "
        "cnki-mcp uninstall again.",
    ),
    "uninstall.program_frozen": (
        "最后删除解压出的 cnki-mcp 文件夹即可删除程序本身。", "Finally delete the unpacked cnki-mcp folder to remove the program."
    ),
    "uninstall.program": (
        "程序本身用安装它的方式删除：pipx uninstall cnki-browser-mcp、uv tool uninstall cnki-browser-mcp、"
        "pip uninstall cnki-browser-mcp，源码安装则删除克隆的文件夹（含 .venv）。",
        "Remove the program the way it was installed: pipx uninstall cnki-browser-mcp, uv tool uninstall "
        "cnki-browser-mcp, pip uninstall cnki-browser-mcp, or delete the cloned folder (with .venv).",
    ),
    "uninstall.heading": ("cnki-mcp uninstall 将要删除：", "cnki-mcp uninstall will remove:"),
    "uninstall.item": ("  {mark} {client}：{path}（{how}）", "  {mark} {client}: {path} ({how})"),
    "uninstall.no_entries": ("  （没有客户端配置指向这个数据目录）", "  (no client config points at this data directory)"),
    "uninstall.data": ("  - 数据目录 {path}（登录状态、下载的文件、检索记录）", "  - the data directory {path} (login, downloads, searches)"),
    "uninstall.data_kept": ("  数据目录 {path} 保留（加 --data 才删除）。", "  The data directory {path} is kept (add --data to delete it)."),
    "uninstall.nothing": ("没有可以自动删除的内容。{program}", "Nothing to remove automatically. {program}"),
    "uninstall.ask": ("确定删除吗？[y/N] ", "Remove these? [y/N] "),
    "uninstall.cancelled": ("已取消，没有改动任何文件。", "Cancelled; nothing was changed."),
    "uninstall.failed": ("未能修改 {path}：{error}", "Could not change {path}: {error}"),
    "uninstall.removed": ("已从 {path} 删除 cnki 条目（原文件备份为 {backup}）", "Removed cnki from {path} (backup {backup})"),
    "uninstall.removed_created": (
        "已删除 {path}：它由 setup 创建，删除 cnki 条目后没有别的内容（setup 创建的空文件夹也一并删除）",
        "Deleted {path}: setup created it and nothing else is in it without cnki (so are the empty folders setup "
        "created)",
    ),
    "uninstall.data_deleted": ("已删除数据目录 {path}", "Deleted the data directory {path}"),
    "uninstall.data_left": ("数据目录 {path} 没有完全删除（可能有程序正在使用它）。", "{path} was not fully deleted (is a program using it?)."),
}
