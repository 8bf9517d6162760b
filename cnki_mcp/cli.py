"""Command line: ``cnki-mcp [serve|setup|config|schema|doctor|store|uninstall|version|help]``; no command means serve.

Its words are Chinese, English with an English locale or ``CNKI_LANG=en`` (setup/cli_words.py).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import Awaitable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from cnki_mcp import __version__
from cnki_mcp.core import settings
from cnki_mcp.core.clock import within
from cnki_mcp.core.errors import CnkiError
from cnki_mcp.setup.cli_words import Group, error_line, language, said, say, show_usage_error

if TYPE_CHECKING:
    from cnki_mcp.research.watch import WatchRun
    from cnki_mcp.serving.owner import OwnerInfo

T = TypeVar("T")
SHUTDOWN_SECONDS = 20


def _fail(error: CnkiError) -> None:
    click.echo(error_line(error), err=True)
    sys.exit(1)


def _run(coro: Awaitable[T]) -> T:
    try:
        return asyncio.run(coro)  # type: ignore[arg-type]
    except CnkiError as error:
        _fail(error)
        raise  # unreachable: _fail exits


class _Commands(Group):
    """Loads `setup`, `config` and `uninstall` only when asked for, so `serve` starts without their imports."""

    _LAZY = {"setup": "setup_command", "config": "config_command", "uninstall": "uninstall_command"}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self._LAZY})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in self._LAZY:
            if name == "uninstall":
                from cnki_mcp.setup import uninstall

                return uninstall.uninstall_command
            from cnki_mcp.setup import wizard as setup

            return getattr(setup, self._LAZY[name])
        return super().get_command(ctx, name)


@click.group(
    cls=_Commands,
    invoke_without_command=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    help=say(
        "知网 MCP 服务。由 AI 客户端启动时（不带命令）提供 stdio 服务；在终端里请先运行 cnki-mcp setup。",
        "CNKI MCP server. Started by an AI client (no command) it serves stdio; in a terminal run cnki-mcp setup first.",
    ),
)
@click.version_option(__version__, "--version", "-V", message="%(version)s", help=say("输出版本号。", "Print the version."))
@click.pass_context
def cli(ctx: click.Context) -> None:
    """知网 MCP 服务。不带命令运行时启动 MCP 服务（stdio）。"""
    if ctx.invoked_subcommand is None:
        if sys.stdin.isatty() and sys.stdout.isatty():
            # A person typed it: a server waiting on stdin in silence looks hung.
            click.echo(_terminal_hint(), err=True)
            sys.exit(0)
        ctx.invoke(serve, http=False, host="127.0.0.1", port=8765)


def _terminal_hint() -> str:
    from cnki_mcp.setup.messages import msg

    return msg("cli.terminal_hint")


@cli.command(help=say(
    "启动 MCP 服务（默认 stdio，直到客户端断开）。数据目录已由另一个 cnki-mcp 进程负责时，自动加入它。",
    "Serve MCP (stdio by default, until the client disconnects); joins the cnki-mcp process that owns the data directory.",
))
@click.option("--http", "http", is_flag=True, help=say(
    "改用 streamable HTTP（地址 http://HOST:PORT/mcp，需要访问令牌），供实验室共用或只支持 HTTP 的客户端。",
    "Serve streamable HTTP instead (http://HOST:PORT/mcp, token required), for a lab or HTTP-only clients.",
))
@click.option("--host", default="127.0.0.1", show_default=True, metavar=say("<地址>", "<host>"), help=say(
    "HTTP 监听地址；不是本机地址时，持有令牌的人都能使用这台电脑的浏览器和登录。",
    "HTTP address; when not loopback, everyone with the token uses this computer's browser and login.",
))
@click.option("--port", default=8765, show_default=True, type=click.IntRange(0, 65535), metavar=say("<端口>", "<port>"),
              help=say("HTTP 端口；0 表示任选空闲端口。", "HTTP port; 0 picks a free one."))
@click.pass_context
def serve(ctx: click.Context, http: bool, host: str, port: int) -> None:
    """启动 MCP 服务（默认 stdio，直到客户端断开）。数据目录已由另一个 cnki-mcp 进程负责时，自动加入它。"""
    from cnki_mcp.core import logs

    explicit = {name for name in ("host", "port") if ctx.get_parameter_source(name) is click.core.ParameterSource.COMMANDLINE}
    if explicit and not http:
        from cnki_mcp.setup.messages import msg

        flags = msg("clients.list_separator").join(f"--{name}" for name in sorted(explicit))
        _fail(CnkiError("INVALID_ARGUMENT", msg("cli.http_only", flags=flags)))
    logs.configure(settings.data_root())
    try:
        if http:
            from cnki_mcp.serving.owner import serve_http

            _run(serve_http(settings.data_root(), host, port))
        else:
            _run(_serve())
    finally:
        logs.shutdown()


async def _serve() -> None:
    from cnki_mcp.serving.shared import Shared

    shared = Shared(settings.data_root())
    loop = asyncio.get_running_loop()
    stopping: list[asyncio.Task[None]] = []

    async def stop(signum: int) -> None:
        # Cancelling the server would wait for the stdin reader thread, which only returns when the
        # client closes the pipe; so close what matters (operations, browser, store) and leave.
        from cnki_mcp.core import logs

        try:
            await within(shared.close(), SHUTDOWN_SECONDS)
        finally:
            logs.shutdown()
            os._exit(128 + signum)

    def on_signal(signum: int) -> None:
        if not stopping:  # the first signal starts the shutdown; later ones wait for it
            stopping.append(loop.create_task(stop(signum)))

    if sys.platform != "win32":
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            loop.add_signal_handler(signum, on_signal, signum)
    try:
        await shared.serve_stdio()
    finally:
        await shared.close()


@cli.command(help=say("输出 tools/list 的完整结果（JSON）。", "Print the full tools/list result (JSON)."))
def schema() -> None:
    """输出 tools/list 的完整结果（JSON）。"""
    from cnki_mcp.surface.server import schema_document

    document = _run(schema_document())
    click.echo(json.dumps(document, ensure_ascii=False, indent=2))


@cli.command(help=say(
    "本地检查；不启动浏览器，也不访问知网（--site 除外）。有问题时退出码为 1。",
    "Local checks; starts no browser and visits no CNKI page (except --site). Exit code 1 on a problem.",
))
@click.option("--protocol", is_flag=True, help=say("再启动一个真实的服务子进程，检查 MCP 通信。", "Also start a real server child and check MCP."))
@click.option("--json", "as_json", is_flag=True, help=say("输出 JSON（供程序读取）。", "Print JSON (for programs)."))
@click.option("--site", is_flag=True, help=say(
    "现场检查：按固定路线访问知网（至多 12 次请求，不下载文件），逐项显示页面是否仍如预期。",
    "Site check: a fixed tour of CNKI (at most 12 requests, no downloads) showing whether each page still reads.",
))
@click.option("--report", is_flag=True, help=say(
    "在数据目录 diagnostics/ 下写一份可以附在公开 issue 中的诊断报告（zip）。",
    "Write a diagnostic report (zip) safe to attach to a public issue, under diagnostics/ in the data directory.",
))
def doctor(protocol: bool, as_json: bool, site: bool, report: bool) -> None:
    """本地检查；不启动浏览器，也不访问知网（--site 除外）。有问题时退出码为 1。"""
    if site:
        passed = _run(_doctor_site())
        if not report:
            sys.exit(0 if passed else 1)
    if report:
        from cnki_mcp.setup.messages import msg

        click.echo(msg("cli.report_written", path=_run(_doctor_report())))
        return
    from cnki_mcp.setup.doctor import render, run_checks

    found, checks = _run(run_checks(protocol))
    click.echo(json.dumps(found, ensure_ascii=False, separators=(",", ":")) if as_json else render(found, checks))
    sys.exit(0 if found["verdict"]["ok"] else 1)


async def _doctor_site() -> bool:
    from cnki_mcp.app import App
    from cnki_mcp.core import logs
    from cnki_mcp.fieldcheck.tour import run_in_terminal
    from cnki_mcp.tools import diagnostics

    logs.configure(settings.data_root())
    app = App()
    english = language() == "en"
    try:
        job = await app.start_site_check(diagnostics.BUDGET.of(), english)
        check = await run_in_terminal(await app.jobs(), job, click.echo, english)
    except CnkiError as exc:
        exc.message = said(exc)  # raised again to _fail: English then already
        if exc.code == "DATA_DIRECTORY_IN_USE":
            from cnki_mcp.setup.messages import msg

            exc.message += msg("cli.site_in_client")
        raise
    finally:
        await app.close()
        logs.shutdown()
    return check is not None and check.status == "passed"


async def _doctor_report() -> str:
    from cnki_mcp.app.core import load_checked_config
    from cnki_mcp.fieldcheck.report import build_report

    root = settings.data_root()
    config, _refused = await asyncio.to_thread(load_checked_config, root)  # doctor's route check says why
    return str(await asyncio.to_thread(build_report, root, config))


@cli.command(name="store", help=say(
    "本地文献库（数据目录中的 research.db）：--dump 导出为一个 JSON 文件（可查看，也是备份），--check 运行 SQLite 的完整性检查。"
    "服务运行时也可以使用。有问题时退出码为 1。",
    "The local library (research.db in the data directory): --dump writes it out as one JSON file (to read, and a backup), "
    "--check runs SQLite's integrity check. Works while the server runs. Exit code 1 on a problem.",
))
@click.option("--dump", "dump_to", type=click.Path(dir_okay=False, path_type=Path), metavar="FILE.json", help=say(
    "导出到这个文件（不覆盖已有文件）。", "Write to this file (never over an existing one).",
))
@click.option("--check", is_flag=True, help=say("运行完整性检查，并列出各类记录的数量。", "Run the integrity check and count each kind of record."))
def store_command(dump_to: Path | None, check: bool) -> None:
    """本地文献库：--dump 导出，--check 完整性检查。"""
    from cnki_mcp.setup.messages import msg
    from cnki_mcp.store import db, migrate

    if dump_to is None and not check:
        raise click.UsageError(msg("store.need_option"))
    root = settings.data_root()
    ok = True
    try:
        if dump_to is not None:
            target = Path(os.path.abspath(dump_to))
            counts = migrate.dump(root / db.DB_FILE, target)
            click.echo(msg("store.dumped", path=target, size=_megabytes(os.path.getsize(target)), counts=_counted(counts)))
        if check:
            report = migrate.check(root / db.DB_FILE)
            head = msg("store.head", path=report["path"], size=_megabytes(report["size_bytes"]), version=report["schema_version"])
            ok = not report["problems"]
            if ok:
                click.echo(msg("store.check_passed", head=head, counts=_counted(report["counts"])))
            else:
                listed = "\n".join(f"  {line}" for line in report["problems"][:20])
                click.echo(msg("store.check_failed", head=head, problems=listed))
    except CnkiError as error:
        _fail(error)
    sys.exit(0 if ok else 1)


def _megabytes(size: int) -> str:
    return f"{size / 1e6:.1f}"


def _counted(counts: dict[str, int]) -> str:
    """Each kind of record and how many, in the CLI's language."""
    from cnki_mcp.setup.messages import msg
    from cnki_mcp.store import db

    return msg("clients.list_separator").join(msg("store.count", kind=msg(f"store.kind.{table}"), count=f"{counts.get(table, 0):,}") for table in db.TABLES)


