"""Run the simulator by hand for headed demos:

    .venv/bin/python -m tests.kns --port 8443 --login institution --captcha grid:2

then start Chromium/Chrome with the printed flags and open https://kns.cnki.net/kns8s/AdvSearch.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading

from .server import CAPTCHA_STYLES, KnsSimulator


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.kns", description="Local CNKI simulator (HTTPS, loopback only)")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--login", choices=("none", "institution", "personal", "both"), default="none")
    ap.add_argument("--captcha", action="append", default=[], metavar="ENDPOINT:AFTER[:STYLE]",
                    help=f"challenge ENDPOINT after AFTER requests until solved; styles {', '.join(CAPTCHA_STYLES)}")
    ap.add_argument("--oversea", default="", metavar="HOST",
                    help="play the overseas site: kns/navi/www requests are redirected to HOST (oversea.cnki.net)")
    args = ap.parse_args(argv)
    sim = KnsSimulator(port=args.port).start()
    sim.configure(login=args.login, oversea=args.oversea)
    for spec in args.captcha:
        endpoint, after, *style = spec.split(":")
        sim.captcha(endpoint, after=int(after), style=style[0] if style else "redirect")
    print(f"CNKI simulator on 127.0.0.1:{sim.port}", file=sys.stderr)
    print(f"CNKI_BROWSER_ARGS='{sim.browser_args}'", file=sys.stderr)
    done = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: done.set())
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    done.wait()
    sim.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
