"""The registry of exchanges: every kind of CNKI request the site makes, with its recorded sample answers.

Each entry (``exchange.Spec``) names an exchange, says how its answers are classified and parsed, and
carries the recorded answers (under ``tests/``) it is tested on: tests/test_exchanges.py runs every
entry's classification and parse on its samples, and the field check (``fieldcheck.tour``) names the
entries its steps read. The exchanges in ``listings``, ``facet_panel``, ``json_api``, ``navi`` and
``site`` classify with their entry's ``classify``; pages read with a caller's parser (navi pages and
fragments, detail and journal pages) are registered with the parser their callers use.
"""

from __future__ import annotations

import json

from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.redact import endpoint_url
from cnki_mcp.pages.author_parse import parse_author_page
from cnki_mcp.pages.facet_parse import parse_facet_panel
from cnki_mcp.pages.navi_parse import NAVI_HOME, parse_keys, parse_papers, parse_search, parse_year_list
from cnki_mcp.pages.page_state import challenge_url, classify_response, gateway_page
from cnki_mcp.pages.parse import parse_detail, parse_grid, parse_journal
from cnki_mcp.pages.urls import is_site_url
from cnki_mcp.site.cdp import FetchResult
from cnki_mcp.site.exchange import Sample, Spec

GRID_URL = "https://kns.cnki.net/kns8s/brief/grid"
DETAIL_URL = "https://kns.cnki.net/kcms2/article/abstract?v=sample"
JOURNAL_URL = "https://navi.cnki.net/knavi/journals/sample/detail"
AUTHOR_URL = "https://kns.cnki.net/kcms2/author/detail?v=sample&uniplatform=NZKPT&language=CHS"
LEGACY_AUTHOR_URL = "https://kns.cnki.net/kcms/detail/knetsearch.aspx?sfield=au&skey=&code=000042423923"
_SAMPLES = "fixtures/cnki-samples/"
_PAGES = "fixtures/pages/"


def plain_data(status: int, url: str, body: str) -> bool:
    """An answer that is the API's data: HTTP 200, JSON with ``data``, no challenge code or verify page."""
    if status != 200 or "/verify/" in url.lower() or challenge_url(body):
        return False
    try:
        answer = json.loads(body)
    except ValueError:
        return False
    return isinstance(answer, dict) and "data" in answer and str(answer.get("code")) not in ("-403", "403")


def answer_problem(answer: FetchResult) -> CnkiError | None:
    """What ``page_state`` reads in an answer (a challenge, login wall, refusal, rate limit, 5xx …)."""
    return classify_response(answer.status, answer.url, answer.text)


def grid_problem(answer: FetchResult) -> CnkiError | None:
    """A grid answer's problem; the empty shell is left to the parser, which tells its kinds apart."""
    problem = answer_problem(answer)
    return None if problem is not None and problem.code == "SITE_TEMPORARILY_EMPTY" else problem


def _left_the_site(answer: FetchResult) -> None:
    """A redirect away from CNKI (a login host …): an in-page request cannot follow it, no retry helps."""
    if answer.redirected and not is_site_url(answer.url) and not gateway_page(answer.url):
        raise CnkiError("LOGIN_REQUIRED" if "//login." in answer.url.lower() else "RESOURCE_FAILED",
                        details={"url": endpoint_url(answer.url)})


def fragment_problem(answer: FetchResult) -> CnkiError | None:
    """A navi fragment's problem (a redirect away from CNKI is raised)."""
    _left_the_site(answer)
    return answer_problem(answer)


def api_problem(answer: FetchResult) -> CnkiError | None:
    """A JSON API answer's problem (a redirect away from CNKI is raised); a small list whose titles happen
    to hold the words of a challenge is data."""
    _left_the_site(answer)
    problem = answer_problem(answer)
    if problem is not None and problem.code == "VERIFICATION_REQUIRED" and plain_data(answer.status, answer.url, answer.text):
        return None
    return problem


def _text(body: str, _url: str) -> str:
    return body


