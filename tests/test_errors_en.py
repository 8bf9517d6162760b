"""The English of the errors a terminal shows in English (core/errors_en.py)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from cnki_mcp.core.errors import CATALOGUE, CnkiError
from cnki_mcp.core.errors_en import CHINESE_ONLY, ERRORS_EN, english_message
from cnki_mcp.core.model import Problem
from tests.test_cli_english import HAN

PACKAGE = Path(__file__).resolve().parents[1] / "cnki_mcp"
# The layers under setup whose errors reach the command line as they were raised (setup words its own).
UNDER_SETUP = ("core/settings.py", "core/files.py", "store", "serving")


def raised_codes(path: Path) -> set[str]:
    """The codes ``path`` raises as ``CnkiError("CODE", …)``."""
    tree = ast.parse(path.read_text("utf-8"))
    return {
        node.args[0].value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "CnkiError"
        and node.args and isinstance(node.args[0], ast.Constant)
    }


def test_every_english_line_is_english_and_names_a_code() -> None:
    assert [line for line in ERRORS_EN.values() if HAN.search(line)] == []
    assert set(ERRORS_EN) <= set(CATALOGUE)


@pytest.mark.parametrize("place", UNDER_SETUP)
def test_every_code_the_layers_under_setup_raise_has_an_english_line(place: str) -> None:
    root = PACKAGE / place
    files = [root] if root.is_file() else sorted(root.glob("*.py"))
    assert sorted(set().union(*map(raised_codes, files)) - set(ERRORS_EN)) == []


def test_the_line_carries_the_details_without_chinese() -> None:
    error = CnkiError("INVALID_SETTING", "环境变量 CNKI_DAILY_DOWNLOAD_LIMIT 的值 'x' 无效",
                      details={"setting": "环境变量 CNKI_DAILY_DOWNLOAD_LIMIT", "name": "CNKI_DAILY_DOWNLOAD_LIMIT", "value": "x"})
    assert english_message(error) == (
        "a setting (an environment variable or config.json) has an invalid value: correct it and try again. "
        "(name: CNKI_DAILY_DOWNLOAD_LIMIT; value: x)"
    )


def test_a_problem_in_an_operation_view_reads_the_same() -> None:
    problem = Problem(code="STORE_UNAVAILABLE", message="本地数据无法读写。", details={"path": "/data/research.db"})
    assert english_message(problem) == (
        "the local data cannot be read or written: check the data directory's permissions and free space. "
        "(path: /data/research.db)"
    )


def test_a_message_already_in_english_is_kept() -> None:
    assert english_message(CnkiError("DISK_WRITE_FAILED", "Cannot write /x: disk full")) == "Cannot write /x: disk full"


def test_a_code_without_a_line_keeps_its_chinese_and_says_so() -> None:
    error = CnkiError("WATCH_NOT_FOUND", "没有这个关注。")
    assert english_message(error) == "没有这个关注。" + CHINESE_ONLY
