"""`cnki-mcp setup`, `cnki-mcp config <client>` and the text of `cnki-mcp help`.

Setup checks its arguments first (the clients' names, and that ``--install-client`` has a client),
then runs the same steps with or without questions: on a machine without a screen decide whether the
clients' env gets CNKI_HEADLESS=1, choose a browser, check that it starts headless, save it in
config.json, choose the clients (several at once; those installed here are offered first), and for
each save its snippet in the data directory, then write its config (through the client's own command
where that is its documented way), offer its import link or say where to paste; finally start one
real server child to check the MCP round trip. It never says a client is ready when nothing was
written for it, and its last line always lists what it changed. With no arguments at all it asks
(numbered menus, Enter takes the default, end of input counts as Enter), and only on a terminal:
with stdin not a terminal it refuses (SETUP_NEEDS_TERMINAL, exit code 2) rather than take every
default unseen. Any of --browser, --client, --install-client, --http, --headless or --no-headless
turns every question off.

``--headless`` writes CNKI_HEADLESS=1 into the env of every entry, snippet and import link it makes;
``--no-headless`` writes none and takes an earlier CNKI_HEADLESS out of the entries it updates (the
person decided); without either an entry's existing CNKI_HEADLESS is left as it is.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
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
from functools import partial
from pathlib import Path
from typing import Any, NoReturn

import click
import msgspec
import psutil

from cnki_mcp.core.clock import Deadline
from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.model import Config, Route
from cnki_mcp.setup import clients, launcher
from cnki_mcp.setup.cli_words import Command, error_line, said, say
from cnki_mcp.setup.client_cli import install_with_cli
from cnki_mcp.setup.created import recorded
from cnki_mcp.setup.messages import english, msg
from cnki_mcp.site.discovery import browser_candidates, probe_version
from cnki_mcp.site.remote import kept, route_of, route_words, setting_words

BROWSER_CHECK_SECONDS = 20.0
_YES = ("", "y", "yes", "是")


def help_text() -> str:
    """Usage, the setup flags and every client id in registry order."""
    lines = [msg("help.usage"), msg("help.commands"), "", msg("help.clients")]
    lines.extend(
        f"  {client.id:<16} {client.name}" + ("" if clients.available(client) else msg("help.not_on_this_os"))
        for client in clients.CLIENTS
    )
    return "\n".join(lines)


def banner() -> str:
    """The first line of setup: this product, and what it really needs to run."""
    return msg("setup.banner_frozen" if getattr(sys, "frozen", False) else "setup.banner_source")


def _data_root() -> Path:
    from cnki_mcp.core.settings import data_root

    return data_root()


def destination(client: clients.Client, root: Path, http: str = "") -> str:
    """Where a client's snippet belongs, in words: its config file, its import link or the place to paste.

    ``http``: the flags of an HTTP snippet (``--http --host … --port …``), for the command that writes it."""
    if not clients.available(client):
        return clients.unavailable_message(client).removesuffix(msg("clients.full_stop"))
    if client.mode == "link" and not http:
        return msg("config.where_link", client=client.name, id=client.id, hint=client.hint)
    try:
        targets = clients.config_paths(client.id)
    except CnkiError:
        targets = []
    if targets:
        rerun = f"cnki-mcp setup --client {client.id} " + (http or "--install-client")
        return msg("config.where_merge", paths=msg("config.where_or").join(map(str, targets)), rerun=rerun)
    return msg("config.where_paste", hint=client.hint or msg("config.generic_hint"))


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
        click.echo(msg("config.token_rotated"), err=True)
        return
    try:
        if client_id.startswith("-") or ctx.args:
            extra = " ".join([client_id] if client_id.startswith("-") else ctx.args)
            raise CnkiError(
                "INVALID_ARGUMENT",
                msg("config.one_client", extra=extra),
                details={"arguments": extra},
            )
        client = clients.get_client(client_id)
        root = _data_root()
        if link:
            found = clients.client_install_link(client.id, root)
            if found is None:
                raise CnkiError(
                    "CLIENT_LINK_UNSUPPORTED",
                    msg("config.no_link", client=client.name, id=client.id, where=destination(client, root)),
                    details={"client": client.id},
                )
            click.echo(found)
            click.echo(msg("config.open_link", client=client.name), err=True)
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
    flags = "--http" + (f" --host {host}" if host != "127.0.0.1" else "") + (f" --port {port}" if port != 8765 else "")
    where = destination(client, root, flags if http else "")
    click.echo(msg("config.belongs_http" if http else "config.belongs", client=client.name, where=where), err=True)
    if client.note:
        click.echo(msg("config.also", note=client.note), err=True)


@click.command(cls=Command, name="setup", help=say(
    "选择浏览器和客户端（可多个），写入配置并检查 MCP 服务。不带参数时在终端里逐步询问。",
    "Choose the browser and the clients (several at once), write the config and check the MCP server. Without flags "
    "it asks step by step, on a terminal.",
))
@click.option("--browser", "browser", metavar=say("<浏览器路径>", "<browser path>"),
              help=say("Chrome、Edge 或 Chromium 的可执行文件。", "The Chrome, Edge or Chromium executable."))
@click.option("--client", "client_ids", multiple=True, metavar=say("<客户端>", "<client>"),
              help=say("要接入的客户端，见 cnki-mcp help；可多次给出。", "The client to connect, see cnki-mcp help; may be given several times."))
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
@click.option("--site", type=click.Choice(["auto", "mainland", "oversea"]), help=say(
    "知网站点：auto 跟随知网的跳转（在中国大陆以外会被送到海外站点 oversea.cnki.net），mainland 总用大陆站点，"
    "oversea 总用海外站点。不写时保持原设置（初次为 auto）。",
    "CNKI site: auto follows CNKI's redirect (outside mainland China it sends you to oversea.cnki.net), mainland always "
    "uses the mainland site, oversea always the overseas one. Left out: the setting stays (auto at first).",
))
@click.option("--headless/--no-headless", "headless", default=None, help=say(
    "在客户端配置的 env 中写入（或不写入）CNKI_HEADLESS=1：没有图形界面的电脑（SSH、WSL、服务器）用无界面浏览器，"
    "能检索和阅读，但验证码和登录需要图形界面。不写时：有询问则询问，否则保持原样。",
    "Write (or leave out) CNKI_HEADLESS=1 in the env of the client config: for a machine without a screen (SSH, "
    "WSL, a server) a headless browser searches and reads, but captchas and login need a screen. Left out: asked "
    "when setup asks, else left as it is.",
))
@click.option("--skip-check", is_flag=True, hidden=True, help=say("跳过最后的 MCP 通信检查。", "Skip the last MCP check."))
def setup_command(
    browser: str | None,
    client_ids: tuple[str, ...],
    install_client: bool,
    http: bool,
    host: str,
    port: int,
    skip_check: bool,
    remote_access: str | None = None,
    site: str | None = None,
    headless: bool | None = None,
) -> None:
    interactive = browser is None and not client_ids and not install_client and not http and headless is None
    changes = Changes()
    try:
        if interactive and not (sys.stdin is not None and sys.stdin.isatty()):
            # Questions nobody sees would take every default silently: say which flags decide instead.
            raise CnkiError("SETUP_NEEDS_TERMINAL", msg("setup.needs_terminal"))
        route = route_of(remote_access.strip()) if remote_access else None  # a bad URL stops before any change
        chosen = _checked_clients(client_ids, install_client)
        if http:
            if not chosen:
                raise CnkiError("CLIENT_REQUIRED", msg("setup.http_needs_client"))
            if headless is not None:
                raise CnkiError("INVALID_ARGUMENT", msg("setup.http_no_headless"))
            run_http_setup(chosen, host, port, changes)
            return
        run_setup(
            browser=browser,
            chosen=chosen,
            install_client=install_client,
            interactive=interactive,
            protocol_check=not skip_check,
            changes=changes,
            route=route,
            site=site,
            headless=headless,
        )
    except CnkiError as error:
        click.echo(error_line(error), err=True)
        click.echo(changes.summary())
        sys.exit(2 if error.code == "SETUP_NEEDS_TERMINAL" else 1)  # 2: a usage error, as click's own


def _checked_clients(client_ids: tuple[str, ...], install_client: bool) -> list[clients.Client]:
    """Everything about the clients that can be wrong, checked before anything is started or written;
    a client named twice (by id or alias) counts once."""
    if not client_ids and install_client:
        raise CnkiError("CLIENT_REQUIRED", msg("setup.install_needs_client"))
    chosen: list[clients.Client] = []
    for client_id in client_ids:
        client = clients.get_client(client_id)
        if not clients.available(client):
            raise CnkiError("CLIENT_UNAVAILABLE", clients.unavailable_message(client), details={"client": client.id})
        if install_client:
            clients.config_path(client.id)  # several installs of the client: CLIENT_CONFIG_AMBIGUOUS now, not later
        if client not in chosen:
            chosen.append(client)
    return chosen


def run_http_setup(chosen: list[clients.Client], host: str, port: int, changes: Changes) -> None:
    """Write the entry of ``cnki-mcp serve --http`` (URL and token) into each client's config file."""
    from cnki_mcp.serving.endpoint import token, url

    root = _data_root()
    address = url(host, port)
    for client in chosen:
        target = clients.config_path(client.id)
        if target is None:
            raise CnkiError(
                "CLIENT_IMPORT_REQUIRED",
                msg("setup.http_cannot_write", client=client.name, id=client.id, hint=client.hint or msg("config.generic_hint")),
                details={"client": client.id},
            )
        write = partial(clients.write_client_config, client.id, root, target, http=(address, token(root)))
        written = recorded(root, target, write)
        changes.client_config |= written.changed
        if written.changed:
            changes.add(msg("setup.http_what", client=client.name), written.path, written.backup)
            click.echo(msg("setup.http_written", client=client.name, address=address, path=written.path))
        else:
            click.echo(msg("setup.http_current", client=client.name, path=written.path))
        click.echo(msg("setup.http_next", address=address, client=client.name))
    click.echo(changes.summary())


