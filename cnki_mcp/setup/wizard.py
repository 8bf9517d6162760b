"""`cnki-mcp setup`, `cnki-mcp config <client>` and the text of `cnki-mcp help`.

Setup checks its arguments first (the client's name, and that ``--install-client`` has a client),
then runs the same steps with or without questions: choose a browser, check that it starts headless,
save it in config.json, choose a client (those installed here are offered first), save that client's
snippet in the data directory, then write the client's config (through the client's own command
where that is its documented way), offer its import link or say where to paste, and finally start a
real server child to check the MCP round trip. It never says a client is ready when nothing was
written for it, and its last line always lists what it changed. With no arguments at all it asks
(numbered menus, Enter takes the default, end of input counts as Enter); any flag turns every
question off.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unicodedata
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import click
import psutil

from cnki_mcp.core.clock import Deadline
from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.model import Config, Route
from cnki_mcp.setup import clients
from cnki_mcp.setup.cli_words import Command, say
from cnki_mcp.setup.client_cli import install_with_cli
from cnki_mcp.site.discovery import browser_candidates, probe_version
from cnki_mcp.site.remote import kept, route_of, route_words

BROWSER_CHECK_SECONDS = 20.0
_YES = ("", "y", "yes", "是")


def help_text() -> str:
    """Usage, the setup flags and every client id in registry order."""
    lines = [
        say("用法：", "Usage:"),
        "  cnki-mcp serve [--http [--host <地址>] [--port <端口>]]",
        "  cnki-mcp setup [--browser <浏览器路径>] [--client <客户端>] [--install-client] [--http [--host <地址>] [--port <端口>]]",
        "  cnki-mcp config [<客户端>] [--http [--host <地址>] [--port <端口>]] [--link] [--rotate-token]",
        "  cnki-mcp doctor [--protocol] [--json] [--site] [--report]",
        "  cnki-mcp uninstall [--data] [--yes]",
        "  cnki-mcp schema | version | --version | help | <命令> --help",
        "",
        say("可选客户端：", "Clients:"),
    ]
    lines.extend(
        f"  {client.id:<16} {client.name}" + ("" if clients.available(client) else say("（这台电脑的系统上没有）", " (not on this OS)"))
        for client in clients.CLIENTS
    )
    return "\n".join(lines)


def banner() -> str:
    """The first line of setup: this product, and what it really needs to run."""
    if getattr(sys, "frozen", False):
        return "cnki-mcp 安装设置（本程序自带运行环境，不需要安装 Python 或 Node）"
    return "cnki-mcp 安装设置（从源码或 pip 安装运行：需要 Python 3.11 或更新版本）"


def _data_root() -> Path:
    from cnki_mcp.core.settings import data_root

    return data_root()


def destination(client: clients.Client, root: Path, http: str = "") -> str:
    """Where a client's snippet belongs, in words: its config file, its import link or the place to paste.

    ``http``: the flags of an HTTP snippet (``--http --host … --port …``), for the command that writes it."""
    if not clients.available(client):
        return clients.unavailable_message(client).rstrip("。")
    if client.mode == "link" and not http:
        return f"在 {client.name} 中打开导入链接（cnki-mcp setup --client {client.id} 会显示它），或粘贴到：{client.hint}"
    try:
        targets = clients.config_paths(client.id)
    except CnkiError:
        targets = []
    if targets:
        rerun = f"cnki-mcp setup --client {client.id} " + (http or "--install-client")
        return "合并到 " + " 或 ".join(map(str, targets)) + f"（或运行 {rerun} 自动写入）"
    return f"粘贴到：{client.hint or '客户端的 MCP 设置'}"


_HOST_HELP = ("与 --http 一起：服务的地址。", "With --http: the server's address.")
_PORT_HELP = ("与 --http 一起：服务的端口。", "With --http: the server's port.")


@click.command(
    cls=Command,
    name="config",
    context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
    help=say("输出某个客户端的配置片段（默认 generic）；说明写到标准错误输出。",
             "Print a client's config snippet (generic by default); the notes go to stderr."),
)
@click.argument("client_id", metavar=say("[客户端]", "[CLIENT]"), required=False, default="generic")
@click.option("--http", "http", is_flag=True, help=say("输出连接 cnki-mcp serve --http 的配置（URL 和 Authorization 头）。",
                                                      "Print the config for cnki-mcp serve --http (URL and Authorization header)."))
@click.option("--host", default="127.0.0.1", show_default=True, metavar=say("<地址>", "<host>"), help=say(*_HOST_HELP))
@click.option("--port", default=8765, show_default=True, type=click.IntRange(1, 65535), metavar=say("<端口>", "<port>"),
              help=say(*_PORT_HELP))
@click.option("--link", is_flag=True, help=say("输出客户端的一键安装链接（Cursor、VS Code 及导入链接客户端）。",
                                               "Print the client's install link (Cursor, VS Code and the link clients)."))
@click.option("--rotate-token", is_flag=True, help=say("更换 HTTP 访问令牌；旧令牌立即失效。", "Replace the HTTP token; the old one stops working."))
@click.pass_context
def config_command(
    ctx: click.Context, client_id: str, http: bool, host: str, port: int, link: bool, rotate_token: bool
) -> None:
    if rotate_token and not http:
        from cnki_mcp.serving.endpoint import token

        try:
            token(_data_root(), rotate=True)
        except CnkiError as error:
            _exit_with(error)
        click.echo("已更换 HTTP 访问令牌；旧令牌已失效。用 cnki-mcp config <客户端> --http 输出新的配置。", err=True)
        return
    try:
        if client_id.startswith("-") or ctx.args:
            extra = " ".join([client_id] if client_id.startswith("-") else ctx.args)
            raise CnkiError(
                "INVALID_ARGUMENT",
                f"config 只接受一个客户端名称，不认识：{extra}。用法：cnki-mcp config <客户端>（见 cnki-mcp help）。",
                details={"arguments": extra},
            )
        client = clients.get_client(client_id)
        root = _data_root()
        if link:
            found = clients.client_install_link(client.id, root)
            if found is None:
                raise CnkiError(
                    "CLIENT_LINK_UNSUPPORTED",
                    f"{client.name} 没有一键安装链接；请用 cnki-mcp config {client.id} 输出配置片段（{destination(client, root)}）。",
                    details={"client": client.id},
                )
            click.echo(found)
            click.echo(f"在装有 {client.name} 的电脑上打开这个链接，{client.name} 会请你确认安装。", err=True)
            return
        if http:
            from cnki_mcp.serving.endpoint import token, url

            text = clients.http_snippet(client.id, url(host, port), token(root, rotate=rotate_token))
        else:
            text = clients.snippet(client.id, root)
    except CnkiError as error:
        _exit_with(error)
    click.echo(text, nl=False)
    # stdout carries only the snippet, so `cnki-mcp config cursor > file` stays clean.
    kind = "连接 HTTP 服务（cnki-mcp serve --http）的配置" if http else "配置"
    flags = "--http" + (f" --host {host}" if host != "127.0.0.1" else "") + (f" --port {port}" if port != 8765 else "")
    click.echo(f"这段{kind}属于 {client.name}：{destination(client, root, flags if http else '')}。", err=True)
    if client.note:
        click.echo(f"另外：{client.note}。", err=True)


@click.command(cls=Command, name="setup", help=say(
    "选择浏览器和客户端，写入配置并检查 MCP 服务。不带参数时逐步询问。",
    "Choose the browser and the client, write the config and check the MCP server. Asks step by step without flags.",
))
@click.option("--browser", "browser", metavar=say("<浏览器路径>", "<browser path>"),
              help=say("Chrome、Edge 或 Chromium 的可执行文件。", "The Chrome, Edge or Chromium executable."))
@click.option("--client", "client_id", metavar=say("<客户端>", "<client>"),
              help=say("要接入的客户端，见 cnki-mcp help。", "The client to connect; see cnki-mcp help."))
@click.option("--install-client", is_flag=True, help=say("写入客户端配置文件，或打开一键导入链接。",
                                                        "Write the client's config file, or open its import link."))
@click.option("--http", "http", is_flag=True, help=say(
    "与 --client 一起：写入连接 cnki-mcp serve --http 的配置（URL 和令牌），而不是 stdio。",
    "With --client: write the entry for cnki-mcp serve --http (URL and token) instead of stdio.",
))
@click.option("--host", default="127.0.0.1", show_default=True, metavar=say("<地址>", "<host>"), help=say(*_HOST_HELP))
@click.option("--port", default=8765, show_default=True, type=click.IntRange(1, 65535), metavar=say("<端口>", "<port>"),
              help=say(*_PORT_HELP))
@click.option("--remote-access", "remote_access", metavar=say("<网址>", "<URL>"), help=say(
    "校外访问：经学校 VPN 打开的知网页面网址（或 CARSI 登录网址），保存访问方式。",
    "Off campus: the URL of a CNKI page opened through the university's VPN (or the CARSI login URL); keeps the route.",
))
@click.option("--skip-check", is_flag=True, hidden=True, help="跳过最后的 MCP 通信检查。")
def setup_command(
    browser: str | None,
    client_id: str | None,
    install_client: bool,
    http: bool,
    host: str,
    port: int,
    skip_check: bool,
    remote_access: str | None = None,
) -> None:
    interactive = browser is None and client_id is None and not install_client and not http
    changes = Changes()
    try:
        route = route_of(remote_access.strip()) if remote_access else None  # a bad URL stops before any change
        client = _checked_client(client_id, install_client)
        if http:
            if client is None:
                raise CnkiError("CLIENT_REQUIRED", "--http 需要同时用 --client 指定要接入的客户端，例如 --client cursor --http。")
            run_http_setup(client, host, port, changes)
            return
        run_setup(
            browser=browser,
            client=client,
            install_client=install_client,
            interactive=interactive,
            protocol_check=not skip_check,
            changes=changes,
            route=route,
        )
    except CnkiError as error:
        click.echo(f"{error.code}: {error.message}", err=True)
        click.echo(changes.summary())
        sys.exit(1)


def _checked_client(client_id: str | None, install_client: bool) -> clients.Client | None:
    """Everything about the client that can be wrong, checked before anything is started or written."""
    if client_id is None:
        if install_client:
            raise CnkiError(
                "CLIENT_REQUIRED",
                "--install-client 需要同时用 --client 指定要接入的客户端，例如 "
                "--client claude-code --install-client；cnki-mcp help 列出全部客户端。",
            )
        return None
    client = clients.get_client(client_id)
    if not clients.available(client):
        raise CnkiError("CLIENT_UNAVAILABLE", clients.unavailable_message(client), details={"client": client.id})
    if install_client:
        clients.config_path(client.id)  # several installs of the client: CLIENT_CONFIG_AMBIGUOUS now, not later
    return client


def run_http_setup(client: clients.Client, host: str, port: int, changes: Changes) -> None:
    """Write the entry of ``cnki-mcp serve --http`` (URL and token) into the client's config file."""
    from cnki_mcp.serving.endpoint import token, url

    root = _data_root()
    address = url(host, port)
    target = clients.config_path(client.id)
    if target is None:
        raise CnkiError(
            "CLIENT_IMPORT_REQUIRED",
            f"{client.name} 不能自动写入配置文件；请运行 cnki-mcp config {client.id} --http，"
            f"把输出粘贴到：{client.hint or '客户端的 MCP 设置'}。",
            details={"client": client.id},
        )
    written = clients.write_client_config(client.id, root, target, http=(address, token(root)))
    changes.client_config = written.changed
    if written.changed:
        changes.add(f"{client.name} 的 HTTP 配置", written.path, written.backup)
        click.echo(f"已写入 {client.name} 连接 {address} 的配置：{written.path}")
    else:
        click.echo(f"{client.name} 的 HTTP 配置已是最新，未改动：{written.path}")
    click.echo(f"请在服务所在的电脑上运行 cnki-mcp serve --http（地址 {address}），然后重启或重新连接 {client.name}。")
    click.echo(changes.summary())


