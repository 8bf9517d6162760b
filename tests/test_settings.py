"""Settings from the environment that an MCP Bundle host may leave unfilled."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from cnki_mcp.core import settings


@pytest.mark.parametrize(("value", "placeholder"), [
    ("${user_config.data_dir}", True), (" ${HOME} ", True), ("/data/${x}", False), ("", False), ("$HOME", False),
])
def test_placeholders(value: str, placeholder: bool) -> None:
    assert settings.is_placeholder(value) is placeholder


def test_an_unfilled_data_dir_setting_is_not_a_folder_name(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CNKI_DATA_DIR", "${user_config.data_dir}")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.setattr(sys, "frozen", False, raising=False)
    monkeypatch.setattr(sys, "platform", "linux")
    assert settings.data_root() == tmp_path / "xdg" / "cnki-mcp"


def test_env_text_strips_and_drops_placeholders(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CNKI_BROWSER_PATH", "  /usr/bin/chromium ")
    monkeypatch.setenv("CNKI_DATA_DIR", "${user_config.data_dir}")
    assert settings.env_text("CNKI_BROWSER_PATH") == "/usr/bin/chromium"
    assert settings.env_text("CNKI_DATA_DIR") == ""