@dataclass
class Changes:
    """What setup changed on disk, for its last line."""

    written: list[str] = field(default_factory=list)
    client_config: bool = False
    headless: bool | None = None  # what the written client configs say about CNKI_HEADLESS, when decided

    def add(self, what: str, path: Path, backup: Path | None = None) -> None:
        if backup is None:
            self.written.append(msg("setup.change", what=what, path=path))
        else:
            self.written.append(msg("setup.change_backup", what=what, path=path, backup=backup))

    def summary(self) -> str:
        if not self.written:
            return msg("setup.nothing_changed")
        tail = "" if self.client_config else msg("setup.no_client_file")
        if self.headless is not None:
            tail += msg("setup.headless_tail" if self.headless else "setup.no_headless_tail")
        return msg("setup.changed", items=msg("setup.changed_separator").join(self.written), tail=tail)


def run_setup(
    *,
    browser: str | None,
    chosen: list[clients.Client],
    install_client: bool,
    interactive: bool,
    protocol_check: bool = True,
    changes: Changes | None = None,
    route: Route | None = None,
    site: str | None = None,
    headless: bool | None = None,
) -> None:
    from cnki_mcp.app.core import load_checked_config
    from cnki_mcp.store.library import save_config

    changes = changes if changes is not None else Changes()
    from cnki_mcp.core.display import display_problem

    click.echo(banner())
    no_screen = display_problem(english=english())
    if no_screen is not None and headless is not True:  # --headless is the advice taken: the last lines say so
        click.echo(msg("setup.warning", problem=no_screen))
        if headless is None and interactive:
            headless = _ask(msg("setup.ask_headless")).lower() in _YES
    changes.headless = headless
    path = _choose_browser(browser, interactive)
    click.echo(msg("setup.checking_browser"))
    check_browser(path)
    click.echo(msg("setup.browser_ok"))

    root = _data_root()
    try:
        before, refused = load_checked_config(root)
    except CnkiError:
        before, refused = Config(), None
    if refused is not None and route is None:  # a stored route the gateway rules refuse is not written back
        click.echo(msg("setup.warning", problem=refused.message))
    route = before.route if route is None else route  # the route a login set stays
    kept_site = before.site if site is None else msgspec.convert({"site": site}, Config).site
    config = Config(browser_path=str(path), route=kept(route), site=kept_site)
    save_config(root, config)
    changes.add(msg("setup.what_browser"), root / "config.json")
    click.echo(msg("setup.browser_saved", path=root / "config.json"))
    click.echo(msg("setup.route", route=route_words(route, english=english())))
    click.echo(msg("setup.site", site=setting_words(config.site, english=english())))

    chosen = chosen or [clients.get_client(client_id) for client_id in _choose_clients(interactive)]
    connected: list[str] = []
    waiting: list[str] = []
    for client in chosen:
        snippet_text = clients.snippet(client.id, root, headless=headless is True)
        snippet_file = root / client.snippet_filename
        _write_private(snippet_file, snippet_text)
        changes.add(msg("setup.what_snippet"), snippet_file)
        click.echo("")
        click.echo(snippet_text, nl=False)
        click.echo(msg("setup.snippet_saved", path=snippet_file))
        if _connect(client, root, install_client, interactive, changes, headless):
            connected.append(client.name)
            if client.note:
                click.echo(msg("setup.one_more_step", note=client.note))
        else:
            waiting.append(client.name)

    separator = msg("setup.names_separator")
    if protocol_check:
        from cnki_mcp.surface.server import protocol_probe

        result: dict[str, Any] = asyncio.run(protocol_probe(launcher.server_command()))
        if connected:
            click.echo(msg("setup.install_ok", tools=result.get("tools"), client=separator.join(connected)))
            if waiting:
                click.echo(msg("setup.not_connected_yet", clients=separator.join(waiting)))
        else:
            click.echo(msg("setup.protocol_ok_not_connected", tools=result.get("tools"), client=separator.join(waiting)))
    else:
        click.echo(msg("setup.protocol_skipped"))
    if no_screen is not None:
        click.echo(msg("setup.headless_reminder" if headless else "setup.no_screen_reminder"))
    click.echo(changes.summary())


