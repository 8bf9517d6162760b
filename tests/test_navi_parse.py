"""The navi fragments read (pages/navi_parse.py) and journal_issues' pure choices (research/journal_issues.py),
on the captured excerpts in shared/cnki-samples and on the simulator's fragments."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qsl

import pytest

from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.model import IssueYear, JournalIssue
from cnki_mcp.pages import navi_parse
from cnki_mcp.research.journal_issues import IssuesAsked, find_issue, pick_journal
from tests.kns import navi, pages
from tests.kns.corpus import build_corpus
from tests.kns.server import Scenario

SAMPLE = Path(__file__).parent / "fixtures" / "cnki-samples" / "mariozzj-knavi-yearList-papers-and-detail.excerpts.html"
BASE = "https://navi.cnki.net/knavi/journals/ZGTS/papers"


def excerpt(n: int) -> str:
    text = SAMPLE.read_text(encoding="utf-8")
    return text.split(f"excerpt {n}")[1].split("excerpt")[0]


def test_year_list_excerpt() -> None:
    listed = navi_parse.parse_year_list(excerpt(1))
    assert listed.total_years == 48
    assert [y.year for y in listed.years] == [2025]
    assert [(i.issue, i.code) for i in listed.years[0].issues] == [("06", "sepBzHVYNTn...加密值..."), ("05", "...")]


def test_papers_excerpt() -> None:
    (row,) = navi_parse.parse_papers(excerpt(2), BASE, "中国图书馆学报", 2025, "06")
    assert row.section == "中国特色图书情报学"
    paper = row.paper
    assert (paper.title, paper.authors, paper.filename, paper.issue, paper.year) == (
        "论文标题文本", ["作者1", "作者2"], "ZGTS202506001", "6", 2025)
    assert paper.locator.startswith("https://kns.cnki.net/kcms2/article/abstract?v=")
    assert paper.record_ref.startswith("rec_")


def test_simulated_fragments_round_trip() -> None:
    corpus = build_corpus()
    key = "FXPL"
    want = navi.issues(corpus, key)
    listed = navi_parse.parse_year_list(navi.year_list_fragment(corpus, key, 0, 50))
    assert {y.year: [int(i.issue) for i in y.issues] for y in listed.years} == want
    year, numbers = next(iter(want.items()))
    rows = navi_parse.parse_papers(navi.papers_fragment(corpus, navi.issue_code(key, year, numbers[0]), 1, True) or "",
                                   BASE, "法学评论", year, f"{numbers[0]:02d}")
    assert [r.paper.title for r in rows] == [p.title for p in navi.toc(corpus, key, year, numbers[0])]
    assert [r.paper.pages for r in rows] == [p.pages for p in navi.toc(corpus, key, year, numbers[0])]
    form = dict(parse_qsl(navi_parse.search_form("cn", corpus.journals[key].cn)))
    (hit,) = navi_parse.parse_search(navi.search_fragment(corpus, form), "https://navi.cnki.net/knavi")
    assert (hit.name, hit.issn, hit.cn) == ("法学评论", corpus.journals[key].issn, corpus.journals[key].cn)


@pytest.mark.parametrize("parse", [
    lambda html: navi_parse.parse_year_list(html),
    lambda html: navi_parse.parse_papers(html, BASE, "刊", 2025, "01"),
    lambda html: navi_parse.parse_search(html, BASE),
    lambda html: navi_parse.parse_keys(html),
])
def test_unknown_fragment_is_no_empty_answer(parse: object) -> None:
    with pytest.raises(CnkiError) as raised:
        parse('<div class="error"><p>请求参数错误，请刷新页面后重试</p></div>')  # type: ignore[operator]
    assert raised.value.code == "PARSER_UNSUPPORTED"
    assert raised.value.details["page_kind"].startswith("navi_")


def test_said_empty_is_empty() -> None:
    assert navi_parse.parse_papers('<div><p class="no-content">暂无数据</p></div>', BASE, "刊", 2025, "01") == []
    assert navi_parse.parse_search('<p class="no-content">没有找到相关出版物</p>', BASE) == []


HITS = [
    navi_parse.JournalHit(name="法学评论", url="https://navi.cnki.net/knavi/detail?p=a", issn="1004-1303", cn="42-1090/D"),
    navi_parse.JournalHit(name="法学评论（英文版）", url="https://navi.cnki.net/knavi/detail?p=b", issn="2000-0001", cn="11-0001/D"),
]


def test_pick_journal() -> None:
    assert pick_journal(HITS, IssuesAsked(journal="法学评论")).url.endswith("p=a")
    assert pick_journal(HITS, IssuesAsked(issn="20000001")).url.endswith("p=b")
    assert pick_journal(HITS, IssuesAsked(cn="42-1090/d")).url.endswith("p=a")
    with pytest.raises(CnkiError) as missing:
        pick_journal(HITS, IssuesAsked(journal="法学"))
    assert missing.value.code == "JOURNAL_NOT_FOUND"
    twins = [HITS[0], navi_parse.JournalHit(name="法学评论", url="https://navi.cnki.net/knavi/detail?p=c")]
    with pytest.raises(CnkiError) as ambiguous:
        pick_journal(twins, IssuesAsked(journal="法学评论"))
    assert ambiguous.value.code == "JOURNAL_AMBIGUOUS"
    assert len(ambiguous.value.details["journals"]) == 2


def test_find_issue() -> None:
    years = [IssueYear(year=2025, issues=[JournalIssue(issue="06", code="c6"), JournalIssue(issue="S1", code="cs")])]
    assert find_issue(years, 2025, "6").code == "c6"
    assert find_issue(years, 2025, "No.06").code == "c6"
    assert find_issue(years, 2025, "第6期").code == "c6"
    assert find_issue(years, 2025, "cs").issue == "S1"
    for year, issue in ((2025, "07"), (2024, "06")):
        with pytest.raises(CnkiError) as raised:
            find_issue(years, year, issue)
        assert raised.value.code == "ISSUE_NOT_FOUND"


def test_former_names_on_entries_and_journal_pages() -> None:
    corpus = build_corpus()
    journal = corpus.journals["ZGFX"]
    form = dict(parse_qsl(navi_parse.search_form("journal", journal.former[-1])))
    assert form["searchType"] == "刊名(曾用刊名)"
    (hidden,) = navi_parse.parse_search(navi.search_fragment(corpus, form), "https://navi.cnki.net/knavi")
    (shown,) = navi_parse.parse_search(navi.search_fragment(corpus, form, former_shown=True), "https://navi.cnki.net/knavi")
    assert (hidden.name, hidden.former, shown.former) == (journal.name, [], list(journal.former))
    assert pick_journal([shown], IssuesAsked(journal=journal.former[-1])).name == journal.name
    for issn in ("plain", "host_unit"):
        page = pages.journal_page(journal, Scenario(journal_issn=issn), [])
        assert navi_parse.parse_keys(page).former == list(journal.former)


def test_journal_not_found_offers_the_closest_names() -> None:
    with pytest.raises(CnkiError) as missing:
        pick_journal([*HITS, navi_parse.JournalHit(name="经济研究", url="https://navi.cnki.net/knavi/detail?p=d")],
                     IssuesAsked(journal="法学评伦"))
    assert missing.value.code == "JOURNAL_NOT_FOUND"
    assert missing.value.details["listed"][:2] == ["法学评论", "法学评论（英文版）"]
    assert "法学评论" in missing.value.message
