"""Which URLs are CNKI's (pure): the one home of "is this CNKI" for hosts, pages the product may open, a paper's
public url, and a link of a page resolved against it. Through a remote-access route the browser's doors
(``site/remote.py``) map every URL back to its public form before these rules see it.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, urljoin, urlsplit

from cnki_mcp.core.redact import is_secret_key


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
