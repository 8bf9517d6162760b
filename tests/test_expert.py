"""The professional-search reader (expert.py): valid expressions, refusals with positions, normalisation,
the canonical rendering and its round trip, structured trees written as expressions, and the request
the listing sends for an expression."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.model import Channel, Plan
from cnki_mcp.research.expert import (
    COMPARISONS,
    EXPRESSION_MAX_CHARS,
    FIELDS,
    LOGIC,
    MATCH_OPERATORS,
    MAX_DEPTH,
    NUMERIC_FIELDS,
    Clause,
    Join,
    Range,
    Word,
    WordOp,
    from_structured,
    parse,
    plan_expression,
    render,
)
from cnki_mcp.research.query import expert_query, plan_of
from cnki_mcp.site.grid_query import compile_expression, grid_form, rewrite_query_json

ISSUE_EXAMPLE = "SU=('数字经济'+'数字化转型') AND AU='张三' NOT TI='综述'"


def refusal(text: str) -> CnkiError:
    with pytest.raises(CnkiError) as caught:
        parse(text)
    return caught.value


# --- valid expressions ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        (ISSUE_EXAMPLE, ISSUE_EXAMPLE),
        ("su=数字经济 and au=张三", "SU='数字经济' AND AU='张三'"),
        ("TI %= '转基因 # 水稻'", "TI %= '转基因 # 水稻'"),
        ("TI % \"O'Brien\"", "TI % \"O'Brien\""),
        ("SU=('经济发展'+'可持续发展')*'转变'-'泡沫'", "SU=(('经济发展'+'可持续发展')*'转变'-'泡沫')"),
        ("TI='生态' and KY='生态文明' and (AU % '陈'+'王')", "TI='生态' AND KY='生态文明' AND AU % ('陈'+'王')"),
        ("YE BETWEEN ('2019','2021') AND CF>=10", "YE BETWEEN ('2019', '2021') AND CF >= '10'"),
        ("((TI='a'))", "TI='a'"),
        ("TI='a' AND (AU='b' OR AU='c')", "TI='a' AND (AU='b' OR AU='c')"),
        ("TI='a' not TI='b' Not TI='c'", "TI='a' NOT TI='b' NOT TI='c'"),
        ("TI='a'AND AU='b'", "TI='a' AND AU='b'"),
        ("DOI='10.1000/ABC-1'", "DOI='10.1000/ABC-1'"),
        ("TI=' 留白 '", "TI='留白'"),
    ],
)
def test_valid_expressions_are_written_canonically(text: str, canonical: str) -> None:
    parsed = parse(text)

    assert render(parsed.tree) == canonical


def test_the_issue_example_reads_as_documented() -> None:
    tree = parse(ISSUE_EXAMPLE).tree

    assert tree == Join(
        "NOT",
        Join("AND", Clause("SU", "=", WordOp("+", Word("数字经济"), Word("数字化转型"))), Clause("AU", "=", Word("张三"))),
        Clause("TI", "=", Word("综述")),
    )


def test_every_listed_field_code_is_accepted() -> None:
    text = " OR ".join(f"{code}='1'" for code in FIELDS)

    assert render(parse(text).tree) == text


# --- precedence: one level, left to right, a warning where readings differ ------------------------------


def test_or_mixed_with_and_reads_left_to_right_and_warns() -> None:
    parsed = parse("TI='a' OR TI='b' AND AU='c'")

    assert parsed.tree == Join("AND", Join("OR", Clause("TI", "=", Word("a")), Clause("TI", "=", Word("b"))), Clause("AU", "=", Word("c")))
    assert len(parsed.warnings) == 1
    assert "(TI='a' OR TI='b') AND AU='c'" in parsed.warnings[0]
    assert "第 1 个字符" in parsed.warnings[0]


def test_the_canonical_form_brackets_what_the_readings_disagree_on() -> None:
    parsed = parse("TI='a' AND TI='b' OR AU='c' NOT AU='d'")

    assert render(parsed.tree) == "((TI='a' AND TI='b') OR AU='c') NOT AU='d'"


def test_and_with_not_needs_no_warning() -> None:
    parsed = parse(ISSUE_EXAMPLE)

    assert parsed.warnings == []


def test_brackets_silence_the_warning() -> None:
    parsed = parse("TI='a' OR (TI='b' AND AU='c')")

    assert parsed.warnings == []


def test_plus_mixed_with_times_inside_a_field_warns() -> None:
    parsed = parse("SU='a'+'b'*'c'")

    assert parsed.tree == Clause("SU", "=", WordOp("*", WordOp("+", Word("a"), Word("b")), Word("c")))
    assert "(('a'+'b')*'c')" in parsed.warnings[0]
    assert "第 4 个字符" in parsed.warnings[0]


def test_a_warning_names_the_position_of_its_own_level() -> None:
    parsed = parse("TI='x' AND (TI='a' OR TI='b' AND AU='c')")

    assert "第 13 个字符" in parsed.warnings[0]


# --- refusals with positions ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "position", "reason"),
    [
        ("", 1, "表达式为空"),
        ("   ", 1, "表达式为空"),
        ("XX='a'", 1, "未知的检索字段 XX"),
        ("TI='a' AND ZZ='b'", 12, "未知的检索字段 ZZ"),
        ("(TI='a'", 1, "左括号没有配对"),
        ("TI='a')", 7, "多余的右括号"),
        ("TI=('a'+'b'", 4, "左括号没有配对"),
        ("()", 2, "括号里没有检索条件"),
        ("TI='a", 4, "没有配对的结束引号"),
        ("TI=“数字经济", 4, "没有配对的结束引号"),
        ("TI='a' AND", 8, "AND 后面缺少检索条件"),
        ("AND TI='a'", 1, "AND 前面缺少检索条件"),
        ("NOT TI='a'", 1, "NOT 前面缺少检索条件"),
        ("TI='a' OR OR TI='b'", 8, "OR 后面缺少检索条件"),
        ("TI='a'+", 7, "+ 后面缺少检索词"),
        ("TI=+'a'", 4, "+ 前面缺少检索词"),
        ("TI=''", 4, "检索词为空"),
        ("TI=", 4, "缺少检索词"),
        ("TI 'a'", 4, "缺少匹配运算符"),
        ("TI='a' AU='b'", 8, "缺少逻辑运算符"),
        ("TI=digital library", 12, "缺少逻辑运算符"),
        ("TI=Wi-Fi", 6, "“-”夹在检索词中间"),
        ("'数字经济'", 1, "应是检索字段"),
        ("TI>'a'", 3, "只有 YE、CF 可以用 > 比较"),
        ("YE%'2020'", 3, "YE 只能用"),
        ("YE='二〇二〇'", 4, "须为数字"),
        ("YE=('2019'+'2020')", 4, "只能是一个数字"),
        ("TI BETWEEN ('1','2')", 4, "只有 YE、CF 可以用 BETWEEN"),
        ("YE BETWEEN ('2019')", 19, "BETWEEN 的写法"),
        ("TI＝'a' AND ＸＸ='b'", 12, "未知的检索字段"),
    ],
)
def test_invalid_expressions_say_where_and_why(text: str, position: int, reason: str) -> None:
    error = refusal(text)

    assert error.code == "INVALID_EXPRESSION"
    assert error.details == {"position": position}
    assert f"第 {position} 个字符" in error.message
    assert reason in error.message


def test_a_full_width_hyphen_inside_a_word_is_named_whole() -> None:
    error = refusal("TI=COVID－19 AND AU='张三'")

    assert error.details == {"position": 9}
    assert "（COVID－19）" in error.message


def test_deep_brackets_are_refused_not_recursed_into() -> None:
    error = refusal("(" * 40 + "TI='a'" + ")" * 40)

    assert error.details == {"position": MAX_DEPTH + 1}


def test_too_many_conditions_are_refused() -> None:
    error = refusal(" OR ".join(["TI='a'"] * 201))

    assert error.details == {"position": 1 + 200 * len("TI='a' OR ")}


def test_an_expression_over_the_length_limit_is_refused() -> None:
    error = refusal("TI='" + "字" * EXPRESSION_MAX_CHARS + "'")

    assert error.details == {"position": EXPRESSION_MAX_CHARS + 1}


# --- normalisation -------------------------------------------------------------------------------------


def test_full_width_punctuation_reads_as_ascii() -> None:
    wide = "SU＝（‘数字经济’＋“数字化转型”）\u3000AND AU％＝'张三'"

    assert parse(wide).tree == parse("SU=('数字经济'+'数字化转型') AND AU%='张三'").tree


def test_full_width_characters_inside_quotes_are_kept() -> None:
    tree = parse("TI='互联网（第二版）＋'").tree

    assert tree == Clause("TI", "=", Word("互联网（第二版）＋"))


def test_each_quote_kind_may_hold_the_other() -> None:
    tree = parse("TI=“他说‘好’” OR TI='“AI+”'").tree

    assert tree == Join("OR", Clause("TI", "=", Word("他说‘好’")), Clause("TI", "=", Word("“AI+”")))


# --- the tree → expression → tree round trip -----------------------------------------------------------

_LETTERS = st.characters(codec="utf-8", categories=("L", "N", "P", "S", "Zs"))
_WORDS = (
    st.text(_LETTERS, min_size=1, max_size=8)
    .map(str.strip)
    .filter(bool)
    .filter(lambda text: not (any(c in "'‘’" for c in text) and any(c in '"“”' for c in text)))
    .map(Word)
)
_VALUES = st.recursive(_WORDS, lambda inner: st.builds(WordOp, st.sampled_from("*+-"), inner, inner), max_leaves=5)
_YEARS = st.integers(min_value=1900, max_value=2100).map(str)
_TEXT_CLAUSES = st.builds(
    Clause, st.sampled_from(sorted(set(FIELDS) - NUMERIC_FIELDS)), st.sampled_from(MATCH_OPERATORS), _VALUES
)
_NUMBER_CLAUSES = st.one_of(
    st.builds(Clause, st.sampled_from(sorted(NUMERIC_FIELDS)), st.sampled_from(("=", *COMPARISONS)), _YEARS.map(Word)),
    st.builds(Clause, st.sampled_from(sorted(NUMERIC_FIELDS)), st.just("BETWEEN"), st.builds(Range, _YEARS, _YEARS)),
)
_TREES = st.recursive(
    st.one_of(_TEXT_CLAUSES, _NUMBER_CLAUSES),
    lambda inner: st.builds(Join, st.sampled_from(LOGIC), inner, inner),
    max_leaves=10,
)
_WIDE = str.maketrans("()=+*-%,>< ", "（）＝＋＊－％，＞＜\u3000")


def widened(expression: str) -> str:
    """The expression with every piece of syntax outside quotes in its full-width form."""
    out, quote = [], ""
    for ch in expression:
        if quote and ch == quote:
            out.append("’" if quote == "'" else "”")
            quote = ""
        elif quote:
            out.append(ch)
        elif ch in "'\"":
            out.append("‘" if ch == "'" else "“")
            quote = ch
        else:
            out.append(ch.translate(_WIDE))
    return "".join(out)


@settings(max_examples=300, deadline=None)
@given(_TREES)
def test_a_tree_written_out_reads_back_the_same(tree: Clause | Join) -> None:
    assert parse(render(tree)).tree == tree


@settings(max_examples=200, deadline=None)
@given(_TREES)
def test_the_canonical_form_is_stable(tree: Clause | Join) -> None:
    text = render(tree)

    assert render(parse(text).tree) == text


@settings(max_examples=200, deadline=None)
@given(_TREES)
def test_the_full_width_form_reads_back_the_same(tree: Clause | Join) -> None:
    assert parse(widened(render(tree))).tree == tree


@settings(max_examples=200, deadline=None)
@given(_TREES)
def test_the_canonical_form_never_warns(tree: Clause | Join) -> None:
    assert parse(render(tree)).warnings == []


# --- structured_search's trees as expressions ---------------------------------------------------------


def test_a_structured_tree_keeps_its_shape() -> None:
    tree = {
        "op": "and",
        "items": [
            {"op": "or", "items": [{"field": "title", "value": "知识图谱"}, {"field": "title", "value": "数字经济"}]},
            {"field": "authors", "value": "王", "match": "exact"},
            {"op": "not", "items": [{"field": "title", "value": "研究"}]},
            {"field": "subject", "value": "法学"},
        ],
    }

    assert from_structured(tree) == "(TI % '知识图谱' OR TI % '数字经济') AND AU='王' AND SU %= '法学' NOT TI % '研究'"


def test_a_not_under_an_or_falls_back_to_the_branches_sent() -> None:
    tree = {
        "op": "and",
        "items": [
            {"field": "title", "value": "a"},
            {"op": "or", "items": [{"field": "title", "value": "b"}, {"op": "not", "items": [{"field": "title", "value": "c"}]}]},
        ],
    }

    assert from_structured(tree) == "(TI % 'a' AND TI % 'b') OR (TI % 'a' NOT TI % 'c')"


def test_subtitles_are_written_with_the_professional_code() -> None:
    assert from_structured({"field": "subtitle", "value": "引言"}) == "CO % '引言'"


def test_a_value_with_both_quote_kinds_has_no_expression() -> None:
    assert from_structured({"field": "title", "value": "“AI+”的'未来'"}) == ""


# --- the plan and the request ------------------------------------------------------------------------


def test_the_plan_carries_the_canonical_form_and_the_warnings() -> None:
    plan = plan_of(expert_query("ti=a or ti=b and au=c"))

    assert plan.method == "expert"
    assert plan.channels == [Channel(name="expert", weight=1.0, expert="(TI='a' OR TI='b') AND AU='c'")]
    assert len(plan.warnings) == 1


def test_a_canonical_form_over_the_limit_is_refused() -> None:
    text = " OR ".join(["TI=" + "字" * 40] * 74)  # 3474 characters as given, 3622 once quoted

    with pytest.raises(CnkiError) as caught:
        plan_of(expert_query(text))

    assert len(text) <= EXPRESSION_MAX_CHARS
    assert caught.value.details == {"position": 1}
    assert "写成知网格式后" in caught.value.message


def test_the_plans_expression_comes_from_the_right_place() -> None:
    structured = Plan(channels=[Channel(name="native", expression={"field": "doi", "value": "10.1/x"})], method="structured")
    lexical = Plan(channels=[Channel(name="q1", expression={"field": "subject", "value": "x"})], method="lexical")

    assert plan_expression(plan_of(expert_query("TI=a"))) == "TI='a'"
    assert plan_expression(structured) == "DOI % '10.1/x'"
    assert plan_expression(lexical) == ""
    assert plan_expression(Plan()) == ""


TEMPLATE = {
    "Platform": "",
    "Resource": "CROSSDB",
    "QNode": {"QGroup": [{"Key": "Subject", "Items": [], "ChildItems": []}, {"Key": "ControlGroup", "Items": [], "ChildItems": []}]},
    "SearchType": 1,
    "SearchFrom": 1,
}


def test_the_request_carries_the_expression_as_the_professional_form_does() -> None:
    query_json = rewrite_query_json(TEMPLATE, [], year_from=2020, year_to=2021, expert="TI='a'")
    subject, control = query_json["QNode"]["QGroup"]

    assert subject["Items"] == [
        {"Key": "Expert", "Title": "", "Logic": 0, "Field": "EXPERT", "Operator": 0, "Value": "TI='a'", "Value2": ""}
    ]
    assert subject["ChildItems"] == []
    assert query_json["SearchType"] == 4
    assert control["ChildItems"][0]["Items"][0]["Value"] == "2020-01-01"


def test_the_form_echoes_the_expression_in_aside_on_page_one_only() -> None:
    template = {"QueryJson": "{}", "aside": "主题：知网", "pageSize": "20"}
    first = grid_form(template, TEMPLATE, expert="TI='a\"b'")
    second = grid_form(template, TEMPLATE, page=2, cursor="c", expert="TI='a\"b'")

    assert first["aside"] == "(TI=&#39;a&quot;b&#39;)"
    assert second["aside"] == ""


def test_double_negation_and_negated_groups_keep_their_shape() -> None:
    tree = {
        "op": "and",
        "items": [
            {"field": "title", "value": "x"},
            {"op": "not", "items": [{"op": "not", "items": [{"field": "title", "value": "y"}]}]},
            {"op": "not", "items": [{"op": "or", "items": [{"field": "title", "value": "a"}, {"field": "title", "value": "b"}]}]},
        ],
    }

    assert from_structured(tree) == "TI % 'x' AND TI % 'y' NOT (TI % 'a' OR TI % 'b')"


_LEAF_VALUES = ("a", "b", "c", "d")
_STRUCTURED = st.recursive(
    st.sampled_from(_LEAF_VALUES).map(lambda value: {"field": "title", "value": value}),
    lambda inner: st.one_of(
        st.builds(lambda items: {"op": "and", "items": items}, st.lists(inner, min_size=2, max_size=3)),
        st.builds(lambda items: {"op": "or", "items": items}, st.lists(inner, min_size=2, max_size=3)),
        st.builds(lambda item: {"op": "not", "items": [item]}, inner),
    ),
    max_leaves=6,
)


def holds_structured(node: dict[str, Any], true: frozenset[str]) -> bool:
    if "op" not in node:
        return node["value"] in true
    results = [holds_structured(item, true) for item in node["items"]]
    if node["op"] == "not":
        return not results[0]
    return all(results) if node["op"] == "and" else any(results)


def holds_expert(node: Clause | Join, true: frozenset[str]) -> bool:
    if isinstance(node, Clause):
        assert isinstance(node.value, Word)
        return node.value.text in true
    left, right = holds_expert(node.left, true), holds_expert(node.right, true)
    if node.op == "AND":
        return left and right
    return left or right if node.op == "OR" else left and not right


@settings(max_examples=300, deadline=None)
@given(_STRUCTURED, st.sets(st.sampled_from(_LEAF_VALUES)).map(frozenset))
def test_a_structured_tree_and_its_expression_select_the_same_records(tree: dict[str, Any], true: frozenset[str]) -> None:
    try:
        compile_expression(tree)
    except CnkiError:
        assume(False)

    expert = parse(from_structured(tree)).tree

    assert holds_expert(expert, true) == holds_structured(tree, true)


def test_nesting_is_refused_one_bracket_over_the_limit() -> None:
    deepest = "(" * MAX_DEPTH + "TI='a'" + ")" * MAX_DEPTH
    assert parse(deepest).tree == parse("TI='a'").tree

    error = refusal("(" * (MAX_DEPTH + 1) + "TI='a'" + ")" * (MAX_DEPTH + 1))

    assert error.details == {"position": MAX_DEPTH + 1}
    assert f"{MAX_DEPTH} 层" in error.message


@pytest.mark.parametrize(("control", "name"), [("\x00", "U+0000"), ("\x1b", "U+001B"), ("\u202e", "U+202E"), ("\u2066", "U+2066")])
def test_control_characters_are_refused_where_they_are(control: str, name: str) -> None:
    error = refusal(f"TI='法{control}学' AND AU='张'")

    assert error.details == {"position": 6}
    assert name in error.message
