"""The pure rules of related_papers: requests, answers, decoys, rendered lists, the cursor; graph evidence in ranking."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest

from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.model import Paper
from cnki_mcp.pages.relation_parse import (
    SITE_ROOT,
    Ask,
    ListLink,
    NotData,
    Signatures,
    decode_cursor,
    decoy_reason,
    encode_cursor,
    page_problem,
    read_answer,
    read_area,
    read_list_page,
    read_rendered,
    request_url,
    v_token,
)
from cnki_mcp.research.rank import evidence_for, is_eligible
from cnki_mcp.research.relations import Relations

DETAIL = "https://kns.cnki.net/kcms2/article/abstract?v=AbC-123_x&uniplatform=NZKPT"


def item(title: str, author: str = "王伟", url: str = DETAIL) -> dict:
    metadata = [{"name": "TI", "value": title}, {"name": "AU", "value": f"{author};李明;"}, {"name": "YE", "value": "2021"},
                {"name": "LY", "value": "法学研究"}]
    return {"metadata": metadata, "relations": [{"scope": "ABSTRACT", "url": url}] if url else []}


def body(total: int, items: list[dict]) -> str:
    return json.dumps({"code": 200, "message": "success", "data": {"total": total, "data": items}}, ensure_ascii=False)


def test_requests_name_the_paper_the_database_and_the_page() -> None:
    assert v_token(DETAIL) == "AbC-123_x"
    assert v_token("https://kns.cnki.net/kcms2/article/abstract?dbcode=CJFD") == ""
    url = request_url("citing", "AbC-123_x", Ask("CDFD", 2, 100))
    assert url.startswith("https://kns.cnki.net/restapi/citation-api/v1/literature/citations?")
    assert "type=CDFDREF&start=2&size=100" in url
    assert "/literature-api/v1/articles/relations/similar?v=AbC-123_x" in request_url("similar", "AbC-123_x", Ask("SIMILAR", 1, 10))


class AbroadApi:
    """The citation API of a session on the overseas site, its answer's one link relative (issue 39)."""

    def __init__(self, site: dict[str, str]) -> None:
        self.site = site

    def site_view(self) -> dict[str, str]:
        return self.site

    async def api_get(self, op: Any, url: str, context_url: str) -> str:
        return body(1, [item("违约金的司法调整", url="/kcms2/article/abstract?v=AbC-123_x")])


@pytest.mark.parametrize(
    ("site", "host"),
    [({"kind": "oversea", "host": "oversea.cnki.net"}, "oversea.cnki.net"), ({"kind": "mainland"}, "kns.cnki.net")],
)
async def test_relative_links_of_the_api_resolve_on_the_sessions_site(site: dict[str, str], host: str) -> None:
    relations = Relations(SimpleNamespace(catalog=None, store=None), AbroadApi(site), Signatures())  # type: ignore[arg-type]
    answer = await relations._ask(SimpleNamespace(), Paper(title="t"), "citing", "AbC-123_x", Ask("CJFD", 1, 100))  # type: ignore[arg-type]
    assert [entry.url for entry in answer.entries] == [f"https://{host}/kcms2/article/abstract?v=AbC-123_x"]
    assert read_answer(body(1, [item("甲", url="kcms2/article/abstract?v=1")]), "CJFD").entries[0].url.startswith(SITE_ROOT)


def test_answers_are_read_with_their_links_and_unlinked_items_kept() -> None:
    answer = read_answer(body(2, [item("违约金的司法调整"), item("Contract Law", "Smith J", url="")]), "CJFD")
    assert answer.total == 2
    linked, unlinked = answer.entries
    assert (linked.title, linked.authors, linked.year, linked.source, linked.url) == (
        "违约金的司法调整", ["王伟", "李明"], 2021, "法学研究", DETAIL)
    assert unlinked.url == "" and "Contract Law" in unlinked.text
    for bad in ("<html>", json.dumps({"code": 400, "message": "请求信息有误"}), json.dumps({"data": {"count": 1, "list": []}})):
        with pytest.raises(NotData):
            read_answer(bad, "CJFD")
    assert page_problem(read_answer(body(3, []), "CJFD"), Ask("CJFD", 1, 100), 0)
    assert page_problem(read_answer(body(1, [item("a"), item("b")]), "CJFD"), Ask("CJFD", 1, 100), 0)


