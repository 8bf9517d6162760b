"""Concept planning, expression compilation and the grid-request rewrite (engine §3, §8, §10; site §2)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

import msgspec
import pytest

from cnki_mcp.core.errors import CnkiError
from cnki_mcp.research import query
from cnki_mcp.research.query import (
    aliases,
    feedback_channels,
    initial_channels,
    lexical_parts,
    parse_sampling_reply,
    plan_explicit,
    plan_from_sampling,
    plan_lexical,
    validate_plan,
)
from cnki_mcp.site import grid_query
from cnki_mcp.site.grid_query import (
    Condition,
    anchor_term,
    compile_expression,
    encode_form,
    grid_form,
    quote_value,
    rewrite_query_json,
    subject_group,
    template_query_json,
    title_expression,
)

SAMPLES = Path(__file__).parent / "fixtures" / "cnki-samples"


def code_of(call: Any, *args: Any, **kwargs: Any) -> str:
    with pytest.raises(CnkiError) as info:
        call(*args, **kwargs)
    return info.value.code


def T(value: str, field: str = "title", match: str = "") -> dict[str, Any]:
    node: dict[str, Any] = {"field": field, "value": value}
    if match:
        node["match"] = match
    return node


def AND(*items: Any) -> dict[str, Any]:
    return {"op": "and", "items": list(items)}


def OR(*items: Any) -> dict[str, Any]:
    return {"op": "or", "items": list(items)}


def NOT(*items: Any) -> dict[str, Any]:
    return {"op": "not", "items": list(items)}


# --- lexical planning -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "parts"),
    [
        ("初中物理分层作业", ["初中物理分层作业"]),
        ("中国中医药现代化", ["中国中医药现代化"]),
        ("C++ 内存模型", ["C++", "内存模型"]),
        ("中华人民共和国 民法典", ["中华人民共和国", "民法典"]),
        ("Wi-Fi 8", ["Wi-Fi 8"]),
        ("IEEE P802.11bn", ["IEEE P802.11bn"]),
        ("machine learning 教育", ["machine learning", "教育"]),
        ("初中物理分层作业的研究进展", ["初中物理分层作业的研究进展"]),
        ("自动驾驶、产品责任；风险分配", ["自动驾驶", "产品责任", "风险分配"]),
        ("自动驾驶，，、产品责任", ["自动驾驶", "产品责任"]),
        ("deep learning AND medical imaging", ["deep learning", "medical imaging"]),
        ("deep learning and 医学影像", ["deep learning", "医学影像"]),
        ("sandbox andromeda", ["sandbox andromeda"]),
        ("人工智能和教育与伦理", ["人工智能和教育与伦理"]),
        ("TCP/IP 协议", ["TCP/IP", "协议"]),
        ("5G-A 网络", ["5G-A", "网络"]),
        ("自动驾驶\u3000产品责任", ["自动驾驶", "产品责任"]),
        ("请帮我检索一下关于自动驾驶、产品责任？", ["自动驾驶", "产品责任"]),
        ("请 帮我 检索 自动驾驶", ["自动驾驶"]),
        ("研究自动驾驶。", ["研究自动驾驶"]),
        ("分析师行为？?。", ["分析师行为"]),
        ("自动驾驶！", ["自动驾驶！"]),
    ],
)
def test_lexical_parts_split_only_at_explicit_separators(text: str, parts: list[str]) -> None:
    assert lexical_parts(text) == parts


def test_prefix_only_query_falls_back_to_the_whole_query() -> None:
    plan = plan_lexical("  请检索  ")
    assert plan.concepts == [["请检索"]]
    assert plan.method == "lexical"


@pytest.mark.parametrize(
    "text", ["初中物理分层作业", "中国中医药现代化", "C++ 内存模型", "中华人民共和国 民法典", "Wi-Fi 8", "IEEE P802.11bn"]
)
def test_planning_keeps_words_concepts_and_versions(text: str) -> None:
    plan = plan_lexical(text)
    concepts_json = json.dumps(plan.concepts, ensure_ascii=False)
    for part in lexical_parts(text):
        assert part in concepts_json
    assert [channel.name for channel in plan.channels] == ["q1", "q2", "q3"]
    for channel in plan.channels:
        expression_json = json.dumps(channel.expression, ensure_ascii=False)
        for group in plan.concepts:
            assert json.dumps(group[0], ensure_ascii=False) in expression_json
        compile_expression(channel.expression)


def test_lexical_plan_fails_instead_of_truncating() -> None:
    assert code_of(plan_lexical, "、".join(f"概念{i}" for i in range(9))) == "INVALID_PLAN"
    assert code_of(plan_lexical, "长" * 81) == "INVALID_PLAN"
    assert len(plan_lexical("、".join(f"概念{i}" for i in range(8))).concepts) == 8
    assert plan_lexical("长" * 80).concepts == [["长" * 80]]


# --- aliases --------------------------------------------------------------------------------------


def test_wifi_aliases() -> None:
    assert aliases("Wi-Fi 8") == ["Wi-Fi 8", "WiFi8", "Wi-Fi8"]
    assert aliases("Wi-Fi 6E") == ["Wi-Fi 6E", "WiFi6E", "Wi-Fi6E"]
    assert aliases("wifi7 吞吐量") == ["wifi7 吞吐量", "Wi-Fi 7 吞吐量", "Wi-Fi7 吞吐量"]
    assert aliases("Wi Fi 6") == ["Wi Fi 6", "Wi-Fi 6", "WiFi6", "Wi-Fi6"]
    # Case-insensitive duplicates collapse to the first spelling.
    assert aliases("wi-fi 8") == ["wi-fi 8", "WiFi8", "Wi-Fi8"]


@pytest.mark.parametrize("text", ["WiFi 8月上市", "WiFi 6次", "Wi-Fi 3个", "WiFi 5年", "Wi-Fi 10分", "wifi 2时", "wifi 9日"])
def test_wifi_date_or_count_is_not_a_version(text: str) -> None:
    assert aliases(text) == [text]


def test_ieee_aliases_keep_the_surrounding_text() -> None:
    assert aliases("IEEE P802.11bn") == ["IEEE P802.11bn", "802.11bn", "IEEE 802.11bn"]
    assert aliases("802.11") == ["802.11", "IEEE 802.11", "IEEE P802.11"]
    every = aliases("IEEE P802.11bn吞吐量")
    assert len(every) == 3
    assert all("吞吐量" in alias for alias in every)
    assert aliases("基于 802.11ax 的调度") == ["基于 802.11ax 的调度", "基于 IEEE 802.11ax 的调度", "基于 IEEE P802.11ax 的调度"]


def test_aliases_of_a_term_matching_both_patterns_are_capped_at_six() -> None:
    terms = aliases("WiFi 7 P802.11be")
    assert terms == [
        "WiFi 7 P802.11be",
        "Wi-Fi 7 P802.11be",
        "WiFi7 P802.11be",
        "Wi-Fi7 P802.11be",
        "WiFi 7 802.11be",
        "WiFi 7 IEEE 802.11be",
    ]
    assert len(terms) == 6
    # Wi-Fi variants are not IEEE-expanded: no term carries both rewrites.
    assert "WiFi7 802.11be" not in terms
    assert plan_lexical("WiFi 7 P802.11be").concepts == [terms]


def test_plain_terms_have_no_aliases() -> None:
    assert aliases("  自动驾驶 ") == ["自动驾驶"]


# --- plan validation and explicit groups ----------------------------------------------------------


@pytest.mark.parametrize(
    "groups",
    [
        [["a"]] * 9,
        [["a"], []],
        [["a", "b", "c", "d", "e", "f", "g"]],
        [["a", "a", "a", "a", "a", "a", "a"]],
        [["  "]],
        [["长" * 81]],
    ],
)
def test_validate_plan_rejects(groups: list[list[str]]) -> None:
    assert code_of(validate_plan, groups) == "INVALID_PLAN"


def test_plan_whose_combinations_cannot_be_sent_is_rejected() -> None:
    six = [f"词{i}" for i in range(6)]
    assert code_of(validate_plan, [six, six[:6]]) == "INVALID_PLAN"
    assert validate_plan([six[:4], six[:4], six[:2]]) == [six[:4], six[:4], six[:2]]
    # Duplicates are removed before counting.
    assert validate_plan([six, ["a", "A", "a"], six[:5]]) == [six, ["a"], six[:5]]
    assert parse_sampling_reply(json.dumps([six, six])) is None
    # The largest plan that passes still compiles on every channel.
    for channel in plan_explicit([six[:4], six[:4], six[:2]]).channels:
        assert len(compile_expression(channel.expression)) == 32


def test_structured_plan() -> None:
    expression = AND(T("违约金"), NOT(T("王利明", "authors")))
    plan = query.plan_of(query.structured_query(expression))
    assert plan.method == "structured"
    assert plan.concepts == []
    (channel,) = plan.channels
    assert (channel.name, channel.weight, channel.expression) == ("native", 1.0, expression)
    assert code_of(query.structured_query, OR(A, NOT(B))) == "UNBOUNDED_QUERY"


def test_validate_plan_deduplicates_after_checking() -> None:
    assert validate_plan([[" 自动驾驶 ", "自动驾驶", "AI", "ai"], ["长" * 80]]) == [["自动驾驶", "AI"], ["长" * 80]]


def test_explicit_plan() -> None:
    plan = plan_explicit([["初中物理"], ["分层作业", "作业分层"]])
    assert plan.method == "explicit"
    assert plan.concepts == [["初中物理"], ["分层作业", "作业分层"]]
    assert [(c.name, c.field, c.weight) for c in plan.channels] == [
        ("q1", "subject", 1.0),
        ("q2", "title", 1.0),
        ("q3", "keywords", 1.0),
    ]
    assert plan.channels[1].expression == AND(
        {"field": "title", "value": "初中物理", "match": "phrase"},
        OR(
            {"field": "title", "value": "分层作业", "match": "phrase"},
            {"field": "title", "value": "作业分层", "match": "phrase"},
        ),
    )


def test_single_term_channel_is_a_leaf() -> None:
    (q1, _, q3) = initial_channels([["自动驾驶"]])
    assert q1.expression == {"field": "subject", "value": "自动驾驶", "match": "phrase"}
    assert q3.expression == {"field": "keywords", "value": "自动驾驶", "match": "phrase"}


def test_channels_compile_with_their_cnki_operators() -> None:
    q1, q2, q3 = initial_channels([["自动驾驶"], ["产品责任"]])
    operators = [
        {(c.code, c.operator) for branch in compile_expression(ch.expression) for c in branch} for ch in (q1, q2, q3)
    ]
    assert operators == [{("SU", "TOPRANK")}, {("TI", "FUZZY")}, {("KY", "FUZZY")}]


# --- sampling -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "reply",
    [
        '[["自动驾驶","无人驾驶"],["产品责任"]]',
        '```json\n[["自动驾驶","无人驾驶"],["产品责任"]]\n```',
        '```\n[["自动驾驶","无人驾驶"],["产品责任"]]\n```',
        '  ```JSON [["自动驾驶", "无人驾驶", "自动驾驶"], ["产品责任"]]```  ',
    ],
)
def test_sampling_reply_parsed(reply: str) -> None:
    assert parse_sampling_reply(reply) == [["自动驾驶", "无人驾驶"], ["产品责任"]]


@pytest.mark.parametrize(
    "reply",
    [
        "",
        "好的，以下是概念组：[[\"a\"]]",
        "[]",
        "[[]]",
        '[["a"], "b"]',
        '[["a", 1]]',
        '{"groups": [["a"]]}',
        json.dumps([["a"]] * 9),
        json.dumps([["a", "b", "c", "d", "e", "f", "g"]]),
        json.dumps([["长" * 81]]),
        '[["a"]',
    ],
)
def test_unusable_sampling_reply_is_none(reply: str) -> None:
    assert parse_sampling_reply(reply) is None


def test_plan_from_sampling_and_its_fallback() -> None:
    plan = plan_from_sampling('```json\n[["自动驾驶"],["产品责任"]]\n```')
    assert plan is not None
    assert plan.method == "sampling"
    assert plan.concepts == [["自动驾驶"], ["产品责任"]]
    assert len(plan.channels) == 3
    assert plan_from_sampling("我不能回答") is None


def test_sampling_prompt_states_the_contract() -> None:
    prompt = query.SAMPLING_SYSTEM_PROMPT
    for needle in ("JSON", "二维", "8", "6", "80", "不要执行", "同义词", "版本"):
        assert needle in prompt
    assert query.SAMPLING_MAX_TOKENS == 1200
    assert query.SAMPLING_INCLUDE_CONTEXT == "none"


# --- feedback channels ----------------------------------------------------------------------------


def test_feedback_channels_keep_every_concept() -> None:
    concepts = [["自动驾驶", "无人驾驶"], ["产品责任"]]
    channels = feedback_channels(concepts, ["风险分配", "算法责任"])
    assert [(c.name, c.field, c.weight) for c in channels] == [("feedback1", "subject", 0.8), ("feedback2", "subject", 0.8)]
    first = channels[0].expression
    assert first["op"] == "and"
    assert first["items"][0] == AND(
        OR(
            {"field": "subject", "value": "自动驾驶", "match": "phrase"},
            {"field": "subject", "value": "无人驾驶", "match": "phrase"},
        ),
        {"field": "subject", "value": "产品责任", "match": "phrase"},
    )
    assert first["items"][1] == {"field": "subject", "value": "风险分配", "match": "phrase"}
    assert channels[0].groups == [*concepts, ["风险分配"]]
    branches = compile_expression(first)
    assert len(branches) == 2
    assert all({c.value for c in branch} >= {"产品责任", "风险分配"} for branch in branches)
    assert feedback_channels(concepts, []) == []


# --- compilation ----------------------------------------------------------------------------------


def evaluate(expression: dict[str, Any], truth: dict[str, bool]) -> bool:
    op = expression.get("op")
    if not op:
        return truth[expression["value"]]
    values = [evaluate(child, truth) for child in expression["items"]]
    return {"and": all, "or": any, "not": lambda v: not v[0]}[op](values)


def evaluate_compiled(branches: list[list[Condition]], truth: dict[str, bool]) -> bool:
    group = subject_group(branches)
    assert [child["Logic"] for child in group["ChildItems"]] == [0] + [1] * (len(branches) - 1)

    def item_true(item: dict[str, Any]) -> bool:
        value = truth[item["Value"]]
        return not value if item["Logic"] == 2 else value

    return any(all(item_true(item) for item in child["Items"]) for child in group["ChildItems"])


A, B, C = T("A"), T("B"), T("C")


@pytest.mark.parametrize(
    "expression",
    [
        NOT(NOT(A)),
        AND(A, OR(B, NOT(C))),
        OR(AND(A, NOT(B)), C),
        AND(A, NOT(AND(B, C))),
        AND(A, NOT(OR(B, C))),
        OR(A, B, C),
        AND(A, B, NOT(NOT(C))),
    ],
)
def test_compiled_groups_match_the_truth_table(expression: dict[str, Any]) -> None:
    branches = compile_expression(expression)
    for values in itertools.product([False, True], repeat=3):
        truth = dict(zip("ABC", values))
        assert evaluate_compiled(branches, truth) == evaluate(expression, truth), truth


@pytest.mark.parametrize("expression", [OR(A, NOT(B)), NOT(A), NOT(OR(A, B)), OR(AND(A, B), NOT(C))])
def test_branch_without_positive_condition_is_unbounded(expression: dict[str, Any]) -> None:
    assert code_of(compile_expression, expression) == "UNBOUNDED_QUERY"


def test_de_morgan_turns_negated_and_into_or_of_negations() -> None:
    branches = compile_expression(AND(A, NOT(AND(B, C))))
    assert [[(c.value, c.negated) for c in b] for b in branches] == [[("A", False), ("B", True)], [("A", False), ("C", True)]]


def test_subject_group_json_shape() -> None:
    expression = AND(
        T("违约金", "title"),
        NOT(T("王利明", "authors", "exact")),
        OR(T("Wi-Fi 8", "subject"), T('say "hi"', "keywords", "exact")),
    )
    group = subject_group(compile_expression(expression))
    assert group == {
        "Key": "Subject",
        "Title": "",
        "Logic": 0,
        "Items": [],
        "ChildItems": [
            {
                "Key": "mcp",
                "Title": "",
                "Logic": 0,
                "Items": [
                    {"Key": "mcp", "Title": "title", "Logic": 0, "Field": "TI", "Operator": "FUZZY", "Value": "违约金", "Value2": "", "options": {}},
                    {"Key": "mcp", "Title": "subject", "Logic": 0, "Field": "SU", "Operator": "TOPRANK", "Value": '"Wi-Fi 8"', "Value2": "", "options": {}},
                    {"Key": "mcp", "Title": "authors", "Logic": 2, "Field": "AU", "Operator": "DEFAULT", "Value": "王利明", "Value2": "", "options": {}},
                ],
                "ChildItems": [],
            },
            {
                "Key": "mcp",
                "Title": "",
                "Logic": 1,
                "Items": [
                    {"Key": "mcp", "Title": "title", "Logic": 0, "Field": "TI", "Operator": "FUZZY", "Value": "违约金", "Value2": "", "options": {}},
                    {"Key": "mcp", "Title": "keywords", "Logic": 0, "Field": "KY", "Operator": "DEFAULT", "Value": "'say \"hi\"'", "Value2": "", "options": {}},
                    {"Key": "mcp", "Title": "authors", "Logic": 2, "Field": "AU", "Operator": "DEFAULT", "Value": "王利明", "Value2": "", "options": {}},
                ],
                "ChildItems": [],
            },
        ],
    }


def test_all_sixteen_fields_have_their_codes() -> None:
    expected = {
        "subject": "SU", "title": "TI", "keywords": "KY", "abstract": "AB", "authors": "AU", "first_author": "FI",
        "corresponding_author": "RP", "institutions": "AF", "source": "LY", "doi": "DOI", "funds": "FU",
        "fulltext": "FT", "references": "RF", "classification": "CLC", "subtitle": "ST", "title_keywords_abstract": "TKA",
    }  # fmt: skip
    assert {name: code for name, (code, _) in grid_query.FIELDS.items()} == expected
    for name, code in expected.items():
        (branch,) = compile_expression(T("x", name))
        assert branch[0].item()["Field"] == code


@pytest.mark.parametrize(
    ("value", "sent"),
    [
        ("违约金", "违约金"),
        ("C#", "C#"),
        ("1.2", "1.2"),
        ("Wi-Fi", '"Wi-Fi"'),
        ("a b", '"a b"'),
        ("a\tb", '"a\tb"'),
        ("C++", '"C++"'),
        ("x*y", '"x*y"'),
        ("(x)", '"(x)"'),
        ("TCP/IP", '"TCP/IP"'),
        ("50%", '"50%"'),
        ("a=b", '"a=b"'),
        ("it's", "\"it's\""),
        ('say "hi"', "'say \"hi\"'"),
    ],
)
def test_value_quoting(value: str, sent: str) -> None:
    assert quote_value(value) == sent


def test_value_with_both_quotes_is_unsupported() -> None:
    assert code_of(quote_value, "it's \"x\"") == "QUERY_UNSUPPORTED"
    assert code_of(compile_expression, T("it's \"x\"")) == "QUERY_UNSUPPORTED"


def test_subject_exact_is_unsupported() -> None:
    assert code_of(compile_expression, T("x", "subject", "exact")) == "QUERY_UNSUPPORTED"
    (branch,) = compile_expression(T("x", "subject", "phrase"))
    assert branch[0].operator == "TOPRANK"


@pytest.mark.parametrize(
    ("expression", "code"),
    [
        (T("x", "year"), "INVALID_CONDITION"),
        ({"value": "x"}, "INVALID_CONDITION"),
        (T("   "), "INVALID_CONDITION"),
        (T("长" * 121), "INVALID_CONDITION"),
        ({"field": "title", "value": "x", "items": [T("y")]}, "INVALID_CONDITION"),
        (T("x", "title", "fuzzy"), "INVALID_MATCH"),
        (T("x", "nope", "fuzzy"), "INVALID_CONDITION"),
        ({"op": "and", "field": "title", "items": [A, B]}, "INVALID_EXPRESSION"),
        ({"op": "or", "value": "x", "items": [A, B]}, "INVALID_EXPRESSION"),
        (NOT(A, B), "INVALID_NOT"),
        (NOT(), "INVALID_NOT"),
        (AND(A), "INVALID_OPERATOR"),
        (OR(*[T(str(i)) for i in range(13)]), "INVALID_OPERATOR"),
        ({"op": "xor", "items": [A, B]}, "INVALID_OPERATOR"),
        ({"op": "AND", "items": [A, B]}, "INVALID_OPERATOR"),
        ([A], "INVALID_EXPRESSION"),
        ({"field": "title", "value": 3}, "INVALID_EXPRESSION"),
        ({"op": "and", "items": "x"}, "INVALID_EXPRESSION"),
        ({}, "INVALID_CONDITION"),
    ],
)
def test_compile_errors(expression: Any, code: str) -> None:
    assert code_of(compile_expression, expression) == code


def test_limits_of_values_and_operands_are_inclusive() -> None:
    (branch,) = compile_expression(T("长" * 120))
    assert branch[0].value == "长" * 120
    assert len(compile_expression(OR(*[T(str(i)) for i in range(12)]))) == 12
    (branch,) = compile_expression({"field": "title", "value": " 违约金 "})
    assert branch[0].value == "违约金"


@pytest.mark.parametrize(
    "expression",
    [
        {"field": "title", "value": "违约金", "extra": "x"},
        {"op": "and", "items": [{"field": "title", "value": "违约金"}, {"fields": "keywords", "value": "调整"}]},
    ],
)
def test_unknown_keys_in_an_expression_are_refused(expression: dict[str, Any]) -> None:
    with pytest.raises(CnkiError) as caught:
        compile_expression(expression)

    assert caught.value.code == "INVALID_EXPRESSION"
    assert "unknown field" in caught.value.message


@pytest.mark.parametrize("value", ["\x00", "\u200b\u200d", " \ufeff ", "\u202e"])
def test_a_term_with_nothing_visible_is_refused_like_a_blank_one(value: str) -> None:
    with pytest.raises(CnkiError) as caught:
        compile_expression({"field": "title", "value": value})

    assert caught.value.code == "INVALID_CONDITION"


def nested(depth: int) -> dict[str, Any]:
    node: dict[str, Any] = A
    for _ in range(depth):
        node = NOT(node)
    return node


def test_depth_limit() -> None:
    assert compile_expression(nested(8))[0][0].negated is False
    assert code_of(compile_expression, nested(9)) == "QUERY_TOO_COMPLEX"


def test_a_tree_deeper_than_the_converter_can_follow_is_too_complex() -> None:
    """3,000 nested nots (6,000 JSON levels) exhaust msgspec's recursion before the depth check runs."""
    assert code_of(compile_expression, nested(3_000)) == "QUERY_TOO_COMPLEX"


