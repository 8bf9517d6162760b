"""The remote-access route: how CNKI is reached through a university's gateway (pure, no I/O).

Three schemes (facts: docs/site-notes.md, "Remote access"):

- ``wrdvpn`` (WebVPN, "wengine"): ``https://<gw>/<scheme>[-<port>]/<token>/<path>``; the token is the hex of
  the IV ``wrdvpnisthebest!`` followed by the host encrypted with AES-128-CFB (128-bit segments, key = IV),
  cut to the host's length. Each host has its own token; the port lives in the scheme segment.
- ``host_rewrite``: every host becomes one label under the gateway's suffix, dots written as dashes and a
  marker for the scheme/port: ``kns-cnki-net-s.<suffix>[:port]`` (``-s`` https), ``www-cnki-net-443.<suffix>``
  (``-443``: https written as its port). A dash inside a label is doubled.
- ``prefix``: the public URL follows a fixed path: ``https://<gw>/-----https://kns.cnki.net/…``.

``outward`` writes a public CNKI URL in the route's form, ``inward`` and ``inward_text`` read any gateway URL
back to its public form. The gateway's own pages (portal, login, ``/wengine-vpn/…`` APIs and assets) are no
CNKI pages: ``inward`` answers None for them and ``inward_text`` hides their host.

``recognise`` reads what the person gave ``login(remote_access_url=…)``; ``discover`` reads the route from a
portal page's links once the person has logged in there.

What may be a gateway at all (``recognise``): a registered domain name in plain ASCII, never an IP literal in
any spelling (``127.0.0.1``, ``2130706433``, ``0x7f.1``), an IDN (a homograph of a university's name), a
single label, or a URL over ``MAX_URL_CHARS``. A URL in one of the three forms names a CNKI page through
the host, and the login then checks it (CNKI's header must show through it before the route is kept); a
portal or login URL names none, so only a university-looking host (``.edu.cn``, ``.ac.cn``, ``.edu``,
``.edu.<cc>``, ``.ac.<cc>``) is taken for one: every campus gateway seen is under its university's domain.
A route read back from config.json meets the same rules (``stored_route_problem``).
"""

from __future__ import annotations

import functools
import re
from typing import Literal
from urllib.parse import parse_qs, quote, unquote, urljoin, urlsplit

import msgspec
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.model import GATEWAY_PLACEHOLDER, Route
from cnki_mcp.pages.urls import is_cnki_host

DIRECT = Route()

WRDVPN_KEY = b"wrdvpnisthebest!"  # key and IV of every wengine gateway seen with CNKI
WRDVPN_IV_HEX = WRDVPN_KEY.hex()
# The gateway's own API, failure pages and assets, on the gateway host and on rewritten hosts alike.
GATEWAY_PATH = "/wengine-vpn/"
# A portal or login URL of a wengine gateway: its paths say so even before any CNKI page is seen.
WENGINE_LOGIN_PATHS = ("/login", "/do-login", "/do-confirm-login")

_HOST = re.compile(r"^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)*$")
_WRDVPN_PATH = re.compile(r"^/(?P<scheme>https?)(?:-(?P<port>\d{1,5}))?/(?P<token>[0-9a-fA-F]{32,})(?P<rest>/.*)?$")
# ``/https/<anything>/…``: a proxy's scheme-and-token path (ctgu writes a base62 token there).
_PROXY_PATH = re.compile(r"^/https?(?:-\d{1,5})?/[^/]{8,}/")
# Path parts only CNKI pages have: a URL carrying them names a CNKI page, whatever the form.
MAX_URL_CHARS = 2048  # a gateway's CNKI URL is a few hundred characters; browsers and servers stop near 2 K-8 K
_UNIVERSITY = re.compile(r"\.(?:edu|ac)\.[a-z]{2}$|\.edu$")
_NUMERIC_LABEL = re.compile(r"^(?:0x[0-9a-f]*|[0-9]+)$")
_CNKI_PATH = re.compile(r"/(?:kcms2?|kns8s?|knavi|kxreader|nzkhtml|bar/download)(?:/|$)", re.IGNORECASE)
_PORT_MARK = re.compile(r"(?<!-)-(?P<port>\d{1,5})$")
# Inside text: a URL's remaining characters, ``\\/`` (JSON-escaped slash) allowed.
_TAIL = r"(?:\\/|[^\s\"'<>\\`(){}\[\]])*"
_SEP = r"\\?/"


