"""The release: setup scripts, archive naming and packing, generated docs, release workflow, and one
end-to-end run of the frozen Linux build (build → unpack into a path with spaces and Chinese characters
→ 安装设置.sh → a real MCP client talks to the frozen server).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
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

from cnki_mcp.tools import REGISTRY

REPO = Path(__file__).resolve().parents[1]
INSTALLERS = REPO / "installers"
POSIX_SCRIPTS = ("安装设置.sh", "安装设置.command")
TOOL_COUNT = len(REGISTRY)  # the frozen server serves every tool of the source registry


def _load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


build = _load("cnki_build", REPO / "packaging" / "build.py")
bundle = _load("cnki_mcpb_bundle", REPO / "packaging" / "mcpb_bundle.py")
gen_tool_docs = _load("cnki_gen_tool_docs", REPO / "packaging" / "gen_tool_docs.py")
MCPB_CLI = REPO / "tests" / "mcpb" / "node_modules" / ".bin" / ("mcpb.cmd" if sys.platform == "win32" else "mcpb")


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
        ["_internal", "cnki-mcp", "安装设置.sh", "README.md", "README.en.md", "LICENSE", "THIRD_PARTY_NOTICES.md", "skills"]
    )
    assert (folder / "skills" / "cnki-deep-research" / "SKILL.md").is_file()
    notices = (folder / "THIRD_PARTY_NOTICES.md").read_text(encoding="utf-8")
    assert "| nodriver |" in notices and "AGPL" in notices


# --- the Claude Desktop bundle (.mcpb) ----------------------------------------------------------------

TOOLS = [{"name": "search", "description": "研究检索。规划概念。\n更多"}, {"name": "login", "description": "登录"}]


@pytest.mark.parametrize(("label", "platform", "exe", "data"), [
    ("macOS-arm64", "darwin", "cnki-mcp", "${HOME}/Library/Application Support/cnki-mcp"),
    ("Windows-x64", "win32", "cnki-mcp.exe", "${HOME}/AppData/Local/cnki-mcp"),
])
def test_bundle_manifest_per_platform(label: str, platform: str, exe: str, data: str) -> None:
    document = bundle.manifest("1.2.3", label, exe, TOOLS)
    assert document["manifest_version"] == "0.3"
    assert document["version"] == "1.2.3"
    assert document["server"]["type"] == "binary"
    assert document["server"]["entry_point"] == f"server/{exe}"
    assert document["server"]["mcp_config"] == {
        "command": f"${{__dirname}}/server/{exe}",
        "args": ["serve"],
        "env": {"CNKI_BROWSER_PATH": "${user_config.browser_path}", "CNKI_DATA_DIR": "${user_config.data_dir}"},
    }
    assert document["compatibility"] == {"platforms": [platform]}
    assert document["user_config"]["browser_path"]["type"] == "file"
    assert document["user_config"]["browser_path"]["required"] is False
    assert document["user_config"]["data_dir"]["type"] == "directory"
    assert document["user_config"]["data_dir"]["default"] == data
    assert document["tools"] == [{"name": "search", "description": "研究检索。"}, {"name": "login", "description": "登录"}]
    assert build.bundle_name("1.2.3", label) == f"cnki-mcp-1.2.3-{label}.mcpb"


def test_only_macos_and_windows_get_a_bundle() -> None:
    # Claude Desktop, the one host that installs MCP Bundles, has no Linux build.
    assert [label for label in build.PLATFORMS.values() if bundle.has_bundle(label)] == ["macOS-arm64", "macOS-x64", "Windows-x64"]


def test_the_bundle_lists_every_served_tool() -> None:
    document = bundle.manifest("1.2.3", "macOS-arm64", "cnki-mcp", build.source_tools())
    assert sorted(tool["name"] for tool in document["tools"]) == sorted(REGISTRY)


def test_bundle_addresses_come_from_pyproject() -> None:
    import tomllib

    urls = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["urls"]
    document = bundle.manifest("1.2.3", "macOS-arm64", "cnki-mcp", TOOLS)
    assert document["repository"] == {"type": "git", "url": urls["Repository"]}
    assert document["support"] == urls["Issues"]


def _fake_frozen(folder: Path) -> Path:
    """A onedir folder whose program prints its arguments and CNKI_DATA_DIR."""
    (folder / "_internal").mkdir(parents=True)
    program = folder / "cnki-mcp"
    program.write_text('#!/bin/sh\necho "ran $* in $CNKI_DATA_DIR"\n', encoding="utf-8")
    program.chmod(0o755)
    (folder / "_internal" / "库.so").write_bytes(b"\x7fELF")
    (folder / "_internal" / "库.so").chmod(0o644)
    return folder


def _fake_bundle(tmp_path: Path) -> Path:
    frozen = _fake_frozen(tmp_path / "dist" / "cnki-mcp")
    notices = tmp_path / "THIRD_PARTY_NOTICES.md"
    notices.write_text("# notices\n", encoding="utf-8")
    document = bundle.manifest("1.2.3", "macOS-arm64", "cnki-mcp", TOOLS)
    return bundle.write_bundle(frozen, tmp_path / "out" / "cnki-mcp-1.2.3-macOS-arm64.mcpb", document,
                               [REPO / "LICENSE", notices])


def test_bundle_layout_and_modes(tmp_path: Path) -> None:
    import zipfile

    with zipfile.ZipFile(_fake_bundle(tmp_path)) as packed:
        names = sorted(packed.namelist())
        modes = {info.filename: (info.external_attr >> 16) & 0o777 for info in packed.infolist()}
        document = json.loads(packed.read("manifest.json"))
    assert names == ["LICENSE", "THIRD_PARTY_NOTICES.md", "manifest.json", "server/_internal/库.so", "server/cnki-mcp"]
    assert modes["server/cnki-mcp"] == 0o755
    assert modes["server/_internal/库.so"] == 0o644
    assert document["name"] == "cnki-mcp"


def mcpb_cli() -> Path:
    """The official MCP Bundle CLI that scripts/bootstrap.sh --test installs, or skip the test."""
    if not MCPB_CLI.exists() or shutil.which("node") is None:
        pytest.skip("没有 mcpb 命令行工具：运行 npm ci --prefix tests/mcpb（scripts/bootstrap.sh --test 会安装）")
    return MCPB_CLI


def _mcpb(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(mcpb_cli()), *args], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)


@pytest.mark.skipif(sys.platform == "win32", reason="the fake program is a shell script")
def test_official_cli_validates_and_unpacks_the_bundle(tmp_path: Path) -> None:
    packed = _fake_bundle(tmp_path)
    unpacked = tmp_path / "解包 后"
    unpacking = _mcpb("unpack", str(packed), str(unpacked))
    validation = _mcpb("validate", str(unpacked / "manifest.json"))
    info = _mcpb("info", str(packed))
    ran = subprocess.run([str(unpacked / "server" / "cnki-mcp"), "serve"], capture_output=True, text=True, timeout=10,
                         env={"CNKI_DATA_DIR": "/数据"})
    assert unpacking.returncode == 0, unpacking.stdout + unpacking.stderr
    assert validation.returncode == 0, validation.stdout + validation.stderr
    assert "Manifest schema validation passes!" in validation.stdout
    assert info.returncode == 0, info.stdout + info.stderr
    assert stat.S_IMODE((unpacked / "server" / "cnki-mcp").stat().st_mode) == 0o755
    assert ran.stdout == "ran serve in /数据\n"


def test_official_cli_rejects_a_broken_manifest(tmp_path: Path) -> None:
    broken = bundle.manifest("1.2.3", "macOS-arm64", "cnki-mcp", TOOLS)
    broken["server"]["type"] = "exe"
    (tmp_path / "manifest.json").write_text(json.dumps(broken), encoding="utf-8")
    validation = _mcpb("validate", str(tmp_path / "manifest.json"))
    assert validation.returncode != 0
    assert "server.type" in validation.stdout


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
    assert "--require-hashes --no-deps -r packaging/requirements-release.txt" in steps
    release_steps = workflow["jobs"]["release"]["steps"]
    assert "cnki-mcp-*.mcpb" in " ".join(str(step.get("run", "")) for step in release_steps)
    assert 'Linux-*) test "${#bundles[@]}" -eq 0' in steps
    bundles = sum(1 for label in build.PLATFORMS.values() if bundle.has_bundle(label))
    assert f'test "$(wc -l < SHA256SUMS.txt)" -eq {len(build.PLATFORMS) + bundles}' in " ".join(str(step.get("run", "")) for step in release_steps)
    release = workflow["jobs"]["release"]
    assert release["needs"] == ["build", "python-package", "scripts"] and release["permissions"]["contents"] == "write"


def test_release_workflow_builds_checks_and_publishes_the_python_package() -> None:
    workflow = yaml.safe_load((REPO / ".github" / "workflows" / "release.yml").read_text(encoding="utf-8"))
    jobs = workflow["jobs"]
    package = " ".join(str(step.get("run", "")) for step in jobs["python-package"]["steps"])
    assert "python -m build" in package and "twine check --strict" in package
    assert "python -m venv /tmp/fresh" in package and "cnki-mcp --version" in package and "cnki-mcp schema" in package
    published = " ".join(str(step.get("run", "")) for step in jobs["release"]["steps"])
    assert "pydist/*.whl" in published and "pydist/*.tar.gz" in published
    pypi = jobs["pypi"]
    assert pypi["if"] == "startsWith(github.ref, 'refs/tags/v')" and pypi["permissions"] == {"id-token": "write"}
    assert [step.get("uses") for step in pypi["steps"]][-1] == "pypa/gh-action-pypi-publish@release/v1"
    scripts = " ".join(str(step.get("run", "")) for step in jobs["scripts"]["steps"])
    assert "bash -n" in scripts and "scripts/bootstrap.ps1" in scripts and "ParseFile" in scripts



def test_the_windows_build_proves_the_devtools_pipe() -> None:
    # --remote-debugging-io-pipes can only run on Windows: the runner starts the browser and finds no TCP listener.
    workflow = yaml.safe_load((REPO / ".github" / "workflows" / "release.yml").read_text(encoding="utf-8"))
    (step,) = [s for s in workflow["jobs"]["build"]["steps"] if "selftest_devtools_pipe.py" in str(s.get("run", ""))]
    assert step["if"] == "runner.os == 'Windows'" and step["timeout-minutes"] <= 10
    assert (REPO / "scripts" / "selftest_devtools_pipe.py").is_file()

# --- packaging metadata and the release lock ------------------------------------------------------


def _pyproject() -> dict[str, Any]:
    import tomllib

    return tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))


def _locked() -> dict[str, tuple[str, str, int]]:
    """name → (version, marker, number of hashes) for every pin in the release lock."""
    text = (REPO / "packaging" / "requirements-release.txt").read_text(encoding="utf-8")
    pins: dict[str, tuple[str, str, int]] = {}
    current = ""
    for line in text.splitlines():
        if line and not line.startswith((" ", "#")):
            requirement, _, marker = line.rstrip(" \\").partition(" ; ")
            name, _, version = requirement.partition("==")
            current = f"{name.lower().replace('_', '-').replace('.', '-')}|{marker}"
            pins[current] = (version, marker, 0)
        elif line.strip().startswith("--hash=sha256:") and current:
            version, marker, count = pins[current]
            pins[current] = (version, marker, count + 1)
    return pins


def test_release_lock_pins_every_dependency_with_hashes() -> None:
    from packaging.requirements import Requirement

    project = _pyproject()["project"]
    wanted = [Requirement(line) for line in [*project["dependencies"], *project["optional-dependencies"]["build"]]]
    pins = _locked()
    by_name = {key.split("|")[0]: value for key, value in pins.items() if not value[1]}
    unpinned = [req.name for req in wanted if req.name.lower().replace(".", "-") not in by_name]
    outside = [req.name for req in wanted if req.name.lower().replace(".", "-") in by_name
               and by_name[req.name.lower().replace(".", "-")][0] not in req.specifier]
    assert unpinned == []
    assert outside == []
    assert [key for key, (_, _, hashes) in pins.items() if hashes == 0] == []


def test_packaging_metadata() -> None:
    pyproject = _pyproject()
    assert pyproject["build-system"]["requires"] == ["setuptools>=77"]
    assert pyproject["project"]["name"] == "cnki-browser-mcp"
    # The command is cnki-mcp; the second name lets `uvx cnki-browser-mcp` find it.
    assert pyproject["project"]["scripts"] == {"cnki-mcp": "cnki_mcp.cli:main", "cnki-browser-mcp": "cnki_mcp.cli:main"}
    assert "nodriver>=0.48,<0.51" in pyproject["project"]["dependencies"]
    assert set(pyproject["project"]["urls"]) >= {"Homepage", "Repository", "Issues"}


def test_server_json_for_the_mcp_registry() -> None:
    from cnki_mcp import __version__

    pyproject = _pyproject()["project"]
    document = json.loads((REPO / "server.json").read_text(encoding="utf-8"))
    (package,) = document["packages"]
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert document["$schema"] == "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json"
    assert document["name"].count("/") == 1
    assert len(document["description"]) <= 100
    assert document["version"] == __version__
    assert document["repository"] == {"url": pyproject["urls"]["Repository"], "source": "github"}
    assert package["registryType"] == "pypi"
    assert package["identifier"] == pyproject["name"]
    assert package["version"] == __version__
    assert package["transport"] == {"type": "stdio"}
    assert [variable["name"] for variable in package["environmentVariables"]] == ["CNKI_BROWSER_PATH", "CNKI_DATA_DIR"]
    assert f"<!-- mcp-name: {document['name']} -->" in readme


# --- end to end: the frozen Linux build -------------------------------------------------------------


def _env(home: Path, **extra: str) -> dict[str, str]:
    """A user's environment with nothing of this test run in it: own HOME, no CNKI_* settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CNKI_", "CLAUDE_", "XDG_"))}
    env.update(HOME=str(home), PYTHONIOENCODING="utf-8", **extra)
    return env


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Linux-x64 archive built by packaging/build.py (the bundle and checksums lie beside it)."""
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
    return archive


@pytest.fixture(scope="module")
def release(built: Path) -> Path:
    """The archive unpacked under '测试 目录'."""
    return build.unpack(built, built.parent.parent / "测试 目录")


@pytest.mark.slow
@pytest.mark.packaging
@pytest.mark.browser
@pytest.mark.timeout(1200)
def test_frozen_release_sets_up_and_serves_a_real_client(release: Path, chromium: str, tmp_path: Path) -> None:
    from tests.kns import KnsSimulator

    exe = release / "cnki-mcp"
    assert sorted(p.name for p in release.iterdir() if p.name != "_internal") == sorted(
        ["cnki-mcp", "安装设置.sh", "README.md", "README.en.md", "LICENSE", "THIRD_PARTY_NOTICES.md", "skills"]
    )
    home = tmp_path / "用户 目录"
    home.mkdir()

    setup = subprocess.run(
        ["./安装设置.sh", "--browser", chromium, "--client", "claude-code", "--install-client"],
        cwd=release, env=_env(home), stdin=subprocess.DEVNULL, capture_output=True, timeout=180,
    )
    output = setup.stdout.decode("utf-8")
    assert setup.returncode == 0, output + setup.stderr.decode("utf-8", "replace")
    assert f"安装检查通过：共 {TOOL_COUNT} 个 MCP 工具" in output
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
    asyncio.run(_read_a_downloaded_pdf(entry["command"], entry["args"], dict(entry["env"], HOME=str(home)), release))


async def _read_a_downloaded_pdf(command: str, args: list[str], env: dict[str, str], cwd: Path) -> None:
    """A PDF in the download ledger read by the frozen server (PDFium is bundled): sections and no request."""
    from mcp import StdioServerParameters

    from cnki_mcp.core.model import Artifact, Paper
    from cnki_mcp.store.library import Store
    from tests import pdfs
    from tests.harness import McpSession

    ref, pdf = "rec_0123456789abcdef01234567", pdfs.article_pdf()
    store = Store.open(Path(env["CNKI_DATA_DIR"]))
    try:
        path = store.downloads_dir / "论文.pdf"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(pdf)
        store.put_paper(Paper(record_ref=ref, title="数字经济背景下违约金调整规则研究"))
        store.data.artifacts[f"{ref}:pdf"] = Artifact(
            state="completed", record_ref=ref, format="pdf", path=str(path), bytes=len(pdf),
            sha256=hashlib.sha256(pdf).hexdigest(), content_format="pdf",
        )
        store.flush()
    finally:
        store.close_sync()
    parameters = StdioServerParameters(command=command, args=args, env=env, cwd=str(cwd))
    async with McpSession.serving(parameters, read_timeout=60) as mcp:
        text = await mcp.call("read_online_html", {"record_ref": ref, "source": "download"})
        assert text["status"] == "completed" and text["source"] == "download" and text["requests"] == 0, text
        assert [s["title"] for s in text["result"]["sections"]] == [title for _, title, _ in pdfs.ARTICLE]


async def _talk_to_frozen_server(
    command: str, args: list[str], env: dict[str, str], cwd: Path, served_tools: list[Any], sim: Any
) -> None:
    """initialize, tools/list, diagnostics, then a structured_search through the simulator."""
    from mcp import StdioServerParameters

    from cnki_mcp.surface.server import schema_document
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

        # The facet panel and its chart: Pillow and its image libraries are in the frozen program.
        chart_reply = await mcp.result("search_facets", {"expression": {"field": "title", "value": term}, "chart": True,
                                                          "facets": ["year", "source"]})
        facets = json.loads(chart_reply.content[0].text)  # type: ignore[union-attr]
        while facets.get("status") in ("running", "awaiting_user"):
            chart_reply = await mcp.result("operation_status", {"operation_id": facets["operation_id"], "wait_seconds": 5})
            facets = json.loads(chart_reply.content[0].text)  # type: ignore[union-attr]
        assert facets["status"] == "completed", facets
        (image,) = chart_reply.content[1:]
        png = base64.b64decode(image.data)  # type: ignore[union-attr]
        chart = facets["result"]["chart"]
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) == chart["bytes"]
        assert [row["label"] for row in facets["result"]["chart_table"] if row["facet"] == "year"] == [
            entry["value"] for entry in facets["result"]["facets"]["year"]
        ]
        assert sim.count("group") == 1

        # The browser the frozen server starts saves into downloads/ under '测试 目录' (the client gives no locale).
        sim.configure(download="ok", login="institution")
        got = await mcp.wait(await mcp.call("download_paper", {"record_ref": page["results"][0]["record_ref"]}), timeout=300)
        assert got["status"] == "completed", json.dumps(got, ensure_ascii=False)
        assert Path(env["CNKI_DATA_DIR"]) / "downloads" in Path(got["result"]["path"]).parents
        assert Path(got["result"]["path"]).stat().st_size == got["result"]["bytes"]


def _substituted(value: Any, names: dict[str, str]) -> Any:
    """What the host does with a manifest's ${...} variables (those it knows; others stay as they are)."""
    if isinstance(value, str):
        for name, replacement in names.items():
            value = value.replace("${" + name + "}", replacement)
        return value
    if isinstance(value, list):
        return [_substituted(item, names) for item in value]
    return {key: _substituted(item, names) for key, item in value.items()}


