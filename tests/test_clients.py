"""The client registry, snippets, import links, config paths and safe config merges."""

from __future__ import annotations

import base64
import json
import os
import stat
import sys
import tomllib
from pathlib import Path
from urllib.parse import parse_qs, unquote_plus, urlsplit

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cnki_mcp.core.errors import CnkiError
from cnki_mcp.setup import clients, launcher

CMD = ["/p/cnki-mcp", "serve"]
ROOT = "/p/data"
# Backslashes, spaces, CJK, quotes and HTML characters: everything a path can make hard to quote.
NASTY_CMD = ["C:\\Program Files\\知网 & <工具>\\cnki-mcp.exe", "serve"]
NASTY_ROOT = "C:\\Users\\张 三\\data \"x\""

REGISTRY_ORDER = [
    "claude-desktop", "claude-code", "codex", "cursor", "gemini", "dsh-desktop", "dsh-web", "workbuddy",
    "zcode", "kimi-code", "codebuddy", "qwen-code", "qoder-cli", "qoder", "trae", "trae-cn", "lingma",
    "codebuddy-ide", "comate", "chatbox", "cherry-studio", "vscode", "windsurf", "cline", "roo", "lobehub",
    "generic",
]
WRITE_CLIENTS = [c.id for c in clients.CLIENTS if c.mode == "write"]
JSON_WRITE_CLIENTS = [c.id for c in clients.CLIENTS if c.mode == "write" and c.format == "json"]


def parse_snippet(client_id: str, text: str) -> dict:
    """The server entry a snippet carries, parsed with that format's own parser."""
    client = clients.get_client(client_id)
    if client.format == "toml":
        return tomllib.loads(text)["mcp_servers"]["cnki"]
    if client.format == "yaml":
        (patch,) = yaml.safe_load(text)
        (item,) = patch["insert"]
        assert item["id"] == "mcp-cnki" and item["name"] == "@deepseek-ai/dsh-mcp-client"
        return item["config"]
    node = json.loads(text)
    for key in client.key_path:
        node = node[key]
    assert list(node) == ["cnki"]
    return node["cnki"]


# --- registry --------------------------------------------------------------------------------------


def test_registry_has_the_27_clients_in_menu_order() -> None:
    assert [c.id for c in clients.CLIENTS] == REGISTRY_ORDER
    modes = {mode: [c.id for c in clients.CLIENTS if c.mode == mode] for mode in ("write", "link", "paste")}
    assert modes["link"] == ["qoder", "trae", "chatbox", "cherry-studio"]
    assert len(modes["write"]) == 15
    assert len(modes["paste"]) == 8
    for client in clients.CLIENTS:
        assert (client.link is not None) == (client.mode == "link")
        assert (client.location is not None) == (client.mode == "write")
        assert client.mode == "write" or client.hint, client.id


def test_unknown_client_is_reported() -> None:
    with pytest.raises(CnkiError) as caught:
        clients.get_client("notepad")
    assert caught.value.code == "UNKNOWN_CLIENT" and "notepad" in caught.value.message


# --- snippets --------------------------------------------------------------------------------------


@pytest.mark.parametrize("client_id", REGISTRY_ORDER)
@pytest.mark.parametrize(("command", "root"), [(CMD, ROOT), (NASTY_CMD, NASTY_ROOT)])
def test_every_snippet_parses_and_carries_the_entry(client_id: str, command: list[str], root: str) -> None:
    text = clients.snippet(client_id, root, command)
    assert text.endswith("\n") and not text.endswith("\n\n")
    parsed = parse_snippet(client_id, text)
    assert parsed["command"] == command[0]
    assert parsed["args"] == command[1:]
    assert parsed["env"] == {"CNKI_DATA_DIR": root}
    expected_extras = dict(clients.get_client(client_id).extras)
    for key, value in expected_extras.items():
        assert parsed[key] == value
    if clients.get_client(client_id).format == "json":
        assert parsed == clients.entry(client_id, root, command)


def test_snippet_formats_are_exact() -> None:
    assert clients.snippet("cursor", ROOT, CMD) == (
        '{\n  "mcpServers": {\n    "cnki": {\n      "args": [\n        "serve"\n      ],\n'
        '      "command": "/p/cnki-mcp",\n      "env": {\n        "CNKI_DATA_DIR": "/p/data"\n      },\n'
        '      "type": "stdio"\n    }\n  }\n}\n'
    )
    assert clients.snippet("codex", ROOT, CMD) == (
        '[mcp_servers.cnki]\ncommand = "/p/cnki-mcp"\nargs = ["serve"]\nstartup_timeout_sec = 30\n'
        'tool_timeout_sec = 900\n\n[mcp_servers.cnki.env]\nCNKI_DATA_DIR = "/p/data"\n'
    )
    dsh = clients.snippet("dsh-desktop", ROOT, CMD)
    assert dsh == clients.snippet("dsh-web", ROOT, CMD)
    assert dsh.splitlines() == [
        "# CNKI Enhanced MCP",
        "- insert:",
        "    - id: mcp-cnki",
        "      name: '@deepseek-ai/dsh-mcp-client'",
        "      config:",
        "        serverName: cnki",
        "        transport: stdio",
        '        command: "/p/cnki-mcp"',
        '        args: ["serve"]',
        '        env: {"CNKI_DATA_DIR":"/p/data"}',
        "        toolCallTimeoutMs: 900000",
        "        failOnStartupError: false",
    ]
    assert json.loads(clients.snippet("zcode", ROOT, CMD))["mcp"]["servers"]["cnki"]["type"] == "stdio"
    assert list(json.loads(clients.snippet("vscode", ROOT, CMD))) == ["servers"]
    cline = json.loads(clients.snippet("cline", ROOT, CMD))["mcpServers"]["cnki"]
    assert list(cline) == ["args", "command", "disabled", "env", "timeout"]  # Go-style sorted keys
    assert cline["timeout"] == 900 and cline["disabled"] is False
    assert json.loads(clients.snippet("gemini", ROOT, CMD))["mcpServers"]["cnki"]["timeout"] == 900000


def test_json_snippets_escape_html_characters_like_the_reference() -> None:
    text = clients.snippet("generic", "/a&b/<c>", CMD)
    assert "\\u0026" in text and "\\u003c" in text and "&" not in text and "<" not in text
    assert json.loads(text)["mcpServers"]["cnki"]["env"]["CNKI_DATA_DIR"] == "/a&b/<c>"
    assert "张" in clients.snippet("generic", "/张", CMD)  # non-ASCII stays readable