def _connect(
    client: clients.Client, root: Path, install_client: bool, interactive: bool, changes: Changes, headless: bool | None
) -> bool:
    """Write the client's config, or open its import link, when asked; say plainly when nothing was done."""
    link = clients.import_link(client.id, root, headless=headless is True)
    if link is not None:
        click.echo(msg("setup.link_heading", client=client.name))
        click.echo(link)
        opening = _ask(msg("setup.ask_open_link")).lower() in _YES if interactive else install_client
        if opening:
            open_link(link)
            click.echo(msg("setup.link_opened", client=client.name))
            return True
        click.echo(msg("setup.link_not_opened", client=client.name, hint=client.hint))
        return False
    targets = clients.config_paths(client.id)
    if not targets:
        if install_client:
            raise CnkiError(
                "CLIENT_IMPORT_REQUIRED",
                msg("setup.paste_required", client=client.name, hint=client.hint),
                details={"client": client.id},
            )
        click.echo(msg("setup.not_written_paste", client=client.name, hint=client.hint))
        return False
    target = targets[0] if len(targets) == 1 else _choose_target(client, targets)
    location = client.location
    if location is not None and location.must_exist and not target.parent.is_dir() and not install_client:
        # With --install-client the write below stops with CLIENT_NOT_INITIALIZED, in the same words.
        click.echo(msg("setup.not_written_no_folder", client=client.name, folder=target.parent, hint=client.hint))
        return False
    apply = install_client or (interactive and _ask(msg("setup.ask_write", path=target)).lower() in _YES)
    if not apply:
        rerun = f"cnki-mcp setup --client {client.id} --install-client"
        click.echo(msg("setup.not_written_merge", client=client.name, path=target, rerun=rerun))
        return False
    written = recorded(root, target, lambda: _write(client, root, target, interactive, headless))
    changes.client_config |= written.changed
    if written.changed:
        how = msg("setup.written_via", via=written.via) if written.via else ""
        changes.add(msg("setup.what_client", client=client.name), written.path, written.backup)
        click.echo(msg("setup.client_written", how=how, path=written.path))
        if written.backup is not None:
            click.echo(msg("setup.backup", path=written.backup))
    else:
        click.echo(msg("setup.client_current", path=written.path))
    return True


