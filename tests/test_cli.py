"""The command line as a user runs it: real subprocesses of `python -m cnki_mcp`."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from cnki_mcp import __version__, settings

REPO = Path(__file__).resolve().parents[1]


def run(*args: str, data_dir: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, CNKI_DATA_DIR=str(data_dir))
    return subprocess.run([sys.executable, "-m", "cnki_mcp", *args], capture_output=True, text=True, env=env, timeout=timeout)


def test_version(isolated_data_dir: Path) -> None:
    done = run("version", data_dir=isolated_data_dir)
    assert done.returncode == 0 and done.stdout == f"{__version__}\n"


def test_schema_is_the_served_tool_list(isolated_data_dir: Path) -> None:
    done = run("schema", data_dir=isolated_data_dir)
    assert done.returncode == 0, done.stderr
    tools = json.loads(done.stdout)["tools"]
    assert [t["name"] for t in tools] == sorted(t["name"] for t in tools)
    assert len(tools) == 14
    assert all(t["inputSchema"]["type"] == "object" for t in tools)


def test_doctor_reports_without_locking_or_starting_anything(isolated_data_dir: Path) -> None:
    done = run("doctor", data_dir=isolated_data_dir)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["version"] == __version__ and report["data_dir"] == str(isolated_data_dir)
    assert "browser_executable" in report and isinstance(report["clients"], list)
    assert not (isolated_data_dir / "cnki.lock").exists()
    assert not (isolated_data_dir / "browser").exists()


@pytest.mark.slow
def test_doctor_protocol_round_trip(isolated_data_dir: Path) -> None:
    done = run("doctor", "--protocol", data_dir=isolated_data_dir, timeout=90)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["protocol"] == {
        "passed": True, "transport": "stdio", "tools": 14, "version": __version__, "browser_started": False,
    }


def test_corrupt_config_is_one_clear_line_and_exit_1(isolated_data_dir: Path) -> None:
    isolated_data_dir.mkdir(parents=True)
    (isolated_data_dir / "config.json").write_text("{not json", encoding="utf-8")
    done = run("doctor", data_dir=isolated_data_dir)
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.startswith("CONFIG_INVALID: ") and done.stderr.count("\n") == 1


def serve_params(data_dir: Path, **env: str) -> StdioServerParameters:
    base = {"CNKI_DATA_DIR": str(data_dir), "PATH": os.environ.get("PATH", "")}
    return StdioServerParameters(command=sys.executable, args=["-m", "cnki_mcp", "serve"], env=base | env, cwd=REPO)


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


@pytest.mark.parametrize(("raw", "level"), [("", logging.WARNING), ("debug", logging.DEBUG), (" Info ", logging.INFO), ("verbose", logging.WARNING), ("10", logging.WARNING)])
def test_log_level_setting(monkeypatch: pytest.MonkeyPatch, raw: str, level: int) -> None:
    monkeypatch.setenv("CNKI_LOG_LEVEL", raw)
    assert settings.log_level() == level
