"""What joining costs: a joined call against a direct one, and how long a take-over takes.

Two real stdio servers (``python -m cnki_mcp serve``, no browser: nothing here reaches CNKI) on one data
directory, each with the official MCP client. The first owns the directory; the second relays to it over
loopback HTTP. ``diagnostics`` is called N times through each (alternating, after a warm-up) and the
median and p99 of the round trips are printed. Then the owner is SIGKILLed and the time until the joined
client is answered again (by itself, now the owner) is measured; repeated ``--takeovers`` times.

    .venv/bin/python bench/joined_latency.py [--calls 200] [--takeovers 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cnki_mcp.core.clock import within
from tests.harness import McpSession, offline_params  # noqa: E402


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def _summary(values: list[float]) -> dict[str, float]:
    return {"median_ms": round(statistics.median(values) * 1000, 2), "p99_ms": round(_percentile(values, 0.99) * 1000, 2)}


async def _timed(mcp: McpSession) -> float:
    started = time.perf_counter()
    result = await mcp.result("diagnostics", {})
    assert not result.is_error, result
    return time.perf_counter() - started


async def latency(data: Path, calls: int, errlog: object) -> dict[str, object]:
    async with McpSession.serving(offline_params(data), errlog=errlog) as owner:
        async with McpSession.serving(offline_params(data), errlog=errlog) as joined:
            first = await owner.call("diagnostics", {})
            second = await joined.call("diagnostics", {})
            assert first["owner_pid"] == second["owner_pid"] == first["process_id"]
            for _ in range(20):  # warm-up: connections, imports, caches
                await _timed(owner)
                await _timed(joined)
            direct, relayed = [], []
            for _ in range(calls):
                direct.append(await _timed(owner))
                relayed.append(await _timed(joined))
    added = statistics.median(relayed) - statistics.median(direct)
    return {
        "calls": calls,
        "direct": _summary(direct),
        "joined": _summary(relayed),
        "added_median_ms": round(added * 1000, 2),
        "added_p99_ms": round((_percentile(relayed, 0.99) - _percentile(direct, 0.99)) * 1000, 2),
    }


async def takeover(data: Path, errlog: object, times: list[float]) -> None:
    """One take-over, its time appended to ``times`` (the killed owner's client may fail on its way out)."""
    async with McpSession.serving(offline_params(data), errlog=errlog) as owner:
        owner_pid = (await owner.call("diagnostics", {}))["owner_pid"]
        async with McpSession.serving(offline_params(data), errlog=errlog) as joined:
            assert (await joined.call("diagnostics", {}))["owner_pid"] == owner_pid
            killed = time.perf_counter()
            os.kill(owner_pid, signal.SIGKILL)
            while True:
                result = await within(joined.result("diagnostics", {}), 30)
                if not result.is_error and result.structured_content["owner_pid"] != owner_pid:
                    times.append(time.perf_counter() - killed)
                    break
                await asyncio.sleep(0.02)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--takeovers", type=int, default=5)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="cnki-bench-") as tmp, open(Path(tmp) / "stderr.txt", "w") as errlog:
        figures: dict[str, object] = await latency(Path(tmp) / "latency", options.calls, errlog)
        times: list[float] = []
        for run in range(options.takeovers):
            try:
                await takeover(Path(tmp) / f"takeover-{run}", errlog, times)
            except BaseException as exc:  # the killed owner's client ends with its server
                if not isinstance(exc, (Exception, BaseExceptionGroup)):
                    raise
        figures["takeover_seconds"] = {
            "runs": len(times),
            "median": round(statistics.median(times), 3) if times else None,
            "max": round(max(times), 3) if times else None,
        }
    print(json.dumps(figures, ensure_ascii=False, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