def test_windows_backslashes_are_doubled_in_toml() -> None:
    text = clients.snippet("codex", "C:\\d", ["C:\\p\\cnki-mcp.exe", "serve"])
    assert 'command = "C:\\\\p\\\\cnki-mcp.exe"' in text
    assert tomllib.loads(text)["mcp_servers"]["cnki"]["command"] == "C:\\p\\cnki-mcp.exe"


# --- server command --------------------------------------------------------------------------------


def test_server_command_prefers_the_console_script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    python = tmp_path / "bin" / "python"
    python.parent.mkdir()
    python.write_text("")
    monkeypatch.setattr(sys, "executable", str(python))
    assert launcher.server_command() == [str(python), "-m", "cnki_mcp", "serve"]
    script = tmp_path / "bin" / ("cnki-mcp.exe" if sys.platform == "win32" else "cnki-mcp")
    script.write_text("")
    assert launcher.server_command() == [str(script), "serve"]
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    assert launcher.server_command() == [str(python), "serve"]


def test_a_program_uvx_started_is_given_uv_itself(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "uv-cache"
    prefix = cache / "archive-v0" / "abc"
    prefix.mkdir(parents=True)
    uv = tmp_path / "uv"
    uv.write_text("#!/bin/sh\necho " + str(cache) + "\n", "utf-8")
    uv.chmod(0o755)
    monkeypatch.setenv("UV", str(uv))
    monkeypatch.setattr(sys, "prefix", str(prefix))
    monkeypatch.setattr(launcher, "_direct_url", lambda: None)
    assert launcher.server_command() == [str(uv), "tool", "run", "--from", "cnki-browser-mcp", "cnki-mcp", "serve"]


def test_a_program_uv_did_not_start_from_its_cache_keeps_its_own_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    uv = tmp_path / "uv"
    uv.write_text("#!/bin/sh\necho " + str(tmp_path / "elsewhere") + "\n", "utf-8")
    uv.chmod(0o755)
    monkeypatch.setenv("UV", str(uv))
    assert launcher.server_command()[0] != str(uv)


def test_the_source_uv_installs_again() -> None:
    git = '{"url": "https://github.com/cnki-mcp/cnki-mcp", "vcs_info": {"vcs": "git", "commit_id": "ab12"}}'
    pinned = '{"url": "https://github.com/cnki-mcp/cnki-mcp", "vcs_info": {"vcs": "git", "requested_revision": "v1.2"}}'
    assert launcher.install_source(git) == "git+https://github.com/cnki-mcp/cnki-mcp"
    assert launcher.install_source(pinned) == "git+https://github.com/cnki-mcp/cnki-mcp@v1.2"
    assert launcher.install_source('{"url": "file:///src/cnki-mcp", "dir_info": {}}') == "file:///src/cnki-mcp"
    assert launcher.install_source(None) == "cnki-browser-mcp"
    assert launcher.install_source("not json") == "cnki-browser-mcp"


def test_entry_uses_the_running_server_command_by_default() -> None:
    command = launcher.server_command()
    assert os.path.isabs(command[0]) and command[-1] == "serve"
    value = clients.entry("cursor", ROOT)
    assert [value["command"], *value["args"]] == command


# --- import links ----------------------------------------------------------------------------------


def test_import_links_match_the_reference_vectors() -> None:
    assert clients.import_link("trae", ROOT, CMD) == (
        "trae://trae.ai-ide/mcp-import?type=stdio&name=cnki&config=eyJhcmdzIjpbInNlcnZlIl0sImNvbW1hbmQiOiIvcC9jbmt"
        "pLW1jcCIsImVudiI6eyJDTktJX0RBVEFfRElSIjoiL3AvZGF0YSJ9fQ%3D%3D"
    )
    assert clients.import_link("chatbox", ROOT, CMD) == (
        "chatbox://mcp/install?server=eyJhcmdzIjpbInNlcnZlIl0sImNvbW1hbmQiOiIvcC9jbmtpLW1jcCIsImVudiI6eyJDTktJX0RB"
        "VEFfRElSIjoiL3AvZGF0YSJ9LCJuYW1lIjoiY25raSJ9"
    )
    assert clients.import_link("cherry-studio", ROOT, CMD) == (
        "cherrystudio://mcp/install?servers=eyJtY3BTZXJ2ZXJzIjp7ImNua2kiOnsiYXJncyI6WyJzZXJ2ZSJdLCJjb21tYW5kIjoiL3"
        "AvY25raS1tY3AiLCJlbnYiOnsiQ05LSV9EQVRBX0RJUiI6Ii9wL2RhdGEifX19fQ%3D%3D"
    )
    assert clients.import_link("qoder", ROOT, CMD) == (
        "qoder://aicoding.aicoding-deeplink/mcp/add?name=cnki&config=JTdCJTIyYXJncyUyMiUzQSU1QiUyMnNlcnZlJTIyJTVEJT"
        "JDJTIyY29tbWFuZCUyMiUzQSUyMiUyRnAlMkZjbmtpLW1jcCUyMiUyQyUyMmVudiUyMiUzQSU3QiUyMkNOS0lfREFUQV9ESVIlMjIlM0El"
        "MjIlMkZwJTJGZGF0YSUyMiU3RCU3RA%3D%3D"
    )
    assert [c for c in REGISTRY_ORDER if clients.import_link(c, ROOT, CMD)] == [
        "qoder", "trae", "chatbox", "cherry-studio"
    ]


@pytest.mark.parametrize(("client_id", "param"), [
    ("qoder", "config"), ("trae", "config"), ("chatbox", "server"), ("cherry-studio", "servers"),
])
def test_import_links_decode_back_to_the_entry(client_id: str, param: str) -> None:
    link = clients.import_link(client_id, NASTY_ROOT, NASTY_CMD)
    assert link is not None and " " not in link
    (raw,) = parse_qs(urlsplit(link).query)[param]
    decoded = base64.b64decode(raw, validate=True).decode("utf-8")
    if client_id == "qoder":
        decoded = unquote_plus(decoded)
    payload = json.loads(decoded)
    expected = clients.entry(client_id, NASTY_ROOT, NASTY_CMD)
    if client_id == "chatbox":
        assert payload.pop("name") == "cnki"
    if client_id == "cherry-studio":
        payload = payload["mcpServers"]["cnki"]
    assert payload == expected


# --- config paths ----------------------------------------------------------------------------------

HOME_PATHS = {
    "claude-code": (".claude.json",),
    "codex": (".codex", "config.toml"),
    "cursor": (".cursor", "mcp.json"),
    "gemini": (".gemini", "settings.json"),
    "dsh-desktop": (".dsh", "profiles", "desktop", "cordis.patch.yml"),
    "dsh-web": (".dsh", "profiles", "web", "cordis.patch.yml"),
    "workbuddy": (".workbuddy", "mcp.json"),
    "zcode": (".zcode", "cli", "config.json"),
    "kimi-code": (".kimi-code", "mcp.json"),
    "codebuddy": (".codebuddy", ".mcp.json"),
    "qwen-code": (".qwen", "settings.json"),
    "qoder-cli": (".qoder", "settings.json"),
    "windsurf": (".codeium", "windsurf", "mcp_config.json"),
}


@pytest.mark.parametrize("os_name", ["darwin", "windows", "linux"])
def test_config_paths_per_os(os_name: str, tmp_path: Path) -> None:
    home = tmp_path / "home"
    for client_id, parts in HOME_PATHS.items():
        assert clients.config_path(client_id, os_name, env={}, home=home) == home.joinpath(*parts)
    for client in clients.CLIENTS:
        if client.mode != "write":
            assert clients.config_path(client.id, os_name, env={}, home=home) is None
    desktop = clients.config_path("claude-desktop", os_name, env={}, home=home)
    if os_name == "darwin":
        assert desktop == home / "Library" / "Application Support" / "Claude" / "claude_desktop_config.json"
    elif os_name == "windows":
        assert desktop == home / "AppData" / "Roaming" / "Claude" / "claude_desktop_config.json"
        roaming = tmp_path / "roaming"
        assert clients.config_path("claude-desktop", "windows", env={"APPDATA": str(roaming)}, home=home) == (
            roaming / "Claude" / "claude_desktop_config.json"
        )
    else:
        assert desktop is None
    vscode = clients.config_path("vscode", os_name, env={}, home=home)
    app_data = {"darwin": home / "Library" / "Application Support", "windows": home / "AppData" / "Roaming",
                "linux": home / ".config"}[os_name]
    assert vscode == app_data / "Code" / "User" / "mcp.json"


@pytest.mark.parametrize("os_name", ["darwin", "windows", "linux"])
def test_config_path_environment_overrides(os_name: str, tmp_path: Path) -> None:
    env = {
        "CLAUDE_CONFIG_DIR": str(tmp_path / "claude"),
        "CODEX_HOME": str(tmp_path / "codex"),
        "KIMI_CODE_HOME": str(tmp_path / "kimi"),
        "DSH_HOME": str(tmp_path / "dsh"),
    }
    home = tmp_path / "home"
    assert clients.config_path("claude-code", os_name, env, home) == tmp_path / "claude" / ".claude.json"
    assert clients.config_path("codex", os_name, env, home) == tmp_path / "codex" / "config.toml"
    assert clients.config_path("kimi-code", os_name, env, home) == tmp_path / "kimi" / "mcp.json"
    assert clients.config_path("dsh-web", os_name, env, home) == (
        tmp_path / "dsh" / "profiles" / "web" / "cordis.patch.yml"
    )
    assert clients.config_path("cursor", os_name, env, home) == home / ".cursor" / "mcp.json"
    # An empty override counts as unset.
    assert clients.config_path("codex", os_name, {"CODEX_HOME": " "}, home) == home / ".codex" / "config.toml"


def test_home_comes_from_the_environment(tmp_path: Path) -> None:
    assert clients.config_path("cursor", "linux", {"HOME": str(tmp_path)}) == tmp_path / ".cursor" / "mcp.json"
    assert clients.config_path("cursor", "windows", {"USERPROFILE": str(tmp_path), "HOME": "/elsewhere"}) == (
        tmp_path / ".cursor" / "mcp.json"
    )


def test_app_data_dir_per_os(tmp_path: Path) -> None:
    home = tmp_path
    assert clients.app_data_dir("linux", {}, home) == home / ".config"
    assert clients.app_data_dir("linux", {"XDG_CONFIG_HOME": str(tmp_path / "x")}, home) == tmp_path / "x"
    assert clients.app_data_dir("linux", {"XDG_CONFIG_HOME": "relative"}, home) == home / ".config"
    assert clients.app_data_dir("macos", {}, home) == home / "Library" / "Application Support"
    assert clients.app_data_dir("win32", {"APPDATA": str(tmp_path / "r")}, home) == tmp_path / "r"


def test_how_configured_labels() -> None:
    assert clients.how_configured("cursor", "linux") == "可自动写入"
    assert clients.how_configured("claude-desktop", "linux") == "粘贴配置"
    assert clients.how_configured("claude-desktop", "darwin") == "可自动写入"
    assert clients.how_configured("dsh-web", "linux").startswith("可自动写入（需先运行过一次")
    assert clients.how_configured("trae", "linux") == "一键导入链接"
    assert clients.how_configured("vscode", "windows") == "可自动写入（需先运行过一次）"
    assert clients.how_configured("lobehub", "windows") == "粘贴配置"


# --- writing configs: every write client ------------------------------------------------------------


def _merged(path: Path, client_id: str, source: str) -> str:
    """The text of a config file holding ``source`` after the entry was written into it."""
    path.write_text(source, "utf-8")
    clients.write_client_config(client_id, ROOT, path, CMD)
    return path.read_text("utf-8")


def _backups(path: Path) -> list[Path]:
    return sorted(path.parent.glob(path.name + ".cnki-backup-*"))


def _leftovers(path: Path) -> list[Path]:
    return [p for p in path.parent.iterdir() if p.name.startswith(path.name + ".cnki-") and "backup" not in p.name]


@pytest.mark.parametrize("client_id", WRITE_CLIENTS)
def test_every_write_client_gets_a_parsable_config(client_id: str, tmp_path: Path) -> None:
    path = clients.config_path(client_id, "linux", env={}, home=tmp_path) or tmp_path / "Claude" / "c.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    result = clients.write_client_config(client_id, ROOT, path, CMD)
    assert result.changed and result.backup is None and result.path == path
    assert parse_snippet(client_id, path.read_text("utf-8"))["command"] == CMD[0]
    if sys.platform != "win32":
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    again = clients.write_client_config(client_id, ROOT, path, CMD)
    assert not again.changed and _backups(path) == []


@pytest.mark.parametrize("client_id", JSON_WRITE_CLIENTS)
def test_json_merge_keeps_other_servers_and_settings(client_id: str, tmp_path: Path) -> None:
    client = clients.get_client(client_id)
    other = {"command": "npx", "args": ["-y", "other"], "env": {"TOKEN": "x"}}
    document = {"theme": "dark", "numbers": [1, 2.5, 10**20], "nested": {"deep": [{"a": None}]}}
    node = document
    for key in client.key_path:
        node = node.setdefault(key, {})
    node["other"] = other
    path = tmp_path / "config.json"
    original = json.dumps(document, indent=4) + "\n"
    path.write_text(original, "utf-8")
    result = clients.write_client_config(client_id, ROOT, path, CMD)
    merged = json.loads(path.read_text("utf-8"))
    entry = merged
    for key in client.key_path:
        entry = entry[key]
    assert entry["other"] == other
    assert entry["cnki"] == clients.entry(client_id, ROOT, CMD)
    del entry["cnki"]
    assert merged == document
    assert result.backup is not None and result.backup.read_text("utf-8") == original
    assert path.read_text("utf-8").startswith(original[: original.index("\n", 5)])  # untouched prefix
    assert _leftovers(path) == []


JSONC_SOURCE = """// VS Code user settings
{
\t"editor.fontSize": 14, // big text
\t/* MCP servers */
\t"mcpServers": {
\t\t"other": {"command": "x"}, // keep me
\t},
\t"files.exclude": {"**/.git": true,},
}
"""

JSONC_EXPECTED = """// VS Code user settings
{
\t"editor.fontSize": 14, // big text
\t/* MCP servers */
\t"mcpServers": {
\t\t"other": {"command": "x"}, // keep me
\t\t"cnki": {
\t\t\t"args": [
\t\t\t\t"serve"
\t\t\t],
\t\t\t"command": "/p/cnki-mcp",
\t\t\t"env": {
\t\t\t\t"CNKI_DATA_DIR": "/p/data"
\t\t\t},
\t\t\t"type": "stdio"
\t\t},
\t},
\t"files.exclude": {"**/.git": true,},
}
"""


def test_jsonc_comments_trailing_commas_and_tabs_survive(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(JSONC_SOURCE, "utf-8")
    clients.write_client_config("cursor", ROOT, path, CMD)
    assert path.read_text("utf-8") == JSONC_EXPECTED
    assert _backups(path)[0].read_text("utf-8") == JSONC_SOURCE


def test_existing_cnki_entry_is_updated_in_place(tmp_path: Path) -> None:
    source = (
        '{\n  "mcpServers": {\n'
        '    "cnki": {\n      "command": "/old/cnki-mcp", // old install\n      "args": ["serve"],\n'
        '      "env": {"CNKI_DATA_DIR": "/old", "CNKI_HEADLESS": "1"},\n      "timeout": 60000,\n'
        '      "trust": true\n    },\n'
        '    "after": {"command": "y"}\n  }\n}\n'
    )
    path = tmp_path / "settings.json"
    path.write_text(source, "utf-8")
    clients.write_client_config("gemini", ROOT, path, CMD)
    text = path.read_text("utf-8")
    assert text == source.replace('"/old/cnki-mcp"', '"/p/cnki-mcp"').replace('"/old"', '"/p/data"')
    merged = clients.parse_jsonc(text)["mcpServers"]
    # The user's own env variables and tuned timeout stay; the server key order is unchanged.
    assert merged["cnki"]["env"] == {"CNKI_DATA_DIR": ROOT, "CNKI_HEADLESS": "1"}
    assert merged["cnki"]["timeout"] == 60000 and merged["cnki"]["trust"] is True
    assert list(merged) == ["cnki", "after"]


def test_cnki_entry_of_the_wrong_shape_is_replaced(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text('{"mcpServers": {"cnki": "broken", "x": {}}}', "utf-8")
    clients.write_client_config("cursor", ROOT, path, CMD)
    assert json.loads(path.read_text("utf-8"))["mcpServers"] == {"cnki": clients.entry("cursor", ROOT, CMD), "x": {}}


def test_json_edge_layouts(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_bytes(b'\xef\xbb\xbf{\r\n  "mcp": {}\r\n}\r\n')  # BOM, CRLF, empty nested object
    clients.write_client_config("zcode", ROOT, path, CMD)
    data = path.read_bytes()
    assert data.startswith(b"\xef\xbb\xbf{\r\n") and b"\n" not in data.replace(b"\r\n", b"")
    assert clients.parse_jsonc(data.decode("utf-8"))["mcp"]["servers"]["cnki"]["type"] == "stdio"

    path.write_text('{"a": 1}', "utf-8")  # one line stays one line
    clients.write_client_config("workbuddy", ROOT, path, CMD)
    text = path.read_text("utf-8")
    assert "\n" not in text and json.loads(text)["a"] == 1

    path.write_text("{ // nothing yet\n}\n", "utf-8")
    clients.write_client_config("workbuddy", ROOT, path, CMD)
    assert "// nothing yet" in path.read_text("utf-8")
    assert clients.parse_jsonc(path.read_text("utf-8"))["mcpServers"]["cnki"]["command"] == CMD[0]

    path.write_text("  \n", "utf-8")  # blank counts as empty: the snippet itself
    clients.write_client_config("workbuddy", ROOT, path, CMD)
    assert path.read_text("utf-8") == clients.snippet("workbuddy", ROOT, CMD)


def test_missing_file_and_folder_are_created(tmp_path: Path) -> None:
    path = tmp_path / "new" / "deeper" / "mcp.json"
    result = clients.write_client_config("cursor", ROOT, path, CMD)
    assert result.changed and result.backup is None
    assert path.read_text("utf-8") == clients.snippet("cursor", ROOT, CMD)
    if sys.platform != "win32":
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


@pytest.mark.parametrize(("client_id", "content", "reason"), [
    ("cursor", '{"mcpServers": {"a": 1,,}}', "JSON"),
    ("cursor", '{"mcpServers": {"a": 1}', "JSON"),
    ("cursor", "{'single': 1}", "JSON"),
    ("cursor", '{"x": 1} /* unterminated', "JSON"),
    ("cursor", '{"mcpServers": ["not", "an", "object"]}', "mcpServers"),
    ("cursor", "[1, 2]", "顶层"),
    ("zcode", '{"mcp": {"servers": 3}}', "mcp.servers"),
    ("codex", "[mcp_servers.cnki\ncommand = 1\n", "TOML"),
    ("codex", "mcp_servers = 5\n", "mcp_servers"),
    ("dsh-web", "- insert: [unclosed\n", "YAML"),
    ("dsh-web", "key: value\n", "补丁列表"),
])
def test_unparsable_configs_are_left_byte_for_byte(client_id: str, content: str, reason: str, tmp_path: Path) -> None:
    path = tmp_path / "profiles" / "web" / "config"
    path.parent.mkdir(parents=True)
    path.write_bytes(content.encode("utf-8"))
    before = path.stat().st_mtime_ns
    with pytest.raises(CnkiError) as caught:
        clients.write_client_config(client_id, ROOT, path, CMD)
    assert caught.value.code == "CLIENT_CONFIG_INVALID"
    assert str(path) in caught.value.message and reason in caught.value.message
    assert path.read_bytes() == content.encode("utf-8") and path.stat().st_mtime_ns == before
    assert sorted(p.name for p in path.parent.iterdir()) == ["config"]


def test_not_utf8_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_bytes(b'{"a": "\xff"}')
    with pytest.raises(CnkiError) as caught:
        clients.write_client_config("cursor", ROOT, path, CMD)
    assert caught.value.code == "CLIENT_CONFIG_INVALID" and path.read_bytes() == b'{"a": "\xff"}'


@pytest.mark.skipif(sys.platform == "win32", reason="symlinks need privileges on Windows")
def test_symlinked_config_is_refused(tmp_path: Path) -> None:
    real = tmp_path / "dotfiles.json"
    real.write_text('{"a": 1}', "utf-8")
    link = tmp_path / "mcp.json"
    link.symlink_to(real)
    with pytest.raises(CnkiError) as caught:
        clients.write_client_config("cursor", ROOT, link, CMD)
    assert caught.value.code == "CONFIG_SYMLINK" and link.is_symlink()
    assert real.read_text("utf-8") == '{"a": 1}'


def test_a_concurrent_change_is_not_overwritten(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "mcp.json"
    path.write_text('{"a": 1}', "utf-8")
    real_backup = clients.write_backup

    def backup_then_client_writes(target: Path, data: bytes) -> Path:
        made = real_backup(target, data)
        target.write_text('{"a": 2}', "utf-8")  # the client saved its settings meanwhile
        return made

    monkeypatch.setattr(clients, "write_backup", backup_then_client_writes)
    with pytest.raises(CnkiError) as caught:
        clients.write_client_config("cursor", ROOT, path, CMD)
    assert caught.value.code == "CONFIG_CHANGED"
    assert path.read_text("utf-8") == '{"a": 2}' and _leftovers(path) == []


# --- TOML -------------------------------------------------------------------------------------------

TOML_SOURCE = """# my Codex settings
model = "o3"  # favourite

[mcp_servers.other]
command = "x"   # keep me
args = []

[profiles.work]
model = "o4"
"""


def test_toml_merge_appends_and_keeps_every_byte(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(TOML_SOURCE, "utf-8")
    result = clients.write_client_config("codex", ROOT, path, CMD)
    assert path.read_text("utf-8") == TOML_SOURCE + "\n" + clients.snippet("codex", ROOT, CMD)
    assert result.backup is not None and result.backup.read_text("utf-8") == TOML_SOURCE
    parsed = tomllib.loads(path.read_text("utf-8"))
    assert parsed["mcp_servers"]["other"] == {"command": "x", "args": []}
    assert parsed["profiles"] == {"work": {"model": "o4"}}


def test_toml_existing_entry_updated_in_place(tmp_path: Path) -> None:
    source = (
        "[mcp_servers.cnki]  # ours\n"
        'command = "/old"  # old path\n'
        'args = ["serve"]\n'
        "startup_timeout_sec = 60\n"
        "\n"
        "[mcp_servers.cnki.env]\n"
        'CNKI_DATA_DIR = "/old/data"\n'
        'CNKI_HEADLESS = "1"\n'
        "\n"
        "[mcp_servers.other]\n"
        'command = "x"\n'
    )
    path = tmp_path / "config.toml"
    path.write_text(source, "utf-8")
    clients.write_client_config("codex", ROOT, path, CMD)
    text = path.read_text("utf-8")
    assert "# ours" in text and "# old path" in text and "startup_timeout_sec = 60" in text
    parsed = tomllib.loads(text)["mcp_servers"]
    assert parsed["cnki"]["command"] == CMD[0] and parsed["cnki"]["tool_timeout_sec"] == 900
    assert parsed["cnki"]["env"] == {"CNKI_DATA_DIR": ROOT, "CNKI_HEADLESS": "1"}
    assert parsed["other"] == {"command": "x"}
    assert text.index("[mcp_servers.cnki]") < text.index("[mcp_servers.other]")


def test_toml_inline_server_table(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('model = "x"\nmcp_servers = { other = { command = "x" } }\n', "utf-8")
    clients.write_client_config("codex", "C:\\d", path, ["C:\\p\\cnki-mcp.exe", "serve"])
    parsed = tomllib.loads(path.read_text("utf-8"))
    assert parsed["model"] == "x" and parsed["mcp_servers"]["other"] == {"command": "x"}
    assert parsed["mcp_servers"]["cnki"]["command"] == "C:\\p\\cnki-mcp.exe"
    assert parsed["mcp_servers"]["cnki"]["env"] == {"CNKI_DATA_DIR": "C:\\d"}


# --- DeepSeek Harness YAML -------------------------------------------------------------------------


def test_dsh_needs_its_profile_folder(tmp_path: Path) -> None:
    path = clients.config_path("dsh-desktop", "linux", env={}, home=tmp_path)
    assert path is not None
    with pytest.raises(CnkiError) as caught:
        clients.write_client_config("dsh-desktop", ROOT, path, CMD)
    assert caught.value.code == "CLIENT_NOT_INITIALIZED"
    assert "先运行一次 DeepSeek Harness 桌面版" in caught.value.message
    assert not path.parent.exists()


def test_dsh_empty_layer_and_append(tmp_path: Path) -> None:
    path = tmp_path / "cordis.patch.yml"
    path.write_text("[]\n", "utf-8")
    clients.write_client_config("dsh-web", ROOT, path, CMD)
    assert path.read_text("utf-8") == clients.snippet("dsh-web", ROOT, CMD)

    source = "# my patches\n- replace:\n    - id: theme\n      value: dark  # keep\n"
    path.write_text(source, "utf-8")
    clients.write_client_config("dsh-web", ROOT, path, CMD)
    text = path.read_text("utf-8")
    assert text == source + "\n" + clients.snippet("dsh-web", ROOT, CMD)
    assert yaml.safe_load(text)[0] == {"replace": [{"id": "theme", "value": "dark"}]}


def test_dsh_existing_entry_updated_in_place(tmp_path: Path) -> None:
    source = """- insert:
  - name: '@deepseek-ai/dsh-mcp-client'
    id: "mcp-cnki"   # ours
    config:
      serverName: cnki
      command: /old/cnki-mcp
      args:
      - serve
      env:
        CNKI_HEADLESS: "1"
        CNKI_DATA_DIR: /old
      transport: stdio  # keep
- insert:
  - id: other
    config:
      command: untouched
"""
    path = tmp_path / "cordis.patch.yml"
    path.write_text(source, "utf-8")
    clients.write_client_config("dsh-web", ROOT, path, CMD)
    text = path.read_text("utf-8")
    assert '      command: "/p/cnki-mcp"\n      args: ["serve"]\n' in text
    assert '# ours' in text and "transport: stdio  # keep" in text and "command: untouched" in text
    parsed = yaml.safe_load(text)
    assert parsed[0]["insert"][0]["config"]["env"] == {"CNKI_HEADLESS": "1", "CNKI_DATA_DIR": ROOT}
    assert parsed[1] == {"insert": [{"id": "other", "config": {"command": "untouched"}}]}
    assert not clients.write_client_config("dsh-web", ROOT, path, CMD).changed

    # Our own earlier snippet, pointed at a new install.
    path.write_text(clients.snippet("dsh-web", "/old", ["/old/cnki-mcp", "serve"]), "utf-8")
    clients.write_client_config("dsh-web", ROOT, path, CMD)
    assert yaml.safe_load(path.read_text("utf-8")) == yaml.safe_load(clients.snippet("dsh-web", ROOT, CMD))


def test_dsh_entry_in_flow_style_is_updated(tmp_path: Path) -> None:
    path = tmp_path / "cordis.patch.yml"
    path.write_text("# head\n- insert:\n    - id: mcp-cnki  # mine\n      config: {command: x, args: [serve]}\n", "utf-8")
    clients.write_client_config("dsh-web", ROOT, path, CMD)
    text = path.read_text("utf-8")
    config = yaml.safe_load(text)[0]["insert"][0]["config"]
    assert config == {"command": CMD[0], "args": CMD[1:], "env": {"CNKI_DATA_DIR": ROOT}}
    assert text.startswith("# head\n- insert:\n    - id: mcp-cnki")
    assert "# mine" in text


def test_dsh_entry_without_config_mapping_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "cordis.patch.yml"
    source = "- insert:\n    - id: mcp-cnki\n      config: x\n"
    path.write_text(source, "utf-8")
    with pytest.raises(CnkiError) as caught:
        clients.write_client_config("dsh-web", ROOT, path, CMD)
    assert caught.value.code == "CLIENT_CONFIG_INVALID"
    assert "手动" in caught.value.message
    assert path.read_text("utf-8") == source


def test_dsh_update_keeps_comments_and_the_files_own_indentation(tmp_path: Path) -> None:
    source = (
        "# layer for the desktop app\n"
        "- insert:\n"
        "    - id: mcp-cnki\n"
        "      name: '@deepseek-ai/dsh-mcp-client'\n"
        "      config:\n"
        "        # which server\n"
        "        serverName: cnki\n"
        "        command: \"/old/cnki-mcp\"\n"
        "        args: [\"serve\"]\n"
        "        env: {\"CNKI_DATA_DIR\": \"/old\", \"CNKI_HEADLESS\": \"1\"}\n"
        "        toolCallTimeoutMs: 900000  # fifteen minutes\n"
    )
    lines = _merged(tmp_path / "cordis.patch.yml", "dsh-web", source).splitlines()
    assert lines[:7] == source.splitlines()[:7]
    assert lines[7] == '        command: "/p/cnki-mcp"'
    assert lines[9] == '        env: {"CNKI_DATA_DIR": "/p/data", "CNKI_HEADLESS": "1"}'
    assert lines[10].startswith("        toolCallTimeoutMs: 900000 ")
    assert lines[10].endswith("# fifteen minutes")


# --- the JSONC reader -------------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)


@settings(max_examples=60, deadline=None)
@given(json_values, st.sampled_from([None, 1, "\t"]))
def test_parse_jsonc_agrees_with_json(value: object, indent: object) -> None:
    assert clients.parse_jsonc(json.dumps(value, indent=indent)) == value


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.dictionaries(st.text(min_size=1, max_size=6), json_values, max_size=4),
       st.dictionaries(st.text(min_size=1, max_size=6).filter(lambda k: k != "cnki"), json_values, max_size=3),
       st.sampled_from([None, 2, 4, "\t"]))
def test_merge_keeps_any_document(tmp_path: Path, top: dict, servers: dict, indent: object) -> None:
    document = {**top, "mcpServers": servers}
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps(document, indent=indent, ensure_ascii=False), "utf-8")
    clients.write_client_config("cursor", ROOT, path, CMD)
    merged = json.loads(path.read_text("utf-8"))
    assert merged.pop("mcpServers") == {**servers, "cnki": clients.entry("cursor", ROOT, CMD)}
    document.pop("mcpServers")
    assert merged == document
    for stale in path.parent.iterdir():
        stale.unlink()


@pytest.mark.parametrize("text", ["", "{", "[1,,2]", "{\"a\" 1}", "tru", "01", "{\"a\":1}}", "/* x"])
def test_parse_jsonc_rejects_broken_text(text: str) -> None:
    with pytest.raises(ValueError):
        clients.parse_jsonc(text)


# --- doctor's view of configured clients ------------------------------------------------------------


def test_configured_clients_report(tmp_path: Path) -> None:
    home = tmp_path
    def where(client_id: str) -> Path:
        path = clients.config_path(client_id, "linux", env={}, home=home)
        assert path is not None
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    clients.write_client_config("cursor", ROOT, where("cursor"), CMD)
    clients.write_client_config("codex", "/elsewhere", where("codex"), CMD)
    clients.write_client_config("dsh-web", ROOT, where("dsh-web"), CMD)
    where("gemini").write_text('{"mcpServers": {"other": {}}}', "utf-8")  # no cnki entry: not listed
    where("qwen-code").write_text("{broken", "utf-8")
    report = clients.configured_clients(ROOT, CMD, "linux", env={}, home=home)
    assert [(r["client"], r["status"]) for r in report] == [
        ("codex", "different"), ("cursor", "current"), ("dsh-web", "current"), ("qwen-code", "unreadable"),
    ]
    assert report[1]["path"] == str(where("cursor")) and "setup" in report[0]["message"]
    assert clients.configured_clients(ROOT, CMD, "linux", env={}, home=tmp_path / "empty") == []


def test_configured_clients_reports_a_disabled_entry(tmp_path: Path) -> None:
    path = clients.config_path("codex", "linux", env={}, home=tmp_path)
    assert path is not None
    path.parent.mkdir(parents=True)
    path.write_text(clients.snippet("codex", ROOT, CMD).replace("[mcp_servers.cnki]\n", "[mcp_servers.cnki]\nenabled = false\n"), "utf-8")
    (report,) = clients.configured_clients(ROOT, CMD, "linux", env={}, home=tmp_path)
    assert report["status"] == "disabled"
    assert "--client codex --install-client" in report["message"]


# --- names users type --------------------------------------------------------------------------------


@pytest.mark.parametrize(("typed", "client_id"), [
    ("gemini-cli", "gemini"), ("claude", "claude-code"), ("vs-code", "vscode"), ("code", "vscode"),
    ("VS Code", "vscode"), ("Claude_Desktop", "claude-desktop"), ("qwen", "qwen-code"), (" Cursor ", "cursor"),
])
def test_aliases_name_a_client(typed: str, client_id: str) -> None:
    assert clients.get_client(typed).id == client_id


@pytest.mark.parametrize(("typed", "nearest"), [("gemni", "gemini"), ("curosr", "cursor"), ("gemini-clii", "gemini")])
def test_unknown_client_names_the_nearest_id_and_the_list(typed: str, nearest: str) -> None:
    with pytest.raises(CnkiError) as caught:
        clients.get_client(typed)
    assert caught.value.code == "UNKNOWN_CLIENT"
    assert f"是不是 {nearest}？" in caught.value.message
    assert "claude-desktop、claude-code、codex" in caught.value.message
    assert caught.value.details["suggestion"] == nearest


def test_unknown_client_without_a_near_name_only_lists() -> None:
    with pytest.raises(CnkiError) as caught:
        clients.get_client("notepad")
    assert "是不是" not in caught.value.message
    assert "generic" in caught.value.message


# --- Claude Desktop's Store (MSIX) install on Windows --------------------------------------------------


def _windows_user(tmp_path: Path, *packages: str) -> tuple[dict[str, str], Path]:
    """A fake Windows profile: APPDATA, LOCALAPPDATA and the Store package folders given."""
    home = tmp_path / "Users" / "张三"
    env = {"APPDATA": str(home / "AppData" / "Roaming"), "LOCALAPPDATA": str(home / "AppData" / "Local")}
    for name in packages:
        (home / "AppData" / "Local" / "Packages" / name).mkdir(parents=True)
    return env, home


def test_claude_desktop_msix_package_is_where_the_app_reads(tmp_path: Path) -> None:
    env, home = _windows_user(tmp_path, "Claude_pzs8sxrjxfjjc", "ClaudeHelper.Other", "Microsoft.Paint_8wekyb3d8bbwe")
    path = clients.config_path("claude-desktop", "windows", env, home)
    assert path == (home / "AppData" / "Local" / "Packages" / "Claude_pzs8sxrjxfjjc" / "LocalCache" / "Roaming"
                    / "Claude" / "claude_desktop_config.json")


def test_claude_desktop_without_msix_uses_the_classic_path(tmp_path: Path) -> None:
    env, home = _windows_user(tmp_path, "Microsoft.Paint_8wekyb3d8bbwe")
    path = clients.config_path("claude-desktop", "windows", env, home)
    assert path == home / "AppData" / "Roaming" / "Claude" / "claude_desktop_config.json"


def test_claude_desktop_msix_without_localappdata_looks_under_home(tmp_path: Path) -> None:
    _, home = _windows_user(tmp_path, "Claude_abc")
    path = clients.config_path("claude-desktop", "windows", {}, home)
    assert path == home / "AppData" / "Local" / "Packages" / "Claude_abc" / "LocalCache" / "Roaming" / "Claude" / (
        "claude_desktop_config.json"
    )


def test_several_claude_desktop_installs_are_not_guessed(tmp_path: Path) -> None:
    env, home = _windows_user(tmp_path, "Claude_one", "Claude_two")
    paths = clients.config_paths("claude-desktop", "windows", env, home)
    with pytest.raises(CnkiError) as caught:
        clients.config_path("claude-desktop", "windows", env, home)
    assert [p.parts[-5] for p in paths] == ["Claude_one", "Claude_two"]
    assert caught.value.code == "CLIENT_CONFIG_AMBIGUOUS"
    assert "Claude_one" in caught.value.message


def test_msix_rule_applies_only_on_windows(tmp_path: Path) -> None:
    env, home = _windows_user(tmp_path, "Claude_pzs8sxrjxfjjc")
    path = clients.config_path("claude-desktop", "darwin", env, home)
    assert path == home / "Library" / "Application Support" / "Claude" / "claude_desktop_config.json"


def test_doctor_view_covers_every_msix_install(tmp_path: Path) -> None:
    env, home = _windows_user(tmp_path, "Claude_one", "Claude_two")
    for path in clients.config_paths("claude-desktop", "windows", env, home):
        path.parent.mkdir(parents=True)
        clients.write_client_config("claude-desktop", ROOT, path, CMD)
    report = clients.configured_clients(ROOT, CMD, "windows", env, home)
    assert [(r["client"], r["status"]) for r in report] == [("claude-desktop", "current"), ("claude-desktop", "current")]


# --- which clients are installed -----------------------------------------------------------------------


def test_installed_clients_from_programs_files_and_folders(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".cursor").mkdir(parents=True)
    (home / ".claude.json").write_text("{}", "utf-8")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("codex", "code"):
        (bin_dir / name).write_text("#!/bin/sh\n", "utf-8")
        (bin_dir / name).chmod(0o755)
    found = clients.installed_clients("linux", {"PATH": str(bin_dir)}, home)
    assert found == ["claude-code", "codex", "cursor", "vscode"]


def test_nothing_installed_in_an_empty_home(tmp_path: Path) -> None:
    assert clients.installed_clients("linux", {"PATH": str(tmp_path / "none")}, tmp_path) == []


# --- merges of odd but valid files ------------------------------------------------------------------


@pytest.mark.parametrize("client_id", ["claude-desktop", "cursor", "vscode", "zcode"])
def test_null_server_table_is_filled(client_id: str, tmp_path: Path) -> None:
    key_path = clients.get_client(client_id).key_path
    path = tmp_path / "config.json"
    path.write_text('{\n  // mine\n  "theme": "dark",\n  "' + key_path[0] + '": null\n}\n', "utf-8")
    clients.write_client_config(client_id, ROOT, path, CMD)
    text = path.read_text("utf-8")
    merged = clients.parse_jsonc(text)
    node = merged
    for key in key_path:
        node = node[key]
    assert node == {"cnki": clients.entry(client_id, ROOT, CMD)}
    assert merged["theme"] == "dark"
    assert "// mine" in text


@pytest.mark.parametrize("comments", ["// nothing yet\n", "/* a\n   block */\n\n", "\ufeff// with a BOM\r\n"])
def test_a_file_of_only_comments_gets_the_snippet_after_them(comments: str, tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_bytes(comments.encode("utf-8"))
    clients.write_client_config("cursor", ROOT, path, CMD)
    text = path.read_text("utf-8")
    assert text.startswith(comments.rstrip("\r\n"))
    assert clients.parse_jsonc(text) == json.loads(clients.snippet("cursor", ROOT, CMD))


def test_comment_only_toml_and_yaml_files_merge(tmp_path: Path) -> None:
    toml_path = tmp_path / "config.toml"
    toml_path.write_text("# codex settings\n", "utf-8")
    yaml_path = tmp_path / "cordis.patch.yml"
    yaml_path.write_text("# no patches yet\n", "utf-8")
    clients.write_client_config("codex", ROOT, toml_path, CMD)
    clients.write_client_config("dsh-web", ROOT, yaml_path, CMD)
    assert tomllib.loads(toml_path.read_text("utf-8"))["mcp_servers"]["cnki"]["command"] == CMD[0]
    assert toml_path.read_text("utf-8").startswith("# codex settings\n")
    assert yaml.safe_load(yaml_path.read_text("utf-8"))[0]["insert"][0]["config"]["command"] == CMD[0]
    assert yaml_path.read_text("utf-8").startswith("# no patches yet\n")


def test_disabled_json_entry_is_enabled_only_when_asked(tmp_path: Path) -> None:
    path = tmp_path / "cline.json"
    entry = {**clients.entry("cline", ROOT, CMD), "disabled": True}
    path.write_text(json.dumps({"mcpServers": {"cnki": entry}}, indent=2), "utf-8")
    kept = clients.write_client_config("cline", ROOT, path, CMD)
    enabled = clients.write_client_config("cline", ROOT, path, CMD, enable=True)
    assert kept.changed is False
    assert enabled.changed is True
    assert json.loads(path.read_text("utf-8"))["mcpServers"]["cnki"]["disabled"] is False


def test_disabled_codex_entry_is_enabled_keeping_comments(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    source = clients.snippet("codex", ROOT, CMD).replace(
        "[mcp_servers.cnki]\n", "[mcp_servers.cnki]\nenabled = false  # paused for now\n"
    )
    path.write_text("# my codex\n" + source, "utf-8")
    clients.write_client_config("codex", ROOT, path, CMD, enable=True)
    text = path.read_text("utf-8")
    assert tomllib.loads(text)["mcp_servers"]["cnki"]["enabled"] is True
    assert text.startswith("# my codex\n")
    assert clients.is_disabled(tomllib.loads(text)["mcp_servers"]["cnki"]) is False


def test_docs_table_follows_the_registry() -> None:
    text = (Path(__file__).resolve().parents[1] / "docs" / "clients.md").read_text("utf-8")
    rows = [line.split(" | ") for line in text.splitlines() if line.startswith("| `")]
    documented = [(row[0].strip("| `"), row[1], row[2].split()[0]) for row in rows]
    wanted = {"write": ("file", "CLI"), "link": ("link",), "paste": ("paste",)}
    assert [row[0] for row in documented] == REGISTRY_ORDER
    assert [name for _, name, _ in documented] == [c.name for c in clients.CLIENTS]
    assert [cid for cid, _, how in documented if how not in wanted[clients.get_client(cid).mode]] == []


# --- issue 30 -----------------------------------------------------------------------------------------


def test_claude_desktop_exists_on_macos_and_windows_only() -> None:
    desktop = clients.get_client("claude-desktop")
    assert [clients.available(desktop, name) for name in ("darwin", "windows", "linux")] == [True, True, False]
    assert all(clients.available(client, "linux") for client in clients.CLIENTS if client.id != "claude-desktop")


def test_the_via_words_keep_the_scope(tmp_path: Path) -> None:
    from cnki_mcp.setup.client_cli import _subcommand

    value = clients.entry("claude-code", tmp_path)
    assert _subcommand(clients._claude_cli(value)[1:]) == ["mcp", "add-json", "--scope", "user"]
    assert _subcommand(clients._codex_cli(clients.entry("codex", tmp_path))[1:]) == ["mcp", "add"]


def test_an_http_entry_replaces_a_stdio_one_whole_and_keeps_comments(tmp_path: Path) -> None:
    target = tmp_path / "settings.json"
    stdio = clients.entry("gemini", tmp_path)
    target.write_text('{\n  // mine\n  "mcpServers": {"cnki": ' + json.dumps(stdio) + ', "x": {"command": "y"}}\n}\n', "utf-8")
    written = clients.write_client_config("gemini", tmp_path, target, http=("http://127.0.0.1:8765/mcp", "t0k"))
    text = target.read_text("utf-8")
    assert written.changed and "// mine" in text
    assert clients.existing_entry("gemini", target) == {"headers": {"Authorization": "Bearer t0k"}, "httpUrl": "http://127.0.0.1:8765/mcp"}
    assert '"x": {"command": "y"}' in text
    again = clients.write_client_config("gemini", tmp_path, target, http=("http://127.0.0.1:8765/mcp", "t0k"))
    assert again.changed is False


def test_the_chinese_client_guide_has_a_quick_start_for_every_client() -> None:
    text = (Path(__file__).resolve().parents[1] / "docs" / "clients.zh.md").read_text("utf-8")
    quick_starts = text.split("## 每个客户端的快速上手", 1)[1].split("\n## ", 1)[0]  # the config-file table follows
    rows = [line.split(" | ")[0].strip("| `") for line in quick_starts.splitlines() if line.startswith("| `")]
    assert rows == [client.id for client in clients.CLIENTS]