@dataclass
class Changes:
    """What setup changed on disk, for its last line."""

    written: list[str] = field(default_factory=list)
    client_config: bool = False

    def add(self, what: str, path: Path, backup: Path | None = None) -> None:
        self.written.append(f"{what} {path}" + (f"（原文件备份为 {backup}）" if backup is not None else ""))

    def summary(self) -> str:
        if not self.written:
            return "本次没有改动任何文件。"
        tail = "" if self.client_config else "；没有改动任何客户端的配置文件"
        return "本次改动：写入了 " + "；".join(self.written) + tail + "。"


def run_setup(
    *,
    browser: str | None,
    client: clients.Client | None,
    install_client: bool,
    interactive: bool,
    protocol_check: bool = True,
    changes: Changes | None = None,
    route: Route | None = None,
) -> None:
    from cnki_mcp.store.library import load_config, save_config

    changes = changes if changes is not None else Changes()
    from cnki_mcp.core.display import display_problem

    click.echo(banner())
    no_screen = display_problem()
    if no_screen is not None:
        click.echo(f"⚠ {no_screen}")
    path = _choose_browser(browser, interactive)
    click.echo("正在以无界面方式启动浏览器做检查……")
    check_browser(path)
    click.echo("浏览器检查通过。")

    root = _data_root()
    if route is None:  # the route a login set stays
        try:
            route = load_config(root).route
        except CnkiError:
            route = Route()
    save_config(root, Config(browser_path=str(path), route=kept(route)))
    changes.add("浏览器设置", root / "config.json")
    click.echo(f"已保存浏览器设置：{root / 'config.json'}")
    click.echo(f"访问方式：{route_words(route)}")

    client = client or clients.get_client(_choose_client(interactive))
    text = clients.snippet(client.id, root)
    snippet_file = root / client.snippet_filename
    _write_private(snippet_file, text)
    changes.add("配置片段", snippet_file)
    click.echo("")
    click.echo(text, nl=False)
    click.echo(f"配置片段已保存：{snippet_file}")

    connected = _connect(client, root, install_client, interactive, changes)

    if connected and client.note:
        click.echo(f"还差一步：{client.note}。")
    if protocol_check:
        from cnki_mcp.surface.server import protocol_probe

        result: dict[str, Any] = asyncio.run(protocol_probe(clients.server_command()))
        if connected:
            click.echo(f"安装检查通过：共 {result.get('tools')} 个 MCP 工具。请重启或重新连接 {client.name}。")
        else:
            click.echo(f"MCP 通信检查通过：共 {result.get('tools')} 个 MCP 工具；{client.name} 还没有接入（见上文）。")
    else:
        click.echo("已跳过 MCP 通信检查。")
    if no_screen is not None:
        click.echo("⚠ 这台电脑没有图形界面：第一次检索前请按上面 ⚠ 的提示处理（有桌面的会话、CNKI_HEADLESS=1 或 serve --http）。")
    click.echo(changes.summary())


