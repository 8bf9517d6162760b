"""author_papers' pure rules: a detail page's byline read into each author's institutions
(pages/author_parse.py) and the listing's expression (research/author_papers.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cnki_mcp.core.errors import CnkiError
from cnki_mcp.pages.author_parse import affiliations, bylines, is_author_page, parse_author_page
from cnki_mcp.research.author_papers import author_code_expression, author_expression
from tests.kns import authors, pages
from tests.kns.corpus import build_corpus
from tests.kns.server import Scenario

SAMPLE = Path(__file__).parent / "fixtures" / "cnki-samples" / "mariozzj-knavi-yearList-papers-and-detail.excerpts.html"


def test_byline_excerpt() -> None:
    html = SAMPLE.read_text(encoding="utf-8").split("excerpt 3")[1]
    (line,) = bylines(html)
    assert (line.name, line.institutions) == ("张晓林", ["上海科技大学", "中国科学院文献情报中心"])
    assert affiliations(html, "张晓林") == ["上海科技大学", "中国科学院文献情报中心"]
    assert affiliations(html, "李四") is None


@pytest.mark.parametrize("markup", ["author", "orgn"])
def test_byline_of_every_simulated_author(markup: str) -> None:
    corpus = build_corpus()
    papers = [p for p in corpus.papers if p.resource == "JOURNAL" and len(p.institutions) > 1][:5]
    papers += [p for p in corpus.papers if p.resource == "JOURNAL" and len(p.institutions) == 1][:2]
    for p in papers:
        html = pages.detail_page(p, Scenario(institution_markup=markup), 1)
        assert [(b.name, b.institutions) for b in bylines(html)] == [
            (a, [p.institutions[n - 1] for n in p.author_orgs[i]]) for i, a in enumerate(p.authors)]
        assert all("/kcms2/author/detail?v=" in b.link for b in bylines(html))


def test_page_without_byline() -> None:
    with pytest.raises(CnkiError) as raised:
        bylines("<html><body><h1>题名</h1></body></html>")
    assert raised.value.code == "PARSER_UNSUPPORTED"


def test_author_expression() -> None:
    assert author_expression("王伟", []) == {"field": "authors", "value": "王伟", "match": "exact"}
    assert author_expression("王伟", ["北江大学", "东湖大学"]) == {"op": "and", "items": [
        {"field": "authors", "value": "王伟", "match": "exact"},
        {"op": "or", "items": [{"field": "institutions", "value": "北江大学", "match": "phrase"},
                               {"field": "institutions", "value": "东湖大学", "match": "phrase"}]}]}


AUTHOR_PAGES = Path(__file__).parent / "fixtures" / "pages"


def test_author_pages_of_each_generation() -> None:
    kcms2 = parse_author_page((AUTHOR_PAGES / "author-kcms2.html").read_text("utf-8"), "https://kns.cnki.net/kcms2/author/detail?v=x")
    legacy = parse_author_page((AUTHOR_PAGES / "author-legacy.html").read_text("utf-8"),
                               "https://kns.cnki.net/kcms/detail/knetsearch.aspx?sfield=au&skey=&code=000042423923")
    assert kcms2 == legacy
    assert (kcms2.name, kcms2.code, len(kcms2.institutions)) == ("高远", "000042423923", 2)
    with pytest.raises(CnkiError) as raised:
        parse_author_page((AUTHOR_PAGES / "author-redesigned.html").read_text("utf-8"), "https://kns.cnki.net/kcms2/author/detail?v=x")
    assert raised.value.code == "PARSER_UNSUPPORTED"


def test_which_links_are_author_pages() -> None:
    assert is_author_page("https://kns.cnki.net/kcms2/author/detail?v=abc&uniplatform=NZKPT")
    assert is_author_page("https://kns.cnki.net/kcms/detail/knetsearch.aspx?sfield=au&skey=王伟&code=000012345678")
    assert not is_author_page("https://kns.cnki.net/kcms/detail/knetsearch.aspx?sfield=in&skey=北江大学")
    assert not is_author_page("https://kns.cnki.net/kcms2/organ/detail?v=abc")
    assert author_code_expression("000012345678") == "AUC=000012345678"


def test_every_simulated_person_is_read_from_their_page() -> None:
    corpus = build_corpus()
    for person in list(corpus.people.values())[:20]:
        page = parse_author_page(authors.author_page(person, Scenario()), "https://kns.cnki.net/kcms2/author/detail?v=x")
        assert (page.name, page.code, sorted(page.institutions)) == (person.name, person.code, sorted(person.institutions))