def test_node_limit() -> None:
    def tree(last: int) -> dict[str, Any]:
        # 1 root + 7 × (1 + 11 leaves) + (1 + last leaves) nodes, one branch.
        groups = [AND(*[T(f"{g}-{i}") for i in range(11)]) for g in range(7)]
        return AND(*groups, AND(*[T(f"x-{i}") for i in range(last)]))

    (branch,) = compile_expression(tree(10))
    assert len(branch) == 87
    assert code_of(compile_expression, tree(11)) == "QUERY_TOO_COMPLEX"


def test_branch_limit() -> None:
    two = lambda tag: OR(T(f"{tag}1"), T(f"{tag}2"))  # noqa: E731
    assert len(compile_expression(AND(two("a"), two("b"), two("c"), two("d"), two("e")))) == 32
    assert code_of(compile_expression, AND(two("a"), two("b"), two("c"), two("d"), two("e"), two("f"))) == "QUERY_TOO_COMPLEX"
    wide = OR(*[T(f"w{i}") for i in range(12)])
    assert code_of(compile_expression, AND(wide, wide, wide)) == "QUERY_TOO_COMPLEX"
    # An OR concatenation past 32 branches fails too.
    block = AND(two("a"), two("b"), two("c"), two("d"))
    assert len(compile_expression(OR(block, block))) == 32
    assert code_of(compile_expression, OR(block, block, A)) == "QUERY_TOO_COMPLEX"
    # De Morgan: NOT of an AND of 33 would-be branches is an OR and is counted the same way.
    assert code_of(compile_expression, NOT(AND(NOT(block), NOT(block), A))) == "QUERY_TOO_COMPLEX"
    assert len(compile_expression(NOT(AND(NOT(block), NOT(A))))) == 17


