"""search_facets' pure parts: the panel parser, the facet request language, the chart, the year trend,
the facet reading over a stand-in site, and the store's facet cache."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import msgspec
import pytest
from PIL import Image

from cnki_mcp.core.clock import utc_now
from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.model import FacetRecord, FacetValue
from cnki_mcp.pages.facet_parse import FacetEntry, FacetGroup, parse_facet_panel
from cnki_mcp.pages.parse import GridPage
from cnki_mcp.research import chart
from cnki_mcp.research.facets import _FOLDED, _NOT_GIVEN, facet_key, read_facets, trend_sentence
from cnki_mcp.site.facet_query import (
    FacetPick,
    facet_picks,
    group_form,
    group_url,
    read_code,
    scdb_group,
    with_facets,
)
from cnki_mcp.site.grid_query import GridQuery, compile_expression
from cnki_mcp.store.library import Store

SAMPLES = Path(__file__).parent / "fixtures" / "cnki-samples"


def _li(value: str, text: str, count: str, style: str = "") -> str:
    return f'<li{style}><input type="checkbox" value="{value}" text="{text}"> <a>{text}</a> <span>{count}</span></li>'


# --- the panel parser ------------------------------------------------------------------------------


def test_the_captured_panel_reads_into_groups_with_codes_names_and_counts() -> None:
    sample = SAMPLES / "azazo1-group-facets-fragment.trimmed.html"

    groups = parse_facet_panel(sample.read_text(encoding="utf-8"))

    assert list(groups) == ["ZYZT|||CYZT", "CCL"]
    assert groups["ZYZT|||CYZT"].title == "主题"
    assert groups["ZYZT|||CYZT"].entries == [FacetEntry(field="ZYZT", value="Android", name="Android", count=14100, approximate=True)]
    assert groups["CCL"].entries == [FacetEntry(field="CCL", value="I140", name="自动化技术", count=8464)]


def test_hidden_entries_titles_and_comma_counts_are_entries_too() -> None:
    html = (
        '<div id="divGroup"><dl groupid="AFC"><dt class="tit"><b>机构</b></dt><dd field="AFC" tit="机构"><ul>'
        + _li("A1", "甲大学", "(1,234)")
        + '<li style="display:none"><input type="checkbox" value="A2" title="乙大学"> <span>（12）</span></li>'
        + "</ul></dd></dl></div>"
    )

    (group,) = parse_facet_panel(html).values()

    assert [(e.value, e.name, e.count) for e in group.entries] == [("A1", "甲大学", 1234), ("A2", "乙大学", 12)]
    assert not group.folded


def test_a_group_without_entries_is_folded_and_an_empty_panel_has_no_groups() -> None:
    folded = parse_facet_panel('<div id="divGroup"><dl groupid="FUC" class="is-up-fold"><dt><b>基金</b></dt><dd field="FUC"></dd></dl></div>')

    assert folded["FUC"].folded and folded["FUC"].entries == []
    assert parse_facet_panel('<div id="divGroup"></div>') == {}


@pytest.mark.parametrize(
    ("html", "words"),
    [
        ('<div class="group-panel-v2"><ul><li>年度</li></ul></div>', "没有 dl[groupid]"),
        ("", "没有 dl[groupid]"),
        ('<div id="divGroup"><dl groupid="YE"><dd field="YE"><ul><li><input type="checkbox" value="2024" text="2024"></li></ul></dd></dl></div>', "条目结构"),
        ('<div id="divGroup"><dl groupid="YE"><dd field="YE"><ul><li><a>2024</a><span>(3)</span></li></ul></dd></dl></div>', "条目结构"),
    ],
)
def test_a_panel_of_an_unknown_shape_is_parser_unsupported(html: str, words: str) -> None:
    with pytest.raises(CnkiError) as caught:
        parse_facet_panel(html)

    assert caught.value.code == "PARSER_UNSUPPORTED"
    assert words in caught.value.message


# --- the request language ----------------------------------------------------------------------------


def test_codes_name_their_field_and_a_bare_value_means_the_first_field() -> None:
    assert read_code("topic", "CYZT=儿科学") == ("CYZT", "儿科学")
    assert read_code("topic", "儿科学") == ("ZYZT", "儿科学")
    assert read_code("source", "QK=FXYJ") == ("QK", "FXYJ")
    assert read_code("year", "YE=2024") == ("YE", "2024")


@pytest.mark.parametrize(
    ("filters", "code"),
    [
        ({"year": ["CCL=I140"]}, "INVALID_FACET_FILTER"),
        ({"year": []}, "INVALID_FACET_FILTER"),
        ({"year": [f"YE={y}" for y in range(1990, 2011)]}, "INVALID_FACET_FILTER"),
        ({"year": ["YE="]}, "INVALID_FACET_FILTER"),
        ({"colour": ["x"]}, "INVALID_FACET"),
    ],
)
def test_filters_that_cannot_narrow_a_listing_are_refused(filters: dict[str, list[str]], code: str) -> None:
    with pytest.raises(CnkiError) as caught:
        facet_picks(filters)

    assert caught.value.code == code


def test_picks_of_one_facet_are_ored_and_facets_anded_as_the_captured_request_sends_them() -> None:
    picks = facet_picks({"topic": ["儿科学", "CYZT=新生儿"], "year": ["YE=2024", "YE=2023", "YE=2024"]})
    group = scdb_group(picks)
    captured = json.loads((SAMPLES / "captured-kns8s-brief-grid-group-request-2025-06.form-only.json").read_text(encoding="utf-8"))

    assert picks == (
        FacetPick(group="YE", field="YE", values=("2024", "2023")),
        FacetPick(group="ZYZT|||CYZT", field="ZYZT", values=("儿科学",)),
        FacetPick(group="ZYZT|||CYZT", field="CYZT", values=("新生儿",)),
    )
    assert [c["Key"] for c in group["ChildItems"]] == ["YE", "ZYZT|||CYZT"]
    assert [(i["Field"], i["Value"], i["Logic"]) for i in group["ChildItems"][1]["Items"]] == [("ZYZT", "儿科学", 1), ("CYZT", "新生儿", 1)]
    sent = captured["form_QueryJson_shown_parsed_but_sent_as_json_string"]["QueryJson"]["QNode"]["QGroup"][1]
    assert scdb_group(facet_picks({"topic": ["儿科学"]})) == sent


def test_with_facets_appends_one_scdb_group_and_asks_page_1_as_the_panel_does() -> None:
    query_json: dict[str, Any] = {"QNode": {"QGroup": [{"Key": "Subject"}, {"Key": "SCDBGroup", "ChildItems": []}]}, "SearchFrom": 1}
    picks = facet_picks({"year": ["2024"]})

    narrowed = with_facets(query_json, picks)

    assert [g["Key"] for g in narrowed["QNode"]["QGroup"]] == ["Subject", "SCDBGroup"]
    assert narrowed["QNode"]["QGroup"][1] == scdb_group(picks)
    assert narrowed["SearchFrom"] == 2
    assert with_facets({**query_json, "SearchFrom": 4}, picks)["SearchFrom"] == 4
    assert with_facets(query_json, ()) == query_json and query_json["SearchFrom"] == 1


def test_the_panel_is_asked_beside_the_grid_with_the_listings_query() -> None:
    form = group_form({"aside": "（主题：儿科学）", "pageNum": "1"}, {"QNode": {"QGroup": []}}, ["YE", "CCL"])

    assert group_url("https://kns.cnki.net/kns8s/brief/grid") == "https://kns.cnki.net/kns8s/group/result"
    assert group_url("https://vpn.example.edu/https/77726476/kns8s/brief/grid") == "https://vpn.example.edu/https/77726476/kns8s/group/result"
    assert form == {"queryJson": '{"QNode":{"QGroup":[]}}', "groupIds": "YE,CCL", "aside": "（主题：儿科学）",
                    "subject": "", "language": "", "uniplatform": ""}
    with pytest.raises(CnkiError) as caught:
        group_url("https://kns.cnki.net/kns8s/brief/senquery")
    assert caught.value.code == "QUERY_TEMPLATE_UNSUPPORTED"


def test_facet_picks_are_part_of_a_listings_key() -> None:
    plain = GridQuery(compile_expression({"field": "title", "value": "的"}))
    narrowed = msgspec.structs.replace(plain, facets=facet_picks({"year": ["2024"]}))

    assert facet_key(plain) != facet_key(narrowed)
    assert facet_key(plain) == facet_key(msgspec.structs.replace(plain, sort="date_desc"))


# --- the chart -----------------------------------------------------------------------------------------

FACETS = {
    "year": [FacetValue(value=str(y), code=f"YE={y}", count=c) for y, c in ((2022, 3), (2023, 9), (2024, 14))],
    "source": [FacetValue(value=f"期刊{n}号很长很长很长很长很长的名字", code=f"WXLY={n}", count=20 - n) for n in range(12)],
}


def test_without_a_cjk_font_bars_are_numbered_and_names_stay_in_the_table() -> None:
    rows = chart.chart_rows(FACETS, 10, cjk=False)

    assert [(r.facet, r.label, r.count) for r in rows[:3]] == [("year", "2022", 3), ("year", "2023", 9), ("year", "2024", 14)]
    assert [r.label for r in rows[3:]] == [f"{n}." for n in range(1, 11)]
    assert [r.value for r in rows[3:]] == [v.value for v in FACETS["source"][:10]]


def test_with_a_cjk_font_names_are_drawn_shortened() -> None:
    rows = chart.chart_rows(FACETS, 10, cjk=True)

    assert rows[3].label == "期刊0号很长很长很长很长很长的…" and len(rows[3].label) == chart.LABEL_CHARS
    assert rows[3].value == "期刊0号很长很长很长很长很长的名字"


def test_the_chart_renders_without_any_cjk_font() -> None:
    drawn = chart.render(FACETS, 10, "")
    image = Image.open(io.BytesIO(drawn.png))

    assert image.format == "PNG"
    assert image.size == (drawn.width, drawn.height) == (chart.WIDTH, drawn.height)
    assert sum(image.convert("L").histogram()[:200]) > 2000
    assert drawn.font == "" and len(drawn.table) == 13


def test_a_font_override_that_is_not_there_is_said_and_one_that_is_there_is_used(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(chart.FONT_ENV, str(tmp_path / "missing.ttf"))
    missing = chart.find_cjk_font()
    real = tmp_path / "mine.ttf"
    real.write_bytes(b"not really a font")
    monkeypatch.setenv(chart.FONT_ENV, str(real))

    assert missing[0] == "" and "CNKI_CHART_FONT 指向的字体文件不存在" in missing[1]
    assert chart.find_cjk_font() == (str(real), "")


def test_no_font_on_the_machine_is_said(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(chart.FONT_ENV, raising=False)
    monkeypatch.setattr(chart, "_known_paths", list)
    monkeypatch.setattr(chart, "_fc_list", list)
    chart._find_font.cache_clear()
    try:
        font, warning = chart.find_cjk_font()
    finally:
        chart._find_font.cache_clear()

    assert font == ""
    assert "本机没有找到中文字体" in warning and "chart_table" in warning


# --- the year trend ------------------------------------------------------------------------------------


def _years(*pairs: tuple[int, int]) -> list[FacetValue]:
    return [FacetValue(value=str(y), code=f"YE={y}", count=c) for y, c in pairs]


def test_the_trend_sentence_says_from_what_to_what_and_the_peak() -> None:
    growth = _years(*((y, y - 2000) for y in range(2005, 2025)))

    assert trend_sentence(growth) == "2015–2024 年发文量由 15 篇变为 24 篇（增长 60%），最多的是 2024 年（24 篇）。"
    assert trend_sentence(_years((2020, 10), (2021, 30), (2022, 5))) == (
        "2020–2022 年发文量由 10 篇变为 5 篇（下降 50%），最多的是 2021 年（30 篇）。"
    )
    assert trend_sentence(_years((2020, 0), (2021, 4))) == "2020–2021 年发文量由 0 篇变为 4 篇，最多的是 2021 年（4 篇）。"
    assert trend_sentence(_years((2021, 4))) == "2021 年 4 篇。"
    assert trend_sentence([]) == ""


# --- reading facets over a stand-in site -----------------------------------------------------------------


class _Op:
    def __init__(self) -> None:
        self.stages: list[str] = []

    def stage(self, name: str, progress: dict[str, Any] | None = None) -> None:
        self.stages.append(name)


class _Site:
    def __init__(self, total: int, answers: list[dict[str, FacetGroup]]) -> None:
        self.total = total
        self.answers = answers
        self.asked: list[list[str]] = []

    async def grid(self, op: Any, query: GridQuery, page: int) -> AsyncIterator[GridPage]:
        yield GridPage(rows=[], total=self.total, exhausted=self.total == 0, zero="stated" if self.total == 0 else "")

    async def facet_panel(self, op: Any, query: GridQuery, idents: list[str]) -> dict[str, FacetGroup]:
        self.asked.append(idents)
        return self.answers.pop(0)


def _group(ident: str, field: str, *entries: tuple[str, int]) -> FacetGroup:
    return FacetGroup(ident=ident, title="", entries=[FacetEntry(field=field, value=v, name=v, count=c) for v, c in entries],
                      folded=not entries)


QUERY = GridQuery(compile_expression({"field": "title", "value": "的"}))


def test_a_folded_group_is_asked_alone_and_one_still_empty_is_named() -> None:
    site = _Site(40, [
        {"YE": _group("YE", "YE", ("2024", 5), ("2023", 7)), "FUC": _group("FUC", "FUC"), "QK": _group("QK", "QK", ("FXYJ", 9))},
        {"FUC": _group("FUC", "FUC")},
        {},
    ])

    record = asyncio.run(read_facets(_Op(), site, QUERY, ["year", "fund", "source", "author"]))  # type: ignore[arg-type]

    assert site.asked == [["YE", "FUC", "WXLY", "AUC|||HWZZ"], ["FUC"], ["AUC|||HWZZ"]]
    assert [(v.value, v.code, v.count) for v in record.facets["year"]] == [("2023", "YE=2023", 7), ("2024", "YE=2024", 5)]
    assert [v.code for v in record.facets["source"]] == ["QK=FXYJ"]
    assert record.facets["fund"] == [] and record.facets["author"] == []
    assert record.notes == {"fund": _FOLDED, "author": _NOT_GIVEN}
    assert record.total == 40


def test_a_real_zero_asks_no_panel() -> None:
    site = _Site(0, [])

    record = asyncio.run(read_facets(_Op(), site, QUERY, ["year", "topic"]))  # type: ignore[arg-type]

    assert site.asked == []
    assert record.total == 0 and record.facets == {"year": [], "topic": []} and record.notes == {}


# --- the store's cache -------------------------------------------------------------------------------------


def test_a_facet_answer_is_reused_for_ten_minutes(tmp_path: Path) -> None:
    store = Store.open(tmp_path)
    now = utc_now()
    store.put_facets(FacetRecord(key="k", observed_at=now.isoformat().replace("+00:00", "Z"), total=3))

    assert store.cached_facets("k", now=now + timedelta(minutes=9)) is not None
    assert store.cached_facets("k", now=now + timedelta(minutes=11)) is None
    assert store.cached_facets("k", 86400, now + timedelta(hours=23)) is not None
    assert store.cached_facets("other", now=now) is None