def _write(
    client: clients.Client, root: Path, target: Path, interactive: bool, headless: bool | None
) -> clients.ConfigWrite:
    """The client's own command where it is the documented way, else (or to complete it) the file merge."""
    try:
        found = clients.existing_entry(client.id, target)
    except clients.UNREADABLE:
        found = None  # the merge reports an unreadable file with its own message
    enable = False
    if clients.is_disabled(found):
        question = msg("setup.ask_enable", client=client.name)
        enable = _ask(question).lower() in _YES if interactive else True
        click.echo(msg("setup.will_enable" if enable else "setup.stays_disabled"))
    by_cli = install_with_cli(client.id, root, target, headless=headless is True)
    merged = clients.write_client_config(
        client.id, root, target, enable=enable, backup_first=by_cli is None, headless=headless
    )
    if by_cli is None:
        return merged
    return clients.ConfigWrite(by_cli.path, by_cli.backup, True, via=by_cli.via)


def _choose_target(client: clients.Client, targets: list[Path]) -> Path:
    click.echo(msg("setup.several_installs", client=client.name))
    for number, target in enumerate(targets, 1):
        click.echo(f"  {number}. {target}")
    while True:
        answer = _ask(msg("setup.ask_install", count=len(targets)))
        if answer.isdigit() and 1 <= int(answer) <= len(targets):
            return targets[int(answer) - 1]
        if answer == "":
            raise CnkiError(
                "CLIENT_CONFIG_AMBIGUOUS",
                msg("setup.no_install_chosen", client=client.name),
                details={"client": client.id, "paths": [str(t) for t in targets]},
            )
        click.echo(msg("setup.no_such_choice", answer=answer))


