"""Shared fixtures: an isolated data directory per test and the path of a real Chromium."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.harness import chromium_or_skip
from tests.kns.fixtures import kns, kns_server  # noqa: F401  (the CNKI simulator, for any test)


@pytest.fixture(autouse=True)
def isolated_data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own CNKI_DATA_DIR, so nothing touches a real user's data."""
    root = tmp_path / "cnki-data"
    monkeypatch.setenv("CNKI_DATA_DIR", str(root))
    return root


@pytest.fixture
def chromium() -> str:
    return chromium_or_skip()