_SCHEDULE = (
    """\b
定时运行（每天 8:00；把 cnki-mcp 换成 `which cnki-mcp` 给出的完整路径）：
  cron（Linux、macOS）：crontab -e，加入一行
    0 8 * * * cnki-mcp watch run >> "$HOME/cnki-watch.log" 2>&1
  launchd（macOS）：把下面四行存为 ~/Library/LaunchAgents/net.cnki-mcp.watch.plist
    <?xml version="1.0" encoding="UTF-8"?><plist version="1.0"><dict><key>Label</key><string>net.cnki-mcp.watch</string>
    <key>ProgramArguments</key><array><string>cnki-mcp</string><string>watch</string><string>run</string></array>
    <key>StartCalendarInterval</key><dict><key>Hour</key><integer>8</integer><key>Minute</key><integer>0</integer></dict>
    </dict></plist>
    然后运行 launchctl load ~/Library/LaunchAgents/net.cnki-mcp.watch.plist
  任务计划程序（Windows，命令提示符）：
    schtasks /Create /SC DAILY /ST 08:00 /TN cnki-mcp-watch /TR "cnki-mcp watch run"
""",
    """\b
Scheduling (daily at 8:00; replace cnki-mcp by the full path `which cnki-mcp` prints):
  cron (Linux, macOS): crontab -e, then add the line
    0 8 * * * cnki-mcp watch run >> "$HOME/cnki-watch.log" 2>&1
  launchd (macOS): save these four lines as ~/Library/LaunchAgents/net.cnki-mcp.watch.plist
    <?xml version="1.0" encoding="UTF-8"?><plist version="1.0"><dict><key>Label</key><string>net.cnki-mcp.watch</string>
    <key>ProgramArguments</key><array><string>cnki-mcp</string><string>watch</string><string>run</string></array>
    <key>StartCalendarInterval</key><dict><key>Hour</key><integer>8</integer><key>Minute</key><integer>0</integer></dict>
    </dict></plist>
    then run launchctl load ~/Library/LaunchAgents/net.cnki-mcp.watch.plist
  Task Scheduler (Windows, Command Prompt):
    schtasks /Create /SC DAILY /ST 08:00 /TN cnki-mcp-watch /TR "cnki-mcp watch run"
""",
)