@pytest.mark.slow
@pytest.mark.packaging
@pytest.mark.timeout(1200)
def test_frozen_bundle_validates_and_serves_as_claude_desktop_runs_it(built: Path, tmp_path: Path) -> None:
    # The Linux build writes no bundle (no Claude Desktop there); packing its frozen program the way the macOS
    # build does checks the manifest and the packing a Mac user's Claude Desktop meets.
    version = build.project_version()
    frozen = built.parent.parent / "work" / "dist" / "cnki-mcp"
    document = bundle.manifest(version, "macOS-arm64", "cnki-mcp", build.source_tools())
    packed = bundle.write_bundle(frozen, tmp_path / build.bundle_name(version, "macOS-arm64"), document, [REPO / "LICENSE"])
    unpacked = tmp_path / "Claude Extensions" / "cnki-mcp"
    unpacking = _mcpb("unpack", str(packed), str(unpacked))
    validation = _mcpb("validate", str(unpacked / "manifest.json"))
    document = json.loads((unpacked / "manifest.json").read_text(encoding="utf-8"))
    data = tmp_path / "用户 数据"
    # An optional setting the user left empty may reach the program unexpanded: it must mean "not set".
    config = _substituted(document["server"]["mcp_config"], {"__dirname": str(unpacked), "user_config.data_dir": str(data)})
    home = tmp_path / "home"
    home.mkdir()
    report = asyncio.run(_diagnostics_through(config, _env(home)))
    assert sorted(path.name for path in built.parent.glob("*.mcpb*")) == []
    assert unpacking.returncode == 0, unpacking.stdout + unpacking.stderr
    assert validation.returncode == 0, validation.stdout + validation.stderr
    assert document["version"] == build.project_version()
    assert stat.S_IMODE((unpacked / "server" / "cnki-mcp").stat().st_mode) & 0o111 == 0o111
    assert config["env"]["CNKI_BROWSER_PATH"] == "${user_config.browser_path}"
    assert report["tools"] == TOOL_COUNT
    assert report["data_dir"] == str(data)


