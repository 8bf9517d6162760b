"""The one list of secrets: what is removed from URLs shown to clients, snapshots and logs.

CNKI carries access in query values (reader invoices, download order ids, nonces, tickets), in
cookies (``Ecp_*``, ``SID_*``, ``LID`` …) and in hidden form inputs (paging cursors, export ids).
Every place that shows or saves a page or URL goes through the functions here:

- ``is_secret_key`` — a query or JSON key whose value grants access (substring match, any case);
- ``client_url`` — a URL for clients: secret values and opaque record keys dropped;
- ``redact_url`` — a URL for snapshots and logs: the same values replaced by ``REDACTED``;
- ``redact_markup`` — page HTML or JSON text: cookies (a gateway's ``wengine_vpn_ticket…`` too), WebVPN
  tokens in paths, secret keys and headers, every input's value, user ids in ``data-*`` attributes, passwords in
  ``user:password@`` URLs; a secret key is found also where its ``=`` is encoded (percent-encoded once or twice
  inside a return URL, an HTML entity, a JSON or JavaScript escape) and in free text (a comment);
- ``redact_page`` — an HTML page to keep: ``redact_markup`` plus its scripts removed, so it cannot run;
- ``LogRedaction`` — a logging filter giving log lines the same treatment as URLs and markup.
"""

from __future__ import annotations

import html
import logging
import re
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

from cnki_mcp.core.errors import CnkiError

REDACTED = "REDACTED"

# Any key containing one of these words carries access (access_token, vpn_ticket, sessionid, pwd …).
SECRET_KEY_WORDS = (
    "token", "ticket", "session", "passw", "pwd", "secret", "invoice", "nonce", "sign", "cookie",
    "authorization", "authcode", "captchaid", "idenid", "jwt", "access_key", "accesskey", "api_key", "apikey",
)
# Opaque keys of CNKI links (detail ``v``, journal ``p``, order ``id`` …): shareable on a detail page,
# but never shown from reader, order or download URLs, and kept out of snapshots.
OPAQUE_KEYS = frozenset({"v", "vl", "p", "id", "uid", "sid", "cid", "code", "key", "time", "q"})

_URL_STARTS = ("http://", "https://", "//")
# A WebVPN path names its target host encrypted (``/https/77726476706e69737468656265737421<hex>/…``, the
# hex of the IV ``wrdvpnisthebest!`` first): a gateway's address, kept nowhere. The site maps such URLs
# back to CNKI's own; this is the net under that.
_WRDVPN_TOKEN = re.compile(r"(/https?(?:-\d{1,5})?/)77726476706e69737468656265737421[0-9a-f]*", re.IGNORECASE)


def is_secret_key(name: str) -> bool:
    """Whether a query, form or JSON key names a value that grants access."""
    lowered = name.lower()
    return any(word in lowered for word in SECRET_KEY_WORDS)


def _hidden(name: str) -> bool:
    return is_secret_key(name) or name.lower() in OPAQUE_KEYS


def _rewrite(url: str, keep_key: bool) -> str:
    try:
        parts = urlsplit(url)
        pairs = parse_qsl(parts.query, keep_blank_values=True)
        fragment_pairs = parse_qsl(parts.fragment, keep_blank_values=True) if "=" in parts.fragment else []
    except ValueError:
        return ""

    def clean(items: list[tuple[str, str]]) -> list[tuple[str, str]]:
        if keep_key:
            return [(key, REDACTED if _hidden(key) and value else value) for key, value in items]
        return [(key, value) for key, value in items if not _hidden(key)]

    query = urlencode(clean(pairs)) if pairs else ("" if not keep_key else parts.query)
    fragment = urlencode(clean(fragment_pairs)) if fragment_pairs else ("" if not keep_key else parts.fragment)
    netloc = parts.netloc.rsplit("@", 1)[-1]  # user:password@ never leaves
    path = _WRDVPN_TOKEN.sub(rf"\1{REDACTED}", parts.path)
    return urlunsplit((parts.scheme, netloc, path, query, fragment))


