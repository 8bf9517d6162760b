"""Start-up against the SDK floor: ``cnki-mcp serve`` beside the smallest MCP server in the same venv.

    .venv/bin/python bench/bench_startup.py [--runs 7] [--command "path/to/cnki-mcp serve"]

Each run starts (a) the server, on a throwaway CNKI_DATA_DIR of its own, and (b) ``bench/floor_server.py``
(the SDK's low-level ``Server`` with one tool), alternately, through the real mcp client over stdio, and
takes (after one uncounted run of each that writes their bytecode, as an installed program has it):
spawn → ``initialize`` answered (wall, and the child's CPU time by then), the first ``tools/list``
round trip, and the idle RSS once the child's memory has settled after them. It prints the medians of both,
the server's difference and ratio to the floor, and the goals of issue 28: ``initialize`` at most 0.15 s
slower than the floor, idle RSS at most 80 MB. ``--runs 1`` is the smoke mode the test suite runs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import psutil
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from cnki_mcp.core.clock import within

FLOOR = Path(__file__).with_name("floor_server.py")
GOALS = {"initialize_delta_s": 0.15, "idle_rss_mb": 80.0}
SETTLE_SECONDS = 5.0  # at most this long for the RSS to stop moving (work started after the first answer)
SETTLE_STEP = 0.1
SETTLE_STEADY = 5  # that many equal samples in a row: settled
RUN_SECONDS = 60.0


@dataclass
class Run:
    initialize_s: float
    initialize_cpu_s: float
    tools_list_ms: float
    idle_rss_mb: float
    tools: int


def _child() -> psutil.Process:
    children = psutil.Process().children()
    if len(children) != 1:
        raise RuntimeError(f"expected one server process, found {len(children)}")
    return children[0]


async def _settled_rss(process: psutil.Process) -> float:
    """The RSS once it has stayed the same (to the page) for a while, or after SETTLE_SECONDS."""
    last, steady = -1, 0
    deadline = time.monotonic() + SETTLE_SECONDS
    while time.monotonic() < deadline and steady < SETTLE_STEADY:
        rss = process.memory_info().rss
        steady = steady + 1 if rss == last else 0
        last = rss
        await asyncio.sleep(SETTLE_STEP)
    return last / 2**20


def _installed_env(pycache: str) -> dict[str, str]:
    """The children's environment as an installed program sees it: compiled bytecode is read, not made anew on
    every start (``PYTHONDONTWRITEBYTECODE`` would make each run compile the package), under a prefix of its own."""
    env = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
    return {**env, "PYTHONPYCACHEPREFIX": pycache}


async def measure(command: list[str], env: dict[str, str]) -> Run:
    params = StdioServerParameters(command=command[0], args=command[1:], env=env)
    with open(os.devnull, "w") as quiet:
        began = time.perf_counter()
        async with stdio_client(params, errlog=quiet) as (read_stream, write_stream):
            async with ClientSession(read_stream, write_stream) as session:
                await session.initialize()
                initialize_s = time.perf_counter() - began
                process = _child()
                cpu = process.cpu_times()
                listed_at = time.perf_counter()
                tools = (await session.list_tools()).tools
                tools_list_ms = (time.perf_counter() - listed_at) * 1000
                rss_mb = await _settled_rss(process)
    return Run(initialize_s, cpu.user + cpu.system, tools_list_ms, rss_mb, len(tools))


async def bench(runs: int, command: list[str]) -> dict[str, list[Run]]:
    found: dict[str, list[Run]] = {"server": [], "floor": []}
    floor = [sys.executable, str(FLOOR)]
    with tempfile.TemporaryDirectory(prefix="cnki-startup-pycache-") as pycache:
        env = _installed_env(pycache)
        # One run of each, not counted, writes the bytecode both sides then read.
        for count in (False, *[True] * runs):  # alternately, so a change in the machine's load falls on both
            floor_run = await within(measure(floor, env), RUN_SECONDS)
            with tempfile.TemporaryDirectory(prefix="cnki-startup-") as data_dir:
                server_run = await within(measure(command, {**env, "CNKI_DATA_DIR": data_dir}), RUN_SECONDS)
            if count:
                found["floor"].append(floor_run)
                found["server"].append(server_run)
    return found


def medians(runs: list[Run]) -> dict[str, float]:
    return {
        name: statistics.median(getattr(run, name) for run in runs)
        for name in ("initialize_s", "initialize_cpu_s", "tools_list_ms", "idle_rss_mb")
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--command", default=f"{shlex.quote(sys.executable)} -m cnki_mcp serve")
    options = parser.parse_args()
    command = shlex.split(options.command)
    found = asyncio.run(bench(options.runs, command))
    server, floor = medians(found["server"]), medians(found["floor"])
    delta = server["initialize_s"] - floor["initialize_s"]

    print(f"server: {' '.join(command)} ({found['server'][0].tools} tools)")
    print(f"floor:  {FLOOR.name} ({found['floor'][0].tools} tool), same interpreter")
    print(f"medians of {options.runs} runs each:")
    print(f"{'':28}{'server':>10}{'floor':>10}{'difference':>12}{'ratio':>8}")
    rows = (
        ("spawn → initialize (s)", "initialize_s", 3),
        ("CPU by initialize (s)", "initialize_cpu_s", 3),
        ("first tools/list (ms)", "tools_list_ms", 2),
        ("idle RSS (MB)", "idle_rss_mb", 1),
    )
    for label, key, places in rows:
        ratio = server[key] / floor[key] if floor[key] else float("nan")
        print(f"{label:28}{server[key]:>10.{places}f}{floor[key]:>10.{places}f}{server[key] - floor[key]:>+12.{places}f}{ratio:>8.2f}")
    print(f"goal: initialize ≤ floor + {GOALS['initialize_delta_s']} s: {delta:+.3f} s "
          f"({'met' if delta <= GOALS['initialize_delta_s'] else 'missed'})")
    print(f"goal: idle RSS ≤ {GOALS['idle_rss_mb']:g} MB: {server['idle_rss_mb']:.1f} MB "
          f"({'met' if server['idle_rss_mb'] <= GOALS['idle_rss_mb'] else 'missed'})")
    print("figures: " + json.dumps({"runs": options.runs, "server": server, "floor": floor, "initialize_delta_s": delta}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