def _connect(
    client: clients.Client, root: Path, install_client: bool, interactive: bool, changes: Changes
) -> bool:
    """Write the client's config, or open its import link, when asked; say plainly when nothing was done."""
    link = clients.import_link(client.id, root)
    if link is not None:
        click.echo(f"一键导入链接（请在装有 {client.name} 的电脑上打开，{client.name} 会请你确认）：")
        click.echo(link)
        opening = _ask("现在打开这个链接吗？[Y/n] ").lower() in _YES if interactive else install_client
        if opening:
            open_link(link)
            click.echo(f"已交给系统打开导入链接；请在 {client.name} 中确认导入。")
            return True
        click.echo(f"未打开导入链接，{client.name} 的配置未写入：请在 {client.name} 中打开上面的链接，"
                   f"或把配置片段粘贴到：{client.hint}。")
        return False
    targets = clients.config_paths(client.id)
    if not targets:
        if install_client:
            raise CnkiError(
                "CLIENT_IMPORT_REQUIRED",
                f"{client.name} 不能自动写入配置文件，请把上面的配置片段粘贴到：{client.hint}。",
                details={"client": client.id},
            )
        click.echo(f"未写入 {client.name} 的配置（它需要手动粘贴）：请把上面的配置片段粘贴到：{client.hint}。")
        return False
    target = targets[0] if len(targets) == 1 else _choose_target(client, targets)
    location = client.location
    if location is not None and location.must_exist and not target.parent.is_dir() and not install_client:
        # With --install-client the write below stops with CLIENT_NOT_INITIALIZED, in the same words.
        click.echo(f"未写入 {client.name} 的配置：配置目录 {target.parent} 还不存在，{client.hint}。")
        return False
    apply = install_client or (interactive and _ask(f"写入 {target} 并备份原文件？[Y/n] ").lower() in _YES)
    if not apply:
        rerun = f"cnki-mcp setup --client {client.id} --install-client"
        click.echo(f"未写入 {client.name} 的配置：请把上面的配置片段合并到 {target}，或运行 {rerun} 自动写入。")
        return False
    written = _write(client, root, target, interactive)
    changes.client_config = written.changed
    if written.changed:
        how = f"（通过 {written.via}）" if written.via else ""
        changes.add(f"{client.name} 的配置", written.path, written.backup)
        click.echo(f"已更新客户端配置{how}：{written.path}")
        if written.backup is not None:
            click.echo(f"原文件已备份为：{written.backup}")
    else:
        click.echo(f"客户端配置已是最新，未改动：{written.path}")
    return True


