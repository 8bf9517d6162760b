"""Shared fixtures: an isolated data directory per test and the path of a real Chromium; the markers a test
gets from where it lives and what it uses (``bash scripts/test.sh --fast`` leaves those out)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness import chromium_or_skip
from tests.kns.fixtures import kns, kns_server  # noqa: F401  (the CNKI simulator, for any test)

# Modules whose every test drives the real server end to end (stdio, often Chromium and the simulator).
E2E_MODULE_PREFIX = "test_e2e_"


@pytest.hookimpl(tryfirst=True)  # before pytest's own hook deselects by -m
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Marks by rule rather than by hand: ``e2e`` for every test in tests/test_e2e_*.py, ``browser`` for every
    test that asks for the ``chromium`` fixture."""
    for item in items:
        if item.path.name.startswith(E2E_MODULE_PREFIX):
            item.add_marker(pytest.mark.e2e)
        if "chromium" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.browser)


# The home folder, and the settings that would point a client's config somewhere in the real one.
FAKE_HOME_VARIABLES = (
    "HOME", "USERPROFILE", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "APPDATA", "LOCALAPPDATA",
    "CLAUDE_CONFIG_DIR", "CODEX_HOME", "KIMI_CODE_HOME", "DSH_HOME", "CNKI_LOG_FILE",
)


@pytest.fixture(scope="session", autouse=True)
def fake_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One empty home folder for the whole run (servers held by a module see it too): no test reads or
    writes a client config, cache or profile of the real user."""
    home = tmp_path_factory.mktemp("home")
    saved = {name: os.environ.get(name) for name in FAKE_HOME_VARIABLES}
    os.environ.update(HOME=str(home), USERPROFILE=str(home))
    for name in FAKE_HOME_VARIABLES[2:]:
        os.environ.pop(name, None)
    yield home
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture(scope="session", autouse=True)
def chinese_cli() -> Iterator[None]:
    """The CLI's lines in Chinese, its default, whatever the locale of the machine running the tests; a test
    that means English sets CNKI_LANG=en itself."""
    saved = os.environ.get("CNKI_LANG")
    os.environ["CNKI_LANG"] = "zh"
    yield
    if saved is None:
        os.environ.pop("CNKI_LANG", None)
    else:
        os.environ["CNKI_LANG"] = saved


@pytest.fixture(autouse=True)
def isolated_data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own CNKI_DATA_DIR, so nothing touches a real user's data."""
    root = tmp_path / "cnki-data"
    monkeypatch.setenv("CNKI_DATA_DIR", str(root))
    return root


@pytest.fixture
def chromium() -> str:
    return chromium_or_skip()