class Recognition(msgspec.Struct, frozen=True):
    """What a remote_access_url says.

    ``route`` None: a gateway's portal whose scheme its URL does not tell; the person logs in there and the
    product reads the route from the page they land on (``discover``). ``login``: ``cnki`` (a CNKI page: the
    usual login), ``gateway`` (the person logs in at the gateway), ``federated`` (CARSI: the person logs in at
    their university's IdP, then CNKI's own cookies carry the institution, so the route stays direct).
    """

    route: Route | None
    login: Literal["cnki", "gateway", "federated"]


# --- hosts -------------------------------------------------------------------------------------------


def _netloc(host: str, port: int | None) -> str:
    return host if port in (None, 443) else f"{host}:{port}"


def _gateway_host(route: Route) -> str:
    return route.gateway.rsplit(":", 1)[0] if ":" in route.gateway else route.gateway


def is_route_host(route: Route, host: str) -> bool:
    """Whether ``host`` (a port is ignored) is the route's gateway or, for host rewriting, one of its hosts."""
    if route.kind == "direct" or not route.gateway:
        return False
    host = host.lower().rsplit(":", 1)[0] if host.count(":") == 1 else host.lower()
    gateway = _gateway_host(route)
    if host == gateway:
        return True
    return route.kind == "host_rewrite" and host.endswith("." + gateway) and "." not in host[: -len(gateway) - 1]


# --- the wrdvpn token --------------------------------------------------------------------------------


def _cfb(data: bytes, decrypt: bool) -> bytes:
    """AES-128-CFB with 128-bit segments (key = IV = WRDVPN_KEY), built on the block cipher itself.

    Written out because cryptography moves its CFB mode to the "decrepit" package; a last partial block is
    simply cut, as the gateways cut the token to the host's length.
    """
    block_cipher = Cipher(algorithms.AES(WRDVPN_KEY), modes.ECB()).encryptor()
    out = bytearray()
    previous = WRDVPN_KEY
    for start in range(0, len(data), 16):
        chunk = data[start:start + 16]
        stream = block_cipher.update(previous)
        produced = bytes(a ^ b for a, b in zip(chunk, stream))
        out += produced
        previous = chunk if decrypt else produced  # only a full block is ever used again
    return bytes(out)


@functools.lru_cache(maxsize=256)  # a page maps the same few hosts again and again
def wrdvpn_token(host: str) -> str:
    """The wrdvpn token of ``host``: hex IV + hex ciphertext of the host, as long as the host."""
    return WRDVPN_IV_HEX + _cfb(host.lower().encode("ascii"), decrypt=False).hex()


@functools.lru_cache(maxsize=256)
def wrdvpn_host(token: str) -> str | None:
    """The host a wrdvpn token stands for, or None when it is no token of this key."""
    token = token.lower()
    body = token[len(WRDVPN_IV_HEX):]
    if not token.startswith(WRDVPN_IV_HEX) or not body or len(body) % 2:
        return None
    try:
        host = _cfb(bytes.fromhex(body), decrypt=True).decode("ascii")
    except ValueError:
        return None
    return host if _HOST.match(host) else None


# --- host rewriting ----------------------------------------------------------------------------------


def rewritten_label(scheme: str, host: str, port: int | None) -> str:
    """``kns.cnki.net`` over https → ``kns-cnki-net-s``; another port: ``-<port>`` before the https ``-s``."""
    label = "-".join(part.replace("-", "--") for part in host.lower().split("."))
    default = 443 if scheme == "https" else 80
    if port not in (None, default):
        label += f"-{port}"
    return label + ("-s" if scheme == "https" else "")


def _unrewrite(label: str) -> tuple[str, str, int | None] | None:
    """(scheme, host, port) of one rewritten label, or None when it is no rewritten host."""
    label = label.lower()
    https = label.endswith("-s") and not label.endswith("--s")
    if https:
        label = label[:-2]
    port: int | None = None
    mark = _PORT_MARK.search(label)
    if mark:
        port = int(mark.group("port"))
        label = label[: mark.start()]
    if port == 443:
        https = True
    host = ".".join(part.replace("\0", "-") for part in label.replace("--", "\0").split("-"))
    if "." not in host or not _HOST.match(host):
        return None
    scheme = "https" if https else "http"
    if port == (443 if https else 80):
        port = None
    return scheme, host, port


# --- public ↔ gateway ---------------------------------------------------------------------------------


