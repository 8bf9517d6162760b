"""Which URLs are CNKI's (pure): the one home of "is this CNKI" for hosts, pages the product may open, a paper's
public url, and a link of a page resolved against it. Through a remote-access route the browser's doors
(``site/remote.py``) map every URL back to its public form before these rules see it.

Also which of CNKI's two sites a URL is on: the mainland one (``kns.cnki.net``, ``navi.cnki.net``) or the
overseas one a session whose exit is outside mainland China is sent to (``oversea.cnki.net``: the same
applications under the same paths, ``uniplatform=OVERSEA`` for ``NZKPT``; docs/site-notes.md "Abroad").
``on_site`` writes a URL on either; the browser's doors use it so that every URL the product builds goes
to the site the session is on.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urljoin, urlsplit, urlunsplit

from cnki_mcp.core.redact import is_secret_key

OVERSEA_HOST = "oversea.cnki.net"  # the overseas site's usual host (``chn.oversea.cnki.net`` is seen too)
# The mainland hosts whose applications the overseas site serves under the same paths.
_MAINLAND_HOSTS = ("kns.cnki.net", "navi.cnki.net")
_UNIPLATFORM = re.compile(r"(?<=[?&]uniplatform=)(?:NZKPT|OVERSEA)(?=&|$)", re.IGNORECASE)


def is_oversea_host(host: str) -> bool:
    """``oversea.cnki.net`` or a host under it (``chn.oversea.cnki.net``)."""
    host = host.lower().rstrip(".")
    return host == OVERSEA_HOST or host.endswith("." + OVERSEA_HOST)


def landed_site(url: str) -> str | None:
    """The site a page at ``url`` shows: its overseas host, "" for a mainland kns/navi page, None for any
    other page (login, bar, a gateway's own page: they tell nothing about the site)."""
    try:
        host = (urlsplit(url).hostname or "").lower()
    except ValueError:
        return None
    if is_oversea_host(host):
        return host
    return "" if host in _MAINLAND_HOSTS else None


def on_site(url: str, oversea: str) -> str:
    """``url`` on the site the session is on: ``oversea`` (an overseas host) or, when "", the mainland.

    A kns/navi URL goes to the overseas host under the same path; an overseas URL goes back to navi
    (``/knavi…``) or kns. ``uniplatform`` follows (NZKPT on the mainland, OVERSEA abroad). Any other URL
    (bar, login, another site) is unchanged.
    """
    try:
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
    except ValueError:
        return url
    if parts.scheme != "https" or "@" in parts.netloc or parts.port is not None:
        return url
    if oversea and host in _MAINLAND_HOSTS:
        target, platform = oversea, "OVERSEA"
    elif not oversea and is_oversea_host(host):
        target, platform = ("navi.cnki.net" if parts.path.lower().startswith("/knavi") else "kns.cnki.net"), "NZKPT"
    else:
        return url
    query = _UNIPLATFORM.sub(platform, "?" + parts.query)[1:] if parts.query else ""
    return urlunsplit(("https", target, parts.path, query, parts.fragment))


def is_cnki_host(host: str) -> bool:
    """cnki.net or one of its hosts: the one home of "is this CNKI" (the site's gateway maps back to these)."""
    return (host := host.lower().rstrip(".")) == "cnki.net" or host.endswith(".cnki.net")


def is_cnki_url(url: str) -> bool:
    """Any URL on a CNKI host, whatever its scheme (a tab where an identity may show)."""
    try:
        return is_cnki_host(urlsplit(url).hostname or "")
    except ValueError:
        return False


def is_site_url(url: str) -> bool:
    """The host allow-list: https and a cnki.net host.

    Through a remote-access route the browser's doors (``site/remote.py``) map every URL back to its public
    form first (gateway hosts are admitted there only); a gateway's own page is ``gateway.invalid``: refused.

    A backslash or userinfo is refused: Python reads ``https://evil.com\\@kns.cnki.net/`` as a CNKI
    host, a browser as ``evil.com`` (WHATWG treats the backslash as a path separator).
    """
    if "\\" in url:
        return False
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
    except ValueError:
        return False
    if "@" in parts.netloc:
        return False
    return parts.scheme == "https" and is_cnki_host(host)


def public_url(locator: str) -> str:
    """The locator when it may be shown to clients as the paper's url, else ""."""
    if not is_site_url(locator):
        return ""
    parts = urlsplit(locator)
    if "@" in parts.netloc or "abstract" not in parts.path.lower():
        return ""
    for key, _ in parse_qsl(parts.query, keep_blank_values=True):
        if is_secret_key(key):
            return ""
    return locator


def resolve_href(href: str | None, base: str) -> str:
    if not href:
        return ""
    href = href.strip()
    if href.lower().startswith(("javascript:", "mailto:", "#")):
        return ""
    try:
        url = urljoin(base, href)
    except ValueError:
        return ""
    return url if is_site_url(url) else ""
