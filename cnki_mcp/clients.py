"""The 27 MCP clients cnki-mcp can be connected to, and how each one is configured.

``CLIENTS`` is the single table: for every client its id, display name, how it is configured
(``write`` into its config file, one-click import ``link``, or ``paste`` by hand), where its config
file lives on macOS, Windows and Linux, the format and key path of that file, the extra fields its
server entry needs and where a pasted snippet goes.

Writing a client's config keeps everything the user already has. JSON files (comments and trailing
commas tolerated, as in VS Code's) and the DeepSeek Harness YAML patch are changed by small text
edits at exactly the places that hold the ``cnki`` entry; Codex's TOML goes through tomlkit, which
keeps comments and layout. Every result is parsed again and compared with the intended document
before anything is written, a timestamped backup is made first and the new file replaces the old
one atomically. A file that cannot be parsed is never touched.
"""

from __future__ import annotations

import base64
import copy
import json
import os
import re
import secrets
import sys
import time
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote_plus

import tomlkit
import yaml

from cnki_mcp.errors import CnkiError

SERVER_KEY = "cnki"
DSH_ENTRY_ID = "mcp-cnki"
SYSTEMS = ("darwin", "windows", "linux")

Mode = Literal["write", "link", "paste"]
Format = Literal["json", "toml", "yaml"]


@dataclass(frozen=True, slots=True)
class Location:
    """Where a client keeps its config file.

    ``parts`` lie below ``base`` (the home directory, or the per-OS application-data directory).
    When the environment variable ``env`` is set, the file is ``$env/<env_parts>`` instead.
    ``must_exist``: the client creates the folder from its own template on first run, so setup
    must not create it.
    """

    parts: tuple[str, ...]
    base: Literal["home", "appdata"] = "home"
    env: str = ""
    env_parts: tuple[str, ...] = ()
    systems: tuple[str, ...] = SYSTEMS
    must_exist: bool = False


@dataclass(frozen=True, slots=True)
class Client:
    id: str
    name: str
    mode: Mode
    format: Format = "json"
    key_path: tuple[str, ...] = ("mcpServers",)
    extras: tuple[tuple[str, Any], ...] = ()
    location: Location | None = None
    hint: str = ""
    link: Callable[[dict[str, Any]], str] | None = None

    @property
    def extension(self) -> str:
        return self.format

    @property
    def snippet_filename(self) -> str:
        return f"cnki-{self.id}.{self.extension}"


# --- import links ---------------------------------------------------------------------------------


def _compact(value: Any) -> str:
    return _html_safe(json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":")))


def _b64(text: str) -> str:
    return base64.b64encode(text.encode("utf-8")).decode("ascii")


def _qesc(text: str) -> str:
    return quote_plus(text, safe="")


def _qoder_link(entry: dict[str, Any]) -> str:
    # Qoder query-escapes the JSON before base64, and the base64 is escaped again in the URL.
    return "qoder://aicoding.aicoding-deeplink/mcp/add?name=cnki&config=" + _qesc(_b64(_qesc(_compact(entry))))


def _trae_link(entry: dict[str, Any]) -> str:
    return "trae://trae.ai-ide/mcp-import?type=stdio&name=cnki&config=" + _qesc(_b64(_compact(entry)))


def _chatbox_link(entry: dict[str, Any]) -> str:
    return "chatbox://mcp/install?server=" + _qesc(_b64(_compact({**entry, "name": SERVER_KEY})))


def _cherry_link(entry: dict[str, Any]) -> str:
    return "cherrystudio://mcp/install?servers=" + _qesc(_b64(_compact({"mcpServers": {SERVER_KEY: entry}})))


# --- the registry (order is the menu and `help` order) --------------------------------------------

_STDIO = (("type", "stdio"),)
_LONG_MS = (("timeout", 900000),)
_CLINE = (("disabled", False), ("timeout", 900))
_DSH_HINT_DESKTOP = "先运行一次 DeepSeek Harness 桌面版，再重新执行 setup"
_DSH_HINT_WEB = "先运行一次 dsh web，再重新执行 setup"

