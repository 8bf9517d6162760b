"""The release: setup scripts, archive naming and packing, generated docs, release workflow, and one
end-to-end run of the frozen Linux build (build → unpack into a path with spaces and Chinese characters
→ 安装设置.sh → a real MCP client talks to the frozen server).
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
INSTALLERS = REPO / "installers"
POSIX_SCRIPTS = ("安装设置.sh", "安装设置.command")


def _load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


build = _load("cnki_build", REPO / "packaging" / "build.py")
gen_tool_docs = _load("cnki_gen_tool_docs", REPO / "packaging" / "gen_tool_docs.py")


# --- setup scripts ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", [*POSIX_SCRIPTS, "安装设置.cmd"])
def test_setup_scripts_are_executable(name: str) -> None:
    mode = (INSTALLERS / name).stat().st_mode
    assert mode & stat.S_IXUSR and mode & stat.S_IXGRP and mode & stat.S_IXOTH


@pytest.mark.parametrize("name", POSIX_SCRIPTS)
def test_posix_scripts_are_plain_sh_with_lf(name: str) -> None:
    data = (INSTALLERS / name).read_bytes()
    assert data.startswith(b"#!/bin/sh\n")
    assert b"\r" not in data
    subprocess.run(["sh", "-n", str(INSTALLERS / name)], check=True)


def test_windows_script_is_crlf_utf8_and_quotes_its_paths() -> None:
    data = (INSTALLERS / "安装设置.cmd").read_bytes()
    lines = data.split(b"\r\n")
    assert lines[-1] == b"" and all(b"\n" not in line for line in lines)
    text = data.decode("utf-8")
    assert "chcp 65001" in text
    before_chcp = text[: text.index("chcp 65001")]
    assert before_chcp.isascii()  # read in the console's old code page
    assert 'cd /d "%~dp0"' in text
    assert '"%~dp0cnki-mcp.exe" setup %*' in text
    assert "\npause" in text.replace("\r", "")
    for line in text.splitlines():  # every use of the script's folder sits inside double quotes
        for piece in line.split('"')[::2]:
            assert "%~dp0" not in piece, line


def _fake_release(folder: Path) -> Path:
    """A release folder whose cnki-mcp records its arguments and working directory."""
    folder.mkdir(parents=True)
    for name in POSIX_SCRIPTS:
        shutil.copy2(INSTALLERS / name, folder / name)
    fake = folder / "cnki-mcp"
    fake.write_text(
        '#!/bin/sh\n{ pwd; for a in "$@"; do printf "<%s>\\n" "$a"; done; } > "$(dirname "$0")/called.txt"\nexit 3\n',
        encoding="utf-8",
    )
    fake.chmod(0o755)
    return folder


@pytest.mark.parametrize("name", POSIX_SCRIPTS)
def test_posix_scripts_run_from_any_directory_and_pass_arguments(tmp_path: Path, name: str) -> None:
    folder = _fake_release(tmp_path / "下载 的 文件" / "cnki-mcp")
    done = subprocess.run(
        ["sh", str(folder / name), "--browser", "/opt/我的 浏览器/chrome", "--client", "claude-code"],
        cwd=tmp_path, stdin=subprocess.DEVNULL, capture_output=True, timeout=10,
    )
    assert done.returncode == 3  # the program's own exit status comes back
    assert (folder / "called.txt").read_text(encoding="utf-8").splitlines() == [
        str(folder), "<setup>", "<--browser>", "</opt/我的 浏览器/chrome>", "<--client>", "<claude-code>",
    ]


def test_macos_script_does_not_wait_without_a_terminal(tmp_path: Path) -> None:
    folder = _fake_release(tmp_path / "a b" / "cnki-mcp")
    done = subprocess.run(["sh", str(folder / "安装设置.command")], stdin=subprocess.DEVNULL, capture_output=True, timeout=10)
    assert done.returncode == 3
    assert (folder / "called.txt").read_text(encoding="utf-8").splitlines() == [str(folder), "<setup>"]


@pytest.mark.parametrize("name", POSIX_SCRIPTS)
def test_posix_scripts_restore_a_lost_executable_bit(tmp_path: Path, name: str) -> None:
    folder = _fake_release(tmp_path / "解压后" / "cnki-mcp")
    (folder / "cnki-mcp").chmod(0o644)
    done = subprocess.run(["sh", str(folder / name), "--client", "generic"], stdin=subprocess.DEVNULL, capture_output=True, timeout=10)
    assert done.returncode == 3
    assert (folder / "called.txt").read_text(encoding="utf-8").splitlines() == [str(folder), "<setup>", "<--client>", "<generic>"]


@pytest.mark.parametrize("name", POSIX_SCRIPTS)
def test_posix_scripts_explain_a_missing_program(tmp_path: Path, name: str) -> None:
    folder = tmp_path / "空 文件夹"
    folder.mkdir()
    shutil.copy2(INSTALLERS / name, folder / name)
    done = subprocess.run(["sh", str(folder / name)], stdin=subprocess.DEVNULL, capture_output=True, timeout=10)
    assert done.returncode == 1
    assert "没有找到 cnki-mcp" in done.stderr.decode("utf-8")


# --- naming and archives ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("system", "machine", "label", "archive", "exe", "script"),
    [
        ("darwin", "arm64", "macOS-arm64", "cnki-mcp-1.2.3-macOS-arm64.tar.gz", "cnki-mcp", "安装设置.command"),
        ("darwin", "x86_64", "macOS-x64", "cnki-mcp-1.2.3-macOS-x64.tar.gz", "cnki-mcp", "安装设置.command"),
        ("win32", "AMD64", "Windows-x64", "cnki-mcp-1.2.3-Windows-x64.zip", "cnki-mcp.exe", "安装设置.cmd"),
        ("linux", "x86_64", "Linux-x64", "cnki-mcp-1.2.3-Linux-x64.tar.gz", "cnki-mcp", "安装设置.sh"),
        ("linux", "aarch64", "Linux-arm64", "cnki-mcp-1.2.3-Linux-arm64.tar.gz", "cnki-mcp", "安装设置.sh"),
    ],
)
def test_release_names_per_platform(system: str, machine: str, label: str, archive: str, exe: str, script: str) -> None:
    assert build.platform_label(system, machine) == label
    assert build.archive_name("1.2.3", label) == archive
    assert build.executable_name(label) == exe
    assert build.installer_name(label) == script
    assert (INSTALLERS / script).is_file()
    assert build.LAYOUTS[label] in ("onedir", "onefile")


@pytest.mark.parametrize(("system", "machine"), [("win32", "ARM64"), ("linux", "i686"), ("freebsd14", "amd64")])
def test_platforms_without_a_release_are_refused(system: str, machine: str) -> None:
    with pytest.raises(SystemExit):
        build.platform_label(system, machine)


def test_version_comes_from_the_package() -> None:
    from cnki_mcp import __version__

    assert build.project_version() == __version__


@pytest.mark.parametrize("suffix", [".tar.gz", ".zip"])
def test_archives_keep_names_modes_and_one_top_folder(tmp_path: Path, suffix: str) -> None:
    folder = tmp_path / "stage" / build.TOP_FOLDER
    (folder / "_internal").mkdir(parents=True)
    (folder / "cnki-mcp").write_bytes(b"\x7fELF program")
    (folder / "cnki-mcp").chmod(0o755)
    (folder / "安装设置.sh").write_text("#!/bin/sh\n", encoding="utf-8")
    (folder / "安装设置.sh").chmod(0o755)
    (folder / "_internal" / "库.txt").write_text("数据", encoding="utf-8")
    (folder / "_internal" / "库.txt").chmod(0o644)
    archive = build.write_archive(folder, tmp_path / f"cnki-mcp-0.0.1-Test{suffix}")
    top = build.unpack(archive, tmp_path / "解压 到这里")
    assert top == tmp_path / "解压 到这里" / build.TOP_FOLDER
    assert sorted(p.relative_to(top).as_posix() for p in top.rglob("*")) == [
        "_internal", "_internal/库.txt", "cnki-mcp", "安装设置.sh",
    ]
    assert (top / "_internal" / "库.txt").read_text(encoding="utf-8") == "数据"
    for name, mode in (("cnki-mcp", 0o755), ("安装设置.sh", 0o755), ("_internal/库.txt", 0o644)):
        assert stat.S_IMODE((top / name).stat().st_mode) == mode, name


def test_staged_folder_holds_exactly_the_release_files(tmp_path: Path) -> None:
    frozen = tmp_path / "dist" / "cnki-mcp"
    (frozen / "_internal").mkdir(parents=True)
    (frozen / "cnki-mcp").write_bytes(b"program")
    folder = build.stage(frozen, "Linux-x64", tmp_path / "stage" / build.TOP_FOLDER)
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        ["_internal", "cnki-mcp", "安装设置.sh", "README.md", "README.en.md", "LICENSE", "THIRD_PARTY_NOTICES.md"]
    )
    notices = (folder / "THIRD_PARTY_NOTICES.md").read_text(encoding="utf-8")
    assert "| nodriver |" in notices and "AGPL" in notices


# --- generated docs, skill, workflow ----------------------------------------------------------------


def test_committed_tool_reference_is_what_the_generator_writes_now() -> None:
    committed = (REPO / "docs" / "tools.md").read_text(encoding="utf-8")
    assert committed == gen_tool_docs.render(gen_tool_docs.served_schema()), (
        "docs/tools.md is out of date: run .venv/bin/python packaging/gen_tool_docs.py"
    )


def test_tool_reference_lists_every_parameter() -> None:
    document = {"tools": [{
        "name": "demo", "description": "示例 | 说明",
        "inputSchema": {"type": "object", "required": ["q"], "properties": {
            "q": {"type": "string", "description": "检索词"},
            "refs": {"type": ["null", "array"], "items": {"type": "string"}},
            "options": {"type": "object", "properties": {"sort": {"type": "string", "enum": ["a", "b"]}}},
        }},
        "annotations": {"readOnlyHint": True, "openWorldHint": False},
    }]}
    text = gen_tool_docs.render(document)
    assert "| `q` | string | 是 | 检索词 |" in text
    assert "| `refs` | string[]（可为 null） | 否 |  |" in text
    assert "| `options.sort` | string | 否 | 可选值：`a`、`b` |" in text
    assert "示例 \\| 说明" in text
    assert "| [`demo`](#demo) | 是 | 否 | 否 | 否 |" in text


def test_skill_front_matter_names_the_skill() -> None:
    text = (REPO / "docs" / "skills" / "cnki-deep-research" / "SKILL.md").read_text(encoding="utf-8")
    assert text.startswith("---\n")
    front = yaml.safe_load(text.split("---\n")[1])
    assert front["name"] == "cnki-deep-research"
    assert "知网" in front["description"]
    for grade in ("A", "B", "C"):
        assert f"| {grade} |" in text


def test_release_workflow_builds_every_platform_natively() -> None:
    workflow = yaml.safe_load((REPO / ".github" / "workflows" / "release.yml").read_text(encoding="utf-8"))
    trigger = workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` as true
    assert "v*" in trigger["push"]["tags"]
    matrix = workflow["jobs"]["build"]["strategy"]["matrix"]["include"]
    assert {row["label"]: row["runner"] for row in matrix} == {
        "macOS-arm64": "macos-14",
        "macOS-x64": "macos-15-intel",  # macos-13 was retired in December 2025
        "Windows-x64": "windows-latest",
        "Linux-x64": "ubuntu-22.04",  # the oldest glibc GitHub offers, so older distributions can run it
        "Linux-arm64": "ubuntu-22.04-arm",
    }
    steps = " ".join(str(step.get("run", "")) for step in workflow["jobs"]["build"]["steps"])
    assert "packaging/build.py" in steps and "--check" in steps
    assert ".[build]" in steps
    release = workflow["jobs"]["release"]
    assert release["needs"] == "build" and release["permissions"]["contents"] == "write"


# --- end to end: the frozen Linux build -------------------------------------------------------------


def _env(home: Path, **extra: str) -> dict[str, str]:
    """A user's environment with nothing of this test run in it: own HOME, no CNKI_* settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CNKI_", "CLAUDE_", "XDG_"))}
    env.update(HOME=str(home), PYTHONIOENCODING="utf-8", **extra)
    return env


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Linux-x64 archive built by packaging/build.py, unpacked under '测试 目录'."""
    if not (sys.platform.startswith("linux") and build.platform_label() == "Linux-x64"):
        pytest.skip("端到端打包测试只在 Linux x86_64 上运行（各平台的构建在发布流程中检查）")
    pytest.importorskip("PyInstaller", reason="需要 PyInstaller：pip install -e '.[build]'")
    scratch = tmp_path_factory.mktemp("release")
    began = time.monotonic()
    done = subprocess.run(
        [sys.executable, str(REPO / "packaging" / "build.py"), "--out", str(scratch / "out"), "--work", str(scratch / "work")],
        capture_output=True, timeout=900, cwd=REPO,
    )
    assert done.returncode == 0, done.stderr.decode("utf-8", "replace")[-4000:]
    archive = Path(done.stdout.decode("utf-8").strip())
    assert archive.name == f"cnki-mcp-{build.project_version()}-Linux-x64.tar.gz"
    print(f"\nbuilt {archive.name} ({archive.stat().st_size / 2**20:.1f} MB) in {time.monotonic() - began:.0f} s")
    return build.unpack(archive, scratch / "测试 目录")


@pytest.mark.slow
@pytest.mark.packaging
@pytest.mark.browser
@pytest.mark.timeout(1200)
def test_frozen_release_sets_up_and_serves_a_real_client(release: Path, chromium: str, tmp_path: Path) -> None:
    from tests.kns import KnsSimulator

    exe = release / "cnki-mcp"
    assert sorted(p.name for p in release.iterdir() if p.name != "_internal") == sorted(
        ["cnki-mcp", "安装设置.sh", "README.md", "README.en.md", "LICENSE", "THIRD_PARTY_NOTICES.md"]
    )
    home = tmp_path / "用户 目录"
    home.mkdir()

    setup = subprocess.run(
        ["./安装设置.sh", "--browser", chromium, "--client", "claude-code", "--install-client"],
        cwd=release, env=_env(home), stdin=subprocess.DEVNULL, capture_output=True, timeout=180,
    )
    output = setup.stdout.decode("utf-8")
    assert setup.returncode == 0, output + setup.stderr.decode("utf-8", "replace")
    assert "安装检查通过：共 14 个 MCP 工具" in output
    data = release / "data"  # a frozen program keeps its data beside itself
    assert json.loads((data / "config.json").read_text(encoding="utf-8"))["browser_path"] == chromium
    entry = json.loads((home / ".claude.json").read_text(encoding="utf-8"))["mcpServers"]["cnki"]
    assert entry["command"] == str(exe) and entry["args"] == ["serve"]
    assert entry["env"]["CNKI_DATA_DIR"] == str(data)

    schema = subprocess.run([str(exe), "schema"], env=_env(home), capture_output=True, timeout=60, check=True)
    served_tools = json.loads(schema.stdout)["tools"]

    with KnsSimulator() as sim:
        env = dict(entry["env"], HOME=str(home), CNKI_HEADLESS="1", CNKI_BROWSER_ARGS=sim.browser_args)
        asyncio.run(_talk_to_frozen_server(entry["command"], entry["args"], env, release, served_tools, sim))


async def _talk_to_frozen_server(
    command: str, args: list[str], env: dict[str, str], cwd: Path, served_tools: list[Any], sim: Any
) -> None:
    """initialize, tools/list, diagnostics, then a structured_search through the simulator."""
    from mcp import StdioServerParameters

    from cnki_mcp.server import schema_document
    from tests.harness import McpSession, payload

    source_tools = (await schema_document())["tools"]
    parameters = StdioServerParameters(command=command, args=args, env=env, cwd=str(cwd))
    async with McpSession.serving(parameters, read_timeout=60) as mcp:
        client = mcp.client
        assert client.server_info is not None
        assert client.server_info.name == "cnki"
        assert client.server_info.version == build.project_version()

        listing = await client.list_tools()
        tools = listing.model_dump(mode="json", by_alias=True, exclude_none=True)["tools"]
        assert tools == served_tools == source_tools

        diagnostics = await mcp.result("diagnostics", {})
        assert not diagnostics.is_error
        report = payload(diagnostics)
        assert report["version"] == build.project_version()
        assert report["data_dir"] == env["CNKI_DATA_DIR"]

        term = "违约金"
        reply = await mcp.result("structured_search", {"expression": {"field": "title", "value": term}, "limit": 10})
        record = payload(reply)
        assert not reply.is_error, record
        record = await mcp.wait(record, timeout=300)
        assert record["status"] == "completed", record
        search_id = record["result"]["search_id"]
        page = await mcp.call("search_results", {"search_id": search_id, "view": "titles"})
        titles = [row["title"] for row in page["results"]]
        assert titles, titles
        assert all(term in title for title in titles), titles
        assert sim.count("grid") >= 1  # the frozen server's Chromium really went to the simulated CNKI
