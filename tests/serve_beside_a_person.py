"""``python -m tests.serve_beside_a_person serve``: the server, with one more process let onto its browser's
DevTools port: the test process named by ``CNKI_TEST_PERSON_PID``, which opens and closes tabs there the way a
person would in a visible window (headless Chromium offers no other way to open a tab from outside). So its
browser is driven over the loopback port (as on Windows), not the pipe, which no other process can open.

Test-only on purpose: the allowance lives in this module, which is not part of the package, so no setting of a
user's environment can turn it on; the server itself still ends the browser for any other process
(BROWSER_DEVTOOLS_INTRUDED).
"""

from __future__ import annotations

import os

from cnki_mcp.site import browser, chrome

PERSON = int(os.environ["CNKI_TEST_PERSON_PID"])


def _strangers_but_the_person(port: int, ours: int | None = None) -> list[int | None]:
    return [pid for pid in chrome.devtools_strangers(port, ours) if pid != PERSON]


browser.devtools_strangers = _strangers_but_the_person  # what _Session.watch_port calls
chrome.DEVTOOLS_PIPE = False  # the person needs a port to open a tab through

if __name__ == "__main__":
    from cnki_mcp.cli import main

    main()