def _exit_with(error: CnkiError) -> NoReturn:
    click.echo(error_line(error), err=True)
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
        click.echo(msg("setup.browsers_found"))
        for number, candidate in enumerate(candidates, 1):
            click.echo(f"  {number}. {candidate}")
    if not interactive:
        if not candidates:
            raise CnkiError("BROWSER_NOT_FOUND", msg("setup.no_browser"))
        return _validate_browser(str(candidates[0]))
    question = msg("setup.ask_browser" if candidates else "setup.ask_browser_path")
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
            click.echo(said(exc))
    raise error or CnkiError("BROWSER_NOT_FOUND", msg("setup.browser_not_given"))


def _validate_browser(raw: str) -> Path:
    text = raw.strip().strip('"').strip("'")
    if not text:
        raise CnkiError("BROWSER_NOT_FOUND", msg("setup.browser_empty"))
    path = Path(os.path.abspath(os.path.expanduser(text)))
    if path.is_dir():
        raise CnkiError(
            "BROWSER_NOT_FOUND",
            msg("setup.browser_is_folder", path=path, app=msg("setup.browser_app_hint") if path.suffix == ".app" else ""),
            details={"path": str(path)},
        )
    version = probe_version(path)
    click.echo(msg("setup.browser_version", path=path, version=version))
    return path


