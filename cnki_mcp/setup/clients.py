"""The MCP clients cnki-mcp can be connected to, and how each one is configured.

``CLIENTS`` is the single table: for every client its id, display name, how it is configured
(``write`` into its config file, one-click import ``link``, or ``paste`` by hand), where its config
file lives on macOS, Windows and Linux, the format and key path of that file, the extra fields its
server entry needs, where a pasted snippet goes, the programs that show it is installed and, where the
client documents one, the command line that adds a server (``claude mcp add-json``, ``codex mcp add``).
``ALIASES`` maps the names users type (``claude``, ``gemini-cli``, ``code``) to ids.

Writing a client's config keeps everything the user already has (see config_edit.py). Every result
is parsed again and compared with the intended document before anything is written, a timestamped
backup is made first and the new file replaces the old one atomically. A file that cannot be parsed is
never touched.
"""

from __future__ import annotations

import base64
import difflib
import json
import os
import shutil
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote, quote_plus

from ruamel.yaml import YAMLError

from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.files import replace_if_unchanged, write_backup
from cnki_mcp.core.settings import normalise_os
from cnki_mcp.setup.config_edit import (
    DSH_ENTRY_ID,
    SERVER_KEY,
    compact,
    find_dsh_entry,
    flow_list,
    html_safe,
    invalid_config,
    is_disabled,
    load_yaml,
    merge_json,
    merge_toml,
    merge_yaml,
    nest,
    parse_jsonc,
    quoted,
)
from cnki_mcp.setup.launcher import server_command
from cnki_mcp.setup.messages import Words, msg, pick

SYSTEMS = ("darwin", "windows", "linux")

Mode = Literal["write", "link", "paste"]
Format = Literal["json", "toml", "yaml"]


@dataclass(frozen=True, slots=True)
class Location:
    """Where a client keeps its config file.

    ``parts`` lie below ``base`` (the home directory, or the per-OS application-data directory).
    When the environment variable ``env`` is set, the file is ``$env/<env_parts>`` instead.
    ``must_exist``: the client creates the folder from its own template on first run, so setup
    must not create it. ``msix``: on Windows the Store (MSIX) build of the app, package folder
    ``%LOCALAPPDATA%\\Packages\\<msix>_<publisher id>``, reads its application data from the package's
    private ``LocalCache\\Roaming`` instead of ``%APPDATA%``.
    """

    parts: tuple[str, ...]
    base: Literal["home", "appdata"] = "home"
    env: str = ""
    env_parts: tuple[str, ...] = ()
    systems: tuple[str, ...] = SYSTEMS
    must_exist: bool = False
    msix: str = ""


@dataclass(frozen=True, slots=True)
class Client:
    """``label``, ``where`` and ``after`` are names or (Chinese, English) pairs; ``name``, ``hint`` and
    ``note`` give them in the CLI's language."""

    id: str
    label: Words
    mode: Mode
    format: Format = "json"
    key_path: tuple[str, ...] = ("mcpServers",)
    extras: tuple[tuple[str, Any], ...] = ()
    location: Location | None = None
    where: Words = ""  # where a pasted snippet goes, or what to do first
    link: Callable[[dict[str, Any]], str] | None = None
    commands: tuple[str, ...] = ()  # the client's own programs: one on PATH means it is installed
    cli: Callable[[dict[str, Any]], list[str]] | None = None  # its documented "add a server" command
    systems: tuple[str, ...] = SYSTEMS  # where the client exists at all (Claude Desktop has no Linux build)
    install_link: Callable[[dict[str, Any]], str] | None = None  # an install link beside its config file
    after: Words = ""  # a step the client needs after its config is written

    @property
    def name(self) -> str:
        return pick(self.label)

    @property
    def hint(self) -> str:
        return pick(self.where)

    @property
    def note(self) -> str:
        return pick(self.after)

    @property
    def extension(self) -> str:
        return self.format

    @property
    def snippet_filename(self) -> str:
        return f"cnki-{self.id}.{self.extension}"


# --- import links ---------------------------------------------------------------------------------


def _b64(text: str) -> str:
    return base64.b64encode(text.encode("utf-8")).decode("ascii")


def _qesc(text: str) -> str:
    return quote_plus(text, safe="")


def _qoder_link(entry: dict[str, Any]) -> str:
    # Qoder query-escapes the JSON before base64, and the base64 is escaped again in the URL.
    return "qoder://aicoding.aicoding-deeplink/mcp/add?name=cnki&config=" + _qesc(_b64(_qesc(compact(entry))))