@cli.group(name="watch", cls=Group, help=say(
    "关注的主题：由定时任务运行（关注由 AI 客户端里的 watch 工具添加）。",
    "Topic watches, for a scheduler (add them with the watch tool in your AI client).",
))
def watch_command() -> None:
    """关注的主题。"""


@watch_command.command(name="run", epilog=say(*_SCHEDULE), help=say(
    "运行关注（不给名称时运行全部）：按发表时间从新到旧读知网列表，只报告上次以来的新论文，"
    "摘要写入数据目录 exports/ 下的 Markdown 文件。有关注未完成时退出码为 1。"
    "数据目录正由 MCP 服务使用时，经那个服务运行（同样遵守限速、预算和人工验证）。",
    "Run the watches (all when none is named): CNKI's listing newest first, reporting only papers new since the last run; "
    "the digest goes to a Markdown file under exports/ in the data directory. Exit code 1 when a watch did not finish. "
    "While an MCP server uses the data directory, the run goes through that server (same pacing, budget and hand-off).",
))
@click.argument("names", nargs=-1, metavar=say("[名称]...", "[NAME]..."))
def watch_run(names: tuple[str, ...]) -> None:
    """运行关注，输出摘要。"""
    from cnki_mcp.core import logs

    logs.configure(settings.data_root())
    try:
        ok = _run(_watch_run(list(names)))
    finally:
        logs.shutdown()
    sys.exit(0 if ok else 1)


