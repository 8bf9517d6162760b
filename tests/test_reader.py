"""The HTML reader's parsers (cnki_mcp.pages.reader): the nzkhtml page, the 2026 reader's JSON and its
rendered page, and the trial verdict taken from the content, never from the URL flag alone."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cnki_mcp.core.errors import CnkiError
from cnki_mcp.pages.page_state import inspect_live_page
from cnki_mcp.pages.reader import (
    DATA_PATH,
    is_reader_app,
    page_notice,
    parse_reader,
    parse_reader_data,
    reader_data_url,
    with_notice,
)

PAGES = Path(__file__).parent / "fixtures" / "pages"
READER_URL = "https://kns.cnki.net/nzkhtml/xmlRead/xml.html?fileName=X&tableName=CJFDTOTAL&dbCode=CJFD"
APP_URL = (
    "https://kns.cnki.net/reader/xml?invoice=INV&platform=NZKPT&sourcetype=nxgp&product=CAPJ&filename=STXB202204021"
    "&tablename=capjlast&type=JOURNAL&scope=readonline&cflag=html&dflag=xml&pages=&language=CHS&trial=&nonce=NON"
    "&loginType=trialRead"
)
APP_TITLE = "基于最优性原理的碳水通量耦合估算方法研究"


def page(name: str) -> str:
    return (PAGES / name).read_text(encoding="utf-8")


def data(**changes: Any) -> dict[str, Any]:
    """The JSON fixture as a dict, with top-level ``data`` keys replaced."""
    payload = json.loads(page("reader-2026-data.json"))
    payload["data"].update(changes)
    return payload


def data_text(payload: dict[str, Any]) -> str:
    return json.dumps(payload, ensure_ascii=False)


def error_of(call, *args, **kwargs) -> CnkiError:
    with pytest.raises(CnkiError) as caught:
        call(*args, **kwargs)
    return caught.value


# --------------------------------------------------------------------------------------------
# nzkhtml


def test_nzkhtml_text_sections_and_coverage() -> None:
    doc = parse_reader(page("reader-fulltext.html"), url=READER_URL, expected_title="数字平台算法治理研究")
    assert doc.title == "数字平台算法治理研究" and not doc.trial
    paragraphs = doc.text.split("\n\n")
    assert paragraphs[:3] == ["数字平台算法治理研究", "作者甲 作者乙\n某大学法学院", "摘要：本文讨论数字平台算法的治理路径， 提出分层监管框架。"]
    assert "方法段落采用混合方法研究设计，变量记为x。" in paragraphs
    assert "变量 均值" in paragraphs and paragraphs[-1] == "（完）"
    for noise in ("复制", "AI 助手", "隐藏的内容", "三、结论与讨论"):
        assert noise not in doc.text
    titles = [(s.level, s.title) for s in doc.sections]
    assert titles == [(1, "数字平台算法治理研究"), (2, "第一节"), (2, "二、研究方法"), (3, "（一）数据来源"), (1, "参考文献")]
    by_title = {s.title: doc.text[s.offset : s.offset + s.length] for s in doc.sections}
    assert by_title["第一节"] == "第一节\n\n子章节内容"
    assert by_title["二、研究方法"].endswith("变量 均值") and "数据来自某省" in by_title["二、研究方法"]
    assert by_title["参考文献"] == "参考文献\n\n[1] 某作者. 某文献[J]. 某期刊, 2020(1): 1-10.\n\n（完）"
    top = doc.sections[0]
    assert top.offset == 0 and top.offset + top.length + 2 == doc.sections[-1].offset
    assert doc.sections[-1].offset + doc.sections[-1].length == len(doc.text)
    coverage = doc.coverage
    assert coverage.container == "#paperRead" and coverage.generation == "nzkhtml"
    assert coverage.missing_catalog_headings == ["三、结论与讨论"]
    assert coverage.scope == "partial" and coverage.non_text_elements == 2
    assert coverage.extracted_characters == coverage.dom_characters == sum(1 for c in doc.text if not c.isspace())
    assert doc.provisional  # a chapter the page may still load


def test_nzkhtml_sections_tile_the_text() -> None:
    doc = parse_reader(page("reader-fulltext.html"))
    for section in doc.sections:
        assert doc.text[section.offset : section.offset + len(section.title)] == section.title
        end = section.offset + section.length
        assert end == len(doc.text) or doc.text[end : end + 2] == "\n\n"


def test_nzkhtml_complete_catalogue_is_a_full_text() -> None:
    doc = parse_reader(page("reader-fulltext.html").replace("三、结论与讨论", "（一）数据来源"))
    assert doc.coverage.scope == "full" and doc.coverage.missing_catalog_headings == []
    assert not doc.provisional and not doc.trial


def test_trial_notice_makes_a_trial() -> None:
    doc = parse_reader(page("reader-trial.html"))
    assert doc.trial and doc.coverage.scope == "trial" and doc.coverage.missing_catalog_headings == []
    assert doc.coverage.trial_evidence == ["页面显示试读提示：“试读结束，购买后阅读全文”"]
    assert not doc.provisional


@pytest.mark.parametrize(
    "url",
    [
        "https://kns.cnki.net/reader/xml?invoice=x&loginType=trialRead",
        "https://kns.cnki.net/nzkhtml/xmlRead/trialRead.html?fileName=X",
    ],
)
def test_trial_url_alone_is_no_trial(url: str) -> None:
    doc = parse_reader(page("reader-fulltext.html").replace("三、结论与讨论", "第一节"), url=url)
    assert not doc.trial
    assert doc.coverage.scope == "full" and doc.coverage.trial_evidence == []


def test_trial_url_and_text_ending_where_the_catalogue_goes_on_is_a_trial() -> None:
    html = page("reader-fulltext.html").replace("三、结论与讨论", "三、结论</div><div class='tit'>四、展望")
    doc = parse_reader(html, url="https://kns.cnki.net/nzkhtml/xmlRead/trialRead.html?fileName=X")
    assert doc.trial and doc.coverage.scope == "trial"
    assert doc.coverage.missing_catalog_headings == ["三、结论", "四、展望"]
    assert doc.coverage.trial_evidence == ["试读地址的页面的正文在目录还有 2 个条目时结束（从“三、结论”起没有正文）"]
    assert doc.provisional  # final only once the page stops growing


def test_missing_chapters_in_the_middle_are_partial_even_on_a_trial_url() -> None:
    html = (
        page("reader-fulltext.html")
        .replace('<div class="tit">第一节</div>', '<div class="tit">一、缺失的章节</div><div class="tit">第一节</div>')
        .replace("三、结论与讨论", "（一）数据来源")
    )
    doc = parse_reader(html, url="https://kns.cnki.net/nzkhtml/xmlRead/trialRead.html?fileName=X")
    assert not doc.trial and doc.coverage.scope == "partial"
    assert doc.coverage.missing_catalog_headings == ["一、缺失的章节"]


def test_reader_failures() -> None:
    assert error_of(parse_reader, page("reader-summary-only.html")).message == "正文不足，未将摘要当全文"
    assert error_of(parse_reader, page("detail-core.html")).message == "没有识别到正文容器"
    conflict = error_of(parse_reader, page("reader-fulltext.html"), expected_title="另一篇论文")
    assert conflict.code == "IDENTITY_CONFLICT" and conflict.message == "正文题名与请求不一致"


# --------------------------------------------------------------------------------------------
# the 2026 reader's rendered page


def test_2026_page_is_read_without_known_containers() -> None:
    doc = parse_reader(page("reader-2026-dom.html"), url=APP_URL, expected_title=APP_TITLE)
    assert doc.title == APP_TITLE
    blocks = doc.text.split("\n\n")
    assert blocks[:3] == [APP_TITLE, "谭深，王焓", "清华大学地球系统科学系"]
    assert "植物光合作用与蒸腾作用通过气孔耦合[1]，二者的估算常被分开处理。" in blocks
    assert "图1 GPP 的估算流程" in blocks and "Fig.1 Estimation of GPP" in blocks and "站点 年份" in blocks
    assert blocks[-1] == "[1] Fisher J B. Example reference[J]. Journal, 2008."
    for furniture in ("欢迎", "返回顶部", "目录", "字号"):
        assert furniture not in doc.text


def test_2026_page_headings_rank_like_the_catalogue_and_the_title_is_no_section() -> None:
    doc = parse_reader(page("reader-2026-dom.html"), url=APP_URL)
    assert [(s.level, s.title) for s in doc.sections] == [
        (1, "1 引言"), (1, "2 方法"), (2, "2.1 模型"), (1, "3 结论"), (1, "参考文献"),
    ]


def test_2026_page_full_text_behind_a_trial_url_is_full() -> None:
    doc = parse_reader(page("reader-2026-dom.html"), url=APP_URL)
    coverage = doc.coverage
    assert coverage.generation == "reader_dom" and coverage.scope == "full" and not doc.trial
    assert coverage.missing_catalog_headings == [] and coverage.non_text_elements == 1


def test_2026_page_is_recognised_by_its_title_without_a_url() -> None:
    doc = parse_reader(page("reader-2026-dom.html"))
    assert doc.coverage.generation == "reader_dom"


def test_2026_trial_page_with_notice_and_slider_box() -> None:
    trial = page("reader-2026-dom.html").replace(
        "<h2>3 结论</h2>\n      <p>该方法在各站点表现稳定。</p>\n      <h2>参考文献</h2>\n      "
        "<ol><li>[1] Fisher J B. Example reference[J]. Journal, 2008.</li></ol>",
        "<h2>3 结论</h2><div class='read-btn-boxXml'><p>试读结束，登录或购买后可继续阅读全文</p>"
        "<div class='slider-wrapper'><span>向右滑动，继续阅读全文</span></div></div>",
    )
    doc = parse_reader(trial, url=APP_URL)
    assert doc.trial and doc.coverage.scope == "trial" and not doc.provisional
    assert doc.coverage.missing_catalog_headings == ["3 结论"]
    assert doc.coverage.trial_evidence == [
        "页面显示试读提示：“试读结束，登录或购买后可继续阅读全文”",
        "试读地址的页面的正文在目录还有 1 个条目时结束（从“3 结论”起没有正文）",
    ]
    assert doc.text.endswith("试读结束，登录或购买后可继续阅读全文") and "向右滑动" not in doc.text
    assert inspect_live_page(trial, APP_URL).state == "ready"  # the trial's slider box is no verification


def test_reader_slider_without_trial_notice_stays_a_verification() -> None:
    slider = inspect_live_page(page("reader-slider.html"), READER_URL)
    assert slider.state == "challenge" and slider.reason == "阅读页滑动验证"


def test_page_notice() -> None:
    assert page_notice(page("reader-trial.html")) == "试读结束，购买后阅读全文"
    assert page_notice(page("reader-2026-dom.html")) == ""


# --------------------------------------------------------------------------------------------
# the 2026 reader's JSON


def test_data_text_sections_tables_figures_and_references() -> None:
    doc = parse_reader_data(page("reader-2026-data.json"), expected_title=APP_TITLE)
    blocks = doc.text.split("\n\n")
    assert blocks[:4] == [APP_TITLE, "Towards a universal model", "谭深；王焓\n清华大学地球系统科学系",
                          "摘要：本文提出一种基于最优性原理的碳水通量耦合估算方法。"]
    assert "关键词：最优性原理；碳水耦合" in blocks and "基金资助：国家自然科学基金" in blocks
    assert "植物光合作用与蒸腾作用通过气孔耦合[1]。" in blocks  # the citation mark reads as [1]
    assert "表1 站点信息\n站点 | 年份\nA | 2020" in blocks
    assert "图1 GPP 的估算流程\nFig.1 Estimation of GPP" in blocks
    assert blocks[-2:] == ["参考文献", "[1] Fisher J B. Example reference."]
    assert "SECRET" not in doc.text and "ossapi" not in doc.text


def test_data_sections_keep_the_catalogue_levels() -> None:
    doc = parse_reader_data(page("reader-2026-data.json"))
    assert [(s.level, s.title) for s in doc.sections] == [
        (1, "1 引言"), (1, "2 方法"), (2, "2.1 模型"), (1, "3 结论"), (1, "参考文献"),
    ]
    method = next(s for s in doc.sections if s.title == "2 方法")
    assert doc.text[method.offset : method.offset + method.length].endswith("Fig.1 Estimation of GPP")


def test_data_full_text_coverage() -> None:
    coverage = parse_reader_data(page("reader-2026-data.json")).coverage
    assert coverage.generation == "reader_json" and coverage.container == DATA_PATH
    assert coverage.scope == "full" and coverage.trial_evidence == []
    assert coverage.non_text_elements == 2  # a figure and a formula


@pytest.mark.parametrize(("where", "key"), [("metadata", "isTrial"), ("data", "trialRead"), ("metadata", "tryRead")])
def test_data_trial_flag(where: str, key: str) -> None:
    payload = data()
    (payload["data"]["metadata"] if where == "metadata" else payload["data"])[key] = True
    doc = parse_reader_data(data_text(payload))
    assert doc.trial and doc.coverage.scope == "trial"
    assert doc.coverage.trial_evidence == [f"阅读器数据标明为试读（{where}.{key}）"]


def test_data_trial_field_left_empty_is_no_trial() -> None:
    payload = data()
    payload["data"]["metadata"]["trial"] = ""
    assert not parse_reader_data(data_text(payload)).trial


def test_data_ending_where_the_catalogue_goes_on_is_a_trial() -> None:
    items = data()["data"]["fullText"][:2] + [
        {"type": "CATALOG", "value": {"title": "2 方法", "level": "1"}},
        {"type": "CATALOG", "value": {"title": "2.1 模型", "level": "2"}},
    ]
    doc = parse_reader_data(data_text(data(fullText=items, references=[])))
    assert doc.trial and doc.coverage.scope == "trial"
    assert doc.coverage.missing_catalog_headings == ["2 方法", "2.1 模型"]
    assert doc.coverage.trial_evidence == ["阅读器数据的正文在目录还有 2 个条目时结束（从“2 方法”起没有正文）"]
    assert [s.title for s in doc.sections] == ["1 引言"] and "2 方法" not in doc.text


def test_data_failures() -> None:
    stale = error_of(parse_reader_data, '{"code": 401, "message": "凭证无效"}')
    assert stale.code == "READER_UNSUPPORTED" and stale.message == "阅读器数据接口答复 code 401：凭证无效"
    assert stale.details == {"code": 401}
    assert error_of(parse_reader_data, "<html>登录</html>").message == "阅读器数据不是 JSON"
    assert error_of(parse_reader_data, "[1, 2]").message == "阅读器数据的结构不受支持"
    assert error_of(parse_reader_data, '{"code": 200}').message == "阅读器数据没有 data 部分"
    assert error_of(parse_reader_data, data_text(data(fullText=[]))).message == "阅读器数据没有正文"
    conflict = error_of(parse_reader_data, page("reader-2026-data.json"), expected_title="另一篇论文")
    assert conflict.code == "IDENTITY_CONFLICT"


def test_data_of_a_page_showing_a_trial_notice() -> None:
    doc = with_notice(parse_reader_data(page("reader-2026-data.json")), "试读结束")
    assert doc.trial and doc.coverage.scope == "trial"
    assert doc.coverage.trial_evidence == ["页面显示试读提示：“试读结束”"]
    assert with_notice(parse_reader_data(page("reader-2026-data.json")), "").trial is False


# --------------------------------------------------------------------------------------------
# URLs


def test_reader_app_urls() -> None:
    assert is_reader_app(APP_URL)
    assert is_reader_app("https://kns.cnki.net/reader/read?invoice=x")
    assert not is_reader_app(READER_URL)
    assert not is_reader_app("https://kns.cnki.net/kcms2/article/abstract?v=x")


def test_data_url_is_built_next_to_the_reader_from_its_query() -> None:
    url = reader_data_url(APP_URL)
    assert url.startswith("https://kns.cnki.net/ossapi/kreader-api/v1/xml/data?invoice=INV&platform=NZKPT")
    assert "&filename=STXB202204021&tablename=capjlast&type=JOURNAL" in url and "&nonce=NON" in url
    assert url.endswith("&datatype=all")


def test_data_url_keeps_a_gateway_prefix() -> None:
    url = reader_data_url("https://vpn.example.edu.cn/https/abc/reader/read?invoice=x&datatype=part")
    assert url == "https://vpn.example.edu.cn/https/abc/ossapi/kreader-api/v1/xml/data?invoice=x&datatype=all"


def test_data_url_prefers_what_the_page_asked_for() -> None:
    asked = "https://kns.cnki.net/ossapi/kreader-api/v1/xml/data?filename=F&invoice=I&idenid=D&datatype=part"
    other = "https://kns.cnki.net/ossapi/kreader-api/v1/xml/attachment?annexid=F_1.jpg"
    url = reader_data_url(APP_URL, [asked, other])
    assert url == "https://kns.cnki.net/ossapi/kreader-api/v1/xml/data?filename=F&invoice=I&idenid=D&datatype=all"