CLIENTS: tuple[Client, ...] = (
    Client("claude-desktop", "Claude Desktop", "write",
           location=Location(("Claude", "claude_desktop_config.json"), base="appdata", systems=("darwin", "windows"))),
    Client("claude-code", "Claude Code", "write", extras=_STDIO,
           location=Location((".claude.json",), env="CLAUDE_CONFIG_DIR", env_parts=(".claude.json",))),
    Client("codex", "Codex", "write", format="toml", key_path=("mcp_servers",),
           location=Location((".codex", "config.toml"), env="CODEX_HOME", env_parts=("config.toml",))),
    Client("cursor", "Cursor", "write", extras=_STDIO, location=Location((".cursor", "mcp.json"))),
    Client("gemini", "Gemini CLI", "write", extras=_LONG_MS, location=Location((".gemini", "settings.json"))),
    Client("dsh-desktop", "DeepSeek Harness 桌面版", "write", format="yaml", key_path=(),
           location=Location((".dsh", "profiles", "desktop", "cordis.patch.yml"), env="DSH_HOME",
                             env_parts=("profiles", "desktop", "cordis.patch.yml"), must_exist=True),
           hint=_DSH_HINT_DESKTOP),
    Client("dsh-web", "DeepSeek Harness 网页版（dsh web）", "write", format="yaml", key_path=(),
           location=Location((".dsh", "profiles", "web", "cordis.patch.yml"), env="DSH_HOME",
                             env_parts=("profiles", "web", "cordis.patch.yml"), must_exist=True),
           hint=_DSH_HINT_WEB),
    Client("workbuddy", "WorkBuddy", "write", location=Location((".workbuddy", "mcp.json"))),
    Client("zcode", "ZCode", "write", key_path=("mcp", "servers"), extras=_STDIO,
           location=Location((".zcode", "cli", "config.json"))),
    Client("kimi-code", "Kimi Code（CLI 与桌面版）", "write",
           location=Location((".kimi-code", "mcp.json"), env="KIMI_CODE_HOME", env_parts=("mcp.json",))),
    Client("codebuddy", "CodeBuddy CLI", "write", extras=_STDIO, location=Location((".codebuddy", ".mcp.json"))),
    Client("qwen-code", "Qwen Code", "write", extras=_LONG_MS, location=Location((".qwen", "settings.json"))),
    Client("qoder-cli", "Qoder CLI", "write", extras=_STDIO, location=Location((".qoder", "settings.json"))),
    Client("qoder", "Qoder IDE", "link", hint="Qoder 设置 → MCP → My Servers → + Add", link=_qoder_link),
    Client("trae", "Trae", "link", hint="Trae 设置 → MCP → 添加 → 手动添加", link=_trae_link),
    Client("trae-cn", "Trae CN", "paste", hint="Trae CN 设置 → MCP → 添加 → 手动添加"),
    Client("lingma", "通义灵码", "paste", hint="通义灵码 个人设置 → MCP 服务 → + → 配置文件添加"),
    Client("codebuddy-ide", "CodeBuddy IDE", "paste", extras=_STDIO, hint="CodeBuddy 设置 → MCP → Add MCP"),
    Client("comate", "文心快码 Comate", "paste", extras=_STDIO, hint="文心快码的 MCP 设置（mcp.json）"),
    Client("chatbox", "Chatbox", "link", hint="Chatbox 设置 → MCP → 添加服务器", link=_chatbox_link),
    Client("cherry-studio", "Cherry Studio", "link", hint="Cherry Studio 设置 → MCP 服务器 → 从 JSON 导入",
           link=_cherry_link),
    Client("vscode", "VS Code / GitHub Copilot", "paste", key_path=("servers",), extras=_STDIO,
           hint="VS Code 命令面板 “MCP: Open User Configuration”"),
    Client("windsurf", "Windsurf", "paste", hint="Windsurf 的 MCP 配置（mcp_config.json）"),
    Client("cline", "Cline", "paste", extras=_CLINE, hint="Cline 的 MCP Servers → Configure"),
    Client("roo", "Roo Code", "paste", extras=_CLINE, hint="Roo Code 的 MCP 设置 → Edit Global MCP"),
    Client("lobehub", "LobeHub / LobeChat", "paste", hint="LobeHub 插件设置 → 自定义 MCP → 导入 JSON"),
    Client("generic", "其他 stdio 客户端（通用 JSON）", "paste", hint="客户端的 MCP 设置"),
)

_BY_ID: dict[str, Client] = {client.id: client for client in CLIENTS}


def get_client(client_id: str) -> Client:
    client = _BY_ID.get(client_id.strip().lower() if isinstance(client_id, str) else "")
    if client is None:
        raise CnkiError(
            "UNKNOWN_CLIENT",
            f"未知的客户端“{client_id}”；用 cnki-mcp help 查看全部选项。",
            details={"client": client_id},
        )
    return client


# --- the server command and its entry -------------------------------------------------------------


def server_command() -> list[str]:
    """The argv a client should run to start this server over stdio."""
    if getattr(sys, "frozen", False):
        return [os.path.abspath(sys.executable), "serve"]
    # Not resolved: a virtualenv's python is a symlink that only works under its own path.
    scripts = Path(os.path.abspath(sys.executable)).parent
    for name in ("cnki-mcp.exe", "cnki-mcp") if sys.platform == "win32" else ("cnki-mcp",):
        script = scripts / name
        if script.is_file():
            return [str(script), "serve"]
    return [os.path.abspath(sys.executable), "-m", "cnki_mcp", "serve"]


def entry(client_id: str, data_root: Path | str, command: list[str] | None = None) -> dict[str, Any]:
    """The server entry the client's config holds under ``cnki``, with that client's extra fields."""
    client = get_client(client_id)
    argv = command or server_command()
    value: dict[str, Any] = {
        "args": list(argv[1:]),
        "command": argv[0],
        "env": {"CNKI_DATA_DIR": str(data_root)},
    }
    value.update(client.extras)
    return dict(sorted(value.items()))


