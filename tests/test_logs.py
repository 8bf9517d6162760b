"""The server's log: the level setting, the file users can send, and a server that keeps running on a bad level."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from cnki_mcp.core import logs
from cnki_mcp.tools import REGISTRY

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(("raw", "level"), [("", "WARNING"), ("info", "INFO"), (" Debug ", "DEBUG"), ("ERROR", "ERROR")])
def test_level_names_are_accepted(raw: str, level: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CNKI_LOG_LEVEL", raw)
    assert logs.level_setting() == (level, None)


@pytest.mark.parametrize("raw", ["loud", "10", "warn ing"])
def test_an_invalid_level_falls_back_with_a_warning(raw: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CNKI_LOG_LEVEL", raw)
    level, warning = logs.level_setting()
    assert level == "WARNING"
    assert warning is not None
    assert f"CNKI_LOG_LEVEL={raw!r} 不是日志级别" in warning


def test_log_file_defaults_to_the_data_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CNKI_LOG_FILE", raising=False)
    assert logs.log_file(tmp_path) == tmp_path / "logs" / "cnki-mcp.log"


def test_log_file_setting_is_made_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CNKI_LOG_FILE", "mine.log")
    assert logs.log_file(tmp_path / "data") == tmp_path / "mine.log"


def test_configure_writes_records_to_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CNKI_LOG_LEVEL", "INFO")
    monkeypatch.delenv("CNKI_LOG_FILE", raising=False)
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        logs.configure(tmp_path)
        logging.getLogger("cnki_mcp.test").info("已记录 %s", "一行")
        logs.shutdown()
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
    text = (tmp_path / "logs" / "cnki-mcp.log").read_text("utf-8")
    assert "INFO cnki_mcp.test: 已记录 一行" in text


def _params(data: Path, **env: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable, args=["-m", "cnki_mcp", "serve"], env={"CNKI_DATA_DIR": str(data), **env}, cwd=REPO
    )


async def test_server_with_an_invalid_level_runs_and_says_so_in_its_log(tmp_path: Path) -> None:
    log_file = tmp_path / "send-me.log"
    async with Client(_params(tmp_path / "data", CNKI_LOG_LEVEL="loud", CNKI_LOG_FILE=str(log_file)),
                      read_timeout_seconds=30) as client:
        tools = (await client.list_tools()).tools
    assert len(tools) == len(REGISTRY)
    assert "CNKI_LOG_LEVEL='loud' 不是日志级别" in log_file.read_text("utf-8")


async def test_server_keeps_a_log_in_the_data_directory(tmp_path: Path) -> None:
    async with Client(_params(tmp_path, CNKI_LOG_LEVEL="verbose"), read_timeout_seconds=30) as client:
        await client.list_tools()
    assert "WARNING cnki_mcp.core.logs:" in (tmp_path / "logs" / "cnki-mcp.log").read_text("utf-8")
