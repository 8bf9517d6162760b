"""Normalisation keys (spec/engine.md §0, site.md §4.6)."""

from __future__ import annotations

import pytest

from cnki_mcp.core.text import (
    clean,
    date_numbers,
    doi_key,
    has_han,
    is_han,
    normalize,
    source_key,
    strip_source_tail,
    title_key,
    trim,
    unique_strings,
)


def test_normalize_lowercases_and_collapses_go_whitespace() -> None:
    assert normalize("  Deep\u3000Learning\tFOR\n C++ ") == "deep learning for c++"
    assert normalize("a\xa0\u2003b") == "a b"
    # U+001F is not whitespace for Go's strings.Fields, so it survives.
    assert normalize("a\x1fb") == "a\x1fb"


def test_trim_and_clean_keep_case() -> None:
    assert trim("\u3000 Ab c\xa0") == "Ab c"
    assert clean(" A \n\n B ") == "A B"


@pytest.mark.parametrize(
    ("left", "right"),
    [
        ("研究——以上海为例", "研究 —— 以上海为例"),
        ("合同法：原理与案例", "合同法 ： 原理与案例"),
        ("《民法典》的解释", "《 民法典 》 的解释"),
        ("What? Why!", "what ?why !"),
        ("A（B）C", "a （ b ） c"),
    ],
)
def test_title_key_ignores_spaces_around_punctuation(left: str, right: str) -> None:
    assert title_key(left) == title_key(right)


@pytest.mark.parametrize(("left", "right"), [("C++", "C#"), ("A B", "AB"), ("1.2", "12"), ("a-b", "a - b")])
def test_title_key_keeps_meaningful_distinctions(left: str, right: str) -> None:
    assert title_key(left) != title_key(right)


def test_source_key() -> None:
    assert source_key("  法学评论 . 。") == "法学评论"
    assert source_key("某大学学报（社会科学版）") == source_key("某大学学报(社会科学版)")
    assert source_key("Law  Review.") == "law review"
    assert strip_source_tail("计算机工程与应用 .") == "计算机工程与应用"


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        (" https://doi.org/10.1000/ABC ", "10.1000/abc"),
        ("http://doi.org/10.1/x", "10.1/x"),
        ("DOI:10.1/x", "10.1/x"),
        ("https://doi.org/doi:10.1/x", "10.1/x"),
        ("doi:https://doi.org/10.1/x", "https://doi.org/10.1/x"),
        ("10.13287/j.1001-9332.2000.0212", "10.13287/j.1001-9332.2000.0212"),
    ],
)
def test_doi_key_removes_each_prefix_once_in_order(raw: str, key: str) -> None:
    assert doi_key(raw) == key


def test_unique_strings_keeps_first_spelling_and_order() -> None:
    assert unique_strings([" Zhang San", "", "  ", "zhang  san", "李四", "ZHANG SAN", "王五 "]) == [
        "Zhang San",
        "李四",
        "王五",
    ]


def test_han() -> None:
    assert is_han("中") and is_han("々") and is_han("〇") and is_han("\U00020000")
    assert not is_han("a") and not is_han("，") and not is_han("ア") and not is_han("한")
    assert has_han("C++ 内存模型") and not has_han("IEEE P802.11bn")


@pytest.mark.parametrize(
    ("text", "parts"),
    [
        ("2024-03-05", [2024, 3, 5]), ("2024/3/5", [2024, 3, 5]), ("2024-03", [2024, 3]), ("2024", [2024]),
        ("2024年3月5日", [2024, 3, 5]), ("2024年3月", [2024, 3]), ("2024年", [2024]), ("2024-03-05 10:12", [2024, 3, 5]),
        ("2024.3", [2024, 3]), ("2024-02-29", [2024, 2, 29]), ("2023-02-29", [2023, 2]), ("2024-00-01", [2024]),
        ("20240305", []), ("2024-3-5-6", []), ("约2024", []), ("", []),
    ],
)
def test_date_numbers_reads_every_cnki_date_form(text: str, parts: list[int]) -> None:
    assert date_numbers(text) == parts
