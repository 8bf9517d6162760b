"""The simulator's reading of professional-search expressions (tests/kns/expert.py), over HTTP: the rows
it lists equal those of the equivalent advanced-form query, and it refuses what CNKI's help rules out."""

from __future__ import annotations

from typing import Any

from tests.kns.server import KnsSimulator
from tests.test_kns_simulator import grid, leaf, qjson, row_files, total


def expert(expression: str, search_type: int = 4, years: tuple[str, str] | None = None) -> dict[str, Any]:
    """A QueryJson as the 专业检索 form writes it: one EXPERT item, SearchType 4."""
    query = qjson([], years=years)
    item = {"Key": "Expert", "Title": "", "Logic": 0, "Field": "EXPERT", "Operator": 0, "Value": expression, "Value2": ""}
    query["QNode"]["QGroup"][0] = {"Key": "Subject", "Title": "", "Logic": 0, "Items": [item], "ChildItems": []}
    query["SearchType"] = search_type
    return query


def refusal(kns: KnsSimulator, query: dict[str, Any]) -> str:
    return grid(kns, query).css("p.no-content")[0].get("value")


def test_an_expression_lists_what_the_advanced_form_lists(kns: KnsSimulator) -> None:
    advanced = qjson(
        [leaf("TI", "知识图谱"), leaf("AU", "王"), leaf("TI", "研究", logic=2)],
        [leaf("TI", "数字经济"), leaf("AU", "王"), leaf("TI", "研究", logic=2)],
    )
    query = expert("(TI % '知识图谱' OR TI % '数字经济') AND AU % '王' NOT TI % '研究'")

    assert row_files(grid(kns, query, size=50)) == row_files(grid(kns, advanced, size=50))
    assert total(grid(kns, query)) == len(kns.expected(advanced))


def test_and_or_not_share_one_precedence_left_to_right(kns: KnsSimulator) -> None:
    left_to_right = expert("TI % '知识图谱' OR TI % '数字经济' AND AU % '王'")
    bracketed = expert("(TI % '知识图谱' OR TI % '数字经济') AND AU % '王'")
    other_reading = expert("TI % '知识图谱' OR (TI % '数字经济' AND AU % '王')")

    assert kns.expected(left_to_right) == kns.expected(bracketed)
    assert kns.expected(left_to_right) != kns.expected(other_reading)


def test_literals_combine_inside_a_field(kns: KnsSimulator) -> None:
    query = expert("SU=(('知识图谱'+'数字经济')*'研究'-'综述')")
    advanced = qjson(
        [leaf("SU", "知识图谱"), leaf("SU", "研究"), leaf("SU", "综述", logic=2)],
        [leaf("SU", "数字经济"), leaf("SU", "研究"), leaf("SU", "综述", logic=2)],
    )

    assert [p.filename for p in kns.expected(query)] == [p.filename for p in kns.expected(advanced)]


def test_a_quoted_literal_is_one_token(kns: KnsSimulator) -> None:
    paper = next(p for p in kns.corpus.papers if " " in p.title)
    first, second = paper.title.split(" ", 1)
    query = expert(f"TI % '{second} {first}'")

    assert paper not in kns.expected(query)


def test_years_and_citations_compare(kns: KnsSimulator) -> None:
    between = kns.expected(expert("YE BETWEEN ('2019', '2021')"))
    cited = kns.expected(expert("CF >= '1000'"))

    assert {p.year for p in between} == {2019, 2020, 2021}
    assert len(between) == sum(2019 <= p.year <= 2021 for p in kns.corpus.papers)
    assert cited == kns.expected(expert("CF > '999'"))
    assert all(p.cited >= 1000 for p in cited)


def test_the_year_range_of_the_control_group_still_applies(kns: KnsSimulator) -> None:
    query = expert("TI % '的'", years=("2020-01-01", "2020-12-31"))

    assert {p.year for p in kns.expected(query)} == {2020}


def test_what_cnkis_help_rules_out_is_refused(kns: KnsSimulator) -> None:
    syntax = "专业检索表达式语法错误，请检查后重新检索"

    assert refusal(kns, expert("TI＝'数字经济'")) == syntax
    assert refusal(kns, expert("TI='a'AND AU='b'")) == syntax
    assert refusal(kns, expert("TI='a")) == syntax
    assert refusal(kns, expert("TI='a' AND")) == syntax
    assert refusal(kns, expert("ti='a'")) == syntax
    assert refusal(kns, expert("SN='1004-1303'")) == "专业检索表达式有误：不支持的检索字段 SN"


def test_the_expert_item_needs_the_professional_form_shape(kns: KnsSimulator) -> None:
    wrong_type = expert("TI='a'", search_type=1)
    crowded = expert("TI='a'")
    crowded["QNode"]["QGroup"][0]["Items"].append(leaf("TI", "b"))

    assert refusal(kns, wrong_type) == "查询对象结构错误"
    assert refusal(kns, crowded) == "查询对象结构错误"


def test_years_in_an_expression_can_be_refused(kns: KnsSimulator) -> None:
    kns.configure(expert_year="refused")

    assert refusal(kns, expert("SU %= '法' AND YE = '2020'")) == "专业检索表达式有误：不支持的检索字段 YE"
    assert total(grid(kns, expert("SU %= '法'"))) > 0
