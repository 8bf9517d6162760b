"""`cnki-mcp uninstall`: take out what setup put in, after saying exactly what that is.

The plan lists every client config file whose ``cnki`` entry points at this data directory (each is
edited with a timestamped backup beside it, nothing else in the file changes), and the data directory
itself (login profile, downloads, research) only with ``--data``. Nothing is done before the person
confirms (``--yes`` confirms in advance). A file whose entry cannot be taken out safely (JSON with
comments, the DeepSeek Harness YAML patch) is named with what to remove by hand. A config file setup
created (listed in created.json, see created.py) that holds nothing else once the entry is out is
deleted instead, with setup's backups of it and the empty folders setup created above it, so the client
no longer looks installed. The program itself is removed by its own installer (pip/pipx/uv, or deleting
the unpacked folder): the last line says how.
"""

from __future__ import annotations

import json
import shutil
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import click
import tomlkit

from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.files import replace_if_unchanged, write_backup
from cnki_mcp.setup import clients
from cnki_mcp.setup.cli_words import Command, say
from cnki_mcp.setup.config_edit import SERVER_KEY
from cnki_mcp.setup.created import bare, load, tidy
from cnki_mcp.setup.messages import msg

_YES = ("y", "yes", "是")  # answers typed, in either language


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
        return True, msg("uninstall.toml")
    if client.format == "json":
        try:
            json.loads(path.read_text("utf-8").removeprefix("\ufeff"))
        except (OSError, ValueError):
            return False, msg("uninstall.comments", key=SERVER_KEY)
        return True, msg("uninstall.json", key=".".join((*client.key_path, SERVER_KEY)))
    return False, msg("uninstall.yaml")


def remove_entry(removal: Removal, created: bool = False) -> Path | None:
    """Take the ``cnki`` entry out of one config file; returns the backup of its earlier content.

    ``created``: setup created the file; when nothing else is left in it, it is deleted instead (``None``)."""
    client = clients.get_client(removal.client)
    old = removal.path.read_bytes()
    text = old.decode("utf-8")
    if client.format == "toml":
        document = tomlkit.parse(text)
        table = document.get(client.key_path[0])
        if table is not None:
            table.pop(SERVER_KEY, None)
        new = tomlkit.dumps(document)
        rest: object = tomllib.loads(new)
    else:
        rest = data = json.loads(text.removeprefix("\ufeff"))
        node = data
        for key in client.key_path:
            node = node.get(key, {}) if isinstance(node, dict) else {}
        if isinstance(node, dict):
            node.pop(SERVER_KEY, None)
        new = json.dumps(data, ensure_ascii=False, indent=2) + "\n"
    if created and bare(rest):
        if removal.path.read_bytes() != old:
            raise _changed(removal)
        removal.path.unlink()
        return None
    backup = write_backup(removal.path, old)
    if not replace_if_unchanged(removal.path, old, new.encode("utf-8")):
        raise _changed(removal)
    return backup


def _changed(removal: Removal) -> CnkiError:
    return CnkiError(
        "CONFIG_CHANGED",
        msg("uninstall.changed_meanwhile", path=removal.path, client=removal.name),
        details={"path": str(removal.path)},
    )


def _program_hint() -> str:
    if getattr(sys, "frozen", False):
        return msg("uninstall.program_frozen")
    return msg("uninstall.program")


@click.command(cls=Command, name="uninstall", short_help=say(
    "删除客户端里的 cnki 条目（可连同数据目录）", "Remove the cnki client entries (and the data)"
), help=say(
    "删除 setup 写入各客户端配置的 cnki 条目（先备份）；setup 新建的配置文件和文件夹在没有别的内容时一并删除；"
    "加 --data 时连数据目录（含登录状态）一起删除。先列出，确认后才执行。",
    "Remove the cnki entries setup wrote into client configs (with backups); a config file or folder setup created "
    "goes too when nothing else is in it; with --data also the data directory (login included). Lists first, acts "
    "after confirmation.",
))
@click.option("--data", "with_data", is_flag=True, help=say(
    "同时删除数据目录：登录状态、下载的文件、检索记录。", "Also delete the data directory: login, downloads, searches."
))
@click.option("--yes", "-y", is_flag=True, help=say("不再询问，直接执行。", "Do it without asking."))
def uninstall_command(with_data: bool, yes: bool) -> None:
    from cnki_mcp.core.settings import data_root

    root = data_root()
    removals = plan(root)
    click.echo(msg("uninstall.heading"))
    for item in removals:
        mark = "-" if item.automatic else "!"
        click.echo(msg("uninstall.item", mark=mark, client=item.name, path=item.path, how=item.how))
    if not removals:
        click.echo(msg("uninstall.no_entries"))
    click.echo(msg("uninstall.data" if with_data else "uninstall.data_kept", path=root))
    automatic = [item for item in removals if item.automatic]
    if not automatic and not with_data:
        click.echo(msg("uninstall.nothing", program=_program_hint()))
        return
    if not yes:
        click.echo(msg("uninstall.ask"), nl=False)
        answer = sys.stdin.readline().strip().lower()
        if answer not in _YES:
            click.echo(msg("uninstall.cancelled"))
            return
    created = load(root).files
    for item in automatic:
        try:
            backup = remove_entry(item, created=str(item.path) in created)
        except (OSError, ValueError, CnkiError) as exc:
            click.echo(msg("uninstall.failed", path=item.path, error=exc), err=True)
            continue
        if backup is None:
            tidy(root, item.path)
            click.echo(msg("uninstall.removed_created", path=item.path))
        else:
            click.echo(msg("uninstall.removed", path=item.path, backup=backup))
    if with_data:
        shutil.rmtree(root, ignore_errors=True)
        click.echo(msg("uninstall.data_deleted" if not root.exists() else "uninstall.data_left", path=root))
    click.echo(_program_hint())