GRID = Spec(
    name="grid",
    label="检索结果页（kns8s/brief/grid，含句子检索）",
    classify=grid_problem,
    parse=parse_grid,
    samples=(
        Sample(_PAGES + "grid-core.html", GRID_URL),
        Sample(_PAGES + "grid-kns8-legacy.html", GRID_URL),
        Sample(_PAGES + "grid-zero.html", GRID_URL),
        Sample(_PAGES + "grid-zero-total.html", GRID_URL, "SITE_TEMPORARILY_EMPTY"),
        Sample(_PAGES + "grid-changed-login.html", GRID_URL, "PARSER_UNSUPPORTED"),
        Sample(_SAMPLES + "azazo1-brief-grid-fragment.trimmed.html", GRID_URL),
        Sample(_SAMPLES + "azazo1-brief-grid-no-content.trimmed.html", GRID_URL, "QUERY_REJECTED"),
        Sample(_SAMPLES + "azazo1-brief-senquery-fragment.trimmed.html", GRID_URL),
        Sample(_SAMPLES + "hunnu-kns8s-results-page-2026.redacted.html", GRID_URL),
        Sample(_SAMPLES + "hushiliang-verify-home-challenge.constructed.html", GRID_URL, "VERIFICATION_REQUIRED"),
    ),
)
FACETS = Spec(
    name="facets",
    label="检索结果的分组面板（kns8s/group/result）",
    classify=answer_problem,
    parse=lambda body, _url: parse_facet_panel(body),
    samples=(Sample(_SAMPLES + "azazo1-group-facets-fragment.trimmed.html", "https://kns.cnki.net/kns8s/group/result"),),
)
API = Spec(name="api", label="知网的 JSON 接口（参考文献、引证、相似文献）", classify=api_problem, parse=_text)
DETAIL = Spec(
    name="detail",
    label="文献详情页",
    classify=answer_problem,
    parse=parse_detail,
    samples=(
        Sample(_PAGES + "detail-book.html", DETAIL_URL, "PARSER_UNSUPPORTED"),  # a book page: unsupported kind
        *(Sample(_PAGES + f"detail-{kind}.html", DETAIL_URL)
          for kind in ("conference", "core", "doctoral", "journal-2026", "master", "meta", "orgn")),
        Sample(_SAMPLES + "hunnu-kcms2-detail-newspaper-2026.modelled.html", DETAIL_URL),
        Sample(_SAMPLES + "hunnu-kcms2-detail-online-first-2026.modelled.html", DETAIL_URL),
    ),
)
JOURNAL = Spec(
    name="journal",
    label="期刊页（评价信息）",
    classify=answer_problem,
    parse=lambda body, url: parse_journal(body, url, ""),
    # A journal page is bound to the journal asked for; the samples are read without one.
    samples=(
        *(Sample(_PAGES + f"journal-{kind}.html", JOURNAL_URL, "SOURCE_IDENTITY_UNCONFIRMED")
          for kind in ("core", "former", "no-metrics")),
        Sample(_PAGES + "journal-missing.html", JOURNAL_URL, "SOURCE_SCHEMA_UNSUPPORTED"),
    ),
)
AUTHOR = Spec(
    name="author",
    label="作者页（kcms2/author/detail，或旧版 knetsearch.aspx?sfield=au）",
    classify=answer_problem,
    parse=parse_author_page,
    samples=(
        Sample(_PAGES + "author-kcms2.html", AUTHOR_URL),
        Sample(_PAGES + "author-legacy.html", LEGACY_AUTHOR_URL),
        Sample(_PAGES + "author-redesigned.html", AUTHOR_URL, "PARSER_UNSUPPORTED"),
    ),
)
_NAVI_EXCERPTS = _SAMPLES + "mariozzj-knavi-yearList-papers-and-detail.excerpts.html"
NAVI_JOURNAL = Spec(
    name="navi_journal",
    label="导航的期刊页（pykm 与 time）",
    classify=answer_problem,
    parse=lambda body, _url: parse_keys(body),
    samples=(Sample(_NAVI_EXCERPTS, JOURNAL_URL, "PARSER_UNSUPPORTED"),),  # excerpts: no #pykm
)
NAVI_SEARCH = Spec(name="navi_search", label="导航的期刊检索", classify=fragment_problem, parse=parse_search)
NAVI_YEARS = Spec(
    name="navi_years",
    label="期刊的年卷期列表（yearList）",
    classify=fragment_problem,
    parse=lambda body, _url: parse_year_list(body),
    samples=(Sample(_NAVI_EXCERPTS, NAVI_HOME),),
)
NAVI_PAPERS = Spec(
    name="navi_papers",
    label="一期的目录（papers）",
    classify=fragment_problem,
    parse=lambda body, url: parse_papers(body, url, "", 0, ""),
    samples=(Sample(_NAVI_EXCERPTS, NAVI_HOME),),
)

REGISTRY: dict[str, Spec] = {
    spec.name: spec
    for spec in (GRID, FACETS, API, DETAIL, JOURNAL, AUTHOR, NAVI_JOURNAL, NAVI_SEARCH, NAVI_YEARS, NAVI_PAPERS)
}


def verdict(spec: Spec, answer: FetchResult) -> str:
    """What ``spec`` makes of a recorded answer: "data", or the code its classification or parse gives."""
    try:
        problem = spec.classify(answer)
        if problem is not None:
            return problem.code
        spec.parse(answer.text, answer.url)
    except CnkiError as exc:
        return exc.code
    return "data"
