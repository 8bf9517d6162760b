"""``within``: the one bounded await (``asyncio.wait_for`` is refused by ruff, see pyproject.toml)."""

from __future__ import annotations

import asyncio
import sys

import pytest

from cnki_mcp.core.clock import within


async def test_within_returns_what_was_awaited() -> None:
    assert await within(asyncio.sleep(0, "answer"), 1) == "answer"


async def test_within_without_a_limit_waits_as_long_as_it_takes() -> None:
    assert await within(asyncio.sleep(0.05, "late"), None) == "late"


async def test_within_ends_in_timeout_and_the_awaited_work_is_stopped() -> None:
    stopped = asyncio.Event()

    async def endless() -> None:
        try:
            await asyncio.sleep(3600)
        finally:
            stopped.set()

    with pytest.raises(TimeoutError):
        await within(endless(), 0.05)
    assert stopped.is_set()


async def lost_cancel(bounded_wait: str) -> str:
    """Cancel a task just as the result it waits for lands; what the task did next."""
    answer: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    async def waiting() -> str:
        if bounded_wait == "within":
            await within(answer, 5)
        else:
            await asyncio.wait_for(answer, 5)  # noqa: TID251 (the behaviour the ban is for)
        return "went on"

    task = asyncio.create_task(waiting())
    await asyncio.sleep(0)  # the task now waits for the answer
    answer.set_result("page answered")
    task.cancel()
    try:
        return await task
    except asyncio.CancelledError:
        return "stopped"


async def test_a_cancel_that_lands_with_the_awaited_result_stops_the_task() -> None:
    assert await lost_cancel("within") == "stopped"


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="Python 3.12 rebuilt wait_for on asyncio.timeout")
async def test_wait_for_on_python_3_11_loses_that_cancel() -> None:
    """Why ``asyncio.wait_for`` is banned here: CPython issue 86296, seen as a download stuck for its 20-minute wait."""
    assert await lost_cancel("wait_for") == "went on"