def endpoint_url(url: str) -> str:
    """A request URL without its query string or fragment (what error details may name)."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))


def client_url(url: str) -> str:
    """``url`` as clients may see it: access values and opaque keys dropped, fragment too."""
    if not url:
        return ""
    return _rewrite(url, keep_key=False)


def redact_url(url: str) -> str:
    """``url`` for a snapshot or a log line: every secret or opaque value replaced by REDACTED."""
    if not url:
        return ""
    return _rewrite(url, keep_key=True)


# --- markup and JSON text ---------------------------------------------------------------------

_QUERY_VALUE = re.compile(r"([?&#](?:amp;)?([A-Za-z_][\w.-]*)=)([^&\"'\s<>#]*)")
# Cookie names CNKI, its analytics and campus gateways set (a pattern, for ``redact_markup`` and the report's scan).
COOKIE_NAMES = (
    r"Ecp_\w+|SID_\w+|LID|c_m_\w+|JSESSIONID|KNS2COOKIE|cnkiUserKey|UM_distinctid|tfstk|Hm_\w+|"
    r"ASP\.NET_SessionId|dblang|knsadv-searchtype|knsLeftGroupSelectItem|kcmscanary|wengine_vpn_ticket\w*"
)
_COOKIE = re.compile(rf"\b((?:{COOKIE_NAMES})=)[^;\"'\s<>&]+")
# "accessToken": "…", token='…', Authorization: "…" — a secret key and its quoted value, in scripts or JSON.
# The key is a whole run of key characters (each run tried once: a page of "tickettickettic…" stays linear);
# whether it names a secret is asked of the key afterwards.
_KEYED = re.compile(r"((?<![\w-])[\"']?([\w-]{1,80})[\"']?\s*[:=]\s*)([\"'])(?:(?!\3).)*\3")
# setRequestHeader('Authorization', '…') and other (name, value) calls naming a secret.
_KEYED_ARGUMENT = re.compile(r"([\"']([\w-]{1,80})[\"']\s*,\s*)([\"'])(?:(?!\3).)*\3")
# ``ticket=…`` wherever it is, its "=" written as it is or encoded: percent-encoded once or twice (a return URL
# inside a return URL), an HTML entity, a JSON or JavaScript escape. The value ends at a separator in any of
# those forms too. Linear: each character of a value is looked at once.
_EQUALS = r"(?:=|%3D|%253D|&#0*61;|&#x0*3D;|&equals;|\\u003D|\\x3D)"
_VALUE_CHAR = r"(?:[^&%\\\"'\s<>#;,}]|%(?!26|2526|22|23|20)|\\(?!u0026|u0022|x26|\"))"
# The key is a whole run of key characters (up to 80) right before the "=", holding a secret word: each run
# is tried once, from its start, so a long run with no "=" costs no more than a short one. Other keys never
# match, so a return URL's value does not hide the ticket inside it.
_ANY_KEYED = re.compile(
    rf"(?<![\w.-])((?=[\w.-]{{0,80}}?(?:{'|'.join(SECRET_KEY_WORDS)}))[\w.-]{{1,80}}{_EQUALS})({_VALUE_CHAR}+)", re.I
)
_URL_PASSWORD = re.compile(r"((?<![a-z0-9+.-])[a-z][a-z0-9+.-]{0,20}://[^/\s:@\"'<>]+:)[^/\s@\"'<>]+(@)", re.I)
_BEARER = re.compile(r"\b((?:Bearer|Basic)\s+)[A-Za-z0-9._~+/=-]{8,}", re.I)
_INPUT_TAG = re.compile(r"<input\b[^>]*>", re.I)
_INPUT_VALUE = re.compile(r"(\bvalue\s*=\s*)(\"[^\"]*\"|'[^']*'|[^\s>]+)", re.I)
_TEXTAREA = re.compile(r"(<textarea\b[^>]*>)(.*?)(</textarea\s*>)", re.I | re.S)
# data-userid, data-uid, data-account … : who is logged in, never kept.
_USER_DATA = re.compile(
    r"(\sdata-[\w-]*(?:user|uid|account|member|login|phone|mobile|email)[\w-]*\s*=\s*)(\"[^\"]*\"|'[^']*'|[^\s>]+)",
    re.I,
)
_SCRIPT = re.compile(r"<script\b[^>]*>.*?(?:</script\s*>|$)", re.I | re.S)
_HANDLER = re.compile(r"\s+on[a-z]+\s*=\s*(?:\"[^\"]*\"|'[^']*'|[^\s>]+)", re.I)
_SCRIPT_URL = re.compile(r"(\b(?:href|src|action|formaction)\s*=\s*[\"']?)\s*javascript:[^\"'\s>]*", re.I)


def _query_value(match: re.Match[str]) -> str:
    return match[1] + (REDACTED if _hidden(match[2]) and match[3] else match[3])


def redact_markup(text: str) -> str:
    """Page HTML or JSON text without cookie values, access values in URLs, keys and header calls,
    input values or user ids."""
    text = _INPUT_TAG.sub(lambda tag: _INPUT_VALUE.sub(rf'\1"{REDACTED}"', tag[0]), text)
    text = _TEXTAREA.sub(rf"\1{REDACTED}\3", text)
    text = _USER_DATA.sub(rf'\1"{REDACTED}"', text)
    text = _QUERY_VALUE.sub(_query_value, text)
    text = _COOKIE.sub(rf"\1{REDACTED}", text)
    text = _WRDVPN_TOKEN.sub(rf"\1{REDACTED}", text)
    text = _BEARER.sub(rf"\1{REDACTED}", text)
    text = _ANY_KEYED.sub(rf"\1{REDACTED}", text)
    text = _URL_PASSWORD.sub(rf"\1{REDACTED}\2", text)
    text = _KEYED_ARGUMENT.sub(_quoted_value, text)
    return _KEYED.sub(_quoted_value, text)


def _quoted_value(match: re.Match[str]) -> str:
    """A secret key's quoted value replaced; any other key's kept."""
    return f"{match[1]}{match[3]}{REDACTED}{match[3]}" if is_secret_key(match[2]) else match[0]


_ESCAPE = re.compile(r"\\u([0-9a-fA-F]{4})|\\x([0-9a-fA-F]{2})")


def readings(text: str) -> list[str]:
    """``text`` as a scan must read it: as it is, HTML entities decoded, JSON/JavaScript escapes decoded,
    percent-encoding decoded once and twice (a URL inside a return URL inside a link)."""
    unescaped = _ESCAPE.sub(lambda m: chr(int(m[1] or m[2], 16)), text)
    once = unquote(html.unescape(unescaped))
    return list(dict.fromkeys((text, html.unescape(text), unescaped, once, unquote(once))))


def redact_page(page: str) -> str:
    """An HTML page as it may be kept: ``redact_markup``, and no script, handler or javascript: URL left to run."""
    page = _SCRIPT.sub("<script><!-- removed --></script>", page)
    page = _HANDLER.sub("", page)
    page = _SCRIPT_URL.sub(r"\1#", page)
    return redact_markup(page)


class LogRedaction(logging.Filter):
    """Log lines pass through ``redact_markup``: a URL, cookie or token in a message never reaches a log."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact_markup(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        return True


def is_url(value: object) -> bool:
    return isinstance(value, str) and value.startswith(_URL_STARTS)


def without_secrets(error: CnkiError) -> CnkiError:
    """The same error with every URL in its details reduced to ``client_url`` (readers and orders carry tokens)."""
    details = error.details
    if isinstance(details, dict):
        error.details = {key: client_url(value) if is_url(value) else value for key, value in details.items()}
    return error
