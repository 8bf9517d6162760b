"""The command line as a user runs it: real subprocesses of `python -m cnki_mcp`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client

from cnki_mcp import __version__
from tests.harness import serve_params


def run(*args: str, data_dir: Path, timeout: float = 60, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cnki_mcp", *args],
        capture_output=True, text=True, env=dict(os.environ, CNKI_DATA_DIR=str(data_dir), **env), timeout=timeout,
    )


def test_version(isolated_data_dir: Path) -> None:
    done = run("version", data_dir=isolated_data_dir)
    assert done.returncode == 0 and done.stdout == f"{__version__}\n"


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version_flag_is_one_line(flag: str, isolated_data_dir: Path) -> None:
    done = run(flag, data_dir=isolated_data_dir)
    assert done.returncode == 0
    assert done.stdout == f"cnki-mcp {__version__}\n"


def test_schema_is_the_served_tool_list(isolated_data_dir: Path) -> None:
    done = run("schema", data_dir=isolated_data_dir)
    assert done.returncode == 0, done.stderr
    tools = json.loads(done.stdout)["tools"]
    assert [t["name"] for t in tools] == sorted(t["name"] for t in tools)
    assert len(tools) == 17
    assert all(t["inputSchema"]["type"] == "object" for t in tools)


def test_doctor_json_reports_without_locking_or_starting_anything(isolated_data_dir: Path) -> None:
    done = run("doctor", "--json", data_dir=isolated_data_dir, CNKI_BROWSER_PATH=sys.executable)
    report = json.loads(done.stdout)
    assert done.returncode == 0, done.stdout
    assert report["version"] == __version__
    assert report["data_dir"] == str(isolated_data_dir)
    assert report["browser_executable"] == {"found": True, "path": sys.executable, "source": "CNKI_BROWSER_PATH"}
    assert report["clients"] == []
    assert [check["name"] for check in report["checks"]] == ["config", "route", "browser", "clients", "log"]
    assert report["verdict"] == {"ok": True, "problems": 0, "message": "结论：一切正常。"}
    assert not (isolated_data_dir / "cnki.lock").exists()
    assert not (isolated_data_dir / "browser").exists()


def test_doctor_prints_a_line_per_check_and_a_verdict(isolated_data_dir: Path) -> None:
    done = run("doctor", data_dir=isolated_data_dir, CNKI_BROWSER_PATH=sys.executable)
    lines = done.stdout.splitlines()
    assert lines[0] == f"cnki-mcp {__version__} 本地检查（数据目录：{isolated_data_dir}）"
    assert [line[:2] for line in lines[1:-1]] == ["✓ ", "✓ ", "✓ ", "✓ ", "✓ "]
    assert lines[-1] == "结论：一切正常。"


def test_doctor_report_writes_one_zip_without_locking_or_starting_anything(isolated_data_dir: Path) -> None:
    done = run("doctor", "--report", data_dir=isolated_data_dir)
    written = list((isolated_data_dir / "diagnostics").glob("report-*.zip"))
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"诊断报告已写入 {written[0]}\n"
    assert not (isolated_data_dir / "cnki.lock").exists()
    assert not (isolated_data_dir / "browser").exists()


@pytest.mark.slow
def test_doctor_protocol_round_trip(isolated_data_dir: Path) -> None:
    done = run("doctor", "--protocol", "--json", data_dir=isolated_data_dir, timeout=90, CNKI_BROWSER_PATH=sys.executable)
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["protocol"] == {
        "passed": True, "transport": "stdio", "tools": 17, "version": __version__, "browser_started": False,
    }


def _corrupt_config(data_dir: Path) -> Path:
    data_dir.mkdir(parents=True)
    path = data_dir / "config.json"
    path.write_text("{not json", encoding="utf-8")
    return path


def test_corrupt_config_is_a_failed_check_not_a_crash(isolated_data_dir: Path) -> None:
    path = _corrupt_config(isolated_data_dir)
    done = run("doctor", data_dir=isolated_data_dir, CNKI_BROWSER_PATH=sys.executable)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert f"✗ config.json 有问题：配置文件 {path} 无法解析" in done.stdout
    assert done.stdout.splitlines()[-1] == "结论：发现 1 个问题，请按上面标 ✗ 的提示处理。"


def test_corrupt_config_in_the_json_report(isolated_data_dir: Path) -> None:
    path = _corrupt_config(isolated_data_dir)
    done = run("doctor", "--json", data_dir=isolated_data_dir, CNKI_BROWSER_PATH=sys.executable)
    report = json.loads(done.stdout)
    (config,) = [check for check in report["checks"] if check["name"] == "config"]
    assert done.returncode == 1
    assert config["ok"] is False
    assert str(path) in config["message"]
    assert report["verdict"]["problems"] == 1
    assert report["browser_executable"]["found"] is True


def test_doctor_names_an_invalid_log_level(isolated_data_dir: Path) -> None:
    done = run("doctor", data_dir=isolated_data_dir, CNKI_BROWSER_PATH=sys.executable, CNKI_LOG_LEVEL="loud")
    assert done.returncode == 1
    assert "✗ CNKI_LOG_LEVEL='loud' 不是日志级别" in done.stdout


async def test_serve_with_a_corrupt_config_answers_config_invalid_and_diagnostics(isolated_data_dir: Path) -> None:
    isolated_data_dir.mkdir(parents=True)
    (isolated_data_dir / "config.json").write_text("{not json", encoding="utf-8")
    async with Client(serve_params(isolated_data_dir), read_timeout_seconds=30) as client:
        tool = await client.call_tool("search_results", {"search_id": "s_1"})
        report = await client.call_tool("diagnostics", {})
    assert tool.is_error
    assert tool.structured_content["errors"][0]["code"] == "CONFIG_INVALID"
    assert not report.is_error
    assert report.structured_content["config_error"]["code"] == "CONFIG_INVALID"
    assert str(isolated_data_dir / "config.json") in report.structured_content["config_error"]["message"]


async def test_serve_with_an_unknown_log_level_starts(isolated_data_dir: Path) -> None:
    async with Client(serve_params(isolated_data_dir, CNKI_LOG_LEVEL="verbose"), read_timeout_seconds=30) as client:
        report = await client.call_tool("diagnostics", {})
    assert report.structured_content["version"] == __version__
