"""Frozen builds against plain Python: build time, size, and spawn → MCP initialize start-up.

    .venv/bin/python bench/bench_frozen.py [--runs 5] [--layouts onedir onefile] [--reuse] [--imports]

Builds every layout with packaging/build.py (--reuse skips layouts already built in --work), then
starts each build and `python -m cnki_mcp serve` in turn, round after round, so that load from other
work on the machine falls on all of them alike, and prints the median start-up of each and its
difference from plain Python (target: the shipped layout within 0.15 s). Start-up is measured the way
bench/bench_server.py does it: raw JSON-RPC `initialize` on the child's stdio; besides wall time it
reports the CPU time the process (and onefile's unpacking parent) used until it answered, which stays
steady when other work on the machine spreads the wall times.
--imports also lists the third-party packages the server imports before it answers, with their
cumulative import time (python -X importtime), and says whether nodriver or lxml is among them.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

import psutil

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))

from bench_server import INITIALIZE, Child  # noqa: E402

TARGET_OVER_PYTHON_S = 0.15


def _build_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("cnki_build", ROOT / "packaging" / "build.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def start_once(command: list[str], data_dir: str) -> tuple[float, float]:
    """Wall time and CPU time (the process and its children, e.g. onefile's unpacker) to initialize."""
    began = time.perf_counter()
    child = Child(command, data_dir)
    try:
        reply = child.request("initialize", INITIALIZE)
        elapsed = time.perf_counter() - began
        if "result" not in reply:
            raise RuntimeError(f"initialize failed: {reply}")
        process = psutil.Process(child.proc.pid)
        cpu = 0.0
        for member in [process, *process.children(recursive=True)]:
            times = member.cpu_times()
            cpu += times.user + times.system
    finally:
        child.close()
    return elapsed, cpu


def startup_imports() -> list[tuple[str, float]]:
    """Top-level packages imported by `python -m cnki_mcp serve` before it waits for input."""
    with tempfile.TemporaryDirectory(prefix="cnki-bench-") as data_dir:
        done = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "cnki_mcp", "serve"],
            input=b"", capture_output=True, timeout=60, env=dict(os.environ, CNKI_DATA_DIR=data_dir),
        )
    totals: dict[str, float] = {}
    for line in done.stderr.decode("utf-8", "replace").splitlines():
        found = re.match(r"import time:\s+\d+ \|\s+(\d+) \|( *)(\S+)$", line)
        if found and found.group(3).split(".")[0] not in sys.stdlib_module_names:
            top = found.group(3).split(".")[0]
            # The outermost import of a package carries its cumulative time; nested ones are smaller.
            totals[top] = max(totals.get(top, 0.0), int(found.group(1)) / 1e6)
    return sorted(totals.items(), key=lambda item: -item[1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--layouts", nargs="+", choices=("onedir", "onefile"), default=["onedir", "onefile"])
    parser.add_argument("--work", type=Path, default=ROOT / "build" / "bench-frozen")
    parser.add_argument("--reuse", action="store_true", help="reuse builds already in --work")
    parser.add_argument("--imports", action="store_true", help="also list the packages imported at start-up")
    options = parser.parse_args()
    build = _build_module()
    label = build.platform_label()
    exe = build.executable_name(label)

    commands: dict[str, list[str]] = {"python": [sys.executable, "-m", "cnki_mcp", "serve"]}
    rows: list[str] = []
    for layout in options.layouts:
        work = options.work.resolve() / layout
        folder = work / "stage" / build.TOP_FOLDER
        archives = sorted((work / "out").glob("cnki-mcp-*"))
        archives = [path for path in archives if not path.name.endswith(".sha256")]
        if options.reuse and (folder / exe).exists() and archives:
            archive, seconds = archives[-1], float("nan")
        else:
            began = time.monotonic()
            archive = build.build(layout, work / "out", work, check=False)
            seconds = time.monotonic() - began
        commands[layout] = [str(folder / exe), "serve"]
        rows.append(
            f"| {label} | {layout} | {seconds:.0f} s | {archive.stat().st_size / 2**20:.1f} MB "
            f"| {build.folder_size(folder) / 2**20:.1f} MB |"
        )

    samples: dict[str, list[float]] = {name: [] for name in commands}
    cpu: dict[str, list[float]] = {name: [] for name in commands}
    with tempfile.TemporaryDirectory(prefix="cnki-bench-") as scratch:
        for name, command in commands.items():  # one warm-up each: page cache, first-run effects
            start_once(command, os.path.join(scratch, name))
        for _ in range(options.runs):
            for name, command in commands.items():
                wall, used = start_once(command, os.path.join(scratch, name))
                samples[name].append(wall)
                cpu[name].append(used)

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"platform {label}, {os.cpu_count()} CPUs, load average {load:.2f}, {options.runs} runs each, interleaved")
    print()
    print("| platform | layout | build time | archive | unpacked |")
    print("| --- | --- | --- | --- | --- |")
    print("\n".join(rows))
    print()
    python = statistics.median(samples["python"])
    python_cpu = statistics.median(cpu["python"])
    # On a busy machine wall times spread widely; CPU time to initialize is the steadier comparison.
    print("| start | spawn → initialize, median | min–max | vs plain Python | CPU time, median | CPU vs plain Python |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, values in samples.items():
        used = statistics.median(cpu[name])
        if name == "python":
            difference = cpu_difference = "—"
        else:
            difference = f"{statistics.median(values) - python:+.3f} s"
            cpu_difference = f"{used - python_cpu:+.3f} s"
        print(
            f"| {name} | {statistics.median(values):.3f} s | {min(values):.3f}–{max(values):.3f} s | {difference} "
            f"| {used:.3f} s | {cpu_difference} |"
        )
    for layout in options.layouts:
        over = statistics.median(samples[layout]) - python
        over_cpu = statistics.median(cpu[layout]) - python_cpu
        verdicts = ["within" if value <= TARGET_OVER_PYTHON_S else "OVER" for value in (over, over_cpu)]
        print(
            f"{layout}: wall {over:+.3f} s ({verdicts[0]}), CPU {over_cpu:+.3f} s ({verdicts[1]}) "
            f"against plain Python; target {TARGET_OVER_PYTHON_S} s"
        )
    print(f"commands: {'; '.join(shlex.join(command) for command in commands.values())}")

    if options.imports:
        print()
        print("| package imported before initialize | cumulative import time |")
        print("| --- | --- |")
        imported = startup_imports()
        for name, seconds in imported:
            if seconds >= 0.005:
                print(f"| {name} | {seconds * 1000:.0f} ms |")
        names = {name for name, _ in imported}
        for heavy in ("nodriver", "lxml"):
            print(f"{heavy} imported at start-up: {'yes' if heavy in names else 'no'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