def _choose_clients(interactive: bool) -> list[str]:
    """The clients to connect: several numbers or names at once; Enter takes the installed ones (else generic)."""
    if not interactive:
        return ["generic"]
    installed = clients.installed_clients()
    order = [*installed, *(c.id for c in clients.CLIENTS if c.id not in installed and clients.available(c))]
    click.echo("")
    click.echo(msg("setup.clients_heading_installed" if installed else "setup.clients_heading"))
    for number, client_id in enumerate(order, 1):
        client = clients.get_client(client_id)
        mark = msg("setup.installed_mark") if client_id in installed else ""
        click.echo(f"  {number:>2}. {_pad(client.name + mark, 36)} {clients.how_configured(client.id)}")
    default = installed or ["generic"]
    numbers = ",".join(str(order.index(client_id) + 1) for client_id in default)
    names = msg("setup.names_separator").join(clients.get_client(client_id).name for client_id in default)
    while True:
        answer = _ask(msg("setup.ask_client", number=numbers, client=names))
        if answer == "":
            return default
        chosen = _read_choices(answer, order)
        if chosen:
            return chosen


_ALL = ("all", "全部")
_CHOICE_SEPARATORS = re.compile(r"[\s,，、;；]+")


def _read_choices(answer: str, order: list[str]) -> list[str]:
    """The client ids an answer names, in its order and each once; [] after saying what is wrong with it."""
    with contextlib.suppress(CnkiError):
        whole = clients.get_client(answer)  # a name typed with a space: "claude code"
        if clients.available(whole):
            return [whole.id]
    chosen: list[str] = []
    for word in filter(None, _CHOICE_SEPARATORS.split(answer)):
        if word.lower() in _ALL:
            found = order
        elif word.isdigit():
            if not 1 <= int(word) <= len(order):
                click.echo(msg("setup.no_such_choice", answer=word))
                return []
            found = [order[int(word) - 1]]
        else:
            try:
                client = clients.get_client(word)
            except CnkiError as error:
                suggestion = (error.details or {}).get("suggestion")
                if suggestion:
                    click.echo(msg("setup.no_such_client_guess", answer=word, suggestion=suggestion))
                else:
                    click.echo(msg("setup.no_such_choice", answer=word))
                return []
            if not clients.available(client):
                click.echo(clients.unavailable_message(client))
                return []
            found = [client.id]
        chosen.extend(client_id for client_id in found if client_id not in chosen)
    return chosen


# --- files and links ------------------------------------------------------------------------------


def _write_private(path: Path, text: str) -> None:
    from cnki_mcp.core.files import atomic_replace

    try:
        atomic_replace(path, text.encode("utf-8"), 0o600)
    except OSError as exc:
        raise CnkiError(
            "DISK_WRITE_FAILED", msg("setup.write_failed", path=path, reason=exc.strerror or exc), details={"path": str(path)}
        ) from exc


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
        click.echo(msg("setup.link_open_failed", reason=exc))
        return
    if done.returncode != 0:
        click.echo(msg("setup.link_open_exit", program=argv[0], code=done.returncode))


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
                raise _check_failed(msg("setup.browser_start_failed", path=path, reason=exc.strerror or exc), log_path) from exc
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
            raise _check_failed(msg("setup.browser_exited", code=code), log_path)
        with contextlib.suppress(OSError, ValueError, urllib.error.URLError):
            if _page_targets(port):
                return
        time.sleep(0.2)
    raise _check_failed(msg("setup.browser_no_page", seconds=f"{timeout:g}"), log_path)


def _check_failed(cause: str, log_path: Path) -> CnkiError:
    from cnki_mcp.core.display import browser_output_cause

    with contextlib.suppress(OSError):
        tail = log_path.read_text("utf-8", "replace").strip()[-600:]
        named = browser_output_cause(tail.splitlines(), english=english())
        if named:
            cause = msg("setup.browser_cause", cause=cause, named=named)
        if tail:
            cause = msg("setup.browser_output", cause=cause, tail=tail)
    return CnkiError("BROWSER_CHECK_FAILED", msg("setup.browser_check_failed", cause=cause), details={"cause": cause})


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