def _trae_link(entry: dict[str, Any]) -> str:
    return "trae://trae.ai-ide/mcp-import?type=stdio&name=cnki&config=" + _qesc(_b64(compact(entry)))


def _chatbox_link(entry: dict[str, Any]) -> str:
    return "chatbox://mcp/install?server=" + _qesc(_b64(compact({**entry, "name": SERVER_KEY})))


def _cherry_link(entry: dict[str, Any]) -> str:
    return "cherrystudio://mcp/install?servers=" + _qesc(_b64(compact({"mcpServers": {SERVER_KEY: entry}})))


def _cursor_link(entry: dict[str, Any]) -> str:
    return "cursor://anysphere.cursor-deeplink/mcp/install?name=cnki&config=" + _qesc(_b64(compact(entry)))


def _vscode_link(entry: dict[str, Any]) -> str:
    return "vscode:mcp/install?" + quote(compact({"name": SERVER_KEY, **entry}), safe="")


# --- the clients' own command lines -----------------------------------------------------------------


def _claude_cli(entry: dict[str, Any]) -> list[str]:
    return ["claude", "mcp", "add-json", "--scope", "user", SERVER_KEY, json.dumps(entry, ensure_ascii=False)]


def _codex_cli(entry: dict[str, Any]) -> list[str]:
    env = [part for key, value in entry["env"].items() for part in ("--env", f"{key}={value}")]
    return ["codex", "mcp", "add", *env, SERVER_KEY, "--", entry["command"], *entry["args"]]


# --- the registry (order is the menu and `help` order) --------------------------------------------

_STDIO = (("type", "stdio"),)
_LONG_MS = (("timeout", 900000),)
_CLINE = (("disabled", False), ("timeout", 900))
_DSH_HINT_DESKTOP = ("先运行一次 DeepSeek Harness 桌面版，再重新执行 setup", "run DeepSeek Harness Desktop once, then run setup again")
_DSH_HINT_WEB = ("先运行一次 dsh web，再重新执行 setup", "run dsh web once, then run setup again")
_GEMINI_TRUST = (
    "Gemini CLI 只在受信任的文件夹里连接 MCP 服务：在要使用的文件夹里启动 gemini，询问时选择信任"
    "（之后可用 /permissions 更改），再用 /mcp 查看 cnki 是否已连接",
    "Gemini CLI connects MCP servers only in trusted folders: start gemini in the folder you will use, choose to "
    "trust it when asked (/permissions changes it later), then check with /mcp that cnki is connected",
)

