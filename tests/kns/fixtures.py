"""pytest fixtures: one simulator per session, reset before every test.

Use from tests/conftest.py:  from tests.kns.fixtures import kns, kns_server  # noqa: F401
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .server import KnsSimulator


@pytest.fixture(scope="session")
def kns_server() -> Iterator[KnsSimulator]:
    sim = KnsSimulator().start()
    try:
        yield sim
    finally:
        sim.stop()


@pytest.fixture
def kns(kns_server: KnsSimulator) -> Iterator[KnsSimulator]:
    """The running simulator with default scenario, no faults and an empty request log."""
    kns_server.reset()
    yield kns_server
    kns_server.reset()