def test_duplicate_literals_are_kept() -> None:
    (branch,) = compile_expression(AND(A, A))
    assert [c.value for c in branch] == ["A", "A"]


def test_anchor_term() -> None:
    assert anchor_term(AND(NOT(T("skip")), OR(T("first"), T("second")))) == "first"
    assert anchor_term(T("  only ")) == "only"
    assert anchor_term(NOT(A)) == ""


def test_title_expression() -> None:
    assert title_expression(["一篇论文"]) == {"field": "title", "value": "一篇论文", "match": "exact"}
    expression = title_expression([f"题名 {i}" for i in range(10)])
    branches = compile_expression(expression)
    assert len(branches) == 10
    assert branches[3][0].item()["Value"] == '"题名 3"'
    assert branches[3][0].item()["Operator"] == "DEFAULT"
    with pytest.raises(ValueError):
        title_expression([f"t{i}" for i in range(11)])


# --- the grid request -----------------------------------------------------------------------------


def sample_form(name: str) -> dict[str, str]:
    data = json.loads((SAMPLES / name).read_text(encoding="utf-8"))
    data = data.get("form_QueryJson_shown_parsed_but_sent_as_json_string", data)
    return {
        key: json.dumps(value, ensure_ascii=False) if key == "QueryJson" else str(value) for key, value in data.items()
    }


