"""Check on this machine that the browser is driven over its DevTools pipe and listens on no TCP port.

    python scripts/selftest_devtools_pipe.py [--browser PATH]

Made for the release workflow's Windows runner (the pipe handed over by ``--remote-debugging-io-pipes`` cannot
be exercised on Linux or macOS), it runs anywhere: the browser CNKI_BROWSER_PATH or discovery names is started
headless the way the server starts it, answers one CDP command (``Browser.getVersion``), opens one tab, and then
every process of its tree is looked at: none may listen on a TCP port, and no ``DevToolsActivePort`` file may
exist. A browser that refused the pipe and was started again on the watched port fails the check too (it
listens). Exit status 0 when all holds, 1 otherwise; what was seen is printed either way.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import tempfile
from pathlib import Path

import psutil

from cnki_mcp.core.clock import within
from cnki_mcp.core.model import Config
from cnki_mcp.site import discovery
from cnki_mcp.site.browser import Browser


def listening_ports(pid: int) -> list[int]:
    """The TCP ports the process ``pid`` and its children listen on."""
    root = psutil.Process(pid)
    ports: set[int] = set()
    for process in [root, *root.children(recursive=True)]:
        with contextlib.suppress(psutil.Error):
            ports |= {c.laddr.port for c in process.net_connections(kind="tcp") if c.status == psutil.CONN_LISTEN}
    return sorted(ports)


async def check(executable: Path) -> list[str]:
    """What is wrong (nothing: an empty list)."""
    problems = []
    with tempfile.TemporaryDirectory(prefix="cnki-pipe-") as tmp:
        profile = Path(tmp) / "profile"
        browser = Browser(profile, executable, headless=True, extra_args=[])
        try:
            await within(browser.ensure(), 60)
            if not await browser.probe():
                problems.append("the browser did not answer Browser.getVersion")
            await within(browser.new_tab("about:blank"), 30)
            pid = browser.process_id
            assert pid is not None
            ports = listening_ports(pid)
            print(f"browser {executable} pid {pid}: listening TCP ports {ports}")
            if ports:
                problems.append(f"the browser's processes listen on TCP ports {ports}")
            if (profile / "DevToolsActivePort").exists():
                problems.append("DevToolsActivePort was written: a DevTools port was opened")
        finally:
            await browser.close()
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--browser", type=Path, help="the browser executable (default: as the server finds it)")
    args = parser.parse_args()
    executable = args.browser or discovery.resolve_browser(Config())
    problems = asyncio.run(check(executable))
    for problem in problems:
        print(f"FAIL: {problem}", file=sys.stderr)
    if not problems:
        print("OK: driven over the DevTools pipe, no TCP listener")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
