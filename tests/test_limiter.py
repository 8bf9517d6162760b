"""The request limiter: spacing, in-flight cap, hold/release, cancellation and back-off.

Timing assertions only check order and lower bounds; the machine is shared and slow at times.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from cnki_mcp.core.clock import within
from cnki_mcp.core.errors import CnkiError
from cnki_mcp.site.limiter import Limiter


async def test_starts_are_spaced_by_the_interval() -> None:
    limiter = Limiter(interval_ms=40, max_inflight=10)
    starts: list[float] = []

    async def request() -> None:
        async with limiter.slot():
            starts.append(time.monotonic())

    await asyncio.gather(*(request() for _ in range(4)))
    assert len(starts) == 4
    gaps = [b - a for a, b in zip(starts, starts[1:])]
    assert all(gap >= 0.035 for gap in gaps), gaps
    assert limiter.stats()["starts"] == 4
    assert limiter.stats()["inflight"] == 0


async def test_latency_overlaps_the_spacing() -> None:
    # A slow request does not delay the next start beyond the interval.
    limiter = Limiter(interval_ms=30, max_inflight=4)
    starts: list[float] = []

    async def request() -> None:
        async with limiter.slot():
            starts.append(time.monotonic())
            await asyncio.sleep(0.2)

    began = time.monotonic()
    await asyncio.gather(*(request() for _ in range(3)))
    assert starts[2] - starts[0] >= 0.055
    # Three overlapping 0.2 s requests finish well before three sequential ones would (0.6 s).
    assert starts[2] - began < 0.2


async def test_inflight_cap() -> None:
    limiter = Limiter(interval_ms=1, max_inflight=2)
    active = 0
    peak = 0

    async def request() -> None:
        nonlocal active, peak
        async with limiter.slot():
            active += 1
            peak = max(peak, active)
            await asyncio.sleep(0.02)
            active -= 1

    await asyncio.gather(*(request() for _ in range(6)))
    assert peak == 2
    assert limiter.stats()["inflight"] == 0


async def test_release_function_is_idempotent() -> None:
    limiter = Limiter(interval_ms=1, max_inflight=1)
    release = await limiter.acquire()
    assert limiter.stats()["inflight"] == 1
    release()
    release()
    assert limiter.stats()["inflight"] == 0
    # Exactly one slot again: a second acquire succeeds, a third would have to wait.
    second = await within(limiter.acquire(), 1)
    third = asyncio.create_task(limiter.acquire())
    await asyncio.sleep(0.05)
    assert not third.done()
    second()
    (await within(third, 1))()


async def test_hold_blocks_new_starts_until_release() -> None:
    limiter = Limiter(interval_ms=50, max_inflight=3)
    limiter.hold()
    assert limiter.held
    waiter = asyncio.create_task(limiter.acquire())
    await asyncio.sleep(0.1)
    assert not waiter.done()
    assert limiter.stats()["waiting"] == 1
    released_at = time.monotonic()
    limiter.release()
    assert not limiter.held
    release = await within(waiter, 2)
    # The first start after a person finishes waits one interval.
    assert time.monotonic() - released_at >= 0.045
    release()
    assert limiter.stats()["held_seconds"] >= 0.09


async def test_hold_during_a_pending_start_waits_and_respaces() -> None:
    limiter = Limiter(interval_ms=60, max_inflight=3)
    first = await limiter.acquire()  # consumes "now"; the next start is 60 ms away
    pending = asyncio.create_task(limiter.acquire())
    await asyncio.sleep(0.01)
    limiter.hold()
    await asyncio.sleep(0.12)  # the pending start time has passed while held
    assert not pending.done()
    released_at = time.monotonic()
    limiter.release()
    second = await within(pending, 2)
    assert time.monotonic() - released_at >= 0.055
    first()
    second()


async def test_cancelling_a_waiter_returns_its_slot() -> None:
    limiter = Limiter(interval_ms=150, max_inflight=1)
    first = await limiter.acquire()
    first()
    # The next start is reserved 150 ms ahead; cancel while sleeping towards it.
    waiter = asyncio.create_task(limiter.acquire())
    await asyncio.sleep(0.02)
    assert limiter.stats()["inflight"] == 1
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert limiter.stats()["inflight"] == 0
    # The reservation is not refunded: the following start lands after the cancelled one's slot.
    began = time.monotonic()
    release = await within(limiter.acquire(), 2)
    assert time.monotonic() - began >= 0.24
    release()


async def test_cancelling_while_held_leaves_no_trace() -> None:
    limiter = Limiter(interval_ms=1, max_inflight=1)
    limiter.hold()
    waiter = asyncio.create_task(limiter.acquire())
    await asyncio.sleep(0.02)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    limiter.release()
    assert limiter.stats()["waiting"] == 0
    release = await within(limiter.acquire(), 1)
    release()


async def test_cancel_check_aborts_and_returns_the_slot() -> None:
    limiter = Limiter(interval_ms=30, max_inflight=1)
    cancelled = False

    def check() -> None:
        if cancelled:
            raise CnkiError("CANCELLED")

    (await limiter.acquire(check))()
    waiter = asyncio.create_task(limiter.acquire(check))
    await asyncio.sleep(0.005)
    cancelled = True
    with pytest.raises(CnkiError) as info:
        await waiter
    assert info.value.code == "CANCELLED"
    assert limiter.stats()["inflight"] == 0


async def test_slot_context_releases_on_error() -> None:
    limiter = Limiter(interval_ms=1, max_inflight=1)
    with pytest.raises(RuntimeError):
        async with limiter.slot():
            raise RuntimeError("request failed")
    assert limiter.stats()["inflight"] == 0


def test_backoff_sequence_and_decay() -> None:
    limiter = Limiter(interval_ms=500, max_inflight=6)
    seen = [limiter.backoff]
    for _ in range(4):
        limiter.slow()
        seen.append(limiter.backoff)
    assert seen == [1, 2, 4, 8, 8]
    assert limiter.stats()["effective_interval_ms"] == 4000
    limiter.fast()
    assert limiter.backoff == pytest.approx(7.2)
    for _ in range(40):
        limiter.fast()
    assert limiter.backoff == 1.0
    # From a decayed value slow() jumps back to at least 2.
    limiter.slow()
    assert limiter.backoff == 2.0
    limiter.fast()
    limiter.slow()
    assert limiter.backoff == pytest.approx(3.6)


async def test_backoff_widens_the_spacing() -> None:
    limiter = Limiter(interval_ms=20, max_inflight=4)
    limiter.slow()
    limiter.slow()  # backoff 4 → 80 ms between starts
    starts: list[float] = []
    for _ in range(3):
        async with limiter.slot():
            starts.append(time.monotonic())
    assert starts[1] - starts[0] >= 0.075
    assert starts[2] - starts[1] >= 0.075


def test_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CNKI_REQUEST_INTERVAL_MS", "1200")
    monkeypatch.setenv("CNKI_MAX_INFLIGHT", "0")
    limiter = Limiter.from_env()
    assert limiter.interval == 1.2
    assert limiter.max_inflight == 6
    monkeypatch.setenv("CNKI_REQUEST_INTERVAL_MS", "fast")
    monkeypatch.setenv("CNKI_MAX_INFLIGHT", "2")
    limiter = Limiter.from_env()
    assert limiter.interval == 0.5
    assert limiter.max_inflight == 2


async def test_a_late_wake_up_never_brings_the_next_start_closer_than_the_interval(monkeypatch) -> None:
    limiter = Limiter(interval_ms=50, max_inflight=6)
    real_sleep = asyncio.sleep
    first = True

    async def late_sleep(delay: float) -> None:
        nonlocal first
        # The first scheduled wake-up comes 30 ms late, as on a busy machine.
        late = 0.03 if first and delay > 0 else 0.0
        if delay > 0:
            first = False
        await real_sleep(delay + late)

    monkeypatch.setattr("cnki_mcp.site.limiter.asyncio.sleep", late_sleep)
    starts: list[float] = []

    async def one() -> None:
        release = await limiter.acquire()
        starts.append(time.monotonic())
        release()

    await asyncio.gather(*(one() for _ in range(4)))
    gaps = [b - a for a, b in zip(starts, starts[1:])]
    assert min(gaps) >= 0.05 - 0.001, gaps
