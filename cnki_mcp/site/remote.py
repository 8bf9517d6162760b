"""The route at the browser's doors: what the product asks for goes out on the site the session is on and in
the gateway's form, what a page says comes back in public form (``route.py`` and ``pages/urls.py`` hold the pure
rules; this is where the browser uses them).

The site: CNKI sends a session whose exit is outside mainland China to ``oversea.cnki.net`` (docs/site-notes.md
"Abroad"). With ``site`` auto (config.json) the page a navigation lands on says which site the session is on
(``landed``); from then on every kns/navi URL the product builds goes to that site (``out``), so its in-page
requests stay on the page's own origin. ``mainland`` / ``oversea`` fix the site from the start.

One ``Routing`` per ``Browser``: ``navigate``, ``fetch_in_page``, ``load_resource`` and downloads map their
URL ``out``; every value a page script returns (``evaluate``: page HTML, ``location.href``, fetched text),
every tab URL and every download URL is mapped ``back``. A gateway's own page (its login, two-factor page,
``/wengine-vpn/…``, a challenge at its root) comes back as ``https://gateway.invalid/<path>``, which
``page_state`` reads as the university's gateway and ``human`` hands to the person.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.model import GATEWAY_PLACEHOLDER, Config, Route
from cnki_mcp.pages.urls import OVERSEA_HOST, is_site_url, landed_site, on_site
from cnki_mcp.site.route import DIRECT, inward, inward_text, outward, recognise
from cnki_mcp.store.library import save_config

log = logging.getLogger(__name__)

SHOW_TIMEOUT = 20.0
# The person-facing words for a step at the gateway (human.py shows them while it waits).
GATEWAY_MESSAGE = (
    "学校 VPN / 统一身份认证要求登录或验证（远程访问的会话可能已过期）：请在弹出的浏览器窗口完成，"
    "完成后任务会自动继续"
)
# A gateway's own login or failure page, read from its body (a resource load does not show redirects).
_GATEWAY_BODY = re.compile(
    r"action\s*=\s*[\"']?[^\"'\s>]*/do-(?:confirm-)?login\b|/wengine-vpn/failed|<title>[^<]*统一身份认证[^<]*</title>",
    re.IGNORECASE,
)
GATEWAY_LOGIN_URL = f"https://{GATEWAY_PLACEHOLDER}/login"


class Routing:
    """The route the dedicated browser goes by now (``login`` changes it; config.json keeps it), and the site."""

    def __init__(self, route: Route = DIRECT, site: str = "auto") -> None:
        self.route = route
        self.site = site  # the person's choice: auto | mainland | oversea
        # The overseas host the session is on ("": the mainland site).
        self.oversea = OVERSEA_HOST if site == "oversea" else ""

    @property
    def direct(self) -> bool:
        return self.route.kind == "direct"

    def here(self, url: str) -> str:
        """A public CNKI URL on the session's site (still public): what a page asked for by it is read against."""
        return on_site(url, self.oversea)

    def out(self, url: str) -> str:
        """A public CNKI URL on the session's site, in the route's form; any other URL unchanged."""
        return outward(self.route, self.here(url))

    def landed(self, url: str) -> None:
        """A navigation ended on ``url`` (public form): with ``auto``, the site it shows is the session's."""
        found = landed_site(url) if self.site == "auto" else None
        if found is not None and found != self.oversea:
            log.info("CNKI site now %s", found or "mainland")
            self.oversea = found

    def site_view(self) -> dict[str, str]:
        """The site as session_status, diagnostics and doctor name it: mainland, or oversea and its host."""
        return {"kind": "oversea", "host": self.oversea} if self.oversea else {"kind": "mainland"}

    def back(self, url: str) -> str:
        """A URL a page or an event reported, in public form (a gateway's own URL: its placeholder form)."""
        if self.direct or not url:
            return url
        mapped = inward(self.route, url)
        return mapped if mapped is not None else inward_text(self.route, url.split("?", 1)[0].split("#", 1)[0])

    def text(self, text: str) -> str:
        """Page, JSON or log text with every gateway URL in public form and no gateway host left."""
        return text if self.direct else inward_text(self.route, text)

    def gateway_body(self, text: str) -> bool:
        """Whether a loaded body is the gateway's own login or failure page (a session that ended)."""
        return not self.direct and bool(_GATEWAY_BODY.search(text[:65536]))


def is_gateway_url(url: str) -> bool:
    """A URL mapped back from the gateway's own pages (``back``)."""
    try:
        return (urlsplit(url).hostname or "") == GATEWAY_PLACEHOLDER
    except ValueError:
        return False


def gateway_problem(error: CnkiError) -> bool:
    """Whether a VERIFICATION_REQUIRED / LOGIN_REQUIRED problem was met at the university's gateway."""
    return isinstance(error.details, dict) and error.details.get("via") == "gateway"


