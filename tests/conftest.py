"""Shared fixtures: an isolated data directory per test and the path of a real Chromium."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.kns.fixtures import kns, kns_server  # noqa: F401  (the CNKI simulator, for any test)


@pytest.fixture(autouse=True)
def isolated_data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own CNKI_DATA_DIR, so nothing touches a real user's data."""
    root = tmp_path / "cnki-data"
    monkeypatch.setenv("CNKI_DATA_DIR", str(root))
    return root


def chromium_path() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return os.environ.get("CNKI_TEST_BROWSER")


@pytest.fixture
def chromium() -> str:
    path = chromium_path()
    if path is None:
        pytest.skip("没有可用的 Chromium（CI 会安装 Debian 的 chromium）")
    return path