CLIENTS: tuple[Client, ...] = (
    Client("claude-desktop", "Claude Desktop", "write",
           location=Location(("Claude", "claude_desktop_config.json"), base="appdata", systems=("darwin", "windows"),
                             msix="Claude"),
           where=("Claude Desktop 设置 → 开发者 → 编辑配置", "Claude Desktop Settings → Developer → Edit Config"), systems=("darwin", "windows")),
    Client("claude-code", "Claude Code", "write", extras=_STDIO,
           location=Location((".claude.json",), env="CLAUDE_CONFIG_DIR", env_parts=(".claude.json",)),
           commands=("claude",), cli=_claude_cli),
    Client("codex", "Codex", "write", format="toml", key_path=("mcp_servers",),
           location=Location((".codex", "config.toml"), env="CODEX_HOME", env_parts=("config.toml",)),
           commands=("codex",), cli=_codex_cli),
    Client("cursor", "Cursor", "write", extras=_STDIO, location=Location((".cursor", "mcp.json")),
           commands=("cursor",), install_link=_cursor_link),
    Client("gemini", "Gemini CLI", "write", extras=_LONG_MS, location=Location((".gemini", "settings.json")),
           commands=("gemini",), after=_GEMINI_TRUST),
    Client("dsh-desktop", ("DeepSeek Harness 桌面版", "DeepSeek Harness Desktop"), "write", format="yaml", key_path=(),
           location=Location((".dsh", "profiles", "desktop", "cordis.patch.yml"), env="DSH_HOME",
                             env_parts=("profiles", "desktop", "cordis.patch.yml"), must_exist=True),
           where=_DSH_HINT_DESKTOP),
    Client("dsh-web", ("DeepSeek Harness 网页版（dsh web）", "DeepSeek Harness Web (dsh web)"), "write", format="yaml", key_path=(),
           location=Location((".dsh", "profiles", "web", "cordis.patch.yml"), env="DSH_HOME",
                             env_parts=("profiles", "web", "cordis.patch.yml"), must_exist=True),
           where=_DSH_HINT_WEB),
    Client("workbuddy", "WorkBuddy", "write", location=Location((".workbuddy", "mcp.json"))),
    Client("zcode", "ZCode", "write", key_path=("mcp", "servers"), extras=_STDIO,
           location=Location((".zcode", "cli", "config.json"))),
    Client("kimi-code", ("Kimi Code（CLI 与桌面版）", "Kimi Code (CLI and desktop)"), "write",
           location=Location((".kimi-code", "mcp.json"), env="KIMI_CODE_HOME", env_parts=("mcp.json",))),
    Client("codebuddy", "CodeBuddy CLI", "write", extras=_STDIO, location=Location((".codebuddy", ".mcp.json"))),
    Client("qwen-code", "Qwen Code", "write", extras=_LONG_MS, location=Location((".qwen", "settings.json")),
           commands=("qwen",)),
    Client("qoder-cli", "Qoder CLI", "write", extras=_STDIO, location=Location((".qoder", "settings.json"))),
    Client("qoder", "Qoder IDE", "link", where=("Qoder 设置 → MCP → My Servers → + Add", "Qoder Settings → MCP → My Servers → + Add"), link=_qoder_link),
    Client("trae", "Trae", "link", where=("Trae 设置 → MCP → 添加 → 手动添加", "Trae Settings → MCP → Add → Add Manually"), link=_trae_link),
    Client("trae-cn", "Trae CN", "paste", where=("Trae CN 设置 → MCP → 添加 → 手动添加", "Trae CN Settings → MCP → Add → Add Manually")),
    Client("lingma", ("通义灵码", "Tongyi Lingma"), "paste",
           where=("通义灵码 个人设置 → MCP 服务 → + → 配置文件添加", "Tongyi Lingma personal settings → MCP services → + → add by config file")),
    Client("codebuddy-ide", "CodeBuddy IDE", "paste", extras=_STDIO, where=("CodeBuddy 设置 → MCP → Add MCP", "CodeBuddy Settings → MCP → Add MCP")),
    Client("comate", ("文心快码 Comate", "Baidu Comate"), "paste", extras=_STDIO,
           where=("文心快码的 MCP 设置（mcp.json）", "Comate's MCP settings (mcp.json)")),
    Client("chatbox", "Chatbox", "link", where=("Chatbox 设置 → MCP → 添加服务器", "Chatbox Settings → MCP → Add Server"), link=_chatbox_link),
    Client("cherry-studio", "Cherry Studio", "link",
           where=("Cherry Studio 设置 → MCP 服务器 → 从 JSON 导入", "Cherry Studio Settings → MCP Servers → Import from JSON"),
           link=_cherry_link),
    Client("vscode", "VS Code / GitHub Copilot", "write", key_path=("servers",), extras=_STDIO,
           location=Location(("Code", "User", "mcp.json"), base="appdata", must_exist=True),
           where=("先打开一次 VS Code，再重新执行 setup", "open VS Code once, then run setup again"), commands=("code",), install_link=_vscode_link),
    Client("windsurf", "Windsurf", "write", location=Location((".codeium", "windsurf", "mcp_config.json")),
           commands=("windsurf",)),
    Client("cline", "Cline", "paste", extras=_CLINE, where=("Cline 的 MCP Servers → Configure", "Cline's MCP Servers → Configure")),
    Client("roo", "Roo Code", "paste", extras=_CLINE, where=("Roo Code 的 MCP 设置 → Edit Global MCP", "Roo Code's MCP settings → Edit Global MCP")),
    Client("lobehub", "LobeHub / LobeChat", "paste", where=("LobeHub 插件设置 → 自定义 MCP → 导入 JSON", "LobeHub plugin settings → Custom MCP → Import JSON")),
    Client("generic", ("其他 stdio 客户端（通用 JSON）", "Other stdio client (generic JSON)"), "paste",
           where=("客户端的 MCP 设置", "the client's MCP settings")),
)

_BY_ID: dict[str, Client] = {client.id: client for client in CLIENTS}