class NoAnswer(CnkiError):
    """An in-page request through a gateway that got no answer at all: the door looks at the page (the
    gateway's login there: its session ended) before asking once more. Met anywhere else: RESOURCE_FAILED."""

    def __init__(self, url: str, error: str) -> None:
        super().__init__("RESOURCE_FAILED", f"页面内请求失败：{error}", details={"url": url, "error": error})


def gateway_session_ended(url: str) -> CnkiError:
    """LOGIN_REQUIRED at the gateway: its session ended (an in-page request failed, the page says so)."""
    return CnkiError(
        "LOGIN_REQUIRED", "学校 VPN / 统一身份认证的会话已过期，需要重新登录", details={"url": url, "via": "gateway"}
    )


async def show_gateway(browser: Any, tab: Any, request: Callable[[], AbstractAsyncContextManager[None]]) -> None:
    """Put the gateway's own page on ``tab`` for the person: a tab still on a CNKI page (an in-page request
    met the gateway) is loaded again (inside ``request``: charged and paced), and the gateway answers with
    its login or challenge page."""
    url = tab.url
    if is_gateway_url(url) or not is_site_url(url):
        return
    async with request():
        try:
            await browser.navigate(tab, url, SHOW_TIMEOUT)
        except CnkiError as exc:
            if exc.code == "BROWSER_UNAVAILABLE":
                raise
            log.debug("loading the page again for the gateway's own page: %s", exc)


def kept(route: Route) -> Route:
    """The route as Config holds it: direct is Config's own default, so config.json writes no route at all."""
    return route if route.kind != "direct" else Config().route


def route_keeper(root: Path, config: Config) -> Callable[[Route], Awaitable[None]]:
    """What keeps a route login set: config.json's ``route`` (kind and gateway host, never a ticket)."""

    async def keep(route: Route) -> None:
        config.route = kept(route)
        await asyncio.to_thread(save_config, root, config)

    return keep


# (Chinese, English): the command line speaks either (setup/messages.py).
KIND_NAMES = {
    "direct": ("直接访问知网", "direct access to CNKI"),
    "wrdvpn": ("WebVPN", "WebVPN"),
    "host_rewrite": ("改写主机名的学校代理", "the university's host-rewriting proxy"),
    "prefix": ("前缀式学校代理", "the university's prefix proxy"),
}


def route_words(route: Route, *, english: bool = False) -> str:
    """The route as a person reads it: 直接访问知网, WebVPN（webvpn.example.edu.cn）; or in English."""
    name = KIND_NAMES[route.kind][1 if english else 0]
    if route.kind == "direct":
        return name
    return f"{name} ({route.gateway})" if english else f"{name}（{route.gateway}）"


def configured_site(config: Config) -> dict[str, str]:
    """The site before any page was seen: the one config.json fixes, else the mainland (auto starts there)."""
    return Routing(site=config.site).site_view()


SITE_NAMES = {"mainland": ("大陆站点", "the mainland site"), "oversea": ("海外站点", "the overseas site")}
SETTING_NAMES = {"auto": ("自动（跟随知网的跳转）", "automatic (follows CNKI's redirect)"),
                 "mainland": ("大陆站点（kns.cnki.net）", "the mainland site (kns.cnki.net)"),
                 "oversea": ("海外站点（oversea.cnki.net）", "the overseas site (oversea.cnki.net)")}


def site_words(view: dict[str, str], *, english: bool = False) -> str:
    """A site view as a person reads it: 大陆站点, 海外站点（oversea.cnki.net）; or in English."""
    name = SITE_NAMES[view["kind"]][1 if english else 0]
    host = view.get("host", "")
    if not host:
        return name
    return f"{name} ({host})" if english else f"{name}（{host}）"


def setting_words(setting: str, *, english: bool = False) -> str:
    """config.json's ``site`` as a person reads it: 自动（跟随知网的跳转）, 海外站点（oversea.cnki.net）…"""
    return SETTING_NAMES[setting][1 if english else 0]


def route_of(url: str) -> Route:
    """The route a ``setup --remote-access`` URL names, without a browser: a CNKI page in a gateway form, a
    gateway's login URL, or CARSI / a public CNKI page (direct). A portal whose URL does not tell its scheme
    needs the person's login first: REMOTE_ACCESS_UNSUPPORTED says so."""
    recognition = recognise(url)
    if recognition.route is None:
        host = urlsplit(url).hostname or ""
        raise CnkiError(
            "REMOTE_ACCESS_UNSUPPORTED",
            f"从门户网址（{host}）看不出学校 VPN 的访问方式：请先经学校 VPN 在浏览器里打开知网任意页面，"
            "把地址栏中的网址传给 --remote-access，或在客户端里调用 login 并传入 remote_access_url。",
            details={"host": host, "path_shape": "portal"},
        )
    return recognition.route