def _html_safe(text: str) -> str:
    # Byte-compatible with the reference's JSON encoder, which escapes these for HTML embedding.
    return (
        text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
        .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    )


def _nest(key_path: tuple[str, ...], value: Any) -> Any:
    for key in reversed(key_path):
        value = {key: value}
    return value


def snippet(client_id: str, data_root: Path | str, command: list[str] | None = None) -> str:
    """The configuration text for a client, exactly as `config <client>` prints it."""
    client = get_client(client_id)
    value = entry(client.id, data_root, command)
    if client.format == "toml":
        return (
            f"[mcp_servers.{SERVER_KEY}]\n"
            f"command = {_quoted(value['command'])}\n"
            f"args = {_flow_list(value['args'], ', ')}\n"
            "startup_timeout_sec = 30\n"
            "tool_timeout_sec = 900\n"
            "\n"
            f"[mcp_servers.{SERVER_KEY}.env]\n"
            f"CNKI_DATA_DIR = {_quoted(value['env']['CNKI_DATA_DIR'])}\n"
        )
    if client.format == "yaml":
        return (
            "# CNKI Enhanced MCP\n"
            "- insert:\n"
            f"    - id: {DSH_ENTRY_ID}\n"
            "      name: '@deepseek-ai/dsh-mcp-client'\n"
            "      config:\n"
            f"        serverName: {SERVER_KEY}\n"
            "        transport: stdio\n"
            f"        command: {_quoted(value['command'])}\n"
            f"        args: {_flow_list(value['args'], ',')}\n"
            f"        env: {_compact(value['env'])}\n"
            "        toolCallTimeoutMs: 900000\n"
            "        failOnStartupError: false\n"
        )
    document = _nest(client.key_path, {SERVER_KEY: value})
    return _html_safe(json.dumps(document, ensure_ascii=False, sort_keys=True, indent=2)) + "\n"


def _quoted(text: str) -> str:
    # A JSON string is also a valid TOML basic string and a YAML double-quoted scalar.
    return _html_safe(json.dumps(text, ensure_ascii=False))


def _flow_list(items: list[str], separator: str) -> str:
    return "[" + separator.join(_quoted(item) for item in items) + "]"


def import_link(client_id: str, data_root: Path | str, command: list[str] | None = None) -> str | None:
    """The one-click import link of a link client (``None`` for the others)."""
    client = get_client(client_id)
    if client.link is None:
        return None
    return client.link(entry(client.id, data_root, command))


# --- where config files live ----------------------------------------------------------------------


def normalise_os(os_name: str | None = None) -> str:
    name = (os_name or sys.platform).lower()
    if name in ("darwin", "macos", "mac", "osx"):
        return "darwin"
    if name in ("windows", "win32", "cygwin", "win"):
        return "windows"
    return "linux"


def _home(system: str, env: Mapping[str, str]) -> Path:
    keys = ("USERPROFILE", "HOME") if system == "windows" else ("HOME",)
    for key in keys:
        if env.get(key, "").strip():
            return Path(env[key])
    return Path.home()


def app_data_dir(os_name: str | None = None, env: Mapping[str, str] | None = None, home: Path | None = None) -> Path:
    """The per-user application configuration directory of an OS."""
    system = normalise_os(os_name)
    env = os.environ if env is None else env
    home = Path(home) if home is not None else _home(system, env)
    if system == "darwin":
        return home / "Library" / "Application Support"
    if system == "windows":
        roaming = env.get("APPDATA", "").strip()
        return Path(roaming) if roaming else home / "AppData" / "Roaming"
    xdg = env.get("XDG_CONFIG_HOME", "").strip()
    return Path(xdg) if xdg and os.path.isabs(xdg) else home / ".config"


def config_path(
    client_id: str,
    os_name: str | None = None,
    env: Mapping[str, str] | None = None,
    home: Path | None = None,
) -> Path | None:
    """The config file setup writes for a client on an OS, or ``None`` if it is not written automatically."""
    client = get_client(client_id)
    system = normalise_os(os_name)
    location = client.location
    if location is None or system not in location.systems:
        return None
    env = os.environ if env is None else env
    if location.env and env.get(location.env, "").strip():
        return Path(env[location.env].strip()).joinpath(*location.env_parts)
    home = Path(home) if home is not None else _home(system, env)
    base = home if location.base == "home" else app_data_dir(system, env, home)
    return base.joinpath(*location.parts)


def how_configured(client_id: str, os_name: str | None = None) -> str:
    """A short Chinese label for the way this client gets its config on this OS."""
    client = get_client(client_id)
    if client.mode == "link":
        return "一键导入链接"
    if client.location is not None and normalise_os(os_name) in client.location.systems:
        return "可自动写入（需先运行过一次）" if client.location.must_exist else "可自动写入"
    return "粘贴配置"


