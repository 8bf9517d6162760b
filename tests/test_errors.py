"""The error catalogue: every code the package raises is declared, with a Chinese message."""

from __future__ import annotations

import re
from pathlib import Path

from cnki_mcp.core.errors import CATALOGUE

PACKAGE = Path(__file__).resolve().parents[1] / "cnki_mcp"
RAISED = re.compile(r"""CnkiError\(\s*["']([A-Z_]+)["']""")
HAN = re.compile(r"[\u4e00-\u9fff]")


def raised_codes() -> dict[str, str]:
    """Every code written as the first argument of ``CnkiError(...)`` in the package, with its file."""
    found: dict[str, str] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for code in RAISED.findall(path.read_text(encoding="utf-8")):
            found.setdefault(code, path.name)
    return found


def test_every_raised_code_is_declared() -> None:
    undeclared = {code: where for code, where in raised_codes().items() if code not in CATALOGUE}
    assert undeclared == {}


def test_every_declared_code_has_a_chinese_message() -> None:
    assert [code for code, entry in CATALOGUE.items() if not HAN.search(entry.message)] == []