def _write(client: clients.Client, root: Path, target: Path, interactive: bool) -> clients.ConfigWrite:
    """The client's own command where it is the documented way, else (or to complete it) the file merge."""
    try:
        found = clients.existing_entry(client.id, target)
    except clients.UNREADABLE:
        found = None  # the merge reports an unreadable file with its own message
    enable = False
    if clients.is_disabled(found):
        question = f"{client.name} 中已有的 cnki 条目被停用了，要重新启用吗？[Y/n] "
        enable = _ask(question).lower() in _YES if interactive else True
        click.echo("将重新启用 cnki 条目。" if enable else "cnki 条目保持停用。")
    by_cli = install_with_cli(client.id, root, target)
    merged = clients.write_client_config(client.id, root, target, enable=enable, backup_first=by_cli is None)
    if by_cli is None:
        return merged
    return clients.ConfigWrite(by_cli.path, by_cli.backup, True, via=by_cli.via)


def _choose_target(client: clients.Client, targets: list[Path]) -> Path:
    click.echo(f"发现 {client.name} 的多个安装，各有自己的配置文件：")
    for number, target in enumerate(targets, 1):
        click.echo(f"  {number}. {target}")
    while True:
        answer = _ask(f"请输入正在使用的那一个的编号（1–{len(targets)}）：")
        if answer.isdigit() and 1 <= int(answer) <= len(targets):
            return targets[int(answer) - 1]
        if answer == "":
            raise CnkiError(
                "CLIENT_CONFIG_AMBIGUOUS",
                f"没有选择 {client.name} 的配置文件，未写入。",
                details={"client": client.id, "paths": [str(t) for t in targets]},
            )
        click.echo(f"没有这个选项：{answer}")