async def _diagnostics_through(config: dict[str, Any], env: dict[str, str]) -> dict[str, Any]:
    from mcp import StdioServerParameters

    from tests.harness import McpSession

    parameters = StdioServerParameters(command=config["command"], args=config["args"], env={**env, **config["env"]})
    async with McpSession.serving(parameters, read_timeout=60) as mcp:
        tools = (await mcp.client.list_tools()).tools
        report = await mcp.call("diagnostics", {})
    return {**report, "tools": len(tools)}


# --- the Python package: wheel and sdist, the wheel installed into a fresh venv -------------------


@pytest.mark.slow
@pytest.mark.packaging
def test_wheel_installs_into_a_fresh_venv_and_runs(tmp_path: Path) -> None:
    from cnki_mcp import __version__

    out = tmp_path / "dist"
    source = tmp_path / "src"
    # A copy without build leftovers, so the sdist is what a clean clone gives.
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", "dist", "node_modules", "__pycache__", "*.egg-info", ".mypy_cache", ".ruff_cache"
    ))
    # python -m build (from PyPI, in a venv of its own) builds both, each in an isolated environment.
    builder = tmp_path / "builder"
    subprocess.run([sys.executable, "-m", "venv", str(builder)], check=True, timeout=300)
    builder_python = builder / ("Scripts" if sys.platform == "win32" else "bin") / "python"
    subprocess.run([str(builder_python), "-m", "pip", "install", "-q", "build"], check=True, timeout=600)
    built = subprocess.run([str(builder_python), "-m", "build", "--outdir", str(out), str(source)],
                           capture_output=True, text=True, timeout=900)
    assert built.returncode == 0, built.stderr[-2000:]
    wheels = sorted(out.glob("*.whl"))
    assert [w.name for w in wheels] == [f"cnki_browser_mcp-{__version__}-py3-none-any.whl"]
    assert [s.name for s in out.glob("*.tar.gz")] == [f"cnki_browser_mcp-{__version__}.tar.gz"]

    venv = tmp_path / "fresh"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    bin_dir = venv / ("Scripts" if sys.platform == "win32" else "bin")
    installed = subprocess.run(
        [str(bin_dir / "python"), "-m", "pip", "install", "-q", str(wheels[0])], capture_output=True, text=True, timeout=900
    )
    assert installed.returncode == 0, installed.stderr[-2000:]
    env = dict(os.environ, CNKI_DATA_DIR=str(tmp_path / "data"))
    env.pop("PYTHONPATH", None)
    assert_installed_cnki_mcp_runs(bin_dir, env, tmp_path)


def assert_installed_cnki_mcp_runs(bin_dir: Path, env: dict[str, str], cwd: Path) -> None:
    """The installed ``cnki-mcp`` says this version and lists every tool (``schema``)."""
    from cnki_mcp import __version__

    version = subprocess.run([str(bin_dir / "cnki-mcp"), "--version"], capture_output=True, text=True, timeout=60,
                             env=env, cwd=cwd)
    assert (version.returncode, version.stdout) == (0, f"{__version__}\n")
    schema = subprocess.run([str(bin_dir / "cnki-mcp"), "schema"], capture_output=True, text=True, timeout=120,
                            env=env, cwd=cwd)
    assert schema.returncode == 0, schema.stderr
    assert len(json.loads(schema.stdout)["tools"]) == TOOL_COUNT
