"""来源类别 and named sources (research/sources.py, site/facet_query.py): the categories as the panel offers
them, the check of the narrowed total, the tools' refusals, and which expressions name their sources."""

from __future__ import annotations

from typing import Any

import pytest

from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.source_filters import CategoryPick, SourceCategories
from cnki_mcp.pages.facet_parse import FacetEntry, FacetGroup
from cnki_mcp.research.query import expert_query
from cnki_mcp.research.sources import (
    NO_TOTAL,
    categories_applied,
    category_filters,
    confirm_categories,
    from_named,
    named_sources,
)
from cnki_mcp.site.facet_query import facet_picks, names_category, source_category
from cnki_mcp.site.grid_query import CompiledQuery, compile_query
from cnki_mcp.tools import search as search_tool
from cnki_mcp.tools import structured_search
from cnki_mcp.tools._searching import check_source_categories


def panel(*entries: tuple[str, str, str, int]) -> dict[str, FacetGroup]:
    """A 来源类别 group of (field, value, name, count) entries."""
    return {"LYBSM": FacetGroup(ident="LYBSM", title="来源类别", entries=[FacetEntry(*entry) for entry in entries])}


def test_names_are_read_case_and_spaces_aside_and_aliases_mean_their_category() -> None:
    assert [source_category(n) for n in ("cssci", " 北大核心 ", "中文核心", "ei", "Wjci")] == ["CSSCI", "北大核心", "北大核心", "EI", "WJCI"]


def test_an_unknown_name_is_invalid_input_naming_the_known_ones() -> None:
    with pytest.raises(CnkiError) as caught:
        source_category("SSCI")
    assert caught.value.code == "INVALID_INPUT"
    assert "北大核心、CSSCI、CSCD、WJCI、AMI、SCI、EI" in caught.value.message
    assert caught.value.details == {"field": "source_categories", "value": "SSCI", "known": ["北大核心", "CSSCI", "CSCD", "WJCI", "AMI", "SCI", "EI"]}


def test_a_panel_name_means_a_category_when_it_is_that_name_or_that_name_and_more_words() -> None:
    assert names_category("SCI来源期刊", "SCI") and names_category("sci", "SCI")
    assert not names_category("SCIE", "SCI") and not names_category("CSSCI", "SCI")


class _Args:
    def __init__(self, names: list[str]) -> None:
        self.source_categories = names


def test_the_tools_keep_each_category_once_and_refuse_it_beside_the_same_facet_filter() -> None:
    args = _Args(["CSSCI", "cssci", "北大核心"])
    check_source_categories(args, {})
    assert args.source_categories == ["CSSCI", "北大核心"]
    with pytest.raises(CnkiError) as caught:
        check_source_categories(_Args(["CSSCI"]), {"facet_filters": {"source_category": ["LYBSM=P0209"]}})
    assert caught.value.code == "INVALID_INPUT" and caught.value.details == {"field": "source_categories"}
    assert "source_categories" in structured_search.Args.__struct_fields__ and "source_categories" in search_tool.Args.__struct_fields__


def test_the_panels_entries_give_code_and_count_whatever_field_or_name_it_uses() -> None:
    groups = panel(("LYBSM", "P0209", "CSSCI", 120), ("LYBSM2", "X9", "SCI来源期刊", 7), ("LYBSM", "P01", "北大核心", 300))

    view = categories_applied(["CSSCI", "SCI", "CSCD", "EI"], groups)

    assert view.applied == [
        CategoryPick(name="CSSCI", code="LYBSM=P0209", count=120),
        CategoryPick(name="SCI", code="LYBSM2=X9", count=7),
        CategoryPick(name="CSCD", code="LYBSM=P0210", count=0),  # not listed: sent by its known code, none there
    ]
    assert view.not_applied == ["EI"] and view.confirmed is False


def test_an_entry_of_a_known_code_under_another_name_is_that_category() -> None:
    view = categories_applied(["北大核心"], panel(("LYBSM", "P01", "北大中文核心期刊", 30)))
    assert view.applied == [CategoryPick(name="北大核心", code="LYBSM=P01", count=30)]


def test_categories_of_which_none_can_be_sent_are_refused_not_searched_unnarrowed() -> None:
    with pytest.raises(CnkiError) as caught:
        categories_applied(["SCI", "EI"], panel(("LYBSM", "P0209", "CSSCI", 120)))
    assert caught.value.code == "SOURCE_CATEGORY_ABSENT"
    assert caught.value.details == {"requested": ["SCI", "EI"], "offered": ["CSSCI"]}