def _exit_with(error: CnkiError) -> NoReturn:
    click.echo(f"{error.code}: {error.message}", err=True)
    sys.exit(1)


# --- questions ------------------------------------------------------------------------------------


def _ask(question: str) -> str:
    """One line from stdin, trimmed; end of input counts as an empty answer (the default)."""
    click.echo(question, nl=False)
    line = sys.stdin.readline()
    if not line:
        click.echo("")
    return line.strip()


def _width(text: str) -> int:
    return sum(2 if unicodedata.east_asian_width(char) in ("W", "F") else 1 for char in text)


def _pad(text: str, width: int) -> str:
    return text + " " * max(0, width - _width(text))


def _choose_browser(given: str | None, interactive: bool) -> Path:
    if given is not None:
        return _validate_browser(given)
    candidates = browser_candidates()
    if candidates:
        click.echo("找到以下浏览器：")
        for number, candidate in enumerate(candidates, 1):
            click.echo(f"  {number}. {candidate}")
    if not interactive:
        if not candidates:
            raise CnkiError(
                "BROWSER_NOT_FOUND",
                "没有找到 Chrome、Edge 或 Chromium；请用 --browser 指定浏览器的可执行文件。",
            )
        return _validate_browser(str(candidates[0]))
    question = (
        "请输入编号选择浏览器（回车 = 1），或输入浏览器可执行文件的完整路径："
        if candidates
        else "没有找到 Chrome、Edge 或 Chromium，请输入浏览器可执行文件的完整路径："
    )
    error: CnkiError | None = None
    for _ in range(3):
        answer = _ask(question)
        if answer == "" and candidates:
            answer = "1"
        if answer == "":
            break
        if answer.isdigit() and 1 <= int(answer) <= len(candidates):
            answer = str(candidates[int(answer) - 1])
        try:
            return _validate_browser(answer)
        except CnkiError as exc:
            error = exc
            click.echo(exc.message)
    raise error or CnkiError(
        "BROWSER_NOT_FOUND", "没有指定浏览器；请用 --browser 指定 Chrome、Edge 或 Chromium 的可执行文件。"
    )