# Names users type for a client, normalised like ids (lower case, "-" for spaces and underscores).
ALIASES: dict[str, str] = {
    "claude": "claude-code", "claude-cli": "claude-code", "claudecode": "claude-code",
    "claude-app": "claude-desktop", "claudedesktop": "claude-desktop",
    "openai-codex": "codex", "codex-cli": "codex",
    "cursor-ide": "cursor",
    "gemini-cli": "gemini", "google-gemini": "gemini",
    "qwen": "qwen-code", "qwen-cli": "qwen-code",
    "kimi": "kimi-code", "kimi-cli": "kimi-code",
    "codebuddy-cli": "codebuddy", "qoder-ide": "qoder", "qodercli": "qoder-cli",
    "trae-china": "trae-cn", "tongyi-lingma": "lingma", "通义灵码": "lingma",
    "baidu-comate": "comate", "文心快码": "comate",
    "cherry": "cherry-studio", "cherrystudio": "cherry-studio",
    "vs-code": "vscode", "code": "vscode", "visual-studio-code": "vscode", "copilot": "vscode",
    "github-copilot": "vscode",
    "codeium": "windsurf",
    "roo-code": "roo", "roocode": "roo",
    "lobechat": "lobehub", "lobe-chat": "lobehub",
}


def _normalised(name: str) -> str:
    return "-".join(name.strip().lower().replace("_", " ").split())


def available(client: Client, os_name: str | None = None) -> bool:
    """Whether the client exists on this OS (the menu offers only those)."""
    return normalise_os(os_name) in client.systems


def unavailable_message(client: Client) -> str:
    systems = msg("clients.list_separator").join(
        {"darwin": "macOS", "windows": "Windows", "linux": "Linux"}[name] for name in client.systems
    )
    return msg("clients.unavailable", client=client.name, systems=systems)


def client_install_link(client_id: str, data_root: Path | str, command: list[str] | None = None) -> str | None:
    """The install link of a client that has one besides its config file (Cursor, VS Code)."""
    client = get_client(client_id)
    link = client.install_link or client.link
    return None if link is None else link(entry(client.id, data_root, command))


def get_client(client_id: str) -> Client:
    """A client by id or alias; an unknown name is UNKNOWN_CLIENT naming the nearest id and every id."""
    key = _normalised(client_id) if isinstance(client_id, str) else ""
    client = _BY_ID.get(ALIASES.get(key, key))
    if client is None:
        nearest = difflib.get_close_matches(key, [*_BY_ID, *ALIASES], n=1, cutoff=0.6)
        suggestion = ALIASES.get(nearest[0], nearest[0]) if nearest else None
        guess = msg("clients.unknown_guess", suggestion=suggestion) if suggestion else ""
        raise CnkiError(
            "UNKNOWN_CLIENT",
            msg("clients.unknown", name=client_id, guess=guess, ids=msg("clients.list_separator").join(_BY_ID)),
            details={"client": client_id, "suggestion": suggestion},
        )
    return client


# --- the server command and its entry -------------------------------------------------------------


# The setting that runs the browser without windows, for a machine without a screen (site/chrome.py reads it).
HEADLESS_ENV = "CNKI_HEADLESS"


def entry(
    client_id: str, data_root: Path | str, command: list[str] | None = None, *, headless: bool = False
) -> dict[str, Any]:
    """The server entry the client's config holds under ``cnki``, with that client's extra fields;
    ``headless`` adds CNKI_HEADLESS=1 to its env."""
    client = get_client(client_id)
    argv = command or server_command()
    env = {"CNKI_DATA_DIR": str(data_root)}
    if headless:
        env[HEADLESS_ENV] = "1"
    value: dict[str, Any] = {
        "args": list(argv[1:]),
        "command": argv[0],
        "env": env,
    }
    value.update(client.extras)
    return dict(sorted(value.items()))


def snippet(
    client_id: str, data_root: Path | str, command: list[str] | None = None, *, headless: bool = False
) -> str:
    """The configuration text for a client, exactly as `config <client>` prints it."""
    client = get_client(client_id)
    value = entry(client.id, data_root, command, headless=headless)
    if client.format == "toml":
        return (
            f"[mcp_servers.{SERVER_KEY}]\n"
            f"command = {quoted(value['command'])}\n"
            f"args = {flow_list(value['args'], ', ')}\n"
            "startup_timeout_sec = 30\n"
            "tool_timeout_sec = 900\n"
            "\n"
            f"[mcp_servers.{SERVER_KEY}.env]\n"
            + "".join(f"{key} = {quoted(setting)}\n" for key, setting in value["env"].items())
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
            f"        command: {quoted(value['command'])}\n"
            f"        args: {flow_list(value['args'], ',')}\n"
            f"        env: {compact(value['env'])}\n"
            "        toolCallTimeoutMs: 900000\n"
            "        failOnStartupError: false\n"
        )
    document = nest(client.key_path, {SERVER_KEY: value})
    return html_safe(json.dumps(document, ensure_ascii=False, sort_keys=True, indent=2)) + "\n"


