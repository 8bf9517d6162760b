"""Issue 30, item 6's last gap: with CNKI_LANG=en (or an English locale) every line setup, config, doctor,
uninstall, help and bare cnki-mcp print is English; Chinese stays the default.

The rules first (the one table of lines, the clients' names and hints, the command modules holding no
Chinese of their own), then real subprocesses of ``python -m cnki_mcp`` in a throwaway HOME.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import cnki_mcp
from cnki_mcp.core import logs, settings
from cnki_mcp.core.display import browser_output_cause, display_problem
from cnki_mcp.setup import clients, messages
from tests.terminal import typed
from tests.test_cli import on_a_terminal

HAN = re.compile(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")  # Han characters and full-width punctuation
PACKAGE = Path(cnki_mcp.__file__).parent
# The modules that print the commands' lines. cli_words.py is left out: its Chinese-only table turns
# click's English usage errors into Chinese, and English keeps click's own text.
COMMAND_MODULES = sorted([PACKAGE / "cli.py", *(PACKAGE / "setup").glob("*.py")])
COMMAND_MODULES.remove(PACKAGE / "setup" / "cli_words.py")
# Words a person types (answers, client names), accepted in either language and never printed.
TYPED = {"_YES", "ALIASES", "_ALL", "_CHOICE_SEPARATORS"}


# --- the rules ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("key", sorted(messages.LINES))
def test_every_line_has_both_languages_with_the_same_fields(key: str) -> None:
    zh, en = messages.LINES[key]
    assert zh.strip() and en.strip(), key
    assert messages.fields(zh) == messages.fields(en), key
    assert HAN.findall(en) == [], key


def test_the_line_follows_the_language_at_the_moment_it_is_printed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CNKI_LANG", "en")
    english = messages.msg("doctor.problems", problems=2, tail="")
    monkeypatch.setenv("CNKI_LANG", "zh")
    chinese = messages.msg("doctor.problems", problems=2, tail="")
    monkeypatch.delenv("CNKI_LANG")
    monkeypatch.setenv("LANG", "en_US.UTF-8")
    by_locale = messages.msg("doctor.all_well")
    assert english == "Verdict: problems found: 2; follow the lines marked ✗ above."
    assert chinese == "结论：发现 2 个问题，请按上面标 ✗ 的提示处理。"
    assert by_locale == "Verdict: all is well."


@pytest.mark.parametrize("client", clients.CLIENTS, ids=lambda client: client.id)
def test_every_client_name_hint_and_note_has_an_english_side(client: clients.Client, monkeypatch: pytest.MonkeyPatch) -> None:
    for words in (client.label, client.where, client.after):
        assert isinstance(words, str) or (len(words) == 2 and all(side.strip() for side in words)), client.id
    monkeypatch.setenv("CNKI_LANG", "en")
    assert HAN.findall(client.name + client.hint + client.note) == [], client.id
    monkeypatch.setenv("CNKI_LANG", "zh")
    assert client.name == (client.label if isinstance(client.label, str) else client.label[0])


def _one_language_literals(path: Path) -> list[str]:
    """Chinese string constants that are not the Chinese side of a (Chinese, English) pair."""
    tree = ast.parse(path.read_text("utf-8"))
    allowed: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and ast.get_docstring(node):
            allowed.add(id(node.body[0].value))  # type: ignore[attr-defined]
        pair: list[ast.expr] | None = None
        if isinstance(node, ast.Tuple) and len(node.elts) == 2:
            pair = node.elts
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "say" and len(node.args) == 2:
            pair = node.args
        english = pair[1] if pair is not None else None
        if isinstance(english, (ast.Constant, ast.JoinedStr)) and not HAN.search(ast.unparse(english)):
            allowed.update(id(sub) for sub in ast.walk(pair[0]))  # type: ignore[index]
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        if any(getattr(target, "id", None) in TYPED for target in targets):
            allowed.update(id(sub) for sub in ast.walk(node))
    return [
        f"{path.name}:{node.lineno}: {node.value[:40]}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and HAN.search(node.value) and id(node) not in allowed
    ]


def test_the_command_modules_hold_no_line_in_one_language_only() -> None:
    found = [literal for path in COMMAND_MODULES for literal in _one_language_literals(path)]
    assert found == []


def test_the_guard_finds_a_chinese_only_line(tmp_path: Path) -> None:
    module = tmp_path / "bad.py"
    module.write_text('"""模块说明。"""\nimport click\nclick.echo("已完成。")\nOK = ("完成", "Done")\n', "utf-8")
    assert _one_language_literals(module) == ["bad.py:3: 已完成。"]


def test_the_screen_and_log_level_sentences_have_an_english_side(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CNKI_LOG_LEVEL", "loud")
    remote = display_problem({"SSH_TTY": "/dev/pts/1"}, "linux", english=True)
    cause = browser_output_cause(["[1:1] Missing X server or $DISPLAY"], english=True)
    _, warning = logs.level_setting(english=True)
    _, chinese_warning = logs.level_setting()
    assert remote is not None and remote.startswith(
        "This is an SSH session, without a screen: the browser window that login and captchas need cannot open. You can: "
    )
    assert cause is not None and cause.startswith("No screen (the browser reports a missing X server or $DISPLAY). You can: ")
    assert warning == "CNKI_LOG_LEVEL='loud' is not a log level (DEBUG, INFO, WARNING, ERROR, CRITICAL), so WARNING is used."
    assert chinese_warning == "CNKI_LOG_LEVEL='loud' 不是日志级别（可选 DEBUG、INFO、WARNING、ERROR、CRITICAL），已使用 WARNING。"
    assert HAN.findall(remote + cause) == []


# --- the commands, as a user runs them -------------------------------------------------------------

_MACHINE = ("DISPLAY", "WAYLAND_DISPLAY", "SSH_CONNECTION", "SSH_TTY", "CNKI_HEADLESS", "CNKI_LANG", "LC_ALL",
            "LC_MESSAGES", "LANG", "CNKI_REQUEST_INTERVAL_MS", "CNKI_LOG_LEVEL", "CLAUDE_CONFIG_DIR", "CODEX_HOME",
            "KIMI_CODE_HOME", "DSH_HOME", "XDG_CONFIG_HOME", "CNKI_BROWSER_PATH")


def english_env(data_dir: Path, home: Path, **extra: str) -> dict[str, str]:
    base = {key: value for key, value in os.environ.items() if key not in _MACHINE}
    return {**base, "HOME": str(home), "CNKI_DATA_DIR": str(data_dir), "LANG": "zh_CN.UTF-8", "CNKI_LANG": "en", **extra}


def run_en(*args: str, data_dir: Path, home: Path, stdin: str | None = None, timeout: float = 90,
           **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cnki_mcp", *args], input=stdin, capture_output=True, text=True,
                          env=english_env(data_dir, home, **extra), timeout=timeout)


def chinese_in(done: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in (done.stdout + done.stderr).splitlines() if HAN.search(line)]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    folder = tmp_path / "home"
    folder.mkdir()
    return folder


def test_doctor_and_its_json_speak_english(isolated_data_dir: Path, home: Path) -> None:
    (home / ".cursor").mkdir()
    (home / ".cursor" / "mcp.json").write_text('{"mcpServers": {"cnki": ', "utf-8")  # a client file it cannot read
    text = run_en("doctor", data_dir=isolated_data_dir, home=home, CNKI_LOG_LEVEL="loud", CNKI_REQUEST_INTERVAL_MS="x")
    machine = run_en("doctor", "--json", data_dir=isolated_data_dir, home=home)
    lines = text.stdout.splitlines()
    report = json.loads(machine.stdout)
    assert (text.returncode, machine.returncode) == (1, 1)
    assert chinese_in(text) == [] and chinese_in(machine) == []
    assert lines[0] == f"cnki-mcp {cnki_mcp.__version__} local checks (data directory: {isolated_data_dir})"
    assert lines[1] == (f"⚠ This data directory was never set up ({isolated_data_dir / 'config.json'} is missing): run "
                        "cnki-mcp setup, which chooses and checks the browser and connects a client.")
    assert f"✗ Cursor: cannot be read or parsed: the content is incomplete ({home / '.cursor' / 'mcp.json'})" in lines
    assert "✗ CNKI_LOG_LEVEL='loud' is not a log level (DEBUG, INFO, WARNING, ERROR, CRITICAL), so WARNING is used." in lines
    default = settings.POSITIVE_INT_SETTINGS["CNKI_REQUEST_INTERVAL_MS"]
    assert (f"⚠ The environment value CNKI_REQUEST_INTERVAL_MS='x' is not a positive integer, so the default {default} is "
            "used; correct or remove it in the env of the client's config.") in lines
    assert lines[-1] == "Verdict: problems found: 2; follow the lines marked ✗ above, and the warnings (⚠): 3."
    assert report["verdict"]["message"] == "Verdict: problems found: 1; follow the lines marked ✗ above, and the warnings (⚠): 2."
    assert [check["name"] for check in report["checks"]] == ["config", "route", "browser", "display", "clients", "log"]


def test_a_config_json_that_cannot_be_read_is_said_in_english_by_doctor_and_the_field_check(isolated_data_dir: Path, home: Path) -> None:
    isolated_data_dir.mkdir(parents=True)
    (isolated_data_dir / "config.json").write_text('{"browser": ', "utf-8")
    said = (f"config.json cannot be read: correct the file or delete it, then try again. "
            f"(path: {isolated_data_dir / 'config.json'}; reason: Input data was truncated)")
    local = run_en("doctor", data_dir=isolated_data_dir, home=home)
    site = run_en("doctor", "--site", data_dir=isolated_data_dir, home=home)
    assert local.returncode == 1
    assert f"✗ config.json has a problem: {said}" in local.stdout.splitlines()
    assert chinese_in(local) == []
    assert site.returncode == 1
    assert site.stderr.splitlines() == [f"CONFIG_INVALID: {said}"]
    assert chinese_in(site) == []


def test_doctor_names_a_browser_setting_that_points_nowhere_in_english(isolated_data_dir: Path, home: Path) -> None:
    gone = home / "no" / "chrome"
    done = run_en("doctor", data_dir=isolated_data_dir, home=home, CNKI_BROWSER_PATH=str(gone))
    assert done.returncode == 1
    assert (f"✗ Browser: {gone}, named by CNKI_BROWSER_PATH, does not exist; no Chrome, Edge or Chromium to launch; "
            "run cnki-mcp setup --browser <browser path>, or set CNKI_BROWSER_PATH.") in done.stdout.splitlines()
    assert chinese_in(done) == []


def test_config_and_help_speak_english(isolated_data_dir: Path, home: Path) -> None:
    lingma = run_en("config", "lingma", data_dir=isolated_data_dir, home=home)
    gemini = run_en("config", "gemini", data_dir=isolated_data_dir, home=home)
    link = run_en("config", "cursor", "--link", data_dir=isolated_data_dir, home=home)
    http = run_en("config", "cursor", "--http", data_dir=isolated_data_dir, home=home)
    rotated = run_en("config", "--rotate-token", data_dir=isolated_data_dir, home=home)
    unknown = run_en("config", "cursr", data_dir=isolated_data_dir, home=home)
    helped = run_en("help", data_dir=isolated_data_dir, home=home)
    for done in (lingma, gemini, link, http, rotated, unknown, helped):
        assert chinese_in(done) == [], done.args
    assert lingma.stderr == "This config belongs to Tongyi Lingma: paste it into: Tongyi Lingma personal settings → MCP services → + → add by config file.\n"
    assert gemini.stderr.splitlines()[1].startswith("Also: Gemini CLI connects MCP servers only in trusted folders: ")
    assert link.stdout.startswith("cursor://anysphere.cursor-deeplink/mcp/install?name=cnki&config=")
    assert link.stderr == "Open this link on the computer with Cursor; Cursor asks you to confirm the install.\n"
    assert http.stderr == (f"This config for the HTTP server (cnki-mcp serve --http) belongs to Cursor: merge it into "
                           f"{home / '.cursor' / 'mcp.json'} (or run cnki-mcp setup --client cursor --http to write it).\n")
    assert rotated.stderr == ("The HTTP token was replaced; the old one no longer works. Print the new config with "
                              "cnki-mcp config <client> --http.\n")
    assert unknown.returncode == 1
    assert unknown.stderr.startswith("UNKNOWN_CLIENT: Unknown client 'cursr'. Did you mean cursor? Clients: claude-desktop, ")
    assert "  generic          Other stdio client (generic JSON)" in helped.stdout.splitlines()
    assert "  cnki-mcp watch run [<name>...]" in helped.stdout.splitlines()


def test_usage_mistakes_of_setup_and_serve_speak_english(isolated_data_dir: Path, home: Path) -> None:
    alone = run_en("setup", "--install-client", data_dir=isolated_data_dir, home=home)
    http = run_en("setup", "--http", data_dir=isolated_data_dir, home=home)
    host = run_en("serve", "--host", "0.0.0.0", data_dir=isolated_data_dir, home=home)
    assert alone.stderr.splitlines()[0] == ("CLIENT_REQUIRED: --install-client needs --client to name the client to "
                                            "connect, e.g. --client claude-code --install-client; cnki-mcp help lists every client.")
    assert alone.stdout == "No file was changed.\n"
    assert http.stderr.splitlines()[0] == "CLIENT_REQUIRED: --http needs --client to name the client to connect, e.g. --client cursor --http."
    assert host.stderr == "INVALID_ARGUMENT: --host can only be used with --http.\n"
    assert [chinese_in(done) for done in (alone, http, host)] == [[], [], []]


def test_setup_without_a_terminal_says_which_flags_decide_in_english(isolated_data_dir: Path, home: Path) -> None:
    done = run_en("setup", data_dir=isolated_data_dir, home=home, stdin="")
    assert done.returncode == 2
    assert done.stderr.splitlines()[0].startswith(
        "SETUP_NEEDS_TERMINAL: Standard input is not a terminal, so setup cannot ask, and it will not take every default unseen."
    )
    assert "--headless or --no-headless" in done.stderr
    assert chinese_in(done) == []


@pytest.mark.browser
def test_setup_doctor_and_uninstall_in_a_throwaway_home_speak_english(
    chromium: str, isolated_data_dir: Path, home: Path
) -> None:
    setup = run_en("setup", "--browser", chromium, "--client", "cursor", "--install-client", data_dir=isolated_data_dir, home=home)
    doctor = run_en("doctor", data_dir=isolated_data_dir, home=home)
    declined = run_en("uninstall", data_dir=isolated_data_dir, home=home, stdin="n\n")
    removed = run_en("uninstall", "--yes", "--data", data_dir=isolated_data_dir, home=home)
    target = home / ".cursor" / "mcp.json"
    assert setup.returncode == 0, setup.stderr
    assert [chinese_in(done) for done in (setup, doctor, declined, removed)] == [[], [], [], []]
    said = setup.stdout.splitlines()
    assert said[0] == "cnki-mcp setup (installed from source or pip: needs Python 3.11 or newer)"
    assert "Starting the browser headless to check it..." in said and "The browser check passed." in said
    assert f"Client config updated: {target}" in said
    assert re.fullmatch(r"Install check passed: \d+ MCP tools\. Restart or reconnect Cursor\.", said[-3]) is not None
    assert said[-1] == (f"Changed: wrote the browser setting {isolated_data_dir / 'config.json'}; the config snippet "
                        f"{isolated_data_dir / 'cnki-cursor.json'}; Cursor's config {target}.")
    assert f"✓ Cursor is connected to this program ({target})" in doctor.stdout.splitlines()
    assert declined.stdout.splitlines() == [
        "cnki-mcp uninstall will remove:",
        f"  - Cursor: {target} (remove mcpServers.cnki)",
        f"  The data directory {isolated_data_dir} is kept (add --data to delete it).",
        "Remove these? [y/N] Cancelled; nothing was changed.",
    ]
    assert removed.stdout.splitlines()[-2] == f"Deleted the data directory {isolated_data_dir}"
    assert removed.stdout.splitlines()[-3] == (f"Deleted {target}: setup created it and nothing else is in it without "
                                               "cnki (so are the empty folders setup created)")
    assert not target.parent.exists()


@pytest.mark.browser
@pytest.mark.slow
def test_the_asking_setup_speaks_english(chromium: str, isolated_data_dir: Path, home: Path) -> None:
    # Enter takes the first browser; "lingma" is a client pasted by hand, so nothing else is asked.
    with typed("\nlingma\n") as terminal:  # setup asks only on a terminal
        done = subprocess.run([sys.executable, "-m", "cnki_mcp", "setup"], stdin=terminal, capture_output=True, text=True,
                              env=english_env(isolated_data_dir, home, CNKI_BROWSER_PATH=chromium, DISPLAY=":0"),
                              timeout=120)
    said = done.stdout.splitlines()
    assert done.returncode == 0, done.stderr
    assert chinese_in(done) == []
    assert "Clients you can connect:" in said
    assert any(line.startswith("Enter a client number or name (Enter = ") for line in said)
    assert ("Tongyi Lingma's config was not written (it is pasted by hand): paste the config snippet above into: "
            "Tongyi Lingma personal settings → MCP services → + → add by config file.") in said


@pytest.mark.skipif(sys.platform == "win32", reason="a pseudo-terminal")
def test_bare_command_on_a_terminal_explains_itself_in_english(isolated_data_dir: Path, home: Path) -> None:
    done = on_a_terminal(english_env(isolated_data_dir, home))
    lines = done.stderr.decode("utf-8").splitlines()
    assert done.returncode == 0
    assert lines[0] == "cnki-mcp is an MCP server: an AI client (Claude Code, Cursor, ...) starts it; it is not used in a terminal."
    assert [line for line in lines if HAN.search(line)] == []