def _validate_browser(raw: str) -> Path:
    text = raw.strip().strip('"').strip("'")
    if not text:
        raise CnkiError("BROWSER_NOT_FOUND", "浏览器路径为空；请用 --browser 指定浏览器的可执行文件。")
    path = Path(os.path.abspath(os.path.expanduser(text)))
    if path.is_dir():
        raise CnkiError(
            "BROWSER_NOT_FOUND",
            f"{path} 是文件夹，不是浏览器的可执行文件"
            + ("（macOS 上请指定 .app/Contents/MacOS/ 里的文件）" if path.suffix == ".app" else "")
            + "。",
            details={"path": str(path)},
        )
    version = probe_version(path)
    click.echo(f"浏览器：{path}（{version}）")
    return path


def _choose_client(interactive: bool) -> str:
    if not interactive:
        return "generic"
    installed = clients.installed_clients()
    order = [*installed, *(c.id for c in clients.CLIENTS if c.id not in installed and clients.available(c))]
    click.echo("")
    click.echo("可以接入的客户端" + ("（这台电脑上已安装的排在前面）：" if installed else "："))
    for number, client_id in enumerate(order, 1):
        client = clients.get_client(client_id)
        mark = "（已安装）" if client_id in installed else ""
        click.echo(f"  {number:>2}. {_pad(client.name + mark, 36)} {clients.how_configured(client.id)}")
    default = order[0] if installed else "generic"
    default_number = order.index(default) + 1
    while True:
        answer = _ask(f"请输入客户端编号或选项名（回车 = {default_number}，{clients.get_client(default).name}）：")
        if answer == "":
            return default
        if answer.isdigit() and 1 <= int(answer) <= len(order):
            return order[int(answer) - 1]
        try:
            chosen = clients.get_client(answer)
            if not clients.available(chosen):
                click.echo(clients.unavailable_message(chosen))
                continue
            return chosen.id
        except CnkiError as error:
            suggestion = (error.details or {}).get("suggestion")
            click.echo(f"没有这个选项：{answer}" + (f"；是不是 {suggestion}？" if suggestion else ""))


# --- files and links ------------------------------------------------------------------------------


def _write_private(path: Path, text: str) -> None:
    from cnki_mcp.core.files import atomic_replace

    try:
        atomic_replace(path, text.encode("utf-8"), 0o600)
    except OSError as exc:
        raise CnkiError("DISK_WRITE_FAILED", f"无法写入 {path}：{exc.strerror or exc}。", details={"path": str(path)}) from exc