def _tail(path: str, query: str, fragment: str) -> str:
    return (path or "/") + (f"?{query}" if query else "") + (f"#{fragment}" if fragment else "")


def outward(route: Route, public_url: str) -> str:
    """A public CNKI URL in the route's form (query and fragment kept); any other URL unchanged."""
    if route.kind == "direct":
        return public_url
    try:
        parts = urlsplit("https:" + public_url if public_url.startswith("//") else public_url)
        host, port = (parts.hostname or ""), parts.port
    except ValueError:
        return public_url
    if parts.scheme not in ("http", "https") or not is_cnki_host(host) or "@" in parts.netloc:
        return public_url
    tail = _tail(parts.path, parts.query, parts.fragment)
    default = 443 if parts.scheme == "https" else 80
    if route.kind == "wrdvpn":
        if port in (None, default):
            segment = (route.segment or "https") if parts.scheme == "https" else "http"
        else:
            segment = f"{parts.scheme}-{port}"
        return f"https://{route.gateway}/{segment}/{wrdvpn_token(host)}{tail}"
    if route.kind == "host_rewrite":
        gateway_port = route.gateway[len(_gateway_host(route)):]
        return f"https://{rewritten_label(parts.scheme, host, port)}.{_gateway_host(route)}{gateway_port}{tail}"
    return f"https://{route.gateway}{route.prefix}{parts.scheme}://{_netloc(host, port if port != default else None)}{tail}"


def _public(scheme: str, host: str, port: int | None, tail: str) -> str:
    if port == (443 if scheme == "https" else 80):
        port = None
    netloc = host if port is None else f"{host}:{port}"
    return f"{scheme}://{netloc}{tail or '/'}"


def inward(route: Route, url: str) -> str | None:
    """A gateway URL in its public form; URLs off the route (public, relative, other sites) unchanged.

    None for the gateway's own URLs (portal, login, ``/wengine-vpn/…``, assets): they are no CNKI pages.
    """
    if route.kind == "direct" or not url:
        return url
    try:
        parts = urlsplit("https:" + url if url.startswith("//") else url)
        host = parts.hostname or ""
    except ValueError:
        return url
    if parts.scheme not in ("http", "https") or not is_route_host(route, host):
        return url
    if parts.path.startswith(GATEWAY_PATH):
        return None
    query = f"?{parts.query}" if parts.query else ""
    fragment = f"#{parts.fragment}" if parts.fragment else ""
    if route.kind == "wrdvpn":
        match = _WRDVPN_PATH.match(parts.path)
        target = wrdvpn_host(match.group("token")) if match else None
        if match is None or target is None:
            return None
        port = int(match.group("port")) if match.group("port") else None
        return _public(match.group("scheme"), target, port, (match.group("rest") or "/") + query + fragment)
    if route.kind == "host_rewrite":
        label = host[: -len(_gateway_host(route)) - 1] if host != _gateway_host(route) else ""
        decoded = _unrewrite(label) if label else None
        if decoded is None:
            return None
        scheme, target, port = decoded
        return _public(scheme, target, port, (parts.path or "/") + query + fragment)
    rest = parts.path[len(route.prefix):] if parts.path.startswith(route.prefix) else ""
    inner = re.match(r"^(https?)://([^/?#]+)(.*)$", rest)
    if inner is None:
        return None
    try:
        inner_parts = urlsplit(f"{inner.group(1)}://{inner.group(2)}/")
        target, port = inner_parts.hostname or "", inner_parts.port
    except ValueError:
        return None
    return _public(inner.group(1), target, port, (inner.group(3) or "/") + query + fragment)


@functools.lru_cache(maxsize=16)
def _gateway_url_pattern(route: Route) -> re.Pattern[str]:
    gateway = re.escape(_gateway_host(route))
    host = rf"(?:[a-z0-9-]+\.)?{gateway}" if route.kind == "host_rewrite" else gateway
    absolute = rf"(?:https?:)?{_SEP}{_SEP}{host}(?::\d{{1,5}})?(?:{_SEP}{_TAIL})?"
    alternatives = [absolute]
    if route.kind == "wrdvpn":  # root-relative links the gateway writes into proxied pages
        alternatives.append(rf"(?<![\w./:-]){_SEP}https?(?:-\d{{1,5}})?{_SEP}{WRDVPN_IV_HEX}[0-9a-f]*{_TAIL}")
    if route.kind == "prefix":
        prefix = _SEP.join(re.escape(part) for part in route.prefix.split("/"))
        alternatives.append(rf"(?<![\w./:-]){prefix}https?:{_SEP}{_SEP}{_TAIL}")
    return re.compile("|".join(f"(?:{a})" for a in alternatives), re.IGNORECASE)


