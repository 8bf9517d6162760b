"""The command line as a user runs it: real subprocesses of `python -m cnki_mcp`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cnki_mcp import __version__


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