def open_link(link: str) -> None:
    """Hand the link to the OS; a failure is reported, not fatal (the link is printed above)."""
    if sys.platform == "darwin":
        argv = ["open", link]
    elif sys.platform == "win32":
        argv = ["rundll32", "url.dll,FileProtocolHandler", link]
    else:
        argv = ["xdg-open", link]
    try:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        click.echo(f"无法自动打开链接（{exc}）；请手动复制上面的链接打开。")
        return
    if done.returncode != 0:
        click.echo(f"无法自动打开链接（{argv[0]} 退出码 {done.returncode}）；请手动复制上面的链接打开。")


# --- headless browser check -----------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _page_targets(port: int) -> list[dict[str, Any]]:
    import json

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=2) as response:
        targets = json.loads(response.read().decode("utf-8"))
    return [t for t in targets if isinstance(t, dict) and t.get("type") == "page"]


def check_browser(path: Path, timeout: float = BROWSER_CHECK_SECONDS) -> None:
    """Launch the browser headless on a throwaway profile and wait for its blank page over DevTools.

    The port is chosen here rather than read from DevToolsActivePort because snap and Flatpak
    browsers see a private /tmp, where that file would be invisible to us.
    """
    work = Path(tempfile.mkdtemp(prefix="cnki-browser-check-"))
    log_path = work / "browser.log"
    port = _free_port()
    argv = [
        str(path),
        "--headless=new",
        f"--user-data-dir={work / 'profile'}",
        f"--remote-debugging-port={port}",
        "--remote-debugging-address=127.0.0.1",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-extensions",
        "about:blank",
    ]
    if hasattr(os, "getuid") and os.getuid() == 0:
        argv.append("--no-sandbox")  # Chromium refuses to run as root with its sandbox
    options: dict[str, Any] = {"start_new_session": True}
    if sys.platform == "win32":
        options = {"creationflags": subprocess.CREATE_NEW_PROCESS_GROUP | subprocess.CREATE_NO_WINDOW}
    process: subprocess.Popen[bytes] | None = None
    try:
        with open(log_path, "wb") as log:
            try:
                process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, **options)
            except OSError as exc:
                raise _check_failed(f"无法启动 {path}：{exc.strerror or exc}", log_path) from exc
            _wait_for_blank_page(process, port, timeout, log_path)
    finally:
        if process is not None:
            _stop_tree(process)
        _remove_tree(work)


def _wait_for_blank_page(process: subprocess.Popen[bytes], port: int, timeout: float, log_path: Path) -> None:
    deadline = Deadline(timeout)
    while not deadline.passed:
        code = process.poll()
        if code is not None:
            raise _check_failed(f"浏览器启动后立即退出（退出码 {code}）", log_path)
        with contextlib.suppress(OSError, ValueError, urllib.error.URLError):
            if _page_targets(port):
                return
        time.sleep(0.2)
    raise _check_failed(f"{timeout:g} 秒内没有打开空白页", log_path)


def _check_failed(cause: str, log_path: Path) -> CnkiError:
    from cnki_mcp.core.display import browser_output_cause

    with contextlib.suppress(OSError):
        tail = log_path.read_text("utf-8", "replace").strip()[-600:]
        named = browser_output_cause(tail.splitlines())
        if named:
            cause = f"{cause}：{named}"
        if tail:
            cause = f"{cause}；浏览器输出：{tail}"
    return CnkiError("BROWSER_CHECK_FAILED", f"浏览器检查未通过：{cause}", details={"cause": cause})


def _stop_tree(process: subprocess.Popen[bytes]) -> None:
    """Stop the browser and every helper it started, by process id."""
    try:
        parent = psutil.Process(process.pid)
        family = [parent, *parent.children(recursive=True)]
    except psutil.NoSuchProcess:
        family = []
    for member in family:
        with contextlib.suppress(psutil.NoSuchProcess):
            member.terminate()
    _, alive = psutil.wait_procs(family, timeout=5)
    for member in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            member.kill()
    psutil.wait_procs(alive, timeout=5)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=5)


def _remove_tree(folder: Path) -> None:
    # Windows keeps files of a just-ended process locked for a moment.
    for _ in range(5):
        shutil.rmtree(folder, ignore_errors=True)
        if not folder.exists():
            return
        time.sleep(0.2)