async def _watch_run(names: list[str]) -> bool:
    """Each watch run, one after the other, through the server that owns the data directory or else in this
    process; the digest printed and written beside the exports. Whether every run finished."""
    from cnki_mcp.research.watch import digest_file
    from cnki_mcp.serving.owner_calls import live_owner
    from cnki_mcp.setup.messages import msg

    root = settings.data_root()
    owner = await asyncio.to_thread(live_owner, root)
    runs: list[WatchRun] = []
    failures: dict[str, str] = {}
    ran = await (_through_owner(root, owner, names, runs, failures) if owner is not None else _in_process(names, runs, failures))
    if not ran:
        click.echo(msg("watch.none"))
        return True
    for run in runs:
        click.echo(msg("watch.baseline", name=run.name, found=run.found) if run.baseline else msg("watch.new", name=run.name, count=run.found))
        for problem in run.warnings:
            click.echo(msg("watch.warning", code=problem.code, message=problem.message))
        for paper in run.new:
            click.echo(msg("watch.paper", title=paper.title, source=paper.source, date=paper.publication_date))
    for name, why in failures.items():
        click.echo(msg("watch.failed", name=name, why=why), err=True)
    path = await asyncio.to_thread(digest_file, root / "exports", runs, failures)  # Store.exports_dir
    click.echo(msg("watch.digest", path=path))
    return not failures