_ENCODED_URL = re.compile(r"https?%3A%2F%2F[^\s&\"'<>]+", re.IGNORECASE)


def inward_text(route: Route, text: str) -> str:
    """Every gateway URL inside a page, JSON or log text in its public form.

    The gateway's own URLs keep their path under GATEWAY_PLACEHOLDER (their query, which may carry a
    ticket, is dropped), and any other mention of a gateway host, its ticket-cookie form included, becomes
    GATEWAY_PLACEHOLDER: what is left names no gateway.
    """
    if route.kind == "direct" or not route.gateway or not text:
        return text
    gateway = _gateway_host(route)
    lowered = text.lower()
    marks = [gateway, gateway.replace(".", "_")] + ([WRDVPN_IV_HEX] if route.kind == "wrdvpn" else [])
    if not any(mark in lowered for mark in marks + ([route.prefix] if route.prefix else [])):
        return text  # most text names no gateway at all: skip the scans

    def public(match: re.Match[str]) -> str:
        found = match.group(0)
        escaped = "\\/" in found
        url = found.replace("\\/", "/")
        if url.startswith("/") and not url.startswith("//"):
            url = f"https://{route.gateway}{url}"
        mapped = inward(route, url)
        if mapped is None:
            path = urlsplit("https:" + url if url.startswith("//") else url).path
            mapped = f"https://{GATEWAY_PLACEHOLDER}{path}"
        elif mapped == url:
            return found
        return mapped.replace("/", "\\/") if escaped else mapped

    def encoded(match: re.Match[str]) -> str:
        # A gateway URL percent-encoded inside another's query (a returnUrl): mapped as it reads, encoded again.
        return quote(inward_text(route, unquote(match.group(0))), safe="")

    text = _ENCODED_URL.sub(encoded, text)
    text = _gateway_url_pattern(route).sub(public, text)
    if route.kind == "host_rewrite":
        def host(match: re.Match[str]) -> str:
            decoded = _unrewrite(match.group(1))
            return decoded[1] if decoded else GATEWAY_PLACEHOLDER
        text = re.sub(rf"\b([a-z0-9-]+)\.{re.escape(gateway)}\b", host, text, flags=re.IGNORECASE)
    text = re.sub(rf"(?<![\w-]){re.escape(gateway)}(?![\w-])", GATEWAY_PLACEHOLDER, text, flags=re.IGNORECASE)
    return re.sub(re.escape(gateway.replace(".", "_")), GATEWAY_PLACEHOLDER.replace(".", "_"), text, flags=re.IGNORECASE)


# --- what the person gave ------------------------------------------------------------------------------


def _gateway_form(url: str) -> tuple[Route, str] | None:
    """(route, target host) when ``url`` is a page in one of the three gateway forms, else None."""
    try:
        parts = urlsplit(url)
        host, port = (parts.hostname or ""), parts.port
    except ValueError:
        return None
    gateway = _netloc(host, port)
    match = _WRDVPN_PATH.match(parts.path)
    if match:
        target = wrdvpn_host(match.group("token"))
        if target is not None:
            # Every wengine gateway seen writes https on 443 as a bare "https" (an http page tells nothing else).
            return Route(kind="wrdvpn", gateway=gateway, segment="https"), target
    label, _, suffix = host.partition(".")
    decoded = _unrewrite(label) if suffix.count(".") >= 1 else None
    if decoded is not None and is_cnki_host(decoded[1]):
        return Route(kind="host_rewrite", gateway=_netloc(suffix, port)), decoded[1]
    at = parts.path.find("://")
    if at > 0:
        inner = re.match(r"^(?P<prefix>/.*?)(?P<scheme>https?)$", parts.path[:at])
        target = (urlsplit("https" + parts.path[at:]).hostname or "") if inner else ""
        if inner and is_cnki_host(target):
            return Route(kind="prefix", gateway=gateway, prefix=inner.group("prefix")), target
    return None


def _shape(path: str) -> str:
    """A path with its opaque parts (tokens, ids) written as <token>: what an error may name."""
    parts = []
    for part in path.split("/")[:7]:  # six segments at most
        opaque = len(part) >= 16 or (len(part) >= 8 and any(ch.isdigit() for ch in part))
        parts.append("<token>" if opaque else part)
    return "/".join(parts) or "/"


