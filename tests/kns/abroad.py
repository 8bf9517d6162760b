"""The overseas site (``Scenario.oversea``): a session whose exit is outside mainland China.

CNKI sends such a session to ``oversea.cnki.net`` (also seen: ``chn.oversea.cnki.net``), which serves the same
applications under the same paths with ``uniplatform=OVERSEA`` for ``NZKPT`` and its own detail markup
(``.total-inform-oversea`` for ``.total-inform``); docs/site-notes.md "Abroad". With the switch on:

- every request to a mainland host the overseas site stands in for (kns, navi, www) is 302-redirected to the
  same path on the overseas host (``moved``), navigations and in-page requests alike: an in-page request that
  still names the mainland host meets a cross-origin redirect, as it would from abroad;
- the overseas host plays kns, navi or www by path (``plays``);
- every CNKI answer names the overseas host where it named kns/navi/www, says OVERSEA and uses the overseas
  detail markup (``localise``).
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

# The mainland hosts the overseas site stands in for.
MAINLAND = ("kns.cnki.net", "navi.cnki.net", "www.cnki.net", "cnki.net")
_HOSTS = re.compile(r"(?<![\w.-])(?P<lead>(?:https?:)?//)(?:kns|navi|www)\.cnki\.net(?![\w.-])", re.IGNORECASE)
_PLATFORM = re.compile(r"(?<=uniplatform=)NZKPT\b")
_SUMMARY = re.compile(r'class="total-inform"')


def is_abroad_host(host: str, oversea: str) -> bool:
    """The overseas host the scenario names (or, for any switch, a host under oversea.cnki.net)."""
    return bool(oversea) and (host == oversea or host.endswith(".oversea.cnki.net") or host == "oversea.cnki.net")


def moved(host: str, target: str, oversea: str) -> str | None:
    """Where a request to a mainland host is sent with the switch on (None: it is served where it is)."""
    if not oversea or host not in MAINLAND:
        return None
    parts = urlsplit(target)
    query = _PLATFORM.sub("OVERSEA", parts.query)
    return f"https://{oversea}{parts.path or '/'}" + (f"?{query}" if query else "")


def plays(path: str) -> str:
    """The mainland host an overseas path stands for: navi for /knavi, www for the home, kns otherwise."""
    lowered = path.lower()
    if lowered.startswith("/knavi"):
        return "navi.cnki.net"
    if lowered in ("", "/", "/index", "/index/"):
        return "www.cnki.net"
    return "kns.cnki.net"


def localise(text: str, oversea: str) -> str:
    """An answer as the overseas site writes it: its host, OVERSEA, ``.total-inform-oversea``."""
    text = _HOSTS.sub(lambda match: f"{match.group('lead')}{oversea}", text)
    return _SUMMARY.sub('class="total-inform-oversea"', _PLATFORM.sub("OVERSEA", text))
