"""Request pacing: one limiter per process spaces the starts of every CNKI request.

* Starts are spaced by ``interval × backoff``; a request's latency overlaps the spacing instead of
  adding to it, and at most ``max_inflight`` requests (including ones waiting for their start time)
  are out at once.
* ``slow()`` doubles the back-off (1 → 2 → 4 → 8) after a 429, a 5xx or a human step; ``fast()``
  decays it by 10 % after every successfully parsed page.
* ``hold()`` closes the gate while a person solves a verification or logs in in the shared
  browser; ``release()`` reopens it one interval later, so the first request after the person does
  not hit the site at once.

Every wait is an ordinary asyncio wait, so cancelling the waiting task cancels the wait; the
in-flight slot is returned then, but a reserved start time is not (spacing stays conservative).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from cnki_mcp.core import settings

MAX_BACKOFF = 8.0


class Limiter:
    def __init__(self, interval_ms: int = 500, max_inflight: int = 6) -> None:
        self.interval = max(0, interval_ms) / 1000.0
        self.max_inflight = max(1, max_inflight)
        self._slots = asyncio.Semaphore(self.max_inflight)
        self._gate = asyncio.Event()
        self._gate.set()
        self._next_start = 0.0
        self._last_start = float("-inf")  # when the latest request actually started
        self._backoff = 1.0
        self._inflight = 0
        self._waiting = 0
        self._starts = 0
        self._held_since: float | None = None
        self._held_total = 0.0

    @classmethod
    def from_env(cls) -> Limiter:
        """CNKI_REQUEST_INTERVAL_MS (500) and CNKI_MAX_INFLIGHT (6)."""
        return cls(settings.request_interval_ms(), settings.max_inflight())

    @property
    def held(self) -> bool:
        return not self._gate.is_set()

    @property
    def backoff(self) -> float:
        return self._backoff

    async def acquire(self, cancel_check: Callable[[], None] | None = None) -> Callable[[], None]:
        """Wait for the right to start one request; returns the function that ends it.

        ``cancel_check``, if given, is called after every wait and should raise (for example the
        operation's cancellation error) when the caller's work has been cancelled; the slot is
        then given back. The returned release function is idempotent.
        """
        self._waiting += 1
        try:
            await self._gate.wait()
            if cancel_check is not None:
                cancel_check()
            await self._slots.acquire()
        finally:
            self._waiting -= 1
        self._inflight += 1
        try:
            while True:
                now = time.monotonic()
                start = max(self._next_start, now)
                self._next_start = start + self.interval * self._backoff
                if start > now:
                    await asyncio.sleep(start - now)
                if cancel_check is not None:
                    cancel_check()
                if self._gate.is_set():
                    break
                # A person took over the browser while this start was pending: wait for them,
                # then take a fresh start time so the queue does not rush the site at once.
                await self._gate.wait()
            # The previous start may have woken late: never start closer to it than the interval.
            while (gap := self._last_start + self.interval * self._backoff - time.monotonic()) > 0:
                await asyncio.sleep(gap)
            self._last_start = time.monotonic()
        except BaseException:
            self._give_back()
            raise
        self._starts += 1
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                self._give_back()

        return release

    def _give_back(self) -> None:
        self._inflight -= 1
        self._slots.release()

    @contextlib.asynccontextmanager
    async def slot(self, cancel_check: Callable[[], None] | None = None) -> AsyncIterator[None]:
        """``async with limiter.slot(): <one request>``"""
        release = await self.acquire(cancel_check)
        try:
            yield
        finally:
            release()

    def hold(self) -> None:
        """Close the gate to new starts while a person handles the browser."""
        if self._gate.is_set():
            self._gate.clear()
            self._held_since = time.monotonic()

    def release(self) -> None:
        """Reopen the gate; the next start comes one interval from now."""
        if self._gate.is_set():
            return
        now = time.monotonic()
        if self._held_since is not None:
            self._held_total += now - self._held_since
            self._held_since = None
        self._next_start = now + self.interval
        self._gate.set()

    def slow(self) -> None:
        self._backoff = min(MAX_BACKOFF, max(2.0, 2.0 * self._backoff))

    def fast(self) -> None:
        self._backoff = max(1.0, 0.9 * self._backoff)

    def stats(self) -> dict[str, Any]:
        """A snapshot for diagnostics."""
        now = time.monotonic()
        held_for = now - self._held_since if self._held_since is not None else 0.0
        return {
            "interval_ms": round(self.interval * 1000),
            "max_inflight": self.max_inflight,
            "inflight": self._inflight,
            "waiting": self._waiting,
            "backoff": round(self._backoff, 3),
            "effective_interval_ms": round(self.interval * self._backoff * 1000),
            "held": self.held,
            "held_seconds": round(self._held_total + held_for, 3),
            "starts": self._starts,
            "next_start_in_ms": max(0, round((self._next_start - now) * 1000)),
        }