# How a client's JSON names a streamable HTTP server: the key of the URL and the transport type, if any.
_HTTP_URL_KEY = {"gemini": "httpUrl", "windsurf": "serverUrl"}
_HTTP_TYPE = {"gemini": None, "windsurf": None, "cline": "streamableHttp", "roo": "streamable-http"}


def http_snippet(client_id: str, url: str, token: str) -> str:
    """The configuration text for a client of ``cnki-mcp serve --http``: the URL and the bearer token."""
    client = get_client(client_id)
    if client.format == "toml":
        bearer = f"Bearer {token}"
        return f"[mcp_servers.{SERVER_KEY}]\nurl = {quoted(url)}\nhttp_headers = {{ Authorization = {quoted(bearer)} }}\ntool_timeout_sec = 900\n"
    document = nest(client.key_path, {SERVER_KEY: http_entry(client.id, url, token)})
    return html_safe(json.dumps(document, ensure_ascii=False, sort_keys=True, indent=2)) + "\n"


def http_entry(client_id: str, url: str, token: str) -> dict[str, Any]:
    """The ``cnki`` entry of a JSON client of ``serve --http``; CLIENT_HTTP_UNSUPPORTED for YAML clients."""
    client = get_client(client_id)
    if client.format == "yaml":
        raise CnkiError(
            "CLIENT_HTTP_UNSUPPORTED",
            msg("clients.http_stdio_only", client=client.name, id=client.id),
            details={"client": client.id},
        )
    value: dict[str, Any] = {_HTTP_URL_KEY.get(client.id, "url"): url, "headers": {"Authorization": f"Bearer {token}"}}
    kind = _HTTP_TYPE.get(client.id, "http")
    if kind:
        value["type"] = kind
    return dict(sorted(value.items()))


def import_link(
    client_id: str, data_root: Path | str, command: list[str] | None = None, *, headless: bool = False
) -> str | None:
    """The one-click import link of a link client (``None`` for the others)."""
    client = get_client(client_id)
    if client.link is None:
        return None
    return client.link(entry(client.id, data_root, command, headless=headless))


# --- where config files live ----------------------------------------------------------------------


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


def _msix_packages(prefix: str, env: Mapping[str, str], home: Path) -> list[Path]:
    """The Store (MSIX) package folders of an app, e.g. ``%LOCALAPPDATA%\\Packages\\Claude_pzs8sxrjxfjjc``."""
    local = env.get("LOCALAPPDATA", "").strip()
    packages = (Path(local) if local else home / "AppData" / "Local") / "Packages"
    try:
        found = [child for child in packages.iterdir() if child.name.startswith(f"{prefix}_") and child.is_dir()]
    except OSError:
        return []
    return sorted(found)


def config_paths(
    client_id: str,
    os_name: str | None = None,
    env: Mapping[str, str] | None = None,
    home: Path | None = None,
) -> list[Path]:
    """Every config file this client may read on an OS: none if setup does not write it, and more than
    one only when several Store (MSIX) installs of it exist (then the user chooses)."""
    client = get_client(client_id)
    system = normalise_os(os_name)
    location = client.location
    if location is None or system not in location.systems:
        return []
    env = os.environ if env is None else env
    if location.env and env.get(location.env, "").strip():
        return [Path(env[location.env].strip()).joinpath(*location.env_parts)]
    home = Path(home) if home is not None else _home(system, env)
    if system == "windows" and location.msix:
        # Since 2026 the official Windows installer is MSIX, whose app reads its package's own AppData.
        packages = _msix_packages(location.msix, env, home)
        if packages:
            return [package.joinpath("LocalCache", "Roaming", *location.parts) for package in packages]
    base = home if location.base == "home" else app_data_dir(system, env, home)
    return [base.joinpath(*location.parts)]


