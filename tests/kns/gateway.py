"""The simulated university gateway in front of the CNKI simulator, and a fake CARSI IdP.

One HTTPS port for everything (dispatch on Host, like the simulator itself):

- ``webvpn.sim-univ.edu.cn``: a wengine WebVPN: ``/https[-port]/<token>/<path>`` (token = hex IV + AES-128-CFB
  of the host, key = IV = ``wrdvpnisthebest!``), its login page ``/login`` → ``POST /do-login``, the ticket cookie
  ``wengine_vpn_ticketwebvpn_sim-univ_edu_cn``, ``/wengine-vpn/…`` (cookie API, failed page, an asset).
- ``<label>.webvpn.sim-univ.edu.cn``: the same gateway rewriting hosts (``kns-cnki-net-s``, ``www-cnki-net-443``).
- ``zylib.sim-univ.edu.cn``: a prefix proxy, ``/-----https://kns.cnki.net/…``, with the same login.
- ``fsso.cnki.net`` and ``idp.sim-univ.edu.cn``: CARSI, SP- and IdP-initiated; the IdP's form logs the
  simulator in as the university (CNKI's own institution state).

Proxied requests go to the simulator's own handler in-process; every CNKI URL in what comes back (HTML, JSON,
scripts, Location) is rewritten to the gateway form, as real gateways do. The token here is computed with
cryptography's own CFB mode (the product builds CFB itself): the two are checked against each other.
"""

from __future__ import annotations

import re
import threading
import warnings
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, quote, urlsplit

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms

from . import pages

if TYPE_CHECKING:
    from .server import KnsSimulator, _Resp

WEBVPN = "webvpn.sim-univ.edu.cn"
PREFIX_HOST = "zylib.sim-univ.edu.cn"
PREFIX = "/-----"
IDP = "idp.sim-univ.edu.cn"
FSSO = "fsso.cnki.net"
UNIVERSITY = "模拟大学图书馆"
KEY = b"wrdvpnisthebest!"
KINDS = ("wrdvpn", "host_rewrite", "prefix")
FETCH_FAILURES = ("redirect", "drop")
_CNKI_URL = re.compile(r"(?P<scheme>https?:)?(?P<s1>\\?/)(?P<s2>\\?/)(?P<host>(?:[a-z0-9-]+\.)*cnki\.net)(?![\w.-])",
                       re.IGNORECASE)
_ROOT_ATTR = re.compile(r"""(?P<attr>\b(?:href|src|action)=["'])/(?![/\\])""", re.IGNORECASE)
_WRDVPN_PATH = re.compile(r"^/(?P<scheme>https?)(?:-(?P<port>\d+))?/(?P<token>[0-9a-f]+)(?P<rest>/.*)?$")


def _cfb_mode() -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:  # cryptography ≥ 47 keeps CFB among its "decrepit" modes
            from cryptography.hazmat.decrepit.ciphers.modes import CFB
        except ImportError:
            from cryptography.hazmat.primitives.ciphers.modes import CFB
        return CFB(KEY)


def token(host: str) -> str:
    enc = Cipher(algorithms.AES(KEY), _cfb_mode()).encryptor()
    return KEY.hex() + (enc.update(host.encode()) + enc.finalize()).hex()


def token_host(tok: str) -> str | None:
    if not tok.startswith(KEY.hex()) or len(tok) % 2:
        return None
    dec = Cipher(algorithms.AES(KEY), _cfb_mode()).decryptor()
    try:
        return (dec.update(bytes.fromhex(tok[32:])) + dec.finalize()).decode("ascii")
    except ValueError:
        return None


def rewritten(host: str) -> str:
    """kns.cnki.net → kns-cnki-net-s.webvpn.sim-univ.edu.cn (https, port 443)."""
    return "-".join(host.split(".")) + "-s." + WEBVPN


