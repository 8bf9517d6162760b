"""Local HTTPS simulator of kns/navi/bar/login/www.cnki.net (one server, dispatch on Host).

Start it, point Chromium at it with `browser_args`, configure a scenario per test:

    sim = KnsSimulator().start()
    sim.configure(login="institution")
    sim.captcha("grid", after=1)          # 2nd grid request gets a challenge until solved
    sim.fault("detail", "status", status=429, times=2)
    ...
    sim.solve(); sim.count("grid"); sim.requests; sim.reset(); sim.stop()
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import socket
import ssl
import threading
import time
import uuid
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

from . import abroad, authors, changes, citations, downloads, facets, gateway, navi, pages, senquery
from .corpus import Corpus, Paper, build_corpus
from .expert import unsupported
from .query import ParsedQuery, QueryRejected, parse_query_json, search, similar_sources

log = logging.getLogger(__name__)

CERT_DIR = Path(__file__).parent / "certs"
ENDPOINTS = ("search", "grid", "group", "detail", "journal", "reader", "reader_part", "reader_data", "download", "file", "login",
             "home", "verify", "error", "other", "citation", "navi", "senquery", "author")
FAULT_KINDS = ("status", "delay", "truncate", "empty", "reject", "denied", "login", "captcha", "close")
EMPTY_STYLES = ("zero", "no_content", "not_found")
CAPTCHA_STYLES = ("redirect", "vericode", "json403", "json200", "tencent", "title", "timeout", "bar", "bar_words", "decoy")
DOWNLOAD_MODES = ("auto", "ok", "login", "login_page", "balance", "unsubscribed", "no_permission", "session_end",
                  "expired", "html", "abstract_only", "not_valid", "too_frequent", "html_file", "tiny")
CHOICES = {
    "journal_issn": ("plain", "host_unit", "missing"),
    "reader_generation": ("nzkhtml", "kreader"),
    "reader_data": ("ok", "once"),
    "thesis_downloads": ("plain", "whole", "whole_short", "whole_pdf"),
    "detail_refusal": ("none", "organization_tip", "entries_unavailable"),
    "alert_refusal": ("none", "load", "click"),
    "error_page": ("text", "blank"),
    "caj_magic": ("HN", "CAJ", "KDH", "C8", "TEB", "PDF", "UNKNOWN"),
    "expert_year": ("accepted", "refused"),
    "page_change": changes.PAGE_CHANGES,
    "citation_api": ("ok", "gone", "bad_shape", "empty"),
    "citation_start": ("page", "record"),
    "empty_style": EMPTY_STYLES,
    "facet_panel": facets.PANEL_STYLES,
    "author_page": ("kcms2", "legacy", "redesigned"),
    "citation_area": citations.AREAS,
}
STATUS_TEXT = {
    401: "请先登录", 403: "403 Forbidden 访问禁止", 404: "404 页面不存在", 429: "访问过于频繁，请稍后再试",
    418: "418 Request Blocked 请求被拦截（EdgeOne）", 500: "服务器内部错误", 502: "502 Bad Gateway", 503: "服务繁忙，请稍后重试", 504: "504 Gateway Time-out",
}


@dataclass
class Scenario:
    """Everything a test may vary.  Defaults follow the majority of real sources."""

    login: str = "none"  # none | institution | personal | both
    institution_name: str = "示例大学图书馆"
    personal_name: str = "cnki_reader"
    cited_class: str = "quote"  # quote (majority) | cited (azazo1 fixture) | citation (td.quote holds a GB/T string, td.cited the count)
    count_style: str = "comma"  # plain | comma (1,024) | wan (1.2万)
    empty_style: str = "zero"  # zero (count 0 + p.no-content) | no_content (azazo1) | not_found (未检索到相关文献)
    turnpage: str = "strict"  # strict: page>1 needs #hidTurnPage value (else HTTP 400) | lenient | reset (serves page 1)
    page_cap: int = 300
    paging_echo: str = "off"  # off | required: page > 1 must carry #briefRequest's Products and View, else refused
    expert_year: str = "accepted"  # accepted | refused: a professional-search expression using YE is refused
    sort_honoured: str = "always"  # always | sort_request (page 1 sorts only with boolSortSearch=true) | never
    rechallenge_new_search: bool = False  # after a solved grid challenge, a new search (boolSearch=true) is challenged again
    journal_tags: str = "plain"  # plain | 2026 (tags written 北大核心期刊, AMI without its level, WJCI)
    journal_issn: str = "plain"  # plain (<p>ISSN：<span>) | host_unit (ul#JournalBaseInfo li p.hostUnit label+span) | missing
    english_names: str = "as_stored"  # as_stored (Wang Wei) | capitalised (WANG Wei: surname first, in capitals)
    detail_meta: bool = False  # add citation_* meta tags (not seen on real kcms2 pages)
    detail_js: bool | frozenset[str] = frozenset()  # True or filenames: detail content inserted by script after 200 ms
    dynamic_doc_top: bool = True  # theses/conference: .top-tip filled by script
    institution_markup: str = "author"  # author (second h3.author) | orgn (h3.orgn)
    abstract_tag: str = "span"  # span | p | div for #ChDivSummary
    abstract_truncate: int = 0  # >0: visible #ChDivSummary cut to N chars, full text in input#abstract_text
    double_download: bool = False  # a second #pdfDown at the bottom of the detail page
    thesis_downloads: str = "plain"  # theses/conference: plain PDF下载/CAJ下载 | whole | whole_short | whole_pdf
    foreign_detail: bool = False  # English-language papers render as WWJD pages without PDF/CAJ entries
    detail_refusal: str = "none"  # none | organization_tip (.organizationTip 未订购) | entries_unavailable
    alert_refusal: str = "none"  # none | load (the detail page alert()s alert_text) | click (PDF/CAJ entries alert() it)
    alert_text: str = downloads.UNSUBSCRIBED_TIP
    reader: str = "auto"  # auto (trial unless logged in or free) | full | trial | refused (302 to ErrorMsg.html) | refused_page
    reader_slider: bool = False  # 「滑动验证，继续阅读全文」 until solved
    reader_url: str = "nzkhtml"  # nzkhtml (xmlRead/xml.html, trialRead.html) | reader_xml (/reader/xml?…&loginType=trialRead)
    reader_generation: str = "nzkhtml"  # nzkhtml | kreader (2026: /reader/xml SPA shell fed by ossapi/kreader-api JSON)
    reader_frame: bool = False  # nzkhtml: the reader text sits in a same-origin iframe
    reader_data: str = "ok"  # kreader: ok | once (an invoice answers its JSON once; later calls get {code:401})
    reader_trial_flag: bool = False  # kreader: trial JSON carries metadata.isTrial = true
    html_entry_decoy: bool = False  # detail page: a styled, dead li.btn-html a 「HTML阅读」 before the real one
    no_html_entry: bool | frozenset[str] = frozenset()  # True or filenames: the detail page offers no HTML阅读/在线阅读
    no_journal_link: frozenset[str] = frozenset()  # filenames: journal papers whose source line links no journal page
    listing_without: frozenset[str] = frozenset()  # resources no listing shows ({"DISSERTATION"}: a thesis-less listing)
    reader_lazy: bool = True  # sections after the first two arrive by XHR
    reader_lazy_delay: float = 0.15
    trial_notice: bool = False  # trial reader shows 试读结束，购买后阅读全文
    download: str = "auto"  # see DOWNLOAD_MODES
    download_by_file: dict[str, str] = field(default_factory=dict)  # filename → a DOWNLOAD_MODES value for that paper alone
    caj_only: frozenset[str] = frozenset()  # filenames: the detail page offers CAJ下载 and no PDF下载 (older journal papers)
    check_referer: bool = True  # order URL without a *.cnki.net Referer → 来源应用不正确(01)
    caj_magic: str = "HN"  # see CHOICES: the CAJ family, PDF (a plain PDF for a CAJ order) or UNKNOWN bytes
    error_page: str = "text"  # text | blank: ErrorMsg.html shows nothing, its message is only in the URL
    expired_locator: str = "404"  # 404 | verify : answer to a v= token from an older epoch
    latency: dict[str, float] = field(default_factory=dict)  # endpoint → seconds added to every response
    page_change: str = ""  # one page type redesigned (see changes.CHANGES): template, grid_title, journal_abstract …
    page_extra: str = ""  # markup planted at the end of every full page (secrets a report must not carry)
    session_cookies: dict[str, str] = field(default_factory=dict)  # name → value set on every answer (SID_kns8, Ecp_Session …)
    citation_api: str = "ok"  # ok | gone (404) | bad_shape (data.list/count) | empty (every list answers total 0)
    citation_start: str = "page"  # page: start counts pages from 1 | record: start counts items from 1
    citation_size_cap: int = 100  # the API answers at most this many items whatever size asks
    facet_panel: str = "full"  # the group/result answer's shape: see facets.PANEL_STYLES and README
    navi_years_per_page: int = 20  # years one yearList page lists (its pIdx pages on)
    navi_columns: bool = True  # an issue's papers fragment: column headings (dt.tit 专栏:…) | False: none
    citation_rendered: bool = False  # detail pages fill in their 参考文献/引证文献 lists by script (off: other tests cut pages by size)
    # author pages and journals by name (issue 39 items 4 and 5)
    author_page: str = "kcms2"  # kcms2 (#kcms-author-info, #au-code) | legacy (knetsearch.aspx?code=) | redesigned (unknown)
    plain_bylines: bool = False  # detail bylines link no author page (names only, as on some older pages)
    navi_hit_former: bool = False  # the navi journal search's entries also show 曾用刊名 (else only the journal page does)
    # 来源类别 and named sources (issue 39 items 2, 3)
    source_category_ignored: bool = False  # the grid and the panel ignore LYBSM picks (CNKI not narrowing by 来源类别)
    ly_similar: bool = False  # LY= (a source leaf with match exact) also lists journals of similar names (query.similar_sources)
    # issue 39 items 6, 7, 9: the 2026 citation area, more journal tags, the slider for sessions without login
    citation_area: str = "lists"  # see CHOICES: lists (inside the page) | link (2026: a.ReferLinkOn to list pages) | empty | unknown
    journal_tags_more: bool = False  # journal pages also carry CAS, JST, Scopus and 卓越期刊 (pages.EXTRA_TAGS)
    anonymous_slider: bool = False  # a session without any login is sent to the blockPuzzle slider on kns pages
    # issue 39, abroad: the overseas site (abroad.py)
    oversea: str = ""  # "" off | an overseas host (oversea.cnki.net, chn.oversea.cnki.net): kns/navi/www requests 302 there
    # store hardening (issue 42)
    citation_lone_surrogate: bool = False  # every abstract of the citation API ends with half a surrogate pair (\ud83d)
    # issue 39, abroad: the citation API's relative links (i-fix)
    citation_relative_links: bool = False  # its detail links are paths (/kcms2/article/abstract?v=…), no host


@dataclass
class Fault:
    endpoint: str  # one of ENDPOINTS or "*"
    kind: str  # one of FAULT_KINDS
    times: int | None = None  # responses it affects (None = every one); captcha: until solved
    after: int = 0  # matching requests that pass untouched first
    status: int = 503
    seconds: float = 0.0
    style: str = "redirect"  # captcha style, see CAPTCHA_STYLES
    mode: str = "html"  # truncate: html (short but consistent body) | connection (connection dropped mid-body) | stall (see below)
    fraction: float = 0.5
    reason: str = "查询对象结构错误, 没有指定检索分类！"
    where: str = "value"  # reject: the reason in p.no-content[value] | in a plain hidden "input"
    empty_style: str = "no_content"  # empty (grid): the bare shell | zero: beside 共找到 0 条结果 | not_found
    min_page: int = 0  # grid: only requests for this page or later match
    duration: float = 0.0  # >0: the fault stops this many seconds after it first fired (a throttling window)
    first_fired: float = 0.0
    rearmed: bool = False
    seen: int = 0
    fired: int = 0
    solved: bool = False
    # download hardening: truncate mode "stall" sends the first ``fraction`` of the body, then holds the connection
    # ``seconds`` (a transfer that never ends) announcing ``claimed_bytes`` (0: the body's length) as its length
    claimed_bytes: int = 0


@dataclass
class SimRequest:
    method: str
    host: str
    path: str
    query: dict[str, str]
    form: dict[str, str]
    referer: str
    endpoint: str
    headers: dict[str, str]
    at: float
    status: int = 0

    @property
    def url(self) -> str:
        q = "&".join(f"{k}={quote(v)}" for k, v in self.query.items())
        return f"https://{self.host}{self.path}" + (f"?{q}" if q else "")


@dataclass
class _Resp:
    status: int = 200
    body: bytes | str = b""
    ctype: str = "text/html; charset=utf-8"
    headers: dict[str, str] = field(default_factory=dict)
    drop_after: int | None = None  # truncate mode "connection"
    close: bool = False  # fault "close": the connection is closed without any answer
    abort: bool = False  # the connection closes without any answer (a network failure)
    reset_mid_body: bool = False  # headers and a first chunk, then the connection ends (no browser retry)
    stall: Fault | None = None  # truncate mode "stall": a part of the body, then the connection is held


def classify(host: str, path: str) -> str:
    p = path.lower()
    if p.endswith("/errormsg.html"):
        return "error"
    if host == "kns.cnki.net":
        if p.startswith("/kns8s/brief/grid"):
            return "grid"
        if p.startswith("/kns8s/group/"):
            return "group"
        if p.startswith("/kns8s/brief/senquery"):
            return "senquery"
        if p.startswith("/kns8s") or p.startswith("/kns/advsearch"):
            return "search"
        if p.startswith("/kcms2/article/abstract") or p.startswith("/kcms/detail/detail.aspx"):
            return "detail"
        if p.startswith("/kcms2/author/detail") or p.startswith("/kcms/detail/knetsearch.aspx"):
            return "author"
        if p.startswith("/nzkhtml/xmlread/chapter"):
            return "reader_part"
        if p.startswith("/ossapi/kreader-api/"):
            return "reader_data"
        if p.startswith("/nzkhtml/") or p.startswith("/reader/"):
            return "reader"
        if p.startswith("/verify/"):
            return "verify"
        if p.startswith("/restapi/citation-api/") or p.startswith("/restapi/literature-api/") \
                or p.startswith(citations.LIST_PATH):
            return "citation"
    elif host == "navi.cnki.net" and p.startswith("/knavi"):
        parts = p.strip("/").split("/")
        if p.rstrip("/") == "/knavi/all/searchbaseinfo" or (len(parts) == 4 and parts[1] == "journals" and parts[3] in ("yearlist", "papers")):
            return "navi"
        return "journal"
    elif host == "bar.cnki.net":
        if p.startswith("/bar/verify/"):
            return "verify"
        if p.startswith("/bar/download/order"):
            return "download"
        if p.startswith("/bar/download/file"):
            return "file"
    elif host == "login.cnki.net":
        return "login"
    elif host in ("www.cnki.net", "cnki.net"):
        return "home"
    if p.startswith("/verify/"):
        return "verify"
    return "other"


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, sim: KnsSimulator, addr: tuple[str, int], ctx: ssl.SSLContext) -> None:
        self.sim = sim
        self.ctx = ctx
        self.live: set[socket.socket] = set()
        self.live_lock = threading.Lock()
        super().__init__(addr, _Handler)

    def finish_request(self, request: Any, client_address: Any) -> None:
        # TLS handshake in the worker thread, so a slow client never blocks accept()
        try:
            request.settimeout(15)
            # headers and body go out as separate writes: without this, Nagle + delayed ACK add ~40 ms
            request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            tls = self.ctx.wrap_socket(request, server_side=True)
        except (OSError, ssl.SSLError):
            return
        with self.live_lock:
            self.live.add(tls)
        try:
            super().finish_request(tls, client_address)
        except (OSError, ssl.SSLError):
            pass
        finally:
            with self.live_lock:
                self.live.discard(tls)
            try:
                tls.close()
            except OSError:
                pass

    def close_live(self) -> None:
        with self.live_lock:
            socks = list(self.live)
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "Tengine"
    sys_version = ""

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("kns-sim %s", format % args)

    def do_GET(self) -> None:
        self.server.sim._serve(self, "GET")  # type: ignore[attr-defined]

    def do_POST(self) -> None:
        self.server.sim._serve(self, "POST")  # type: ignore[attr-defined]

    def do_HEAD(self) -> None:
        self.server.sim._serve(self, "HEAD")  # type: ignore[attr-defined]


class KnsSimulator:
    """The simulator.  Thread-safe; all public methods may be called while it serves."""

    def __init__(self, corpus: Corpus | None = None, port: int = 0) -> None:
        self.corpus = corpus or build_corpus()
        self._want_port = port
        self._lock = threading.RLock()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self.scenario = Scenario()
        self.faults: list[Fault] = []
        self._log: list[SimRequest] = []
        self.epoch = 1
        self.slider_solved = False
        self.solves = 0
        self.reader_visits = 0  # every reader URL handed out gets a fresh invoice
        self.used_invoices: set[str] = set()
        self.stalls_ended: list[float] = []  # when a held ("stall") transfer was closed by the client
        self._graph: citations.Graph | None = None
        self.gateway = gateway.Gateway()  # the university gateway and CARSI IdP in front (tests/kns/gateway.py)
        self.published: list[Paper] = []  # papers a test added to the corpus (publish), withdrawn by reset

    @property
    def graph(self) -> citations.Graph:
        """The corpus's citation graph (built on first use): the oracle of the citation API."""
        with self._lock:
            if self._graph is None:
                self._graph = citations.Graph(self.corpus)
            return self._graph

    # ------------------------------------------------------------ lifecycle

    def start(self) -> KnsSimulator:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(CERT_DIR / "cert.pem", CERT_DIR / "key.pem")
        ctx.set_alpn_protocols(["http/1.1"])
        self._server = _Server(self, ("127.0.0.1", self._want_port), ctx)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="kns-sim", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is None:
            return
        self._server.shutdown()
        self._server.close_live()
        self._server.server_close()
        if self._thread:
            self._thread.join(timeout=5)
        self._server = None

    def __enter__(self) -> KnsSimulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._server is not None, "simulator not started"
        return self._server.server_address[1]

    @property
    def _resolver_rules(self) -> str:
        # The gateway's hosts (*.sim-univ.edu.cn: WebVPN, rewritten hosts, prefix proxy, IdP) come here too.
        return ", ".join(f"MAP {host} 127.0.0.1:{self.port}" for host in ("*.cnki.net", "cnki.net", "*.sim-univ.edu.cn"))

    @property
    def browser_args(self) -> str:
        """The CNKI_BROWSER_ARGS value that sends Chromium's *.cnki.net (and gateway) traffic here."""
        return f'--host-resolver-rules="{self._resolver_rules}" --ignore-certificate-errors'

    @property
    def browser_arg_list(self) -> list[str]:
        return [f"--host-resolver-rules={self._resolver_rules}",
                "--ignore-certificate-errors"]

    # ------------------------------------------------------------ configuration

    def configure(self, **changes: Any) -> Scenario:
        """Change scenario fields (see Scenario); unknown names raise TypeError.
        `faults=[Fault(...), ...]` replaces the fault list."""
        with self._lock:
            faults = changes.pop("faults", None)
            names = {f.name for f in dataclasses.fields(Scenario)}
            bad = set(changes) - names
            if bad:
                raise TypeError(f"unknown scenario fields: {sorted(bad)}")
            for name, allowed in {"download": DOWNLOAD_MODES, **CHOICES}.items():
                if name in changes and changes[name] not in allowed:
                    raise ValueError(f"{name} must be one of {allowed}")
            if set(changes.get("download_by_file", {}).values()) - set(DOWNLOAD_MODES):
                raise ValueError(f"download_by_file values must be among {DOWNLOAD_MODES}")
            for name in ("detail_js", "no_html_entry", "no_journal_link", "listing_without", "caj_only"):
                if name in changes and not isinstance(changes[name], bool):
                    changes[name] = frozenset(changes[name])
            self.scenario = dataclasses.replace(self.scenario, **changes)
            if changes.get("reader_slider"):
                self.slider_solved = False  # (re-)arming the slider makes it unsolved again
            if faults is not None:
                self.faults = []
                for f in faults:
                    self._add_fault(f)
            return self.scenario

    def _add_fault(self, f: Fault) -> Fault:
        if f.endpoint != "*" and f.endpoint not in ENDPOINTS:
            raise ValueError(f"unknown endpoint {f.endpoint!r}; one of {ENDPOINTS}")
        if f.kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {f.kind!r}; one of {FAULT_KINDS}")
        if f.kind == "captcha" and f.style not in CAPTCHA_STYLES:
            raise ValueError(f"unknown captcha style {f.style!r}; one of {CAPTCHA_STYLES}")
        if f.empty_style not in EMPTY_STYLES:
            raise ValueError(f"unknown empty fault style {f.empty_style!r}; one of {EMPTY_STYLES}")
        with self._lock:
            self.faults.append(f)
        return f

    def fault(self, endpoint: str, kind: str, **kw: Any) -> Fault:
        """Add a fault, e.g. fault("grid", "status", status=429, times=2), fault("detail", "delay", seconds=1)."""
        return self._add_fault(Fault(endpoint, kind, **kw))

    def captcha(self, endpoint: str, after: int = 0, style: str = "redirect") -> Fault:
        """Challenge every request to `endpoint` after the first `after` ones, until solve()."""
        return self._add_fault(Fault(endpoint, "captcha", after=after, style=style))

    def solve(self) -> None:
        """A person finished the challenge: captchas stop, the reader slider opens."""
        with self._lock:
            for f in self.faults:
                if f.kind == "captcha":
                    f.solved = True
            self.slider_solved = True
            self.solves += 1
        self.gateway.solve()

    @property
    def challenge_pending(self) -> bool:
        with self._lock:
            return self._anonymous_slider(self.scenario) or any(
                f.kind == "captcha" and not f.solved and f.seen > f.after for f in self.faults)

    def _anonymous_slider(self, sc: Scenario) -> bool:
        """``anonymous_slider``: a session without any login is sent to the slider until a person solves it once."""
        return sc.anonymous_slider and sc.login == "none" and self.solves == 0

    def expire_locators(self) -> None:
        """Invalidate every v=/order id handed out so far (CNKI tokens are session-bound)."""
        with self._lock:
            self.epoch += 1

    def reset(self) -> None:
        """Back to defaults: scenario, faults, log, solved state, token epoch."""
        with self._lock:
            self.scenario = Scenario()
            self.faults = []
            self._log = []
            self.epoch = 1
            self.slider_solved = False
            self.solves = 0
            self.used_invoices = set()
            self.gateway = gateway.Gateway()
            for paper in self.published:
                self.corpus.withdraw(paper)
            self.published = []
            self.stalls_ended = []

    def configure_gateway(self, **fields: Any) -> gateway.Gateway:
        """Change the gateway's switches (see gateway.Gateway); unknown names raise TypeError."""
        names = {"expire_after", "challenge", "challenge_after", "two_factor", "require_visit", "fetch_failure", "idp_name",
                 "drop_fetches", "expire_at", "drop_only"}
        if set(fields) - names:
            raise TypeError(f"unknown gateway fields: {sorted(set(fields) - names)}")
        if fields.get("fetch_failure", "redirect") not in gateway.FETCH_FAILURES:
            raise ValueError(f"fetch_failure must be one of {gateway.FETCH_FAILURES}")
        with self.gateway.lock:
            for name, value in fields.items():
                setattr(self.gateway, name, value)
            if "challenge" in fields:
                self.gateway.solved = self.gateway.challenged = False
                self.gateway.seen = 0
        return self.gateway

    def gateway_login(self) -> str:
        """A person logged in at the gateway: the ticket cookie's value (name: gateway.cookie_name(host))."""
        return self.gateway.login()

    # ------------------------------------------------------------ observation

    @property
    def requests(self) -> list[SimRequest]:
        with self._lock:
            return list(self._log)

    def orders(self) -> list[tuple[float, str, str]]:
        """Every download order the browser sent, in time order: (``at``, filename, kind pdf/caj/html/…)."""
        found = []
        for r in self.requests:
            parts = pages.decode_token(r.query.get("id", "")) if r.endpoint == "download" else None
            if parts and len(parts) == 4:
                found.append((r.at, parts[3], parts[2]))
        return found

    def count(self, endpoint: str, method: str | None = None) -> int:
        with self._lock:
            return sum(1 for r in self._log if r.endpoint == endpoint and (method is None or r.method == method))

    @property
    def counts(self) -> dict[str, int]:
        with self._lock:
            out: dict[str, int] = {}
            for r in self._log:
                out[r.endpoint] = out.get(r.endpoint, 0) + 1
            return out

    def clear_log(self) -> None:
        with self._lock:
            self._log = []

    # ------------------------------------------------------------ corpus helpers

    def publish(self, *papers: Paper) -> None:
        """New papers appear in every listing, detail page and journal from now on (a topic watch's test);
        ``reset`` withdraws them."""
        with self._lock:
            for paper in papers:
                self.corpus.add(paper)
                self.published.append(paper)


    def paper(self, filename: str) -> Paper:
        p = self.corpus.by_filename(filename)
        if p is None:
            raise KeyError(filename)
        return p

    def detail_url(self, paper: Paper) -> str:
        return pages.detail_url(paper, self.epoch)

    def journal_url(self, key: str) -> str:
        return pages.source_url(key)

    def order_url(self, paper: Paper, kind: str = "pdf") -> str:
        return pages.order_url(paper, kind, self.epoch)

    def expected(self, query_json: str | dict[str, Any], sort_field: str = "", sort_type: str = "desc") -> list[Paper]:
        """What the grid would list (all pages) for this QueryJson: the oracle for integration tests."""
        text = query_json if isinstance(query_json, str) else json.dumps(query_json, ensure_ascii=False)
        return listed(search(self.corpus, parse_query_json(text), sort_field, sort_type), self.scenario)

    # ------------------------------------------------------------ request handling

    def _serve(self, h: _Handler, method: str) -> None:
        length = int(h.headers.get("Content-Length") or 0)
        raw = h.rfile.read(length) if length else b""
        host = (h.headers.get("Host") or "").split(":")[0].lower()
        headers = {k.lower(): v for k, v in h.headers.items()}
        if self.gateway.handles(host):
            try:
                resp = self.gateway.serve(self, method, host, h.path, headers, raw)
            except Exception:
                log.exception("kns-sim gateway failed for %s%s", host, h.path)
                resp = _Resp(500, pages.simple_page("错误", "模拟网关内部错误"))
            cookies: list[str] = []
        else:
            resp = self.handle(method, host, h.path, headers, raw)
            # As the real site does on every answer: session cookies for the whole domain, out of the page's reach.
            cookies = [f"{name}={value}; Domain=.cnki.net; Path=/; Secure; HttpOnly" for name, value in self.scenario.session_cookies.items()]
        self._send(h, method, resp, cookies)

    def handle(self, method: str, host: str, target: str, headers: dict[str, str], raw: bytes) -> _Resp:
        """One request to a CNKI host (``headers`` with lower-case names), logged: what the gateway proxies to."""
        parts = urlsplit(target)
        query = {k: v[0] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        form: dict[str, str] = {}
        if raw and "x-www-form-urlencoded" in (headers.get("content-type") or ""):
            form = {k: v[0] for k, v in parse_qs(raw.decode("utf-8", "replace"), keep_blank_values=True).items()}
        oversea = self.scenario.oversea
        moved = abroad.moved(host, target, oversea)
        if moved is not None:
            endpoint = "moved"  # sent to the overseas site, never served here
        else:
            endpoint = classify(abroad.plays(parts.path) if abroad.is_abroad_host(host, oversea) else host, parts.path)
        keep = ("X-Requested-With", "Content-Type", "Origin", "User-Agent", "Sec-Fetch-Mode", "Sec-Fetch-Dest", "Cookie")
        rec = SimRequest(method, host, parts.path, query, form, headers.get("referer") or "", endpoint,
                         {k: headers[k.lower()] for k in keep if headers.get(k.lower())}, time.time())
        with self._lock:
            self._log.append(rec)
            sc = self.scenario
        try:
            resp = _redirect(moved) if moved is not None else self._respond(rec, sc)
        except Exception:  # a simulator bug must show up as a 500, not a hung client
            log.exception("kns-sim handler failed for %s", rec.url)
            resp = _Resp(500, pages.simple_page("错误", "模拟站点内部错误"))
        if sc.oversea and moved is None:
            _localise(resp, sc.oversea)
        rec.status = resp.status
        return resp

    def _send(self, h: _Handler, method: str, resp: _Resp, cookies: list[str] | None = None) -> None:
        if resp.close:  # not a byte: the browser sees the connection end (net::ERR_EMPTY_RESPONSE)
            h.close_connection = True
            return
        if resp.abort:
            h.close_connection = True
            try:
                h.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return
        if resp.reset_mid_body:  # the answer started, so the browser does not send the request again itself
            h.close_connection = True
            try:
                h.send_response(resp.status)
                h.send_header("Content-Type", resp.ctype)
                h.send_header("Transfer-Encoding", "chunked")
                h.end_headers()
                h.wfile.write(b"4\r\n<htm\r\n")
                h.wfile.flush()
                h.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return
        body = resp.body.encode("utf-8") if isinstance(resp.body, str) else resp.body
        h.send_response(resp.status)
        h.send_header("Content-Type", resp.ctype)
        h.send_header("Content-Length", str(resp.stall.claimed_bytes or len(body)) if resp.stall else str(len(body)))
        h.send_header("Cache-Control", "no-store")
        for k, v in resp.headers.items():
            h.send_header(k, v)
        for cookie in cookies or ():
            h.send_header("Set-Cookie", cookie)
        if resp.drop_after is not None:
            h.send_header("Connection", "close")
            h.close_connection = True
        h.end_headers()
        if method == "HEAD":
            return
        try:
            h.wfile.write(body if resp.drop_after is None else body[:resp.drop_after])
            h.wfile.flush()
        except OSError:
            h.close_connection = True
        if resp.stall is not None:
            self._hold(h, resp.stall.seconds)

    def _respond(self, rec: SimRequest, sc: Scenario) -> _Resp:
        delay = sc.latency.get(rec.endpoint, 0.0)
        truncate: Fault | None = None
        chosen: Fault | None = None
        with self._lock:
            for f in self.faults:
                if f.endpoint not in ("*", rec.endpoint) or rec.endpoint in ("verify", "login", "error", "other") and f.endpoint == "*":
                    continue
                if f.min_page and _page_of(rec) < f.min_page:
                    continue
                if f.duration and f.first_fired and time.time() - f.first_fired > f.duration:
                    continue
                f.seen += 1
                if f.seen <= f.after:
                    continue
                if f.kind == "captcha":
                    if f.solved:
                        continue
                elif f.times is not None and f.fired >= f.times:
                    continue
                f.fired += 1
                f.first_fired = f.first_fired or time.time()
                if f.kind == "delay":
                    delay += f.seconds
                elif f.kind == "truncate":
                    truncate = f
                elif chosen is None:
                    chosen = f
        if delay:
            time.sleep(delay)
        if rec.endpoint == "grid" and self._anonymous_slider(sc):  # the grid's JSON naming verify/home?captchaType=blockPuzzle
            resp = self._captcha_response("json403", rec, sc)
        else:
            resp = self._fault_response(chosen, rec, sc) if chosen else self._route(rec, sc)
        if isinstance(resp.body, str) and (sc.page_change or sc.page_extra):
            resource = ""
            if rec.endpoint == "detail":
                paper, _ = self._paper_from_v(rec)
                resource = paper.resource if paper is not None else ""
            resp.body = changes.plant(sc.page_extra, changes.apply(sc.page_change, rec.endpoint, resource, resp.body))
        if truncate is not None:
            body = resp.body.encode("utf-8") if isinstance(resp.body, str) else resp.body
            cut = max(1, int(len(body) * truncate.fraction))
            if truncate.mode == "connection":
                resp.body, resp.drop_after = body, cut
            elif truncate.mode == "stall":
                resp.body, resp.drop_after, resp.stall = body, cut, truncate
            else:
                resp.body = body[:cut].decode("utf-8", "ignore") if "text/" in resp.ctype else body[:cut]
        return resp

    def _hold(self, h: BaseHTTPRequestHandler, seconds: float) -> None:
        """A transfer that never ends: the connection is held up to ``seconds``; when the client closes it
        first (the download cancelled), the moment goes to ``stalls_ended``."""
        h.close_connection = True
        deadline = time.time() + seconds
        h.connection.settimeout(0.2)
        while time.time() < deadline:
            try:
                if h.connection.recv(1024) == b"":
                    with self._lock:
                        self.stalls_ended.append(time.time())
                    return
            except TimeoutError:
                continue
            except OSError:
                with self._lock:
                    self.stalls_ended.append(time.time())
                return

    def _fault_response(self, f: Fault, rec: SimRequest, sc: Scenario) -> _Resp:
        if f.kind == "status":
            text = STATUS_TEXT.get(f.status, f"HTTP {f.status}")
            return _Resp(f.status, pages.simple_page(text, text))
        if f.kind == "empty":
            if rec.endpoint == "grid":
                return _Resp(200, pages.grid_empty(f.empty_style))
            return _Resp(200, pages.simple_page("暂无数据", "暂无数据，请稍后重试"))
        if f.kind == "reject":
            return _Resp(200, pages.grid_rejected(f.reason, f.where))
        if f.kind == "denied":
            return _Resp(200, pages.simple_page("无权访问", "您所在的机构未订购该资源（机构未订购），无权访问。"))
        if f.kind == "close":
            return _Resp(0, close=True)
        if f.kind == "login":
            return _redirect(f"https://login.cnki.net/login/?ReturnURL={quote(rec.url, safe='')}")
        return self._captcha_response(f.style, rec, sc)

    def _captcha_response(self, style: str, rec: SimRequest, sc: Scenario) -> _Resp:
        back = rec.referer if rec.method == "POST" and rec.referer else rec.url
        verify = f"https://kns.cnki.net/verify/home?captchaType=slide&returnUrl={quote(back, safe='')}"
        if style == "redirect":
            return _redirect(verify)
        if style in ("json403", "json200"):
            # The grid's usual challenge: JSON naming a verify page without any way back (no returnUrl).
            ident = hashlib.sha1(rec.url.encode()).hexdigest()[:16]
            bare = f"https://kns.cnki.net/verify/home?captchaType=blockPuzzle&ident={ident}&captchaId={uuid.uuid4()}"
            return _Resp(403 if style == "json403" else 200, json.dumps({"code": -403, "message": bare}),
                         "application/json; charset=utf-8")
        if style == "vericode":
            form = pages.vericode_form()
            return _Resp(200, form if rec.endpoint == "grid" else pages.page("检索-中国知网", pages.header_html(sc) + form))
        if style == "tencent":
            return _Resp(200, pages.page("检索-中国知网", pages.header_html(sc) + pages.parked_slider(True, self.solves)))
        if style == "timeout":
            return _Resp(200, pages.timeout_verify_page(self.solves))
        if style in ("bar", "bar_words"):
            return _redirect(f"https://bar.cnki.net/bar/verify/index.html?platform=nxgp&returnUrl={quote(rec.url, safe='')}")
        if style == "decoy":  # no challenge shown: a fixed record, whatever the paper
            return _Resp(200, citations.decoy(self.graph, self.epoch), "application/json; charset=utf-8")
        return _Resp(200, pages.verify_home_page(back, self.solves))

    # ------------------------------------------------------------ routes

    def _route(self, rec: SimRequest, sc: Scenario) -> _Resp:
        ep = rec.endpoint
        if ep == "search":
            title = "检索-中国知网" if "defaultresult" in rec.path.lower() else "高级检索-中国知网"
            return _Resp(200, pages.adv_search_page(sc, title))
        if ep == "grid":
            if rec.method != "POST":
                return _redirect("https://kns.cnki.net/kns8s/AdvSearch")
            return self._grid(rec, sc)
        if ep == "group":
            return self._group(rec, sc)
        if ep == "detail":
            return self._detail(rec, sc)
        if ep == "journal":
            return self._journal(rec, sc)
        if ep == "author":
            status, body = authors.answer(self.corpus, rec.query, sc)
            return _Resp(status, body)
        if ep == "senquery":
            if rec.method != "POST":
                return _redirect("https://kns.cnki.net/kns8s/AdvSearch")
            return self._senquery(rec, sc)
        if ep == "navi":
            with self._lock:
                epoch = self.epoch
            status, body = navi.answer(self.corpus, rec.method, rec.path, rec.query, rec.form, rec.headers, sc, epoch)
            return _Resp(status, body)
        if ep in ("reader", "reader_part"):
            return self._reader(rec, sc)
        if ep == "reader_data":
            return self._reader_data(rec, sc)
        if ep == "citation":
            with self._lock:
                epoch = self.epoch
            if rec.path.lower().startswith(citations.LIST_PATH):
                status, html = citations.list_page(self.graph, rec.query, epoch)
                return _Resp(status, html)
            status, ctype, body = citations.answer(self.graph, rec.path.rstrip("/"), rec.query, sc, epoch)
            return _Resp(status, body, ctype)
        if ep in ("download", "file"):
            return self._download(rec, sc)
        if ep == "login":
            return self._login(rec, sc)
        if ep == "verify":
            if rec.path.lower().startswith("/verify/status"):
                with self._lock:
                    pending = (self.scenario.reader_slider and not self.slider_solved) \
                        if rec.query.get("kind") == "slider" else self.challenge_pending
                return _Resp(200, json.dumps({"pending": pending, "solves": self.solves}), "application/json; charset=utf-8")
            if rec.path.lower().startswith("/verify/solve"):
                self.solve()
                return _Resp(200, json.dumps({"code": 1, "msg": "ok"}), "application/json; charset=utf-8")
            if rec.path.lower().startswith("/bar/verify/"):
                words = any(f.style == "bar_words" for f in self.faults if f.kind == "captcha")
                return _Resp(200, pages.bar_verify_page(rec.query.get("returnUrl", ""), self.solves, words))
            return _Resp(200, pages.verify_home_page(rec.query.get("returnUrl", ""), self.solves))
        if ep == "home":
            return _Resp(200, pages.home_page(sc))
        if ep == "error":
            return _Resp(200, pages.error_msg_page(rec.query.get("errorMsg", ""), blank=sc.error_page == "blank"))
        if rec.host.endswith("cnki.net") or rec.host == "cnki.net":
            return _Resp(404, pages.simple_page("页面不存在", "404 页面不存在"))
        return _Resp(421, pages.simple_page("Misdirected", "unknown host"))

    def _grid(self, rec: SimRequest, sc: Scenario) -> _Resp:
        text = rec.form.get("QueryJson") or rec.form.get("queryJson")
        if not text:
            return _Resp(200, pages.grid_rejected("查询对象结构错误, 没有指定检索分类！"))
        try:
            q: ParsedQuery = parse_query_json(text)
        except QueryRejected as exc:
            return _Resp(200, pages.grid_rejected(str(exc)))
        if sc.expert_year == "refused" and "YE" in q.expert_codes:
            return _Resp(200, pages.grid_rejected(unsupported("YE")))
        try:
            page_num = max(1, int(rec.form.get("pageNum") or rec.form.get("CurPage") or 1))
            size = int(rec.form.get("pageSize") or 20)
        except ValueError:
            return _Resp(200, pages.grid_rejected("查询对象结构错误"))
        size = size if 1 <= size <= 50 else 20
        new_search = rec.form.get("boolSearch") == "true"
        if sc.rechallenge_new_search and new_search:
            again = self._rechallenge()
            if again is not None:
                return self._captcha_response(again.style, rec, sc)
        products, view = pages.products_of(q), "changeDBCh"
        if sc.paging_echo == "required" and page_num > 1:
            sent = {str(k).lower(): v for k, v in q.raw.items()}
            if sent.get("products") != products or sent.get("view") != view:
                return _Resp(200, pages.grid_rejected("查询对象结构错误！", "input"))
        sort_field = rec.form.get("sortField", "")
        if sc.sort_honoured == "never" or (
            sc.sort_honoured == "sort_request" and page_num == 1 and rec.form.get("boolSortSearch") != "true"
        ):
            sort_field = ""
        hits = listed(self._search(q, sc, sort_field, rec.form.get("sortType", "") or "desc"), sc)
        token = pages.encode_token("tp", q.fingerprint())
        if page_num > 1 and rec.form.get("turnpage", "") != token:
            if sc.turnpage == "strict":
                return _Resp(400, pages.simple_page("请求错误", "翻页参数缺失或已失效 (turnpage)"))
            if sc.turnpage == "reset":
                page_num = 1
        if not hits:
            return _Resp(200, pages.grid_empty(sc.empty_style))
        page_num = min(page_num, sc.page_cap)
        rows = hits[(page_num - 1) * size: page_num * size]
        echoed = dict(q.raw, Products=products, view=view)
        request = {"queryJson": json.dumps(echoed, ensure_ascii=False), "pageNum": page_num, "turnpage": rec.form.get("turnpage"), "pageSize": size,
                   "dstyle": rec.form.get("dstyle", "listmode"), "sortField": sort_field,
                   "sortType": rec.form.get("sortType", ""), "boolSearch": rec.form.get("boolSearch") == "true",
                   "aside": rec.form.get("aside", ""), "searchFrom": rec.form.get("searchFrom", "")}
        with self._lock:
            epoch = self.epoch
        return _Resp(200, pages.grid_fragment(rows, len(hits), page_num, size, sort_field, sc, epoch, token,
                                              q.positive_terms, request))

    def _search(self, q: ParsedQuery, sc: Scenario, sort_field: str, sort_type: str) -> list[Paper]:
        """A listing as the scenario's CNKI answers it: 来源类别 picks ignored, LY= reaching similar names."""
        if sc.source_category_ignored:
            q = replace(q, picks=[g for g in q.picks if not all(field == facets.CATEGORY_FIELD for field, _ in g)])
        token = similar_sources.set(sc.ly_similar)
        try:
            return search(self.corpus, q, sort_field, sort_type)
        finally:
            similar_sources.reset(token)

    def _group(self, rec: SimRequest, sc: Scenario) -> _Resp:
        """The left facet panel of a listing (POST kns8s/group/result): facets.py."""
        text = rec.form.get("queryJson") or rec.form.get("QueryJson")
        if rec.method != "POST" or not text:
            return _Resp(200, pages.grid_rejected("查询对象结构错误, 没有指定检索分类！"))
        try:
            q = parse_query_json(text)
        except QueryRejected as exc:
            return _Resp(200, pages.grid_rejected(str(exc)))
        hits = listed(self._search(q, sc, "", "desc"), sc)
        return _Resp(200, facets.panel(hits, rec.form.get("groupIds", ""), sc.facet_panel, sc.count_style))
    def _senquery(self, rec: SimRequest, sc: Scenario) -> _Resp:
        """句子检索 (senquery.py): the one sentence item or a refusal; pages of 20."""
        try:
            item, years = senquery.sentence_item(rec.form.get("QueryJson") or rec.form.get("queryJson") or "")
        except senquery.Refused as exc:
            return _Resp(200, pages.grid_rejected(str(exc)))
        found = senquery.matches(self.corpus, item, years)
        if not found:
            return _Resp(200, pages.grid_empty(sc.empty_style))
        try:
            page_num = max(1, int(rec.form.get("pageNum") or rec.form.get("CurPage") or 1))
        except ValueError:
            page_num = 1
        with self._lock:
            epoch = self.epoch
        terms = [str(item["Value"]), str(item["Value2"])]
        return _Resp(200, senquery.fragment(found, page_num, epoch, terms, json.dumps(item, ensure_ascii=False)))

    def _rechallenge(self) -> Fault | None:
        """The solved grid captcha, armed again (a new search right after a solve is challenged again)."""
        with self._lock:
            for f in self.faults:
                if f.kind == "captcha" and f.endpoint == "grid" and f.solved and not f.rearmed:
                    f.solved = False
                    f.rearmed = True
                    return f
        return None

    def _paper_from_v(self, rec: SimRequest) -> tuple[Paper | None, bool]:
        """(paper, stale) from v= or dbcode/filename query parameters."""
        v = rec.query.get("v")
        if v:
            parts = pages.decode_token(v)
            if not parts or parts[0] != "v" or len(parts) != 3:
                return None, False
            with self._lock:
                stale = parts[1] != str(self.epoch)
            return self.corpus.by_filename(parts[2]), stale
        fn = rec.query.get("filename") or rec.query.get("FileName") or ""
        return (self.corpus.by_filename(fn) if fn else None), False

    def _detail(self, rec: SimRequest, sc: Scenario) -> _Resp:
        if rec.path.lower().startswith("/kcms/detail") and sc.login == "none":
            return _redirect(f"https://login.cnki.net/login/?ReturnURL={quote(rec.url, safe='')}")
        p, stale = self._paper_from_v(rec)
        if p is None:
            return _Resp(404, pages.simple_page("文献不存在", "404 文献不存在或链接已失效"))
        if stale:
            if sc.expired_locator == "verify":
                return self._captcha_response("redirect", rec, sc)
            return _Resp(404, pages.simple_page("文献不存在", "404 文献链接已失效"))
        with self._lock:
            epoch = self.epoch
        html = pages.detail_page(p, sc, epoch)
        if sc.alert_refusal != "none":
            html = html.replace("</body>", downloads.alert_script(sc) + "</body>")
        if sc.citation_rendered and p.resource != "BOOK":
            html = html.replace("</body>", citations.rendered(self.graph, p, epoch, sc.citation_area) + "</body>")
        return _Resp(200, html)

    def _journal(self, rec: SimRequest, sc: Scenario) -> _Resp:
        key = ""
        path = rec.path.strip("/").split("/")
        if rec.query.get("p"):
            parts = pages.decode_token(rec.query["p"]) or []
            key = parts[1] if len(parts) == 2 and parts[0] == "p" else ""
        elif len(path) == 4 and path[1] == "journals" and path[3] == "detail":
            key = path[2].upper()
        elif rec.query.get("pykm"):
            key = rec.query["pykm"].upper()
        j = self.corpus.journal(key) if key else None
        if j is None:
            if rec.path.rstrip("/") == "/knavi" and not rec.query:
                return _Resp(200, pages.simple_page("出版物检索-中国知网", "出版来源导航"))
            return _Resp(404, pages.simple_page("页面不存在", "404 出版物不存在"))
        return _Resp(200, pages.journal_page(j, sc, [p for p in self.corpus.papers if p.source_key == j.key]))

    def _reader_trial(self, p: Paper, sc: Scenario) -> bool:
        if sc.reader == "trial":
            return True
        if sc.reader == "full":
            return False
        return sc.login == "none" and not p.free

    def _reader_url(self, p: Paper, sc: Scenario, epoch: int) -> str:
        trial = self._reader_trial(p, sc)
        with self._lock:
            self.reader_visits += 1
            visit = self.reader_visits
        invoice = pages.encode_token("r", epoch, p.filename, int(trial), visit)
        nonce = pages.encode_token("n", p.filename, visit)
        if sc.reader_generation == "kreader":
            # the 2026 URL says loginType=trialRead for full texts too (real-pages-2026 §4)
            return (f"//kns.cnki.net/reader/xml?invoice={invoice}&platform=NZKPT&sourcetype=nxgp&product={p.dbcode}"
                    f"&filename={p.filename}&tablename={p.table}&type={p.resource}&scope=readonline&cflag=html"
                    f"&dflag=xml&pages=&language=CHS&trial=&nonce={nonce}&loginType=trialRead")
        if sc.reader_url == "reader_xml":
            url = f"//kns.cnki.net/reader/xml?invoice={invoice}&nonce={nonce}"
            return url + ("&loginType=trialRead" if trial else "")
        name = "trialRead.html" if trial else "xml.html"
        return (f"//kns.cnki.net/nzkhtml/xmlRead/{name}?dbCode={p.dbcode}&tableName={p.table}&fileName={p.filename}"
                f"&fileSourceType=1&invoice={invoice}&appId=KNS_BASIC_PSMC")

    def _invoice(self, rec: SimRequest) -> tuple[Paper | None, bool, bool]:
        """(paper, trial, current) of the request's reader invoice; paper None when it is no invoice."""
        parts = pages.decode_token(rec.query.get("invoice", "")) or []
        if len(parts) != 5 or parts[0] != "r":
            return None, False, False
        with self._lock:
            current = parts[1] == str(self.epoch)
        return self.corpus.by_filename(parts[2]), parts[3] == "1", current

    def _reader(self, rec: SimRequest, sc: Scenario) -> _Resp:
        p, trial, _ = self._invoice(rec)
        if p is None:
            return _Resp(200, pages.refusal_page("session_end"))
        if rec.endpoint == "reader_part":
            if trial:
                return _Resp(403, pages.simple_page("无权访问", "试读内容已结束，无权访问"))
            start = int(rec.query.get("start") or 0)
            return _Resp(200, pages.reader_sections_html(p, start, len(p.sections)))
        if sc.reader_generation == "kreader" and rec.path.lower().startswith("/reader/"):
            welcome = sc.institution_name if sc.login in ("institution", "both") else ""
            return _Resp(200, pages.kreader_page(p, trial, welcome))
        if sc.reader_frame and not rec.query.get("frame"):
            return _Resp(200, pages.reader_frame_page(p, rec.url + "&frame=1"))
        chapter_url = f"/nzkhtml/xmlRead/chapter?fileName={p.filename}&invoice={rec.query['invoice']}"
        with self._lock:
            solved = self.slider_solved
        return _Resp(200, pages.reader_page(p, sc, trial, solved, chapter_url, self.solves))

    def _reader_data(self, rec: SimRequest, sc: Scenario) -> _Resp:
        """ossapi/kreader-api/v1/xml/data: {code:200, data} for a current invoice of that file, else {code:401}."""
        p, trial, current = self._invoice(rec)
        invoice = rec.query.get("invoice", "")
        with self._lock:
            spent = sc.reader_data == "once" and invoice in self.used_invoices
            self.used_invoices.add(invoice)
        if p is None or not current or spent or rec.query.get("filename", p.filename) != p.filename:
            body: dict[str, Any] = {"code": 401, "message": "凭证无效或已过期", "data": None}
        else:
            body = {"code": 200, "message": "success", "data": pages.kreader_data(p, trial, sc.reader_trial_flag, invoice)}
        return _Resp(200, json.dumps(body, ensure_ascii=False), "application/json; charset=utf-8")

    def _download(self, rec: SimRequest, sc: Scenario) -> _Resp:
        parts = pages.decode_token(rec.query.get("id", "")) or []
        if rec.endpoint == "file":
            if len(parts) != 3 or parts[0] != "f":
                return _Resp(200, pages.refusal_page("expired"))
            p = self.corpus.by_filename(parts[2])
            if p is None:
                return _Resp(404, pages.simple_page("文件不存在", "404"))
            mode = sc.download_by_file.get(p.filename, sc.download)
            if mode == "html":
                return _Resp(200, pages.refusal_page("expired"))
            kind = parts[1]
            disposition = {"Content-Disposition": downloads.content_disposition(p, kind)}
            if mode == "html_file":  # an error page sent as the attachment itself
                return _Resp(200, pages.refusal_page("expired"), "text/html; charset=utf-8", disposition)
            if mode == "tiny":  # a few bytes of text as the attachment: the refusal, not a paper
                return _Resp(200, downloads.TINY_FILE.encode(), "application/pdf", disposition)
            data = downloads.pdf_bytes(p) if kind == "pdf" else downloads.caj_bytes(p, sc.caj_magic)
            ctype = "application/pdf" if kind == "pdf" else "application/octet-stream"
            return _Resp(200, data, ctype, disposition)
        if len(parts) != 4 or parts[0] != "o":
            return _Resp(200, pages.refusal_page("expired"))
        p = self.corpus.by_filename(parts[3])
        if p is None:
            return _Resp(200, pages.refusal_page("expired"))
        with self._lock:
            epoch = self.epoch
        if parts[1] != str(epoch):
            return _Resp(200, pages.refusal_page("session_end"))
        ref_host = urlsplit(rec.referer).hostname or ""
        if sc.check_referer and not (ref_host == "cnki.net" or ref_host.endswith(".cnki.net")):
            return _Resp(200, pages.refusal_page("referer"))
        kind = parts[2]
        if kind in ("catalog", "downpage"):
            return _Resp(200, pages.chapter_page(p))
        if kind == "html":
            if sc.reader == "refused":
                return _redirect(pages.error_msg_url(pages.ABSTRACT_ONLY))
            if sc.reader == "refused_page":
                return _Resp(200, pages.refusal_page("no_album"))
            return _redirect(self._reader_url(p, sc, epoch))
        mode = sc.download_by_file.get(p.filename, sc.download)
        if mode == "abstract_only":
            return _redirect(pages.error_msg_url(pages.ABSTRACT_ONLY))
        if mode == "auto":
            mode = "login" if sc.login == "none" and not p.free else "ok"
        if mode == "login":
            return _redirect(f"//login.cnki.net/login/?ReturnURL={quote(rec.url, safe='')}")
        if mode == "login_page":
            return _Resp(200, pages.login_page(sc, rec.url, unit=False))
        if mode in pages.REFUSALS:
            return _Resp(200, pages.refusal_page(mode))
        return _redirect(f"//bar.cnki.net/bar/download/file?id={pages.encode_token('f', kind, p.filename)}")

    def _login(self, rec: SimRequest, sc: Scenario) -> _Resp:
        path = rec.path.rstrip("/").lower()
        target = rec.form.get("ReturnURL") or rec.query.get("ReturnURL") or "https://kns.cnki.net/kns8s/AdvSearch"
        if path == "/logout":
            with self._lock:
                self.scenario = dataclasses.replace(self.scenario, login="none")
            return _redirect(target)
        if rec.method == "POST" and path == "/login/dologin":
            name = rec.form.get("username") or sc.personal_name
            new = "both" if sc.login in ("institution", "both") else "personal"
            self.configure(login=new, personal_name=name)
            return _redirect(target)
        if rec.method == "POST" and path == "/login/dounitlogin":
            name = rec.form.get("unit") or sc.institution_name
            new = "both" if sc.login in ("personal", "both") else "institution"
            self.configure(login=new, institution_name=name)
            return _redirect(target)
        return _Resp(200, pages.login_page(sc, target, unit=rec.query.get("type") == "unit"))


def listed(hits: list[Paper], sc: Scenario) -> list[Paper]:
    """The hits a listing shows under ``sc.listing_without``."""
    return [paper for paper in hits if paper.resource not in sc.listing_without] if sc.listing_without else hits


def _page_of(rec: SimRequest) -> int:
    try:
        return int(rec.form.get("pageNum") or rec.form.get("CurPage") or 1)
    except ValueError:
        return 1


def _localise(resp: _Resp, oversea: str) -> None:
    """An answer of the overseas site: its links, Location and markup (abroad.localise)."""
    if "Location" in resp.headers:
        resp.headers["Location"] = abroad.localise(resp.headers["Location"], oversea)
    if isinstance(resp.body, str):
        resp.body = abroad.localise(resp.body, oversea)
    elif resp.ctype.startswith(("text/", "application/json")):
        resp.body = abroad.localise(resp.body.decode("utf-8"), oversea).encode("utf-8")


def _redirect(location: str) -> _Resp:
    return _Resp(302, pages.simple_page("Found", "页面跳转中"), headers={"Location": location})