def test_decoys_are_told_apart_from_data() -> None:
    source = Paper(title="违约金研究", authors=["赵六"], cited=4)
    decoy = {db: read_answer(body(1, [item("固定的记录")]), db) for db in ("CJFD", "CDFD", "CMFD")}
    assert "3 个数据库" in decoy_reason(source, "references", decoy)
    assert "自己" in decoy_reason(source, "references", {"CJFD": read_answer(body(1, [item("违约金研究", "赵六")]), "CJFD")})
    empty = {"CJFD": read_answer(body(0, []), "CJFD")}
    assert decoy_reason(source, "citing", empty, complete=False) == ""
    assert "被引次数" in decoy_reason(source, "citing", empty)
    real = {"CJFD": read_answer(body(1, [item("甲")]), "CJFD")}
    signatures = Signatures()
    assert signatures.other_paper("rec_a", "references", real) == ""
    assert signatures.other_paper("rec_a", "references", real) == ""
    assert signatures.other_paper("rec_b", "references", real) == "rec_a"


def test_rendered_lists_and_the_cursor() -> None:
    html = ('<html><body><div id="reference-list"><div class="essayBox"><div class="dbTitle">中国学术期刊网络出版总库'
            f'<b>(12)</b></div><ul><li><em>[1]</em><a href="{DETAIL}">违约金的司法调整</a>[J].王伟.法学研究.2021</li>'
            '</ul></div><div class="essayBox"><div class="dbTitle">其他文献<b>(1)</b></div><ul>'
            '<li><em>[1]</em>合同法原理[M].张三.法律出版社.2010</li></ul></div></div></body></html>')
    rendered = read_rendered(html, "references", DETAIL)
    assert rendered is not None
    (db1, count1, entries1), (db2, count2, entries2) = rendered.parts
    assert (db1, count1, entries1[0].title, entries1[0].url) == ("CJFD", 12, "违约金的司法调整", DETAIL)
    assert (db2, count2, entries2[0].url) == ("NLNK", 1, "")
    assert read_rendered("<html><body><div class='relations-area'></div></body></html>", "references", DETAIL) is None
    cursor = encode_cursor("rec_a", "citing", 50)
    assert decode_cursor(cursor) == ("rec_a", "citing", 50)
    for bad in ("abc", "rp1.!!!", encode_cursor("rec_a", "citing", 1).replace("rp1.", "rp1.x")):
        with pytest.raises(CnkiError) as caught:
            decode_cursor(bad)
        assert caught.value.code == "INVALID_CURSOR"


# The 2026 citation area (a CDP citation proxy's notes, 2026-09-19): tabs and #MapArea, the lists behind links.
AREA_2026 = (
    '<html><body><div id="refpartdiv"><h5 class="module-title">引文网络</h5><ul class="module-tab"><li>参考文献</li>'
    '<li>引证文献</li><li>二级参考文献</li></ul><div id="MapArea">{links}</div><div class="nxgp-references"></div>'
    '<div id="ref_nodata" style="display:none">暂无数据</div></div></body></html>'
)
LIST_URL = "https://kns.cnki.net/kcms/detail/frame/list.aspx?dbcode=CJFQ&filename=FXYJ202101001&RefType=1"