def config_path(
    client_id: str,
    os_name: str | None = None,
    env: Mapping[str, str] | None = None,
    home: Path | None = None,
) -> Path | None:
    """The one config file setup writes for a client, ``None`` if it is not written automatically;
    CLIENT_CONFIG_AMBIGUOUS when several installs of the client each have their own."""
    paths = config_paths(client_id, os_name, env, home)
    if len(paths) > 1:
        client = get_client(client_id)
        raise CnkiError(
            "CLIENT_CONFIG_AMBIGUOUS",
            msg("clients.ambiguous", client=client.name, paths=msg("clients.ambiguous_separator").join(map(str, paths))),
            details={"client": client.id, "paths": [str(path) for path in paths]},
        )
    return paths[0] if paths else None


def how_configured(client_id: str, os_name: str | None = None) -> str:
    """A short label (in the CLI's language) for the way this client gets its config on this OS."""
    client = get_client(client_id)
    if client.mode == "link":
        return msg("clients.how_link")
    if client.location is not None and normalise_os(os_name) in client.location.systems:
        return msg("clients.how_write_after_run" if client.location.must_exist else "clients.how_write")
    return msg("clients.how_paste")


def installed_clients(
    os_name: str | None = None, env: Mapping[str, str] | None = None, home: Path | None = None
) -> list[str]:
    """Ids of the clients that look installed here, in registry order: their program is on PATH, their
    config file exists, or the folder it lives in does (a folder of its own, not the home folder)."""
    system = normalise_os(os_name)
    env = os.environ if env is None else env
    home = Path(home) if home is not None else _home(system, env)
    search_path = env.get("PATH", os.defpath)
    found: list[str] = []
    for client in CLIENTS:
        on_path = any(shutil.which(command, path=search_path) for command in client.commands)
        files = config_paths(client.id, system, env, home)
        present = any(path.is_file() or (path.parent != home and path.parent.is_dir()) for path in files)
        if on_path or present:
            found.append(client.id)
    return found


# --- what is configured already (for doctor) ------------------------------------------------------


def _read_entry(client: Client, text: str) -> Any:
    if client.format == "toml":
        node: Any = tomllib.loads(text)
    elif client.format == "yaml":
        found = find_dsh_entry(load_yaml(text))
        return found.get("config") if found is not None else None
    else:
        node = parse_jsonc(text.removeprefix("\ufeff"))
    for key in (*client.key_path, SERVER_KEY):
        if not isinstance(node, dict):
            return None
        node = node.get(key)
    return node


# What reading a client's config file can raise.
UNREADABLE = (OSError, UnicodeDecodeError, ValueError, YAMLError)


def existing_entry(client_id: str, path: Path) -> Any:
    """The ``cnki`` entry a client's config file holds (``None`` if none, or the file is missing).

    Raises one of ``UNREADABLE`` for a file that cannot be read."""
    try:
        text = path.read_text("utf-8")
    except FileNotFoundError:
        return None
    return _read_entry(get_client(client_id), text)


def configured_clients(
    data_root: Path | str,
    command: list[str] | None = None,
    os_name: str | None = None,
    env: Mapping[str, str] | None = None,
    home: Path | None = None,
) -> list[dict[str, Any]]:
    """Every auto-write client whose config file holds a ``cnki`` entry, and whether it points here.

    ``status`` is ``current`` (this program and data directory), ``different`` (another
    installation or data directory), ``disabled`` (switched off in the client) or ``unreadable``;
    ``headless`` says whether the entry's env sets CNKI_HEADLESS (the browser then runs without windows).
    Reads files only; changes nothing.
    """
    wanted = entry("generic", data_root, command)
    report: list[dict[str, Any]] = []
    for client in CLIENTS:
        for path in config_paths(client.id, os_name, env, home):
            item: dict[str, Any] = {"client": client.id, "name": client.name, "path": str(path)}
            try:
                found = existing_entry(client.id, path)
            except UNREADABLE as exc:
                message = msg("clients.unreadable", reason=exc).replace("\n", " ")
                report.append({**item, "status": "unreadable", "message": message})
                continue
            if found is not None:
                report.append({**item, **_entry_status(client, found, wanted), "headless": _sets_headless(found)})
    return report


def _sets_headless(found: Any) -> bool:
    from cnki_mcp.site.chrome import env_headless

    env = found.get("env") if isinstance(found, dict) else None
    return isinstance(env, dict) and env_headless(env)


