"""What a page says about access, and who is logged in.

``classify_response`` reads a fetched answer (status, URL, body) for what stops it from being parsed:
a verification page or the grid's JSON challenge, a login wall, a denial, a rate limit, a server
error, a missing page or the grid's temporary empty shell. ``inspect_live_page`` reads a live tab's
DOM (marked by ``LIVE_PAGE_SCRIPT`` with what is really visible) for a challenge widget, a login
form or a denial, and for the identity the page header shows (``parse_session``). The refusal
readers recognise CNKI's words for a withheld full text (余额不足, 未订购, 只收录题录 …), also when
they only sit in the query of its error page (``…/ErrorMsg.html?…``).

All functions are pure: text in, Structs or ``CnkiError`` out.
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import lxml.html
import msgspec

from cnki_mcp.core.errors import BLOCKED_STATUS, CnkiError, network_unreachable
from cnki_mcp.core.model import GATEWAY_PLACEHOLDER, SessionState
from cnki_mcp.core.text import trim, unique_strings
from cnki_mcp.pages.markup import (
    MAX_MARKUP_BYTES,
    NON_CONTENT_TAGS,
    first_match,
    load_page,
    own_text,
    page_text,
    parse_markup,
    prune,
    text_of,
)
from cnki_mcp.pages.parse import EMPTY_PREVIEW_CHARS, REFUSAL_SAMPLE_CHARS, TEMPORARY_EMPTY, empty_kind, grid_total, now
from cnki_mcp.pages.reader import TRIAL_NOTICE
from cnki_mcp.pages.urls import is_site_url


class PageState(msgspec.Struct):
    """One observation of a live tab, computed from its current DOM HTML."""

    state: str  # ready | challenge | login | denied
    reason: str = ""
    identity_ready: bool = False
    institutions: list[str] = []
    personal: bool = False
    personal_name: str = ""


# --------------------------------------------------------------------------------------------
# Fetched answers

_VERIFY_BODY = re.compile(
    r"<title[^>]*>\s*安全验证\s*</title>|<title[^>]*>[^<]*超时验证[^<]*</title>"
    r"|id\s*=\s*[\"']?vericode|name\s*=\s*[\"']?vericodeForm",
    re.I,
)
_VERIFY_JSON = re.compile(r"\"message\"\s*:\s*\"[^\"]*(?:/verify|captcha)|\"code\"\s*:\s*-403\b", re.I)
_SMALL_CHALLENGE = re.compile(r"安全验证|captchaType")
_RATE_TEXT = re.compile("访问过于频繁|系统检测到异常访问")
_DENIED_TEXT = re.compile(r"机构未订购|无权访问|您没有.{0,8}权限")
_CONTENT_MARKERS = "#paperRead, #ChDivSummary, table.result-table-list"
_SMALL_BODY = 4096


def _content_of(root: lxml.html.HtmlElement) -> bool:
    return bool(root.cssselect(_CONTENT_MARKERS))


def challenge_url(body: str) -> str:
    """The verification page a JSON answer sends the person to (``{"code":-403,"message":"https://kns.cnki.net/
    verify/home?captchaType=blockPuzzle&…"}``, with HTTP 403 or 200); "" when there is none or it is not CNKI's."""
    if len(body) > _SMALL_BODY or not body.lstrip().startswith("{"):
        return ""
    try:
        answer = json.loads(body)
    except ValueError:
        return ""
    message = answer.get("message") if isinstance(answer, dict) else None
    if not isinstance(message, str) or not is_site_url(message.strip()):
        return ""
    return message.strip() if "/verify/" in urlsplit(message.strip()).path.lower() else ""


def gateway_page(url: str) -> str:
    """What a page of the university's gateway itself asks (``challenge`` at its ``/verify/``, else
    ``login``: its login, two-factor or failure page), or "" for any other page. The site's doors
    map such pages back to GATEWAY_PLACEHOLDER (``site/remote.py``)."""
    try:
        parts = urlsplit(url) if url else None
    except ValueError:
        return ""
    if parts is None or (parts.hostname or "") != GATEWAY_PLACEHOLDER:
        return ""
    return "challenge" if "/verify/" in parts.path.lower() else "login"


GATEWAY_CHALLENGE_REASON = "学校 VPN 安全验证"
GATEWAY_LOGIN_REASON = "学校 VPN / 统一身份认证登录页"


def classify_response(status: int, url: str, body: str) -> CnkiError | None:
    """The problem a fetched response shows, or None when it should be parsed."""
    details: dict[str, object] = {"status": status, "url": url}
    at_gateway = gateway_page(url)
    if at_gateway:
        details["via"] = "gateway"
        if at_gateway == "challenge":
            return CnkiError("VERIFICATION_REQUIRED", "学校 VPN 要求人工验证", details=details)
        return CnkiError("LOGIN_REQUIRED", "学校 VPN / 统一身份认证要求登录", details=details)
    if len(body) > MAX_MARKUP_BYTES // 4 and len(body.encode("utf-8", "replace")) > MAX_MARKUP_BYTES:
        return CnkiError("RESPONSE_TOO_LARGE", "页面超过 8 MB，未解析。", details=details)
    if status == 429:
        return CnkiError("RATE_LIMITED", "知网限制当前请求频率，请稍后继续", details=details)
    if status == BLOCKED_STATUS:
        return network_unreachable(url, "blocked", status=status)
    path = urlsplit(url).path.lower() if url else ""
    if (
        _VERIFY_BODY.search(body)
        or "/verify/" in path
        or (status == 403 and _VERIFY_JSON.search(body))
        or challenge_url(body)
        or (
            len(body.encode("utf-8", "replace")) < _SMALL_BODY
            and _SMALL_CHALLENGE.search(body)
            and "result-table-list" not in body
        )
    ):
        return CnkiError("VERIFICATION_REQUIRED", "知网要求人工验证", details=details)
    if status == 401 or "//login." in url.lower():
        return CnkiError("LOGIN_REQUIRED", "当前资源要求登录", details=details)
    if status == 403:
        return CnkiError("ACCESS_DENIED", "当前资源拒绝访问", details=details)
    if status == 404:
        return CnkiError("LOCATOR_EXPIRED", "文献入口失效", details=details)
    if status >= 500:
        return CnkiError("SITE_UNAVAILABLE", "知网服务暂时不可用", details=details)
    if not (_RATE_TEXT.search(body) or _DENIED_TEXT.search(body) or TEMPORARY_EMPTY.search(body)):
        return None
    root = load_page(body)
    text = page_text(root)
    if _RATE_TEXT.search(text):
        return CnkiError("RATE_LIMITED", "知网提示访问过于频繁，请稍后继续", details=details)
    denied = _DENIED_TEXT.search(text)
    if denied and not _content_of(root):
        return CnkiError("ACCESS_DENIED", f"站点拒绝当前资源访问：{denied[0]}", details=details)
    if (
        not root.cssselect("table.result-table-list, table.GridTableContent, .wx-tit, #paperRead, #ChDivSummary")
        and grid_total(root) != 0
        and empty_kind(root)[0] == "temporary"
    ):
        return CnkiError(
            "SITE_TEMPORARILY_EMPTY", f"知网暂时没有返回数据：{text[:EMPTY_PREVIEW_CHARS]}", details=details
        )
    return None


# Evaluated in a live tab before its HTML is handed to inspect_live_page: marks the elements the
# inspection looks at that are not really visible (computed style, zero size, outside the viewport),
# which static HTML cannot tell, and returns the marked document.
LIVE_PAGE_SCRIPT = """(() => {
  const sel = 'iframe,#tCaptchaDyMainWrap,.captcha-dialog,.geetest_panel,[id^=nc_][id$=_wrapper],.tcaptcha-transform,'
    + '#tcaptcha_transform_dy,.read-btn-boxXml,.slider-wrapper,#vericode,#changeVercode,input[type=password],'
    + '.ecp_header_login_area,header,.header,.topbar,.top-bar,.topLogin,.ecp_header_unitName,.org-name,'
    + '.institution-name,[data-institution-name],#Ecp_top_orgName,#Ecp_loginShowName1,'
    + '.ecp_header_personalName_loginbg,#Ecp_top_logout,a,button';
  const vw = window.innerWidth, vh = window.innerHeight;
  for (const el of document.querySelectorAll(sel)) {
    if ((el.tagName === 'A' || el.tagName === 'BUTTON') && el.textContent.trim().length > 12) continue;
    let shown = true;
    for (let n = el; n && n.nodeType === 1; n = n.parentElement) {
      const cs = getComputedStyle(n);
      if (cs.display === 'none' || cs.visibility === 'hidden' || Number(cs.opacity) === 0) { shown = false; break; }
    }
    if (shown) {
      const r = el.getBoundingClientRect();
      shown = r.width > 0 && r.height > 0 && r.right > 0 && r.bottom > 0 && r.left < vw && r.top < vh;
    }
    if (shown) el.removeAttribute('data-cnki-hidden'); else el.setAttribute('data-cnki-hidden', '');
  }
  return document.documentElement.outerHTML;
})()"""

_OFFSCREEN_STYLE = re.compile(r"(?:^|[;\s])(?:top|left)\s*:\s*-\s*\d{4,}", re.I)
_INVISIBLE_STYLE = re.compile(r"display\s*:\s*none|visibility\s*:\s*hidden|opacity\s*:\s*0(?:\.0*)?\s*(?:;|$)", re.I)
_CHALLENGE_WIDGETS = (
    "#tCaptchaDyMainWrap, .captcha-dialog, .geetest_panel, [id^=nc_][id$=_wrapper], .tcaptcha-transform,"
    " #tcaptcha_transform_dy"
)
_HEADER_AREAS = ".ecp_header_login_area, header, .header, .topbar, .top-bar, .topLogin"
_INSTITUTION_NAMES = (
    ".ecp_header_unitName, .org-name, .institution-name, [data-institution-name], #Ecp_top_orgName, #Ecp_loginShowName1"
)
# Placeholders shown where a name appears once someone is logged in.
_NOT_A_NAME = frozenset({"机构登录", "登录", "个人登录", "请登录", "机构用户登录", "登录/注册", "注册"})
_LOGOUT_TEXTS = frozenset({"退出登录", "安全退出", "退出账号", "logout", "sign out"})


def _visible(el: lxml.html.HtmlElement) -> bool:
    """Static stand-in for the in-page visibility test: inline hiding, hidden inputs, parked widgets.

    The site layer may mark elements it measured as invisible with ``data-cnki-hidden``.
    """
    if el.tag == "input" and (el.get("type") or "").lower() == "hidden":
        return False
    for node in (el, *el.iterancestors()):
        style = node.get("style") or ""
        if (
            node.get("hidden") is not None
            or node.get("data-cnki-hidden") is not None
            or _INVISIBLE_STYLE.search(style)
            or _OFFSCREEN_STYLE.search(style)
        ):
            return False
    return True


def _any_visible(root: lxml.html.HtmlElement, selector: str) -> list[lxml.html.HtmlElement]:
    return [el for el in root.cssselect(selector) if _visible(el)]


def _shows_trial_notice(root: lxml.html.HtmlElement) -> bool:
    return any(
        isinstance(el.tag, str) and TRIAL_NOTICE.search(own_text(el)) and _visible(el) for el in root.iter()
    )


def _reader_slider(root: lxml.html.HtmlElement) -> bool:
    """The reader's own slider 「滑动验证，继续阅读全文」 that a person solves to see the rest.

    The same slider box under a trial notice (试读结束，购买后阅读全文 …) is the end of a trial:
    sliding it leads to buying or logging in, not to more text, so it is part of the trial text
    and no human step. The page tells the two apart: a visible trial notice means a trial.
    """
    box = first_match(root, ".read-btn-boxXml")
    return (
        box is not None
        and bool(_any_visible(box, ".slider-wrapper"))
        and bool(re.search("滑动验证|继续阅读全文", text_of(box)))
        and _visible(box)
        and not _shows_trial_notice(root)
    )


def _challenge_reason(root: lxml.html.HtmlElement, url: str) -> str:
    for frame in _any_visible(root, "iframe"):
        if re.search("captcha|verify", (frame.get("src") or "") + (frame.get("title") or ""), re.I):
            return "验证码窗口"
    if _any_visible(root, _CHALLENGE_WIDGETS):
        return "滑块或验证码"
    if _reader_slider(root):
        return "阅读页滑动验证"
    if _any_visible(root, ".verifycode #vericode") and _any_visible(root, ".verifycode #changeVercode"):
        return "图片验证码"
    title = trim(text_of(first_match(root, "title")))
    if title == "安全验证" or "超时验证" in title or title.startswith("拼图校验"):
        return title
    path = urlsplit(url).path.lower() if url else ""
    if "/verify/" in path and "success" not in path:  # bar's verify/verifySuccess.html is the way out
        return "安全验证页"
    return ""


def _login_prompt(root: lxml.html.HtmlElement, url: str) -> bool:
    host = (urlsplit(url).hostname or "") if url else ""
    if host.startswith("login.") and _any_visible(root, "input[type=password]"):
        return True
    return any(re.search("login|passport|sso", frame.get("src") or "", re.I) for frame in _any_visible(root, "iframe"))


def _identity(root: lxml.html.HtmlElement) -> tuple[bool, list[str], bool, str]:
    institutions = unique_strings(
        name
        for el in _any_visible(root, _INSTITUTION_NAMES)
        if (name := text_of(el) or trim(el.get("data-institution-name") or "")) and name not in _NOT_A_NAME
    )
    personal_name = ""
    personal = False
    for el in _any_visible(root, ".ecp_header_personalName_loginbg"):
        personal = True
        personal_name = personal_name or text_of(el)
    if not personal:
        personal = any(text_of(el).lower() in _LOGOUT_TEXTS for el in _any_visible(root, "a, button"))
    if not personal and _any_visible(root, "#Ecp_top_logout"):
        personal = True
        personal_name = text_of(first_match(root, "#Ecp_loginShowName"))
    ready = bool(institutions) or any(
        re.search("登录|退出|注册", text_of(el)) for el in _any_visible(root, _HEADER_AREAS)
    )
    return ready, institutions, personal, personal_name


def _live_tree(html: str) -> lxml.html.HtmlElement:
    """The page as parsed, minus scripts and styles; hidden elements stay (visibility is checked)."""
    root = parse_markup(html)
    for junk in list(root.iter(*NON_CONTENT_TAGS)):
        junk.drop_tree()
    return root


def inspect_live_page(html: str, url: str) -> PageState:
    """Challenge, login prompt, denial and identity evidence of a live tab's DOM."""
    raw = _live_tree(html)
    ready, institutions, personal, personal_name = _identity(raw)
    identity: dict[str, Any] = {
        "identity_ready": ready,
        "institutions": institutions,
        "personal": personal,
        "personal_name": personal_name,
    }
    at_gateway = gateway_page(url)  # the university's gateway itself: its challenge, else its login
    if at_gateway:
        challenge = GATEWAY_CHALLENGE_REASON if at_gateway == "challenge" else ""
    else:
        challenge = _challenge_reason(raw, url)
    if challenge:
        return PageState(state="challenge", reason=challenge, **identity)
    if at_gateway or _login_prompt(raw, url):
        return PageState(state="login", reason=GATEWAY_LOGIN_REASON if at_gateway else "登录页", **identity)
    denied = _DENIED_TEXT.search(page_text(prune(raw)))
    if denied and not _content_of(raw):
        return PageState(state="denied", reason=denied[0], **identity)
    return PageState(state="ready", **identity)


def parse_session(html: str) -> SessionState:
    """Personal and institutional login evidence from a KNS page header."""
    _, institutions, personal, personal_name = _identity(_live_tree(html))
    return SessionState(
        personal="authenticated" if personal else "not_observed",
        institution="observed" if institutions else "not_observed",
        institution_evidence=institutions,
        personal_evidence=[personal_name] if personal and personal_name else [],
        permission_scope="unknown",
        evidence_source="kns_header",
        observed_at=now(),
    )


# --------------------------------------------------------------------------------------------
# Refusals of a full text

_REFUSAL = re.compile(
    r"余额不足|未订购|没有订购|机构未购买|无权|没有权限|暂无权限|权限不足|请先登录|下载失败|下载异常|超出.{0,6}限"
    r"|会话已经结束|请返回原页面刷新|服务端出现未知错误|来源应用不正确|只收录题录|暂不提供原文"
    r"|不在有效期|操作太过频繁"
)
# The refusals that say the account or institution has no right to the full text (as against a paper CNKI
# keeps no file of, or a passing failure): another paper will most likely be refused the same way.
_NO_RIGHTS = re.compile(r"余额不足|未订购|没有订购|机构未购买|未购买|无权|没有权限|暂无权限|权限不足|请先登录|未登录|不在有效期")
_ERROR_PAGE = re.compile(r"/errormsg\.(?:html?|aspx)$", re.I)


def page_text_sample(html: str) -> str:
    """The first words a page shows (whitespace collapsed), as a refusal is quoted to the client."""
    return page_text(load_page(html))[:REFUSAL_SAMPLE_CHARS]


def parse_download_refusal(html: str) -> str | None:
    """The popup's text sample when it refuses the download (余额不足, 未订购 …), else None."""
    sample = page_text_sample(html)
    return sample if is_refusal(sample) else None


def is_refusal(text: str) -> bool:
    """``text`` says CNKI will not hand out the file (a tip, an entry's title, a page's words)."""
    return bool(_REFUSAL.search(text))


def is_rights_refusal(text: str) -> bool:
    """``text`` refuses the file for want of rights (未订购, 余额不足, not logged in, subscription expired)."""
    return bool(_NO_RIGHTS.search(text))


def refusal_in_url(url: str) -> str | None:
    """The site's words when ``url`` is CNKI's error page (``…/ErrorMsg.html?…``), which carries the
    refusal (对不起，本刊只收录题录信息，暂不提供原文下载…) URL-encoded in its query; else None."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    if not is_site_url(url) or not _ERROR_PAGE.search(parts.path):
        return None
    texts = [trim(value) for _, value in parse_qsl(parts.query, keep_blank_values=True) if trim(value)]
    words = next((text for text in texts if _REFUSAL.search(text)), "") or next(
        (text for text in texts if re.search(r"[\u4e00-\u9fff]", text)), ""
    )
    return words[:REFUSAL_SAMPLE_CHARS] or "知网错误页（没有给出原因）"
