"""Time: UTC timestamps as the stored and returned JSON carries them, and the deadlines of waits (``within`` is
the one bounded await: ``asyncio.wait_for`` is refused by the linter, see below).

Timestamps are RFC 3339 with a ``Z`` suffix.

Every module that stamps or compares times goes through here so the format stays one thing:
``2026-11-30T01:34:16.123Z`` (millisecond precision, fixed width, so strings also sort by time).
Parsing is lenient: any RFC 3339 / ISO 8601 form with an offset is accepted; naive times are
taken as UTC, and anything unparsable is reported as ``None`` rather than raising, because stored
data written by other versions must never break a read.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta, timezone
from typing import TypeVar

T = TypeVar("T")


def utc_now() -> datetime:
    return datetime.now(UTC)


def format_utc(moment: datetime) -> str:
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    text = moment.astimezone(UTC).isoformat(timespec="milliseconds")
    return text.replace("+00:00", "Z")


def utc_now_iso() -> str:
    return format_utc(utc_now())


# CNKI's day: its daily quotas turn over at midnight in Beijing, wherever the machine is and whatever its
# zone says (a laptop that travels, or a restart under another TZ, must not open a fresh day early).
CHINA = timezone(timedelta(hours=8), "UTC+8")


def china_day(moment: datetime | None = None) -> str:
    """The calendar day in China (UTC+8) of ``moment`` (now), ``YYYY-MM-DD``: what a daily count is kept under."""
    return (moment or utc_now()).astimezone(CHINA).date().isoformat()


def next_china_midnight(moment: datetime | None = None) -> datetime:
    """When China's day of ``moment`` (now) ends, as an aware UTC+8 time (China keeps no daylight saving)."""
    tomorrow = (moment or utc_now()).astimezone(CHINA).date() + timedelta(days=1)
    return datetime(tomorrow.year, tomorrow.month, tomorrow.day, tzinfo=CHINA)


def parse_utc(text: str | None) -> datetime | None:
    """The moment ``text`` names, as an aware UTC datetime; ``None`` when empty or unparsable."""
    if not text or not isinstance(text, str):
        return None
    candidate = text.strip()
    if candidate[-1:] in ("z", "Z"):
        candidate = candidate[:-1] + "+00:00"
    # Go writes up to nine fractional digits; datetime accepts at most six.
    head, dot, rest = candidate.partition(".")
    if dot:
        digits = len(rest) - len(rest.lstrip("0123456789"))
        if digits > 6:
            rest = rest[:6] + rest[digits:]
        candidate = head + dot + rest
    try:
        moment = datetime.fromisoformat(candidate)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def age_seconds(text: str | None, now: datetime | None = None) -> float | None:
    """Seconds elapsed since ``text`` (negative when it lies in the future); ``None`` if unparsable."""
    moment = parse_utc(text)
    if moment is None:
        return None
    reference = now or utc_now()
    if reference.tzinfo is None:
        reference = reference.replace(tzinfo=UTC)
    return (reference - moment).total_seconds()


class Deadline:
    """When a wait ends, on the monotonic clock; ``restart`` grants the whole wait again (after a person's step)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = max(0.0, seconds)
        self.restart()

    def restart(self) -> None:
        self._end = time.monotonic() + self.seconds

    def remaining(self) -> float:
        """Seconds left, never negative."""
        return max(0.0, self._end - time.monotonic())

    @property
    def passed(self) -> bool:
        return time.monotonic() >= self._end


async def within(awaitable: Awaitable[T], seconds: float | None) -> T:
    """``await awaitable``, or TimeoutError once ``seconds`` pass (None: no limit): ``asyncio.wait_for`` as
    Python 3.12 has it. On 3.11, which the releases are built with, ``wait_for`` returns the inner result when its
    task is cancelled just as that result lands, and the cancel is lost (CPython issue 86296): a person's step told
    to stop because the download had begun went on waiting for the person for 20 minutes."""
    async with asyncio.timeout(seconds):
        return await awaitable


async def poll(probe: Callable[[], Awaitable[T]], seconds: float, interval: float) -> T:
    """Call ``probe`` every ``interval`` until it returns something truthy or ``seconds`` pass.

    Returns the last value (falsy on a timeout). The probe runs at least once, and once more at
    the deadline, so a wait never ends without a last look.
    """
    deadline = Deadline(seconds)
    while True:
        value = await probe()
        if value or deadline.passed:
            return value
        await asyncio.sleep(min(interval, deadline.remaining()))