def _entry_status(client: Client, found: Any, wanted: dict[str, Any]) -> dict[str, str]:
    if is_disabled(found):
        return {
            "status": "disabled",
            "message": msg("clients.disabled", client=client.name, id=client.id),
        }
    found_env = found.get("env") if isinstance(found, dict) else None
    current = (
        isinstance(found, dict)
        and found.get("command") == wanted["command"]
        and found.get("args") == wanted["args"]
        and isinstance(found_env, dict)
        and found_env.get("CNKI_DATA_DIR") == wanted["env"]["CNKI_DATA_DIR"]
    )
    if current:
        return {"status": "current"}
    return {
        "status": "different",
        "message": msg("clients.different"),
    }


# --- writing a client's config --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConfigWrite:
    path: Path
    backup: Path | None
    changed: bool
    via: str = ""  # the client's own command that wrote it, if one did


def write_client_config(
    client_id: str,
    data_root: Path | str,
    path: Path | str,
    command: list[str] | None = None,
    *,
    enable: bool = False,
    backup_first: bool = True,
    http: tuple[str, str] | None = None,
    headless: bool | None = None,
) -> ConfigWrite:
    """Merge the ``cnki`` entry into the client's config file at ``path``.

    Everything else in the file is kept. An unparsable file is left untouched
    (CLIENT_CONFIG_INVALID); a symlink is refused (CONFIG_SYMLINK); a folder the client creates
    itself (DeepSeek Harness profiles, VS Code's User folder) that does not exist yet gives
    CLIENT_NOT_INITIALIZED; a file changed by someone else while we worked is not overwritten
    (CONFIG_CHANGED). ``enable`` switches a disabled ``cnki`` entry back on; ``backup_first=False``
    when the caller already kept the file's earlier content. ``http`` (url, token) writes the entry of
    ``serve --http`` instead of the stdio one (JSON clients only: CLIENT_HTTP_UNSUPPORTED otherwise).
    ``headless``: True sets CNKI_HEADLESS=1 in the entry's env, False takes it out, None leaves it as it is.
    """
    client = get_client(client_id)
    target = Path(path)
    if target.is_symlink():
        raise CnkiError(
            "CONFIG_SYMLINK",
            msg("clients.symlink", path=target),
            details={"path": str(target)},
        )
    if client.location is not None and client.location.must_exist and not target.parent.is_dir():
        raise CnkiError(
            "CLIENT_NOT_INITIALIZED",
            msg("clients.not_initialized", client=client.name, folder=target.parent, hint=client.hint),
            details={"client": client.id, "path": str(target)},
        )
    try:
        old_bytes = target.read_bytes()
    except FileNotFoundError:
        old_bytes = b""
    except OSError as exc:
        raise invalid_config(target, msg("clients.cannot_read", reason=exc.strerror or exc)) from exc
    try:
        old_text = old_bytes.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise invalid_config(target, msg("clients.not_utf8")) from exc

    if http is None:
        on = headless is True
        value, fresh = entry(client.id, data_root, command, headless=on), snippet(client.id, data_root, command, headless=on)
    elif client.format == "json":
        value, fresh = http_entry(client.id, *http), http_snippet(client.id, *http)
    else:
        raise CnkiError(
            "CLIENT_HTTP_UNSUPPORTED",
            msg("clients.http_not_written", client=client.name, id=client.id, path=target),
            details={"client": client.id, "path": str(target)},
        )
    merge = {"json": merge_json, "toml": merge_toml, "yaml": merge_yaml}[client.format]
    drop = (HEADLESS_ENV,) if headless is False else ()
    new_text = merge(old_text, client.key_path, value, fresh, target, enable, drop)
    new_bytes = new_text.encode("utf-8")
    if new_bytes == old_bytes:
        return ConfigWrite(target, None, False)

    try:
        target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        backup = write_backup(target, old_bytes) if old_bytes.strip() and backup_first else None
        replaced = replace_if_unchanged(target, old_bytes, new_bytes)
    except OSError as exc:
        raise CnkiError(
            "DISK_WRITE_FAILED", msg("clients.write_failed", path=target, reason=exc.strerror or exc),
            details={"path": str(target)},
        ) from exc
    if not replaced:
        raise CnkiError(
            "CONFIG_CHANGED",
            msg("clients.changed_meanwhile", path=target),
            details={"path": str(target)},
        )
    return ConfigWrite(target, backup, True)