def unrewritten(host: str) -> str | None:
    label = host[: -len(WEBVPN) - 1]
    for mark in ("-s", "-443"):
        if label.endswith(mark):
            return label[: -len(mark)].replace("-", ".")
    return None


def cookie_name(gateway_host: str) -> str:
    return "wengine_vpn_ticket" + gateway_host.replace(".", "_")


@dataclass
class Proxied:
    """One proxied request as the gateway saw it (``Gateway.log``)."""

    kind: str
    host: str  # the target host
    path: str
    dest: str  # Sec-Fetch-Dest: document (a page), empty (fetch, XHR, a network-stack load), image…
    referer: str  # in public form: a gateway's own page (its login sending the browser back) keeps its host
    answer: str = "served"  # · login (the session had ended) · dropped (closed, no answer) · reset · challenge · failed


@dataclass
class Gateway:
    """Switches (set attributes, or ``sim.configure_gateway(**fields)``) and what the gateway saw."""

    expire_after: int | None = None  # proxied requests a ticket serves before its session ends
    challenge: str = ""  # captchaType: proxied requests go to /verify/home at the gateway root until solved
    challenge_after: int = 0  # proxied requests that pass before the challenge starts
    two_factor: bool = False  # the login asks for a second factor (/login/two-factor → /do-confirm-login)
    require_visit: bool = False  # a host's first proxied request must carry wrdrecordvisit (else /wengine-vpn/failed)
    fetch_failure: str = "redirect"  # expired in-page fetch (Sec-Fetch-Mode cors): redirect to login | drop (network error)
    drop_fetches: int = 0  # the next N in-page requests (Sec-Fetch-Mode cors) dropped while the session lives (a reset)
    # Where the two faults above fall, by a piece of the proxied path ("" = anywhere): a real gateway ends its
    # session on an idle or absolute timeout, and resets a connection, under whatever request comes next; these
    # put that moment at one request (the facet panel's group/result, a navi yearList or papers fragment).
    expire_at: str = ""  # the session ends as the first proxied request whose path holds this arrives (once)
    drop_only: str = ""  # drop_fetches counts only in-page requests whose path holds this
    idp_name: str = UNIVERSITY  # the institution CARSI logs CNKI in as
    tickets: dict[str, int] = field(default_factory=dict)  # ticket → proxied requests served
    visited: set[tuple[str, str]] = field(default_factory=set)  # (ticket, target host) opened with wrdrecordvisit
    counts: Counter[tuple[str, str]] = field(default_factory=Counter)  # (kind, target host or "login"/"idp"…) → n
    log: list[Proxied] = field(default_factory=list)  # every proxied request, in order
    seen: int = 0
    challenged: bool = False
    solved: bool = False
    issued: int = 0
    person: bool = False  # a person logged in (gateway_login): the open login form submits itself
    lock: threading.RLock = field(default_factory=threading.RLock)

    # ------------------------------------------------------------ switches and helpers

    def login(self) -> str:
        """A person logged in at the gateway: a new valid ticket (the cookie value)."""
        with self.lock:
            self.issued += 1
            ticket = f"sim{self.issued:04d}a9c1f7e2"
            self.tickets[ticket] = 0
            self.person = True
            return ticket

    def expire(self) -> None:
        """Every ticket handed out so far is no longer valid (the gateway session ended)."""
        with self.lock:
            self.tickets.clear()

    def solve(self) -> None:
        with self.lock:
            self.solved = True

    def count(self, kind: str, host: str | None = None) -> int:
        with self.lock:
            return sum(n for (k, h), n in self.counts.items() if k == kind and (host is None or h == host))

    @staticmethod
    def handles(host: str) -> bool:
        return host in (WEBVPN, PREFIX_HOST, IDP, FSSO) or host.endswith("." + WEBVPN)

    # ------------------------------------------------------------ URLs

    @staticmethod
    def base(kind: str, host: str) -> str:
        """The gateway form of ``https://<host>`` (no trailing slash)."""
        if kind == "wrdvpn":
            return f"https://{WEBVPN}/https/{token(host)}"
        if kind == "host_rewrite":
            return f"https://{rewritten(host)}"
        return f"https://{PREFIX_HOST}{PREFIX}https://{host}"

    def public(self, url: str) -> str:
        """A gateway URL (e.g. a Referer) in its public form; anything else unchanged."""
        try:
            parts = urlsplit(url)
        except ValueError:
            return url
        host = parts.hostname or ""
        query = f"?{parts.query}" if parts.query else ""
        if host == WEBVPN:
            m = _WRDVPN_PATH.match(parts.path)
            target = token_host(m.group("token")) if m else None
            if m and target:
                return f"https://{target}{m.group('rest') or '/'}{query}"
        elif host.endswith("." + WEBVPN):
            target = unrewritten(host)
            if target:
                return f"https://{target}{parts.path}{query}"
        elif host == PREFIX_HOST and parts.path.startswith(PREFIX):
            return parts.path[len(PREFIX):] + query
        return url

    def rewrite(self, kind: str, host: str, text: str) -> str:
        """Every CNKI URL of a proxied answer in the gateway form; root-relative links too (wrdvpn, prefix)."""
        def absolute(m: re.Match[str]) -> str:
            escaped = "\\" in m.group("s1") + m.group("s2")
            base = self.base(kind, m.group("host").lower())
            return base.replace("/", "\\/") if escaped else base

        text = _CNKI_URL.sub(absolute, text)
        if kind != "host_rewrite":
            text = _ROOT_ATTR.sub(lambda m: m.group("attr") + self.base(kind, host) + "/", text)
        return text

    # ------------------------------------------------------------ serving

    def serve(self, sim: KnsSimulator, method: str, host: str, target: str, headers: dict[str, str], raw: bytes) -> _Resp:
        from .server import _Resp

        parts = urlsplit(target)
        query = {k: v[0] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        if host == FSSO or host == IDP:
            return self._carsi(sim, method, host, parts.path, query, raw)
        gateway_host = PREFIX_HOST if host == PREFIX_HOST else WEBVPN
        kind, target_host, rest = self._target(host, parts.path, headers.get("referer", ""))
        if kind == "":
            return self._own(sim, method, gateway_host, parts.path, query, headers, raw)
        ticket = self._ticket(headers.get("cookie", ""), gateway_host)
        entry = Proxied(kind, target_host, rest, headers.get("sec-fetch-dest", ""), self.public(headers.get("referer", "")))
        with self.lock:
            self.counts[(kind, target_host)] += 1
            self.log.append(entry)
            if self.expire_at and self.expire_at in rest:
                self.tickets.clear()
                self.expire_at = ""
            valid = ticket in self.tickets and (self.expire_after is None or self.tickets[ticket] < self.expire_after)
            if valid:
                self.tickets[ticket] += 1
            elif ticket in self.tickets:
                del self.tickets[ticket]  # the session just ended
        here = self.base(kind, target_host) + rest + (f"?{parts.query}" if parts.query else "")
        if not valid:
            if headers.get("sec-fetch-mode") == "cors" and self.fetch_failure == "drop":
                entry.answer = "dropped"
                return _Resp(502, b"", abort=True)
            entry.answer = "login"
            return _Resp(302, pages.simple_page("Found", "登录已过期"),
                         headers={"Location": f"https://{gateway_host}/login?service={quote(here, safe='')}"})
        if headers.get("sec-fetch-mode") == "cors" and self.drop_only in rest:
            with self.lock:
                dropped, self.drop_fetches = self.drop_fetches > 0, max(0, self.drop_fetches - 1)
            if dropped:
                entry.answer = "reset"
                return _Resp(200, b"", reset_mid_body=True)
        with self.lock:
            self.seen += 1
            challenge = self.challenge and not self.solved and self.seen > self.challenge_after
            if challenge:
                self.challenged = True
            visited = (ticket, target_host) in self.visited or "wrdrecordvisit" in query
            if "wrdrecordvisit" in query:
                self.visited.add((ticket, target_host))
        if challenge:
            entry.answer = "challenge"
            root = f"https://{host}" if kind == "host_rewrite" else f"https://{gateway_host}"
            return _Resp(302, pages.simple_page("Found", "安全验证"), headers={
                "Location": f"{root}/verify/home?captchaType={self.challenge}&returnUrl={quote(here, safe='')}"})
        if kind == "wrdvpn" and self.require_visit and not visited:
            entry.answer = "failed"
            return _Resp(302, pages.simple_page("Found", "访问失败"),
                         headers={"Location": f"https://{WEBVPN}/wengine-vpn/failed?reason=DNS_RECORD_NOT_FOUND"})
        inner = dict(headers)
        inner.pop("cookie", None)
        if inner.get("referer"):
            inner["referer"] = self.public(inner["referer"])
        forwarded = rest + (f"?{parts.query}" if parts.query else "")
        resp = sim.handle(method, target_host, forwarded, inner, raw)
        return self._rewritten(kind, target_host, resp)

    def _rewritten(self, kind: str, host: str, resp: _Resp) -> _Resp:
        location = resp.headers.get("Location")
        if location:
            if location.startswith("/") and not location.startswith("//"):
                location = self.base(kind, host) + location
            resp.headers["Location"] = self.rewrite(kind, host, location)
        if isinstance(resp.body, str) and any(t in resp.ctype for t in ("html", "json", "javascript", "text/")):
            resp.body = self.rewrite(kind, host, resp.body)
        return resp

    def _target(self, host: str, path: str, referer: str) -> tuple[str, str, str]:
        """(kind, target host, path) of a proxied request; kind "" for the gateway's own pages."""
        if host.endswith("." + WEBVPN):
            target = unrewritten(host)
            if target is None or path.startswith(("/wengine-vpn/", "/verify/")):
                return "", "", path
            return "host_rewrite", target, path
        if host == PREFIX_HOST:
            inner = path[len(PREFIX):] if path.startswith(PREFIX) else ""
            if inner.startswith("https://"):
                p = urlsplit(inner)
                return "prefix", p.hostname or "", p.path or "/"
        else:
            m = _WRDVPN_PATH.match(path)
            target = token_host(m.group("token")) if m else None
            if m and target:
                return "wrdvpn", target, m.group("rest") or "/"
        if path in ("/", "/login", "/do-login", "/do-confirm-login", "/login/two-factor", "/login/status") \
                or path.startswith(("/wengine-vpn/", "/verify/")):
            return "", "", path
        # A root-relative in-page request (the page's script wrote '/kns8s/brief/grid'): the gateway's own
        # script hooks send it on to the host of the page it came from.
        origin = urlsplit(self.public(referer)) if referer else None
        if origin is not None and origin.hostname and origin.hostname.endswith("cnki.net"):
            return ("prefix" if host == PREFIX_HOST else "wrdvpn"), origin.hostname, path
        return "", "", path

    @staticmethod
    def _ticket(cookies: str, gateway_host: str) -> str:
        name = cookie_name(gateway_host)
        for part in cookies.split(";"):
            key, _, value = part.strip().partition("=")
            if key == name:
                return value
        return ""

    def _own(self, sim: KnsSimulator, method: str, gateway_host: str, path: str, query: dict[str, str],
             headers: dict[str, str], raw: bytes) -> _Resp:
        from .server import _Resp

        with self.lock:
            self.counts[("own", path)] += 1
        form = {k: v[0] for k, v in parse_qs(raw.decode("utf-8", "replace"), keep_blank_values=True).items()}
        service = form.get("service") or query.get("service") or ""
        if path == "/login/status":
            with self.lock:
                person = self.person
            return _Resp(200, f'{{"person": {str(person).lower()}}}', "application/json; charset=utf-8")
        if method == "POST" and (path == "/do-confirm-login" or path == "/do-login" and not self.two_factor):
            with self.lock:
                self.person = False
        if path == "/do-login" and method == "POST":
            if self.two_factor:
                return _Resp(302, pages.simple_page("Found", "二次验证"),
                             headers={"Location": f"/login/two-factor?service={quote(service, safe='')}"})
            return self._logged_in(gateway_host, service)
        if path == "/do-confirm-login" and method == "POST":
            return self._logged_in(gateway_host, service)
        if path == "/login/two-factor":
            return _Resp(200, _two_factor_page(service))
        if path == "/login":
            return _Resp(200, _login_page(service))
        if path.startswith("/verify/"):
            if path.startswith("/verify/solve"):
                sim.solve()
                return _Resp(200, '{"code": 1, "msg": "ok"}', "application/json; charset=utf-8")
            if path.startswith("/verify/status"):
                with self.lock:
                    pending = bool(self.challenge) and self.challenged and not self.solved
                return _Resp(200, f'{{"pending": {str(pending).lower()}, "solves": {sim.solves}}}',
                             "application/json; charset=utf-8")
            return _Resp(200, pages.verify_home_page(query.get("returnUrl", ""), sim.solves))
        if path.startswith("/wengine-vpn/cookie"):
            return _Resp(200, "Ecp_ClientId=sim; LID=WEEvREcwSlJHSldSdmVq", "text/plain; charset=utf-8")
        if path.startswith("/wengine-vpn/failed"):
            return _Resp(200, pages.simple_page("访问失败", f"访问出错：{query.get('reason', '')}"))
        if path.startswith("/wengine-vpn/"):
            return _Resp(200, "/* wengine hooks */", "application/javascript; charset=utf-8")
        if path == "/":
            ticket = self._ticket(headers.get("cookie", ""), gateway_host)
            with self.lock:
                valid = ticket in self.tickets
            if not valid:
                return _Resp(302, pages.simple_page("Found", "请登录"), headers={"Location": "/login"})
            return _Resp(200, _portal_page(gateway_host))
        return _Resp(404, pages.simple_page("页面不存在", "404"))

    def _logged_in(self, gateway_host: str, service: str) -> _Resp:
        from .server import _Resp

        ticket = self.login()
        domain = f"; Domain={WEBVPN}" if gateway_host == WEBVPN else ""
        return _Resp(302, pages.simple_page("Found", "登录成功"), headers={
            "Location": service or "/",
            "Set-Cookie": f"{cookie_name(gateway_host)}={ticket}; Path=/; Secure; HttpOnly{domain}"})

    def _carsi(self, sim: KnsSimulator, method: str, host: str, path: str, query: dict[str, str], raw: bytes) -> _Resp:
        from .server import _Resp

        with self.lock:
            self.counts[("carsi", host + path)] += 1
        form = {k: v[0] for k, v in parse_qs(raw.decode("utf-8", "replace"), keep_blank_values=True).items()}
        if host == FSSO:
            if path == "/Shibboleth.sso/Login":
                relay = query.get("target", "https://fsso.cnki.net/secure/default.aspx")
                return _Resp(302, pages.simple_page("Found", "统一身份认证"), headers={
                    "Location": f"https://{IDP}/idp/profile/SAML2/Redirect/SSO?SAMLRequest=sim&RelayState={quote(relay, safe='')}"})
            if path == "/Shibboleth.sso/SAML2/POST" and form.get("SAMLResponse") == "sim-assertion":
                sim.configure(login="both" if sim.scenario.login in ("personal", "both") else "institution",
                              institution_name=self.idp_name)
                return _Resp(302, pages.simple_page("Found", "登录成功"), headers={
                    "Location": form.get("RelayState") or "https://fsso.cnki.net/secure/default.aspx"})
            if path == "/secure/default.aspx":
                return _Resp(302, pages.simple_page("Found", "登录成功"), headers={"Location": "https://www.cnki.net/"})
            return _Resp(404, pages.simple_page("页面不存在", "404"))
        if path in ("/idp/profile/SAML2/Redirect/SSO", "/idp/profile/SAML2/Unsolicited/SSO"):
            relay = query.get("RelayState") or query.get("target") or "https://www.cnki.net/"
            return _Resp(200, _idp_page(relay))
        if path == "/idp/status":
            with self.lock:
                person = self.person
            return _Resp(200, f'{{"person": {str(person).lower()}}}', "application/json; charset=utf-8")
        if path == "/idp/login" and method == "POST":
            with self.lock:
                self.person = False
            return _Resp(200, _assertion_page(form.get("RelayState", "https://www.cnki.net/")))
        return _Resp(404, pages.simple_page("页面不存在", "404"))


def _login_page(service: str) -> str:
    return pages.page("统一身份认证 - WebVPN", f"""
<div class="login-box"><h2>模拟大学 WebVPN 统一身份认证</h2>
<form id="login-form" method="post" action="/do-login">
<input type="hidden" name="_csrf" value="sim-csrf"><input type="hidden" name="captcha_id" value="sim-captcha">
<input type="hidden" name="service" value="{pages.esc(service)}">
<input name="username" placeholder="学号/工号"><input type="password" name="password" placeholder="密码">
<button type="submit" id="login">登录</button></form></div>{_person_script("/login/status", "login-form")}""")


def _two_factor_page(service: str) -> str:
    return pages.page("二次验证 - WebVPN", f"""
<div class="login-box"><h2>请输入手机验证码（二次验证）</h2>
<form id="confirm-form" method="post" action="/do-confirm-login">
<input type="hidden" name="service" value="{pages.esc(service)}"><input name="code" placeholder="验证码">
<button type="submit" id="confirm">确认</button></form></div>{_person_script("/login/status", "confirm-form")}""")


def _portal_page(gateway_host: str) -> str:
    if gateway_host == PREFIX_HOST:
        link = f"{PREFIX}https://kns.cnki.net/kns8s/AdvSearch"
    else:
        link = f"/https/{token('kns.cnki.net')}/kns8s/AdvSearch?wrdrecordvisit=1"
    return pages.page("WebVPN 门户", f'<ul class="portal"><li><a id="cnki" href="{link}">中国知网</a></li></ul>')


def _idp_page(relay: str) -> str:
    return pages.page("模拟大学统一身份认证 CARSI", f"""
<form id="idp-form" method="post" action="/idp/login"><h2>模拟大学 统一身份认证（CARSI）</h2>
<input type="hidden" name="RelayState" value="{pages.esc(relay)}">
<input name="j_username"><input type="password" name="j_password">
<button type="submit" id="idp-login">登录</button></form>{_person_script("/idp/status", "idp-form")}""")


def _assertion_page(relay: str) -> str:
    # The IdP's auto-submitting form back to CNKI's SP, as Shibboleth IdPs answer.
    return pages.page("正在返回", f"""
<form id="saml" method="post" action="https://{FSSO}/Shibboleth.sso/SAML2/POST">
<input type="hidden" name="SAMLResponse" value="sim-assertion"><input type="hidden" name="RelayState" value="{pages.esc(relay)}">
<noscript><button type="submit">继续</button></noscript></form>
<script>document.getElementById('saml').submit();</script>""")


def _person_script(status: str, form: str) -> str:
    """The form submits itself once the test's person logged in (``sim.gateway_login()``), as a person would."""
    return f"""<script>(function poll(){{
  fetch('{status}', {{credentials: 'include'}}).then(function(r){{ return r.json(); }}).then(function(j){{
    if (j.person) {{ document.getElementById('{form}').submit(); }} else {{ setTimeout(poll, 300); }}
  }}, function(){{ setTimeout(poll, 600); }});
}})();</script>"""
