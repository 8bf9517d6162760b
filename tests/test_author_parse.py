"""author_papers' pure rules: a detail page's byline read into each author's institutions
(pages/author_parse.py) and the listing's expression (research/author_papers.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cnki_mcp.core.errors import CnkiError
from cnki_mcp.pages.author_parse import affiliations, bylines
from cnki_mcp.research.author_papers import author_expression
from tests.kns import pages
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