def test_the_2026_area_leads_to_its_list_pages_and_an_empty_or_unknown_one_is_never_a_list() -> None:
    links = ('<a href="/kcms/detail/frame/list.aspx?RefType=2">二级参考文献</a>'
             '<a class="ReferLinkOn" id="references" href="/kcms/detail/frame/list.aspx?dbcode=CJFQ&amp;'
             'filename=FXYJ202101001&amp;RefType=1">参考文献</a><a id="citations" href="/kcms/detail/frame/'
             'list.aspx?dbcode=CJFQ&amp;filename=FXYJ202101001&amp;RefType=3">引证文献(3)</a>')
    assert read_area(AREA_2026.format(links=links), "references", DETAIL) == ListLink(LIST_URL)
    assert read_area(AREA_2026.format(links=links), "citing", DETAIL) == ListLink(LIST_URL.replace("=1", "=3"))
    # An empty area (its hidden 暂无 included), a link that leads nowhere, an unknown area: nothing, never a list.
    for area in (AREA_2026.format(links=""), AREA_2026.format(links='<a class="ReferLinkOn" href="javascript:void(0)">参考文献</a>'),
                 '<html><body><a class="ReferLinkOn" href="#MapArea">参考文献</a></body></html>'):
        assert read_area(area, "references", DETAIL) is None, area
    # Up to 2025 the lists sit in the page, an explicit 暂无 is an empty list as before.
    assert read_area("<html><body><div id='reference-list'><p>暂无数据</p></div></body></html>", "references", DETAIL)


def test_the_list_page_behind_the_link_is_read_by_its_blocks_or_its_numbered_items() -> None:
    blocks = ('<html><body><div class="essayBox"><div class="dbTitle">中国学术期刊网络出版总库<b>(12)</b></div><ul>'
              f'<li><em>[1]</em><a href="{DETAIL}">违约金的司法调整</a>[J].王伟.法学研究.2021</li></ul></div></body></html>')
    rendered = read_list_page(blocks, "references", LIST_URL)
    assert rendered is not None and rendered.parts[0][:2] == ("CJFD", 12)
    numbered = ('<html><body><ul class="nav"><li>首页</li></ul><ol><li>[1] 合同法原理[M].张三.法律出版社.2010</li>'
                f'<li>[2] <a href="{DETAIL}">违约金的司法调整</a>[J].王伟.法学研究.2021</li></ol></body></html>')
    rendered = read_list_page(numbered, "references", LIST_URL)
    assert rendered is not None and [e.title for e in rendered.parts[0][2]] == ["合同法原理", "违约金的司法调整"]
    assert read_list_page("<html><body><p>暂无数据</p></body></html>", "references", LIST_URL) is None


def test_links_in_the_citation_graph_are_evidence() -> None:
    paper = Paper(record_ref="rec_x", title="知识图谱的风险防控研究", keywords=["知识图谱"])
    alone = evidence_for(paper, [["实体链接"]], year=2026)
    linked = evidence_for(paper, [["实体链接"]], year=2026, links=2)
    assert not is_eligible(alone)
    assert linked.graph_links == 2 and linked.relevance > alone.relevance
    assert is_eligible(linked)
    assert not is_eligible(evidence_for(paper, [["实体链接"]], year=2026, links=1))


def test_a_list_is_not_taken_for_a_challenge_or_a_decoy_for_its_words_or_its_length() -> None:
    from cnki_mcp.site.registry import plain_data

    words = body(1, [item("数据安全验证方法研究")])
    assert plain_data(200, "https://kns.cnki.net/restapi/citation-api/v1/literature/references", words)
    challenge = json.dumps({"code": -403, "message": "https://kns.cnki.net/verify/home?captchaType=blockPuzzle"})
    assert not plain_data(200, "https://kns.cnki.net/restapi/citation-api/v1/literature/references", challenge)
    assert not plain_data(403, "https://kns.cnki.net/restapi/x", words)
    long = {"CJFD": read_answer(body(5, [item(f"题名{n}") for n in range(5)]), "CJFD")}
    signatures = Signatures()
    assert signatures.other_paper("rec_thesis", "references", long) == ""
    assert signatures.other_paper("rec_article", "references", long) == ""  # the article drawn from the thesis