EXPERT = "jasminum-kns8s-brief-grid-expert-payload.json"
CAPTURED = "captured-kns8s-brief-grid-group-request-2025-06.form-only.json"


def groups_by_key(query_json: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {group["Key"]: group for group in query_json["QNode"]["QGroup"]}


def test_rewrite_replaces_subject_and_adds_the_year_range() -> None:
    form = sample_form(EXPERT)
    template = template_query_json(form)
    branches = compile_expression(AND(T("违约金"), T("王利明", "authors")))
    rewritten = rewrite_query_json(template, branches, year_from=2020, year_to=2024, page=1)
    groups = groups_by_key(rewritten)
    assert groups["Subject"] == subject_group(branches)
    assert groups["ControlGroup"]["ChildItems"] == [
        {
            "Key": ".tit-date-box",
            "Title": "发表时间",
            "Logic": 0,
            "Items": [
                {
                    "Key": ".tit-date-box",
                    "Title": "发表时间",
                    "Logic": 0,
                    "Field": "PT",
                    "Operator": 7,
                    "Value": "2020-01-01",
                    "Value2": "2024-12-31",
                    "options": {},
                }
            ],
            "ChildItems": [],
        }
    ]
    assert rewritten["SearchFrom"] == 1
    # Everything else is carried over, and the template itself is untouched.
    for key in ("Platform", "Resource", "Classid", "Products", "ExScope", "SearchType", "Rlang", "KuaKuCode"):
        assert rewritten[key] == template[key]
    assert groups_by_key(template)["ControlGroup"]["ChildItems"] == []
    assert groups_by_key(template)["Subject"]["Items"][0]["Field"] == "EXPERT"


def test_rewrite_open_ended_years_and_later_pages() -> None:
    template = template_query_json(sample_form(EXPERT))
    branches = compile_expression(A)
    only_from = rewrite_query_json(template, branches, year_from=2021, page=3)
    (date,) = groups_by_key(only_from)["ControlGroup"]["ChildItems"]
    assert (date["Items"][0]["Value"], date["Items"][0]["Value2"]) == ("2021-01-01", "")
    assert only_from["SearchFrom"] == 4
    only_to = rewrite_query_json(template, branches, year_to=2019)
    (date,) = groups_by_key(only_to)["ControlGroup"]["ChildItems"]
    assert (date["Items"][0]["Value"], date["Items"][0]["Value2"]) == ("", "2019-12-31")
    no_years = rewrite_query_json(template, branches)
    assert groups_by_key(no_years)["ControlGroup"]["ChildItems"] == []


def test_rewrite_of_the_captured_real_request() -> None:
    template = template_query_json(sample_form(CAPTURED))
    rewritten = rewrite_query_json(template, compile_expression(T("儿科学", "subject")), year_from=2024, year_to=2024)
    groups = groups_by_key(rewritten)
    assert groups["Subject"]["ChildItems"][0]["Items"][0]["Operator"] == "TOPRANK"
    assert groups["SCDBGroup"] == groups_by_key(template)["SCDBGroup"]
    # The capture had no ControlGroup; the year range still reaches the site.
    assert groups["ControlGroup"]["ChildItems"][0]["Items"][0]["Value2"] == "2024-12-31"
    assert rewritten["SearchFrom"] == 1


def test_rewrite_of_the_kns8_templates() -> None:
    for name in ("sa1utyeggs-kns8-GetGridTableHtml-payload-SU.json", "sa1utyeggs-kns8-GetGridTableHtml-payload-KY.json"):
        template = template_query_json(sample_form(name))
        rewritten = rewrite_query_json(template, compile_expression(OR(A, B)))
        assert len(groups_by_key(rewritten)["Subject"]["ChildItems"]) == 2


@pytest.mark.parametrize(
    "query_json",
    [
        {"Platform": ""},
        {"QNode": None},
        {"QNode": {"QGroup": None}},
        {"QNode": {"QGroup": [{"Key": "ControlGroup", "Items": [], "ChildItems": []}]}},
        {"QNode": {"QGroup": ["Subject"]}},
        [],
    ],
)
def test_unexpected_template_shapes(query_json: Any) -> None:
    form = {"QueryJson": json.dumps(query_json)}
    with pytest.raises(CnkiError) as info:
        rewrite_query_json(template_query_json(form), compile_expression(A))
    assert info.value.code == "QUERY_TEMPLATE_UNSUPPORTED"
    assert info.value.fatal


@pytest.mark.parametrize("form", [{"QueryJson": "{not json"}, {"pageNum": "1"}])
def test_template_without_query_json(form: dict[str, str]) -> None:
    assert code_of(template_query_json, form) == "QUERY_TEMPLATE_UNSUPPORTED"


def test_grid_form_page_one() -> None:
    template_form = sample_form(EXPERT)
    query_json = rewrite_query_json(template_query_json(template_form), compile_expression(A))
    form = grid_form(template_form, query_json, page=1, sort="")
    assert json.loads(form["QueryJson"]) == query_json
    assert form["pageNum"] == "1"
    assert form["boolSearch"] == "true"
    assert form["dstyle"] == "listmode"
    assert (form["sortField"], form["sortType"]) == ("FFD", "desc")
    assert (form["boolSortSearch"], form["sentenceSearch"]) == ("false", "false")
    assert form["pageSize"] == "50"
    assert form["CurPage"] == "1"
    assert "turnpage" not in form
    assert form["aside"] == template_form["aside"]
    assert form["productStr"] == template_form["productStr"]


@pytest.mark.parametrize(("sort", "code"), [("relevance", "FFD"), ("date_desc", "PT"), ("cited_desc", "CF"), ("downloaded_desc", "DFR")])
def test_grid_form_later_page_and_sort(sort: str, code: str) -> None:
    template_form = sample_form(CAPTURED)
    query_json = rewrite_query_json(template_query_json(template_form), compile_expression(A), page=2)
    form = grid_form(template_form, query_json, page=2, sort=sort, cursor="TOKEN+/=", page_size=20)
    assert form["sortField"] == code
    assert form["pageNum"] == "2"
    assert form["boolSearch"] == "false"
    assert form["pageSize"] == "20"
    assert "CurPage" not in form
    assert form["turnpage"] == "TOKEN+/="
    assert form["aside"] == ""
    assert json.loads(form["QueryJson"])["SearchFrom"] == 4


def test_grid_form_rules() -> None:
    minimal = {"QueryJson": json.dumps({"QNode": {"QGroup": [{"Key": "Subject"}]}}), "CurPage": "1"}
    query_json = rewrite_query_json(template_query_json(minimal), compile_expression(A))
    form = grid_form(minimal, query_json)
    assert "pageSize" not in form  # only set when the template carries it
    lower = {"queryJson": minimal["QueryJson"]}
    assert "queryJson" in grid_form(lower, query_json) and "QueryJson" not in grid_form(lower, query_json)
    assert code_of(grid_form, minimal, query_json, sort="newest") == "INVALID_SORT"
    with pytest.raises(ValueError):
        grid_form(minimal, query_json, page=2)


def test_encode_form_sorts_keys_and_uses_plus_for_spaces() -> None:
    body = encode_form({"b": "x y", "a": "主题：儿科学", "QueryJson": '{"V":"a+b"}'})
    assert body.startswith("QueryJson=")
    assert "b=x+y" in body
    assert dict(parse_qsl(body)) == {"b": "x y", "a": "主题：儿科学", "QueryJson": '{"V":"a+b"}'}
    keys = [pair.split("=")[0] for pair in body.split("&")]
    assert keys == sorted(keys)


def test_condition_is_a_msgspec_struct() -> None:
    condition = Condition("title", "x", "exact", True)
    assert msgspec.to_builtins(condition) == {"field": "title", "value": "x", "match": "exact", "negated": True}
