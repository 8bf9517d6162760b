"""`cnki-mcp uninstall`: take out what setup put in, after saying exactly what that is.

The plan lists every client config file whose ``cnki`` entry points at this data directory (each is
edited with a timestamped backup beside it, nothing else in the file changes), and the data directory
itself (login profile, downloads, research) only with ``--data``. Nothing is done before the person
confirms (``--yes`` confirms in advance). A file whose entry cannot be taken out safely (JSON with
comments, the DeepSeek Harness YAML patch) is named with what to remove by hand. The program itself
is removed by its own installer (pip/pipx/uv, or deleting the unpacked folder): the last line says how.
"""

from __future__ import annotations

import json
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import click
import tomlkit

from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.files import replace_if_unchanged, write_backup
from cnki_mcp.setup import clients
from cnki_mcp.setup.cli_words import Command, say
from cnki_mcp.setup.config_edit import SERVER_KEY


@dataclass(frozen=True, slots=True)
class Removal:
    client: str
    name: str
    path: Path
    automatic: bool  # False: the entry has to be removed by hand (the reason is in ``how``)
    how: str


def plan(data_root: Path) -> list[Removal]:
    """What uninstall would remove from the clients' config files; reads files only."""
    found = []
    for item in clients.configured_clients(data_root):
        if item["status"] not in ("current", "disabled"):
            continue  # another installation's entry is not ours to remove
        client = clients.get_client(item["client"])
        path = Path(item["path"])
        automatic, how = _removable(client, path)
        found.append(Removal(client.id, client.name, path, automatic, how))
    return found


def _removable(client: clients.Client, path: Path) -> tuple[bool, str]:
    if client.format == "toml":
        return True, say("删除 [mcp_servers.cnki] 一节", "remove [mcp_servers.cnki]")
    if client.format == "json":
        try:
            json.loads(path.read_text("utf-8").removeprefix("\ufeff"))
        except (OSError, ValueError):
            return False, say(f"文件含注释，请手动删除其中的 {SERVER_KEY} 条目", f"has comments: remove the {SERVER_KEY} entry by hand")
        return True, say(f"删除 {'.'.join((*client.key_path, SERVER_KEY))} 条目", f"remove {'.'.join((*client.key_path, SERVER_KEY))}")
    return False, say("请手动删除 id 为 mcp-cnki 的补丁项", "remove the mcp-cnki patch item by hand")


def remove_entry(removal: Removal) -> Path:
    """Take the ``cnki`` entry out of one config file; returns the backup of its earlier content."""
    client = clients.get_client(removal.client)
    old = removal.path.read_bytes()
    text = old.decode("utf-8")
    if client.format == "toml":
        document = tomlkit.parse(text)
        table = document.get(client.key_path[0])
        if table is not None:
            table.pop(SERVER_KEY, None)
        new = tomlkit.dumps(document)
    else:
        data = json.loads(text.removeprefix("\ufeff"))
        node = data
        for key in client.key_path:
            node = node.get(key, {}) if isinstance(node, dict) else {}
        if isinstance(node, dict):
            node.pop(SERVER_KEY, None)
        new = json.dumps(data, ensure_ascii=False, indent=2) + "\n"
    backup = write_backup(removal.path, old)
    if not replace_if_unchanged(removal.path, old, new.encode("utf-8")):
        raise CnkiError(
            "CONFIG_CHANGED",
            f"{removal.path} 在修改期间被其他程序改动，未覆盖；请关闭 {removal.name} 后重新运行 cnki-mcp uninstall。",
            details={"path": str(removal.path)},
        )
    return backup


def _program_hint() -> str:
    if getattr(sys, "frozen", False):
        return say("最后删除解压出的 cnki-mcp 文件夹即可删除程序本身。", "Finally delete the unpacked cnki-mcp folder to remove the program.")
    return say(
        "程序本身用安装它的方式删除：pipx uninstall cnki-browser-mcp、uv tool uninstall cnki-browser-mcp、"
        "pip uninstall cnki-browser-mcp，源码安装则删除克隆的文件夹（含 .venv）。",
        "Remove the program the way it was installed: pipx uninstall cnki-browser-mcp, uv tool uninstall "
        "cnki-browser-mcp, pip uninstall cnki-browser-mcp, or delete the cloned folder (with .venv).",
    )


@click.command(cls=Command, name="uninstall", short_help=say(
    "删除客户端里的 cnki 条目（可连同数据目录）", "Remove the cnki client entries (and the data)"
), help=say(
    "删除 setup 写入各客户端配置的 cnki 条目（先备份）；加 --data 时连数据目录（含登录状态）一起删除。先列出，确认后才执行。",
    "Remove the cnki entries setup wrote into client configs (with backups); with --data also the data directory "
    "(login included). Lists first, acts after confirmation.",
))
@click.option("--data", "with_data", is_flag=True, help=say(
    "同时删除数据目录：登录状态、下载的文件、检索记录。", "Also delete the data directory: login, downloads, searches."
))
@click.option("--yes", "-y", is_flag=True, help=say("不再询问，直接执行。", "Do it without asking."))
def uninstall_command(with_data: bool, yes: bool) -> None:
    from cnki_mcp.core.settings import data_root

    root = data_root()
    removals = plan(root)
    click.echo(say("cnki-mcp uninstall 将要删除：", "cnki-mcp uninstall will remove:"))
    for item in removals:
        mark = "-" if item.automatic else "!"
        click.echo(f"  {mark} {item.name}：{item.path}（{item.how}）")
    if not removals:
        click.echo(say("  （没有客户端配置指向这个数据目录）", "  (no client config points at this data directory)"))
    if with_data:
        click.echo(say(f"  - 数据目录 {root}（登录状态、下载的文件、检索记录）", f"  - the data directory {root} (login, downloads, searches)"))
    else:
        click.echo(say(f"  数据目录 {root} 保留（加 --data 才删除）。", f"  The data directory {root} is kept (add --data to delete it)."))
    automatic = [item for item in removals if item.automatic]
    if not automatic and not with_data:
        click.echo(say("没有可以自动删除的内容。", "Nothing to remove automatically.") + _program_hint())
        return
    if not yes:
        click.echo(say("确定删除吗？[y/N] ", "Remove these? [y/N] "), nl=False)
        answer = sys.stdin.readline().strip().lower()
        if answer not in ("y", "yes", "是"):
            click.echo(say("已取消，没有改动任何文件。", "Cancelled; nothing was changed."))
            return
    for item in automatic:
        try:
            backup = remove_entry(item)
        except (OSError, ValueError, CnkiError) as exc:
            click.echo(say(f"未能修改 {item.path}：{exc}", f"Could not change {item.path}: {exc}"), err=True)
            continue
        click.echo(say(f"已从 {item.path} 删除 cnki 条目（原文件备份为 {backup}）", f"Removed cnki from {item.path} (backup {backup})"))
    if with_data:
        shutil.rmtree(root, ignore_errors=True)
        click.echo(say(f"已删除数据目录 {root}", f"Deleted the data directory {root}") if not root.exists()
                   else say(f"数据目录 {root} 没有完全删除（可能有程序正在使用它）。", f"{root} was not fully deleted (in use?)."))
    click.echo(_program_hint())
