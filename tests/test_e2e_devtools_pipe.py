"""No DevTools listener while the server drives the browser (issue 42, item 1).

Over a TCP DevTools port another local user could read the HttpOnly CNKI cookies and the tab URLs in a few
milliseconds, faster than any watcher; the browser is driven over the pipe it inherited
(``--remote-debugging-pipe``; on Windows also ``--remote-debugging-io-pipes``), so there is no port to connect
to. The real server, a real Chromium and the simulator: login pages, a search and a download, and after each a
look at every socket of the browser's processes.
"""

from __future__ import annotations

import contextlib
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.harness import AWAITING, process_tree, processes_on, tcp_ports
from tests.test_hardening_faults import seed_papers, sim_server


def devtools_exposure(profile: Path) -> dict[str, list[int]]:
    """The TCP ports the browser's processes listen on, and those of its local ports that answer /json/version."""
    tree = process_tree(processes_on(profile))
    assert tree, "the browser runs"
    answering = []
    for port in tcp_ports(tree, listening=False):
        with contextlib.suppress(OSError, ValueError), urllib.request.urlopen(f"http://127.0.0.1:{port}/json/version", timeout=1) as answer:
            if b"webSocketDebuggerUrl" in answer.read():
                answering.append(port)
    return {"listening": tcp_ports(tree, listening=True), "json_version": answering}


NONE: dict[str, list[int]] = {"listening": [], "json_version": []}


@pytest.mark.browser
@pytest.mark.timeout(300)
async def test_no_devtools_listener_exists_while_the_server_drives_the_browser(kns: Any, tmp_path: Path) -> None:
    data = tmp_path / "data"
    (ref,) = seed_papers(data, kns, 1)
    kns.configure(login="institution", institution_name="华东政法大学", reader="full")
    profile = data / "browser" / "profile"
    seen: dict[str, dict[str, list[int]]] = {}
    with open(tmp_path / "stderr.txt", "ab") as errlog:
        async with sim_server(data, kns, errlog) as mcp:
            login = await mcp.wait(await mcp.call("login", {}))
            assert login["status"] == "completed", login
            assert login["result"]["institution_evidence"] == ["华东政法大学"]
            seen["login"] = devtools_exposure(profile)

            # The login page shown to a person, who logs in there.
            kns.configure(login="none")
            waiting = await mcp.wait(await mcp.call("login", {"force": True}), until=AWAITING, timeout=20)
            assert waiting["status"] == "awaiting_user", waiting
            seen["login page"] = devtools_exposure(profile)
            kns.configure(login="personal", personal_name="reader")
            resumed = await mcp.wait(await mcp.call("operation_control", {"action": "resume", "operation_id": waiting["operation_id"]}), timeout=20)
            assert resumed["status"] == "completed", resumed
            assert resumed["result"]["personal"] == "authenticated"

            search = await mcp.wait(await mcp.call("structured_search", {"expression": {"field": "title", "value": "法"}, "limit": 5}))
            assert search["status"] == "completed", search
            assert search["result"]["results"], search
            seen["search"] = devtools_exposure(profile)

            download = await mcp.wait(await mcp.call("download_paper", {"record_ref": ref, "format": "pdf"}))
            assert download["status"] == "completed", (download.get("errors"), download.get("message"), download.get("result"))
            seen["download"] = devtools_exposure(profile)
            port_file = (profile / "DevToolsActivePort").exists()
    assert seen == dict.fromkeys(("login", "login page", "search", "download"), NONE), seen
    assert not port_file