def test_a_total_above_what_the_categories_hold_means_cnki_did_not_narrow() -> None:
    view = categories_applied(["CSSCI", "北大核心"], panel(("LYBSM", "P0209", "CSSCI", 120), ("LYBSM", "P01", "北大核心", 300)))
    with pytest.raises(CnkiError) as caught:
        confirm_categories(view, 421)
    assert caught.value.code == "SOURCE_CATEGORY_NOT_APPLIED" and caught.value.fatal
    confirm_categories(view, 380)  # overlapping categories: fewer than their sum
    assert view.confirmed and not view.note


def test_a_page_without_a_total_leaves_it_unconfirmed_and_says_so() -> None:
    view = SourceCategories(requested=["CSSCI"], confirmed=False, applied=[CategoryPick(name="CSSCI", code="LYBSM=P0209", count=1)])
    confirm_categories(view, None)
    assert view.confirmed is False and view.note == NO_TOTAL


def test_applied_categories_join_the_facet_filters_as_one_panel_group() -> None:
    view = SourceCategories(requested=["CSSCI", "北大核心"], confirmed=False, applied=[
        CategoryPick(name="CSSCI", code="LYBSM=P0209"), CategoryPick(name="北大核心", code="LYBSM=P01")])
    filters = category_filters({"year": ["YE=2024"]}, view)
    assert filters == {"year": ["YE=2024"], "source_category": ["LYBSM=P0209", "LYBSM=P01"]}
    assert [(p.group, p.field, p.values) for p in facet_picks(filters)] == [
        ("YE", "YE", ("2024",)), ("LYBSM", "LYBSM", ("P0209", "P01"))]
    assert category_filters({"year": ["YE=2024"]}, None) == {"year": ["YE=2024"]}


def _tree(*items: Any, op: str = "and") -> dict[str, Any]:
    return {"op": op, "items": list(items)}


TITLE = {"field": "title", "value": "数字经济"}
EXACT_A = {"field": "source", "value": "法学评论", "match": "exact"}
EXACT_B = {"field": "source", "value": "经济研究评论", "match": "exact"}


@pytest.mark.parametrize(("expression", "named"), [
    (_tree(TITLE, EXACT_A), {"法学评论"}),
    (_tree(TITLE, _tree(EXACT_A, EXACT_B, op="or")), {"法学评论", "经济研究评论"}),
    (_tree(TITLE, {"field": "source", "value": "法学评论"}), None),  # phrase: CNKI's fuzzy match is what was asked
    (_tree(TITLE, EXACT_A, op="or"), None),  # a title match needs no named source
    (_tree(TITLE, {"op": "not", "items": [EXACT_A]}), None),
])
def test_a_condition_tree_names_its_sources_only_when_every_branch_needs_one(expression: dict[str, Any], named: set[str] | None) -> None:
    assert named_sources(compile_query(expression)) == (None if named is None else frozenset(named))


@pytest.mark.parametrize(("expression", "named"), [
    ("TI='数字经济' AND LY='法学评论'", {"法学评论"}),
    ("LY='法学评论'+'经济研究评论' AND TI='x'", {"法学评论", "经济研究评论"}),
    ("(LY='法学评论' OR LY='经济研究评论') NOT TI='综述'", {"法学评论", "经济研究评论"}),
    ("LY='法学评论' AND LY='经济研究评论'", set()),  # no row can be both
    ("LY%'法学评论' AND TI='x'", None),
    ("LY='法学评论' OR TI='x'", None),
    ("TI='x' NOT LY='法学评论'", None),
])
def test_an_expert_expression_names_the_ly_sources_every_match_needs(expression: str, named: set[str] | None) -> None:
    listing = CompiledQuery(expert=expert_query(expression).canonical)
    assert named_sources(listing) == (None if named is None else frozenset(named))


def test_a_rows_source_is_compared_as_a_source_key_and_nothing_named_keeps_every_row() -> None:
    named = named_sources(compile_query(_tree(TITLE, EXACT_A)))
    assert from_named("法学评论 ", named) and not from_named("中国法学评论", named)
    assert from_named("任何来源", None)
    assert named_sources(None) is None


def test_the_instructions_name_every_source_category() -> None:
    """source_categories is explained once, in the instructions every client reads: each known name is there."""
    from cnki_mcp.site.facet_query import SOURCE_CATEGORIES
    from cnki_mcp.surface.server import instructions_text

    assert [name for name in SOURCE_CATEGORIES if name not in instructions_text()] == []