# --- what is configured already (for doctor) ------------------------------------------------------


def _read_entry(client: Client, text: str) -> Any:
    if client.format == "toml":
        node: Any = tomllib.loads(text)
    elif client.format == "yaml":
        found = _find_dsh_entry(yaml.safe_load(text))
        return found.get("config") if found is not None else None
    else:
        node = parse_jsonc(text.removeprefix("\ufeff"))
    for key in (*client.key_path, SERVER_KEY):
        if not isinstance(node, dict):
            return None
        node = node.get(key)
    return node


def configured_clients(
    data_root: Path | str,
    command: list[str] | None = None,
    os_name: str | None = None,
    env: Mapping[str, str] | None = None,
    home: Path | None = None,
) -> list[dict[str, Any]]:
    """Every auto-write client whose config file holds a ``cnki`` entry, and whether it points here.

    ``status`` is ``current`` (this program and data directory), ``different`` (another
    installation or data directory) or ``unreadable``. Reads files only; changes nothing.
    """
    wanted = entry("generic", data_root, command)
    report: list[dict[str, Any]] = []
    for client in CLIENTS:
        path = config_path(client.id, os_name, env, home)
        if path is None or not path.is_file():
            continue
        item: dict[str, Any] = {"client": client.id, "name": client.name, "path": str(path)}
        try:
            found = _read_entry(client, path.read_text("utf-8"))
        except (OSError, UnicodeDecodeError, ValueError, yaml.YAMLError) as exc:
            report.append({**item, "status": "unreadable", "message": f"无法读取或解析：{exc}".replace("\n", " ")})
            continue
        if found is None:
            continue
        found_env = found.get("env") if isinstance(found, dict) else None
        current = (
            isinstance(found, dict)
            and found.get("command") == wanted["command"]
            and found.get("args") == wanted["args"]
            and isinstance(found_env, dict)
            and found_env.get("CNKI_DATA_DIR") == wanted["env"]["CNKI_DATA_DIR"]
        )
        if current:
            report.append({**item, "status": "current"})
        else:
            report.append({
                **item,
                "status": "different",
                "message": "cnki 条目指向另一个程序或数据目录；重新运行 cnki-mcp setup 可以更新。",
            })
    return report


# --- writing a client's config --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConfigWrite:
    path: Path
    backup: Path | None
    changed: bool


def write_client_config(
    client_id: str,
    data_root: Path | str,
    path: Path | str,
    command: list[str] | None = None,
) -> ConfigWrite:
    """Merge the ``cnki`` entry into the client's config file at ``path``.

    Everything else in the file is kept. An unparsable file is left untouched
    (CLIENT_CONFIG_INVALID); a symlink is refused (CONFIG_SYMLINK); a DeepSeek Harness profile
    folder that does not exist yet gives CLIENT_NOT_INITIALIZED; a file changed by someone else
    while we worked is not overwritten (CONFIG_CHANGED).
    """
    client = get_client(client_id)
    target = Path(path)
    if target.is_symlink():
        raise CnkiError(
            "CONFIG_SYMLINK",
            f"{target} 是符号链接，为安全起见未做改动；请把配置片段手动粘贴到它指向的文件中。",
            details={"path": str(target)},
        )
    if client.location is not None and client.location.must_exist and not target.parent.is_dir():
        raise CnkiError(
            "CLIENT_NOT_INITIALIZED",
            f"{client.name} 的配置目录 {target.parent} 还不存在：{client.hint}。",
            details={"client": client.id, "path": str(target)},
        )
    try:
        old_bytes = target.read_bytes()
    except FileNotFoundError:
        old_bytes = b""
    except OSError as exc:
        raise _invalid(target, f"无法读取：{exc.strerror or exc}") from exc
    try:
        old_text = old_bytes.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _invalid(target, "不是 UTF-8 文本") from exc

    value = entry(client.id, data_root, command)
    merge = {"json": _merge_json, "toml": _merge_toml, "yaml": _merge_yaml}[client.format]
    new_text = merge(old_text, client, value, target)
    new_bytes = new_text.encode("utf-8")
    if new_bytes == old_bytes:
        return ConfigWrite(target, None, False)

    try:
        target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise _disk_failed(target.parent, exc) from exc
    backup = _backup(target, old_bytes) if old_bytes.strip() else None
    _replace_if_unchanged(target, old_bytes, new_bytes)
    return ConfigWrite(target, backup, True)


def _invalid(path: Path, why: str) -> CnkiError:
    return CnkiError(
        "CLIENT_CONFIG_INVALID",
        f"客户端配置文件 {path} 无法处理（{why}），未做改动；请修正后重试，或手动粘贴配置片段。",
        details={"path": str(path), "reason": why},
    )


def _disk_failed(path: Path, exc: OSError) -> CnkiError:
    return CnkiError("DISK_WRITE_FAILED", f"写入 {path} 失败：{exc.strerror or exc}。", details={"path": str(path)})


