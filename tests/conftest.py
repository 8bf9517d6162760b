"""Shared fixtures: an isolated data directory per test and the path of a real Chromium; the markers a test
gets from where it lives and what it uses (``bash scripts/test.sh --fast`` leaves those out)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness import RECENT_ANSWERS, chromium_or_skip
from tests.kns.fixtures import kns, kns_server  # noqa: F401  (the CNKI simulator, for any test)
from tests.kns.server import KnsSimulator

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


SIM_REQUESTS = 60  # how many of the simulator's last requests a failed test's report shows


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    RECENT_ANSWERS.clear()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[pytest.TestReport]:
    """A failed (or timed out) test's report carries what CI would otherwise lose with the machine: the last
    answers its client read and the simulator's last requests (the server's log is its captured stderr)."""
    report: pytest.TestReport = yield
    if report.when == "call" and report.failed:
        report.sections.extend(failure_context(getattr(item, "funcargs", {})))
    return report


def failure_context(funcargs: dict[str, object]) -> list[tuple[str, str]]:
    sections = []
    if RECENT_ANSWERS:
        lines = (line if count == 1 else f"{line}  (×{count})" for line, count in RECENT_ANSWERS)
        sections.append(("last answers read", "\n".join(lines)))
    for sim in {id(value): value for value in funcargs.values() if isinstance(value, KnsSimulator)}.values():
        requests = sim.requests[-SIM_REQUESTS:]
        start = requests[0].at if requests else 0.0
        lines = (f"+{r.at - start:6.2f}s {r.status} {r.method} {r.endpoint} {r.host}{r.path}" for r in requests)
        sections.append(("simulator's last requests", "\n".join(lines)))
    return sections


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