def unsupported(url: str, why: str = "") -> CnkiError:
    """REMOTE_ACCESS_UNSUPPORTED naming the host and the path's shape (never its query)."""
    parts = urlsplit(url)
    host, shape = parts.netloc.rsplit("@", 1)[-1], _shape(parts.path)
    return CnkiError(
        "REMOTE_ACCESS_UNSUPPORTED",
        f"无法识别这个学校 VPN（远程访问）网址的格式：主机 {host}，路径形如 {shape}{('（' + why + '）') if why else ''}。"
        "目前支持 WebVPN（/https/<令牌>/…）、改写主机名（kns-cnki-net-s.…）和前缀式（/-----https://kns.cnki.net/…）三种；"
        "请先在浏览器里通过学校 VPN 打开知网任意页面，把地址栏中的完整网址作为 remote_access_url 传入。",
        details={"host": host, "path_shape": shape},
    )


def _federated(host: str, path: str, query: str) -> bool:
    provider = " ".join(parse_qs(query).get("providerId", []) + parse_qs(query).get("entityID", []))
    return (
        host == "fsso.cnki.net"
        or host == "carsi.edu.cn" or host.endswith(".carsi.edu.cn")
        or "fsso.cnki.net" in provider
        or "/idp/" in path.lower() + "/"
    )


def recognise(url: str) -> Recognition:
    """Read a remote_access_url.

    - A CNKI page in a gateway form: that route (login at the gateway).
    - A CARSI URL (``fsso.cnki.net``, a CARSI discovery page, an IdP URL with ``/idp/`` or naming CNKI's
      fsso as provider): direct, federated login.
    - A public CNKI page: direct, the usual login.
    - A wengine portal or login URL (``/wengine-vpn/…``, ``/login``, ``/do-login``, or a ``wrdrecordvisit``
      parameter): wrdvpn on that host (assumed from the path: these are wengine's own).
    - Any other https page that names no CNKI page: a portal whose scheme is read after the person has logged
      in (``route`` None, then ``discover``). Assumed: a portal's URL alone cannot tell a host-rewriting proxy
      from a WebVPN (ZJU's portal is ``webvpn.…`` yet rewrites hosts).
    - A URL that names a CNKI page in a form none of the three schemes reads (a token of another key,
      reversed labels, ``/rwt/…``): REMOTE_ACCESS_UNSUPPORTED with the host and path shape.

    INVALID_LOGIN_URL for what is no https URL (or carries credentials).
    """
    url = url.strip()
    try:
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
        parts.port  # noqa: B018 - a bad port raises here
    except ValueError:
        parts, host = None, ""
    if parts is None or parts.scheme.lower() != "https" or not host or parts.username is not None or parts.password is not None:
        raise CnkiError("INVALID_LOGIN_URL", details={"field": "remote_access_url"})
    if len(url) > MAX_URL_CHARS:
        raise not_a_gateway(host, f"网址有 {len(url)} 个字符，超过 {MAX_URL_CHARS} 个")
    if _federated(host, parts.path, parts.query):
        return Recognition(route=DIRECT, login="federated")
    if is_cnki_host(host):
        return Recognition(route=DIRECT, login="cnki")
    why = _no_gateway_host(host)
    if why:
        raise not_a_gateway(host, why)
    found = _gateway_form(url)
    if found is not None:
        if "<token>" in _shape(found[0].prefix):  # a session ticket in the path: never a route to keep
            raise unsupported(url, "代理前缀里带有会话票据")
        return Recognition(route=found[0], login="gateway")
    if _WRDVPN_PATH.match(parts.path) or _PROXY_PATH.match(parts.path):
        raise unsupported(url, "令牌不是 WebVPN 的标准加密形式")
    wengine = parts.path.startswith(GATEWAY_PATH) or parts.path.rstrip("/") in WENGINE_LOGIN_PATHS or "wrdrecordvisit" in parts.query
    if not wengine and ("cnki" in (host + parts.path).lower() or _CNKI_PATH.search(parts.path)):
        raise unsupported(url)
    # A portal or login URL: nothing in it shows the host is a gateway but its name.
    if not university_host(host):
        raise not_a_gateway(host, "网址里没有经它打开的知网页面，主机名也不像学校的域名（.edu.cn、.ac.cn 等）")
    if wengine:
        return Recognition(route=Route(kind="wrdvpn", gateway=_netloc(host, parts.port), segment="https"), login="gateway")
    return Recognition(route=None, login="gateway")


