"""Server start-up and protocol latency: prints figures and their ratio to the targets.

    .venv/bin/python bench/bench_server.py [--runs 5] [--command "path/to/cnki-mcp"]

Measures, over raw newline-delimited JSON-RPC on the child's stdio (no client library in the way):
spawn → initialize response (median of --runs fresh processes), tools/list round trip (median of
50 calls on one process), and the idle RSS of the server after those calls.
Targets (issue "Foundation"): initialize < 0.8 s, tools/list < 20 ms, idle RSS < 80 MB.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

import psutil

TARGETS = {"initialize_s": 0.8, "tools_list_ms": 20.0, "idle_rss_mb": 80.0}


class Child:
    def __init__(self, command: list[str], data_dir: str) -> None:
        env = dict(os.environ, CNKI_DATA_DIR=data_dir)
        self.proc = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env
        )
        self.next_id = 0

    def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self.next_id += 1
        message = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params or {}}
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"server closed its stdout during {method}")
            reply = json.loads(line)
            if reply.get("id") == self.next_id:
                return reply

    def notify(self, method: str) -> None:
        assert self.proc.stdin
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", "method": method}).encode() + b"\n")
        self.proc.stdin.flush()

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


INITIALIZE = {
    "protocolVersion": "2025-06-18",
    "capabilities": {},
    "clientInfo": {"name": "cnki-bench", "version": "1"},
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--command", default=f"{shlex.quote(sys.executable)} -m cnki_mcp serve")
    options = parser.parse_args()
    command = shlex.split(options.command)

    with tempfile.TemporaryDirectory(prefix="cnki-bench-") as data_dir:
        starts = []
        for _ in range(options.runs):
            began = time.perf_counter()
            child = Child(command, data_dir)
            reply = child.request("initialize", INITIALIZE)
            starts.append(time.perf_counter() - began)
            assert "result" in reply, reply
            child.close()

        child = Child(command, data_dir)
        child.request("initialize", INITIALIZE)
        child.notify("notifications/initialized")
        tool_count = len(child.request("tools/list")["result"]["tools"])
        lists = []
        for _ in range(50):
            began = time.perf_counter()
            child.request("tools/list")
            lists.append((time.perf_counter() - began) * 1000)
        child.request("tools/call", {"name": "diagnostics", "arguments": {}})
        time.sleep(0.5)
        rss_mb = psutil.Process(child.proc.pid).memory_info().rss / 2**20
        child.close()

    figures = {
        "initialize_s": statistics.median(starts),
        "tools_list_ms": statistics.median(lists),
        "idle_rss_mb": rss_mb,
    }
    print(f"command: {' '.join(command)}")
    print(f"tools listed: {tool_count}")
    print(f"spawn → initialize (median of {options.runs}): {figures['initialize_s']:.3f} s  "
          f"(min {min(starts):.3f}, max {max(starts):.3f})")
    print(f"tools/list round trip (median of 50): {figures['tools_list_ms']:.2f} ms")
    print(f"idle RSS after initialize, 51 tools/list and diagnostics: {figures['idle_rss_mb']:.1f} MB")
    for name, target in TARGETS.items():
        print(f"  {name}: {figures[name]:.3f} / target {target} = {figures[name] / target:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