def _outcome(name: str, view: dict[str, Any], runs: list[WatchRun], failures: dict[str, str]) -> bool:
    """A run's final view (or one that needs the person) read into ``runs`` or ``failures``; whether the
    operation must be cancelled: from a scheduler nobody is there to handle CNKI's check."""
    import msgspec

    from cnki_mcp.research.watch import WatchRun
    from cnki_mcp.setup.messages import msg

    if view["status"] == "completed" and view.get("result") is not None:
        runs.append(msgspec.convert(view["result"], WatchRun))
    elif view["status"] == "awaiting_user":
        failures[name] = msg("watch.needs_person")
        return True
    else:
        failures[name] = "; ".join(f"{problem['code']}: {problem['message']}" for problem in view.get("errors", [])) or view["status"]
    return False


async def _in_process(names: list[str], runs: list[WatchRun], failures: dict[str, str]) -> bool:
    """The runs in this process (nobody owns the data directory); whether there was any watch to run."""
    import msgspec

    from cnki_mcp.app import App
    from cnki_mcp.core.tool_args import OPTION_RANGES
    from cnki_mcp.tools.watch import start_watch, stored_watch

    app = App()
    try:
        store, jobs = await app.store(), await app.jobs()
        chosen = names or list(store.data.watches)
        for name in chosen:
            try:
                job = await start_watch(app, stored_watch(store.data.watches, name), None)
            except CnkiError as error:
                failures[name] = error_line(error)
                continue
            view = await jobs.wait(job, float(OPTION_RANGES["timeout_seconds"][1]))
            if _outcome(name, msgspec.to_builtins(view), runs, failures):
                await jobs.cancel(view.operation_id)
        return bool(chosen)
    finally:
        await app.close()


async def _through_owner(root: Path, owner: OwnerInfo, names: list[str], runs: list[WatchRun], failures: dict[str, str]) -> bool:
    """The runs as tool calls to the owner, followed to their end (or to the person, then cancelled)."""
    from cnki_mcp.serving.owner_calls import owner_session

    async with owner_session(root, owner) as session:
        chosen = names or [watch["name"] for watch in (await session.call("watch", {"action": "list"}))["watches"]]
        for name in chosen:
            try:
                view = await session.call("watch", {"action": "run", "name": name})
                while view["status"] == "running":
                    view = await session.call("operation_status", {"operation_id": view["operation_id"], "wait_seconds": 50})
            except CnkiError as error:
                failures[name] = error_line(error)
                continue
            if _outcome(name, view, runs, failures):
                await session.call("operation_control", {"action": "cancel", "operation_id": view["operation_id"]})
        return bool(chosen)


@cli.command(name=settings.GUARD_COMMAND, hidden=True)
@click.argument("server", type=int)
def browser_guard(server: int) -> None:
    """由服务自己启动：服务结束（哪怕被强行终止）时关闭它启动的浏览器。请勿手动运行。"""
    from cnki_mcp.site import reaper

    reaper.guard(server)


@cli.command(help=say("输出版本号（与 --version 相同）。", "Print the version (same as --version)."))
def version() -> None:
    """输出版本号。"""
    click.echo(__version__)


@cli.command(name="help", help=say("显示用法、全部命令与参数和全部客户端。", "Show the usage, every command and flag, and every client."))
@click.pass_context
def help_command(ctx: click.Context) -> None:
    """显示用法和全部客户端选项。"""
    from cnki_mcp.setup.wizard import help_text

    click.echo(help_text())


def main() -> None:
    try:
        code = cli.main(prog_name="cnki-mcp", standalone_mode=False)
    except click.UsageError as error:
        show_usage_error(error)
    except click.Abort:
        click.echo(say("已取消。", "Cancelled."), err=True)
        sys.exit(1)
    except click.ClickException as error:
        click.echo(say("错误：", "Error: ") + error.format_message(), err=True)
        sys.exit(error.exit_code)
    sys.exit(code if isinstance(code, int) else 0)