def _backup(target: Path, data: bytes) -> Path:
    now = time.time_ns()
    stamp = datetime.fromtimestamp(now / 1e9).strftime("%Y%m%d-%H%M%S")
    backup = target.with_name(f"{target.name}.cnki-backup-{stamp}.{now % 1_000_000_000:09d}")
    try:
        fd = os.open(backup, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
    except OSError as exc:
        raise _disk_failed(backup, exc) from exc
    return backup


def _replace_if_unchanged(target: Path, expected: bytes, data: bytes) -> None:
    temp = target.with_name(f"{target.name}.cnki-{secrets.token_hex(12)}")
    try:
        mode = target.stat().st_mode & 0o777
    except FileNotFoundError:
        mode = 0o600
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if sys.platform != "win32":
            os.chmod(temp, mode)
        try:
            current = target.read_bytes()
        except FileNotFoundError:
            current = b""
        if current != expected:
            raise CnkiError(
                "CONFIG_CHANGED",
                f"{target} 在写入期间被其他程序修改，未覆盖；请关闭该客户端后重新执行 setup。",
                details={"path": str(target)},
            )
        os.replace(temp, target)
    except OSError as exc:
        raise _disk_failed(target, exc) from exc
    finally:
        try:
            os.unlink(temp)
        except FileNotFoundError:
            pass


def _edits(existing: Any, value: dict[str, Any], base: tuple[str, ...]) -> list[tuple[tuple[str, ...], Any]]:
    """The (path, value) settings that bring an existing ``cnki`` entry up to date.

    ``command``, ``args`` and ``CNKI_DATA_DIR`` always follow this installation; other env
    variables and keys the user added stay, and extra fields the user already tuned (timeouts,
    ``disabled``) are only added when missing.
    """
    if not isinstance(existing, dict):
        return [(base, value)]
    changes: list[tuple[tuple[str, ...], Any]] = []
    for key in ("command", "args"):
        if existing.get(key) != value[key]:
            changes.append((base + (key,), value[key]))
    env = existing.get("env")
    if not isinstance(env, dict):
        changes.append((base + ("env",), value["env"]))
    elif env.get("CNKI_DATA_DIR") != value["env"]["CNKI_DATA_DIR"]:
        changes.append((base + ("env", "CNKI_DATA_DIR"), value["env"]["CNKI_DATA_DIR"]))
    for key, extra in value.items():
        if key not in ("command", "args", "env") and key not in existing:
            changes.append((base + (key,), extra))
    return changes


def _apply(document: Any, path: tuple[str, ...], value: Any) -> None:
    node = document
    for key in path[:-1]:
        node = node.setdefault(key, {})
    node[path[-1]] = copy.deepcopy(value)


def _walk_objects(document: Any, key_path: tuple[str, ...], target: Path) -> Any:
    """The value at ``key_path + (cnki,)`` (or None), checking every level on the way is an object."""
    if not isinstance(document, dict):
        raise _invalid(target, "顶层不是对象")
    node: Any = document
    for depth, key in enumerate(key_path):
        node = node.get(key)
        if node is None:
            return None
        if not isinstance(node, dict):
            raise _invalid(target, f"“{'.'.join(key_path[: depth + 1])}”不是对象，结构不兼容")
    return node.get(SERVER_KEY)


# --- JSON with comments -----------------------------------------------------------------------------


class _JsonSyntaxError(ValueError):
    def __init__(self, message: str, position: int) -> None:
        super().__init__(message)
        self.position = position


@dataclass(slots=True)
class _Node:
    start: int
    end: int
    value: Any
    members: list[_Member] | None = None  # objects only


@dataclass(slots=True)
class _Member:
    key: str
    key_start: int
    node: _Node


_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")


class _JsoncParser:
    """JSON plus // and /* */ comments and trailing commas, keeping the offsets of every value."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def parse(self) -> _Node:
        self._skip()
        try:
            node = self._value()
        except RecursionError:
            raise _JsonSyntaxError("嵌套层数过多", self.pos) from None
        self._skip()
        if self.pos != len(self.text):
            raise _JsonSyntaxError("文档结束后还有多余内容", self.pos)
        return node

    def _skip(self) -> None:
        text = self.text
        while self.pos < len(text):
            char = text[self.pos]
            if char in " \t\r\n":
                self.pos += 1
            elif text.startswith("//", self.pos):
                newline = text.find("\n", self.pos)
                self.pos = len(text) if newline < 0 else newline + 1
            elif text.startswith("/*", self.pos):
                close = text.find("*/", self.pos + 2)
                if close < 0:
                    raise _JsonSyntaxError("注释 /* 没有结束", self.pos)
                self.pos = close + 2
            else:
                return

    def _value(self) -> _Node:
        if self.pos >= len(self.text):
            raise _JsonSyntaxError("内容不完整", self.pos)
        char = self.text[self.pos]
        if char == "{":
            return self._object()
        if char == "[":
            return self._array()
        if char == '"':
            start = self.pos
            text = self._string()
            return _Node(start, self.pos, text)
        for word, literal in (("true", True), ("false", False), ("null", None)):
            if self.text.startswith(word, self.pos):
                self.pos += len(word)
                return _Node(self.pos - len(word), self.pos, literal)
        match = _NUMBER.match(self.text, self.pos)
        if match is None:
            raise _JsonSyntaxError(f"无法识别的字符 {char!r}", self.pos)
        self.pos = match.end()
        return _Node(match.start(), match.end(), json.loads(match.group()))

    def _string(self) -> str:
        try:
            value, self.pos = json.decoder.scanstring(self.text, self.pos + 1, True)
        except json.JSONDecodeError as exc:
            raise _JsonSyntaxError("字符串无效", exc.pos) from None
        return value

    def _object(self) -> _Node:
        start = self.pos
        self.pos += 1
        members: list[_Member] = []
        value: dict[str, Any] = {}
        comma = True
        while True:
            self._skip()
            if self.text.startswith("}", self.pos):
                self.pos += 1
                return _Node(start, self.pos, value, members)
            if not comma:
                raise _JsonSyntaxError("缺少逗号", self.pos)
            if not self.text.startswith('"', self.pos):
                raise _JsonSyntaxError("对象的键必须是双引号字符串", self.pos)
            key_start = self.pos
            key = self._string()
            self._skip()
            if not self.text.startswith(":", self.pos):
                raise _JsonSyntaxError("缺少冒号", self.pos)
            self.pos += 1
            self._skip()
            node = self._value()
            members.append(_Member(key, key_start, node))
            value[key] = node.value  # a repeated key: the last one wins, as in JavaScript
            self._skip()
            comma = self.text.startswith(",", self.pos)
            if comma:
                self.pos += 1

    def _array(self) -> _Node:
        start = self.pos
        self.pos += 1
        items: list[Any] = []
        comma = True
        while True:
            self._skip()
            if self.text.startswith("]", self.pos):
                self.pos += 1
                return _Node(start, self.pos, items)
            if not comma:
                raise _JsonSyntaxError("缺少逗号", self.pos)
            items.append(self._value().value)
            self._skip()
            comma = self.text.startswith(",", self.pos)
            if comma:
                self.pos += 1


def parse_jsonc(text: str) -> Any:
    """Decode JSON that may contain comments and trailing commas (VS Code style)."""
    return _JsoncParser(text.removeprefix("\ufeff")).parse().value


def _where(text: str, position: int) -> str:
    line = text.count("\n", 0, position) + 1
    column = position - (text.rfind("\n", 0, position) + 1) + 1
    return f"第 {line} 行第 {column} 列"


def _line_indent(text: str, position: int) -> str:
    line_start = text.rfind("\n", 0, position) + 1
    match = re.match(r"[ \t]*", text[line_start:])
    return match.group() if match else ""


def _first_on_line(text: str, position: int) -> bool:
    line_start = text.rfind("\n", 0, position) + 1
    return text[line_start:position].strip() == ""


def _dump(value: Any, unit: str, indent: str, newline: str) -> str:
    text = json.dumps(value, ensure_ascii=False, indent=unit)
    return text.replace("\n", newline + indent)


def _jsonc_set(text: str, path: tuple[str, ...], value: Any, unit: str, newline: str) -> str:
    """Set ``path`` to ``value`` by editing only the text of that value (or inserting one member)."""
    node = _JsoncParser(text).parse()
    for depth, key in enumerate(path):
        assert node.members is not None  # the caller checked every level is an object
        member = next((m for m in reversed(node.members) if m.key == key), None)
        if member is None:
            return _insert_member(text, node, key, _nest(path[depth + 1:], value), unit, newline)
        if depth == len(path) - 1:
            indent = _line_indent(text, member.key_start)
            return text[: member.node.start] + _dump(value, unit, indent, newline) + text[member.node.end:]
        node = member.node
    raise AssertionError("empty path")


def _insert_member(text: str, node: _Node, key: str, value: Any, unit: str, newline: str) -> str:
    assert node.members is not None
    members = node.members
    owner_indent = _line_indent(text, node.start)
    if not members:
        indent = owner_indent + unit
        member = f"{json.dumps(key, ensure_ascii=False)}: {_dump(value, unit, indent, newline)}"
        inside = text[node.start + 1: node.end - 1]
        if inside.strip() == "":
            return text[: node.start + 1] + newline + indent + member + newline + owner_indent + text[node.end - 1:]
        # Only comments inside: put the member first and leave them after it.
        return text[: node.start + 1] + newline + indent + member + text[node.start + 1:]
    first, last = members[0], members[-1]
    if not _first_on_line(text, first.key_start):
        # A one-line object: stay on that line.
        compact = json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
        member = f"{json.dumps(key, ensure_ascii=False)}: {compact}"
        return text[: last.node.end] + ", " + member + text[last.node.end:]
    indent = _line_indent(text, first.key_start)
    member = f"{json.dumps(key, ensure_ascii=False)}: {_dump(value, unit, indent, newline)}"
    # Go past a trailing comma and a comment on the last member's line, so that comment stays with it.
    match = _AFTER_VALUE.match(text, last.node.end)
    assert match is not None  # every part of the pattern is optional
    had_comma = match.group(1) is not None
    insertion = newline + indent + member + ("," if had_comma else "")
    head = text[: last.node.end] + ("" if had_comma else ",")
    return head + text[last.node.end: match.end()] + insertion + text[match.end():]


_AFTER_VALUE = re.compile(r"[ \t]*(,)?[ \t]*(?://[^\r\n]*|/\*[^\n]*?\*/)?")


def _merge_json(text: str, client: Client, value: dict[str, Any], target: Path) -> str:
    if text.strip("\ufeff \t\r\n") == "":
        return snippet(client.id, value["env"]["CNKI_DATA_DIR"], [value["command"], *value["args"]])
    bom = "\ufeff" if text.startswith("\ufeff") else ""
    body = text[len(bom):]
    try:
        document = _JsoncParser(body).parse().value
    except _JsonSyntaxError as exc:
        raise _invalid(target, f"JSON 语法错误，{_where(body, exc.position)}：{exc}") from None
    existing = _walk_objects(document, client.key_path, target)
    changes = _edits(existing, value, client.key_path + (SERVER_KEY,))
    newline = "\r\n" if "\r\n" in body else "\n"
    unit_match = re.search(r"\n([ \t]+)\S", body)
    unit = unit_match.group(1) if unit_match else "  "
    expected = copy.deepcopy(document)
    for path, new in changes:
        body = _jsonc_set(body, path, new, unit, newline)
        _apply(expected, path, new)
    _verify(lambda: parse_jsonc(body), expected, target)
    return bom + body


def _verify(parse: Callable[[], Any], expected: Any, target: Path) -> None:
    """Refuse to write unless the edited text decodes to exactly the intended document."""
    try:
        produced = parse()
    except Exception as exc:  # any parser failure means our edit went wrong
        raise _invalid(target, f"自动修改后无法解析（{exc}）") from exc
    if produced != expected:
        raise _invalid(target, "自动修改的结果与预期不一致")


# --- TOML (Codex) -------------------------------------------------------------------------------------


def _newline_of(text: str) -> str:
    return "\r\n" if "\r\n" in text else "\n"


def _append(text: str, fresh: str) -> str:
    newline = _newline_of(text)
    return text.rstrip("\r\n") + newline + newline + fresh.replace("\n", newline)


def _merge_toml(text: str, client: Client, value: dict[str, Any], target: Path) -> str:
    fresh = snippet(client.id, value["env"]["CNKI_DATA_DIR"], [value["command"], *value["args"]])
    if text.strip() == "":
        return fresh
    try:
        document = tomllib.loads(text)
        editable = tomlkit.parse(text)
    except (tomllib.TOMLDecodeError, tomlkit.exceptions.TOMLKitError) as exc:
        raise _invalid(target, f"TOML 语法错误：{exc}") from None
    existing = _walk_objects(document, client.key_path, target)
    full = {**value, "startup_timeout_sec": 30, "tool_timeout_sec": 900}
    base = client.key_path + (SERVER_KEY,)
    if existing is None:
        # The common case: append the snippet's tables verbatim, leaving every other byte alone.
        # That is invalid only when mcp_servers is an inline table; tomlkit handles that below.
        appended = _append(text, fresh)
        expected = copy.deepcopy(document)
        _apply(expected, base, full)
        try:
            if tomllib.loads(appended) == expected:
                return appended
        except tomllib.TOMLDecodeError:
            pass
    expected = copy.deepcopy(document)
    try:
        for path, new in _edits(existing, full, base):
            node: Any = editable
            for key in path[:-1]:
                if key not in node:
                    node[key] = tomlkit.table()
                node = node[key]
            node[path[-1]] = new
            _apply(expected, path, new)
        new_text = tomlkit.dumps(editable)
    except (tomlkit.exceptions.TOMLKitError, KeyError, TypeError, ValueError) as exc:
        raise _invalid(target, f"无法自动修改这种写法（{exc}），请手动修改") from exc
    _verify(lambda: tomllib.loads(new_text), expected, target)
    return new_text


# --- YAML patch (DeepSeek Harness) -------------------------------------------------------------------

_ID_LINE = re.compile(r"(?P<lead>[ ]*(?:-[ ]+)*)id:[ \t]*(['\"]?)" + re.escape(DSH_ENTRY_ID) + r"\2[ \t]*(?:#.*)?")
_KEY_PREFIX = re.compile(r"[ ]*(?:-[ ]+)*")


def _find_dsh_entry(document: Any) -> dict[str, Any] | None:
    """The patch item whose id is mcp-cnki, wherever it sits in the list of patch operations."""
    stack = [document]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if node.get("id") == DSH_ENTRY_ID:
                return node
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return None


def _indent_of(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _is_content(line: str) -> bool:
    stripped = line.strip()
    return stripped != "" and not stripped.startswith("#")


def _merge_yaml(text: str, client: Client, value: dict[str, Any], target: Path) -> str:
    fresh = snippet(client.id, value["env"]["CNKI_DATA_DIR"], [value["command"], *value["args"]])
    if text.strip() in ("", "[]"):
        return fresh  # an empty patch layer, as the client creates it
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise _invalid(target, "YAML 语法错误：" + " ".join(str(exc).split())) from None
    if document is not None and not isinstance(document, list):
        raise _invalid(target, "顶层不是补丁列表")
    found = _find_dsh_entry(document)
    if found is None:
        appended = _append(text, fresh)
        expected = (document or []) + yaml.safe_load(fresh)
        _verify(lambda: yaml.safe_load(appended), expected, target)
        return appended
    config = found.get("config")
    if not isinstance(config, dict):
        raise _invalid(target, f"已有的 {DSH_ENTRY_ID} 条目没有 config 映射，请手动修改")
    old_env = config.get("env")
    wanted = {
        "command": value["command"],
        "args": value["args"],
        "env": {**(old_env if isinstance(old_env, dict) else {}), **value["env"]},
    }
    expected = copy.deepcopy(document)
    expected_entry = _find_dsh_entry(expected)
    assert expected_entry is not None
    expected_entry["config"].update(copy.deepcopy(wanted))
    if expected == document:
        return text
    new_text = "".join(_edit_dsh_lines(text.splitlines(keepends=True), wanted, target))
    _verify(lambda: yaml.safe_load(new_text), expected, target)
    return new_text


def _edit_dsh_lines(lines: list[str], wanted: dict[str, Any], target: Path) -> list[str]:
    """Rewrite the command, args and env lines inside the existing mcp-cnki item's ``config`` block."""
    cannot = _invalid(target, f"已有的 {DSH_ENTRY_ID} 条目格式无法自动更新，请手动修改")
    matches = [(i, _ID_LINE.fullmatch(line.rstrip("\r\n"))) for i, line in enumerate(lines)]
    found = [(i, m) for i, m in matches if m is not None]
    if len(found) != 1:
        raise cannot
    id_index, id_match = found[0]
    key_column = len(id_match.group("lead"))

    def is_key_line(index: int) -> bool:
        line = lines[index]
        prefix = _KEY_PREFIX.fullmatch(line[:key_column])
        return prefix is not None and len(line) > key_column and line[key_column] not in " #\r\n"

    # The item's keys all sit at key_column; it starts on the line carrying its "- " marker.
    start = id_index
    while "-" not in lines[start][:key_column]:
        start -= 1
        while start >= 0 and not _is_content(lines[start]):
            start -= 1
        if start < 0 or _indent_of(lines[start]) < key_column and not is_key_line(start):
            raise cannot
    end = id_index + 1
    while end < len(lines) and (not _is_content(lines[end]) or _indent_of(lines[end]) >= key_column):
        end += 1
    config_index = next(
        (i for i in range(start, end)
         if is_key_line(i) and re.fullmatch(r"config:[ \t]*(?:#.*)?", lines[i][key_column:].rstrip("\r\n"))),
        None,
    )
    if config_index is None:
        raise cannot
    block_end = config_index + 1
    while block_end < end and (not _is_content(lines[block_end]) or _indent_of(lines[block_end]) > key_column):
        block_end += 1
    children = [i for i in range(config_index + 1, block_end) if _is_content(lines[i])]
    if not children:
        raise cannot
    child_column = _indent_of(lines[children[0]])
    newline = "\r\n" if lines[config_index].endswith("\r\n") else "\n"
    rendered = {
        "command": _quoted(wanted["command"]),
        "args": _flow_list(wanted["args"], ","),
        "env": _compact(wanted["env"]),
    }
    replacements: list[tuple[int, int, str]] = []
    for key, text in rendered.items():
        new_line = " " * child_column + f"{key}: {text}{newline}"
        pattern = re.compile(rf"{re.escape(key)}:(?:[ \t].*)?")
        line_index = next(
            (i for i in children if _indent_of(lines[i]) == child_column and pattern.fullmatch(lines[i].strip())),
            None,
        )
        if line_index is None:
            replacements.append((children[-1] + 1, children[-1] + 1, new_line))
            continue
        stop = line_index + 1
        # The value may continue below: deeper lines, or a block sequence at the key's own column.
        while stop < block_end and (
            not _is_content(lines[stop])
            or _indent_of(lines[stop]) > child_column
            or _indent_of(lines[stop]) == child_column and lines[stop].lstrip().startswith("- ")
        ):
            stop += 1
        while stop - 1 > line_index and not _is_content(lines[stop - 1]):
            stop -= 1  # leave trailing blank or comment lines where they are
        replacements.append((line_index, stop, new_line))
    result = list(lines)
    for begin, stop, new_line in sorted(replacements, key=lambda r: r[0], reverse=True):
        result[begin:stop] = [new_line]
    return result