# A CNKI page a stored route is tried on: the URL the route would open first.
_PROBE_URL = "https://kns.cnki.net/kns8s/"
# Why a stored route is refused, by the rule (the error recognise raised) it fails.
_REFUSED_WHY = {
    "INVALID_LOGIN_URL": "主机是 IP 地址、国际化域名或不完整的域名，或者网址过长，都不会是学校的网关",
    "REMOTE_ACCESS_UNSUPPORTED": "它不是支持的三种网关形式之一，或带有会话票据",
}


def stored_route_problem(route: Route) -> CnkiError | None:
    """Why a route read from config.json is no gateway to use (CONFIG_ROUTE_REFUSED), or None.

    An older version or a hand edit may have written it: it is held to ``recognise``'s rules through the CNKI
    URL it would open, and must read back as the same route, so a host no login would take is never used.
    """
    if route.kind == "direct":
        return None
    try:
        found = recognise(outward(route, _PROBE_URL)).route
    except CnkiError as exc:
        rule = exc.code
    else:
        if found is not None and (found.kind, found.gateway) == (route.kind, route.gateway.lower()):
            return None
        rule = "REMOTE_ACCESS_UNSUPPORTED"
    why = _REFUSED_WHY.get(rule, _REFUSED_WHY["REMOTE_ACCESS_UNSUPPORTED"])
    shown = route.gateway[:100]
    return CnkiError(
        "CONFIG_ROUTE_REFUSED",
        f"config.json 里保存的学校 VPN（远程访问）入口 {shown} 没有使用（{why}），现在直接访问知网。请经学校 VPN 重新调用 login"
        "（传入 remote_access_url），或运行 cnki-mcp setup --remote-access <网址>；不再用学校 VPN 时，可删去 config.json 中的 route 项。",
        details={"host": shown, "kind": route.kind, "rule": rule},
    )


def university_host(host: str) -> bool:
    """A host under a university's or an academy's domain (``.edu.cn``, ``.ac.cn``, ``.edu``, ``.edu.<cc>``)."""
    return bool(_UNIVERSITY.search(host.lower().rstrip(".")))


def _no_gateway_host(host: str) -> str:
    """Why ``host`` can be no gateway ("" when it may be one)."""
    if not host.isascii() or any(label.startswith("xn--") for label in host.split(".")):
        return "主机名含非 ASCII 字符（国际化域名），可能是仿冒学校域名的同形字"
    labels = host.rstrip(".").split(".")
    if ":" in host or _NUMERIC_LABEL.match(labels[-1]):
        return "主机是 IP 地址，不是学校的域名"
    if len(labels) < 2 or not _HOST.match(host.rstrip(".")):
        return "主机名不是完整的域名"
    return ""


def not_a_gateway(host: str, why: str) -> CnkiError:
    """INVALID_LOGIN_URL for a host that is taken for no gateway (its name, cut to 100 characters)."""
    shown = host[:100]
    return CnkiError(
        "INVALID_LOGIN_URL",
        f"不把 {shown} 当作学校 VPN（远程访问）入口：{why}。请在浏览器里通过学校 VPN 打开知网任意页面，"
        "把地址栏中的完整网址作为 remote_access_url 传入；没有改变访问方式。",
        details={"field": "remote_access_url", "host": shown},
    )


_PAGE_URL = re.compile(rf"(?:https?:{_SEP}{_SEP}|(?<![\w./:-]){_SEP}(?=https?(?:-\d{{1,5}})?{_SEP}{WRDVPN_IV_HEX}|-)){_TAIL}",
                       re.IGNORECASE)


def discover(page_url: str, html: str) -> Route | None:
    """The route a gateway page's links to CNKI use (the portal after the person logged in), or None.

    Only links of the page's own gateway count: the same host, or (host rewriting) a host under the page's.
    """
    try:
        page_host = (urlsplit(page_url).hostname or "").lower()
    except ValueError:
        return None
    for match in _PAGE_URL.finditer(html):
        link = urljoin(page_url, match.group(0).replace("\\/", "/").replace("&amp;", "&"))
        found = _gateway_form(link)
        if found is None or not is_cnki_host(found[1]):
            continue
        gateway = _gateway_host(found[0])
        if page_host == gateway or page_host.endswith("." + gateway) or gateway.endswith("." + page_host):
            return found[0]
    return None
