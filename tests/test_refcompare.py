"""refcompare and refcheck's pure parts: titles, names, sources and fields of an entry against a CNKI record."""

from __future__ import annotations

import pytest

from cnki_mcp.core.model import Paper
from cnki_mcp.core.refcheck_model import FieldDifference, ParsedReference
from cnki_mcp.references.refcheck import corrected_text, not_found_message, related, search_phrase
from cnki_mcp.references.refcompare import (
    PARTIAL,
    SAME,
    TRANSLATED,
    choose,
    differences,
    name_matches,
    not_compared,
    source_agrees,
    title_relation,
)

RECORD = Paper(
    record_ref="rec_a",
    title="数字经济的影响机制研究：基于省级面板数据的分析",
    authors=["王利明", "陈晓红", "欧阳修"],
    source="经济研究评论",
    year=2020,
    volume="40",
    issue="5",
    pages="101-109",
    doi="10.13840/j.cnki.jjyj.2020.05.001",
    document_type="期刊",
)


@pytest.mark.parametrize(
    ("given", "relation"),
    [
        ("数字经济的影响机制研究：基于省级面板数据的分析", SAME),
        ("数字经济的影响机制研究:基于省级面板数据的分析", SAME),
        ("《数字经济的影响机制研究——基于省级面板数据的分析》", SAME),
        ("數字經濟的影響機制研究：基於省級面板數據的分析", SAME),
        ("数字经济的影响机制研究", PARTIAL),
        ("數字經濟的影響機制研究", PARTIAL),
        ("Mechanisms of the digital economy", TRANSLATED),
        ("数字经济", ""),
        ("绿色金融的影响机制研究", ""),
    ],
)
def test_title_relation(given: str, relation: str) -> None:
    assert title_relation(given, RECORD.title) == relation


@pytest.mark.parametrize(
    ("given", "record", "agrees"),
    [
        ("王利明", "王利明", True),
        ("王利明", "王立明", False),
        ("Wang Liming", "王利明", True),
        ("WANG Li-ming", "王利明", True),
        ("Liming Wang", "王利明", True),
        ("Wang L M", "王利明", True),
        ("Wang, L.", "王利明", True),
        ("L. Wang", "王利明", True),
        ("Li Ming", "王利明", False),
        ("Ouyang Xiu", "欧阳修", True),
        ("Zeng Hao", "曾浩", True),
        ("Smith J", "Smith John", True),
        ("Smith, John", "John Smith", True),
        ("Smith K", "Smith John", False),
        ("王利明", "Wang Liming", False),
    ],
)
def test_name_matches(given: str, record: str, agrees: bool) -> None:
    assert name_matches(given, record) is agrees


@pytest.mark.parametrize(
    ("given", "record", "agrees"),
    [
        ("经济研究评论", "经济研究评论", True),
        ("經濟研究評論", "经济研究评论", True),
        ("中国工业经济", "中国工业经济杂志", True),
        ("法学评论", "经济研究评论", False),
        ("J Inf Sci", "Journal of Information Science", True),
        ("Nature", "Journal of Information Science", False),
    ],
)
def test_source_agrees(given: str, record: str, agrees: bool) -> None:
    assert source_agrees(given, record) is agrees


def entry(**fields: object) -> ParsedReference:
    base: dict[str, object] = {
        "authors": ["王利明", "陈晓红", "欧阳修"], "title": RECORD.title, "type_code": "J", "source": "经济研究评论",
        "year": 2020, "volume": "40", "issue": "5", "pages": "101-109",
    }
    return ParsedReference(**(base | fields))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("parsed", "relation", "found"),
    [
        (entry(), SAME, []),
        (entry(pages="101–9"), SAME, []),
        (entry(issue="05", volume=""), SAME, []),
        (entry(authors=["王利明", "陈晓红"], et_al=True), SAME, []),
        (entry(authors=["Wang L", "Chen X H", "Ouyang X"]), SAME, []),
        (entry(doi="https://doi.org/10.13840/J.CNKI.JJYJ.2020.05.001"), SAME, []),
        (entry(year=2019), SAME, [FieldDifference("year", "2019", "2020")]),
        (entry(pages="101-119"), SAME, [FieldDifference("pages", "101-119", "101-109")]),
        (entry(pages="11-19"), SAME, [FieldDifference("pages", "11-19", "101-109")]),
        (entry(authors=["陈晓红", "王利明", "欧阳修"]), SAME, [FieldDifference("authors", "陈晓红, 王利明, 欧阳修", "王利明, 陈晓红, 欧阳修")]),
        (entry(authors=["王利明", "陈晓红"]), SAME, [FieldDifference("authors", "王利明, 陈晓红", "王利明, 陈晓红, 欧阳修")]),
        (entry(title="数字经济的影响机制研究"), PARTIAL, [FieldDifference("title", "数字经济的影响机制研究", RECORD.title)]),
        (entry(source="法学评论"), SAME, [FieldDifference("source", "法学评论", "经济研究评论")]),
        (entry(source="Economic Research Review"), SAME, []),
        (entry(title="Mechanisms", source="Economic Review"), TRANSLATED, []),
        (entry(volume="41", issue="6"), SAME, [FieldDifference("volume", "41", "40"), FieldDifference("issue", "6", "5")]),
        (entry(doi="10.1000/other"), SAME, [FieldDifference("doi", "10.1000/other", RECORD.doi)]),
        (entry(year=2019, pages="1-9"), SAME, [FieldDifference("year", "2019", "2020"), FieldDifference("pages", "1-9", "101-109")]),
    ],
    ids=["all agree", "abbreviated range", "leading zero", "et al", "pinyin", "doi url", "year", "pages end", "pages start",
         "author order", "author missing", "subtitle missing", "source", "english source", "translated", "volume issue",
         "doi", "year and pages"],
)
def test_differences(parsed: ParsedReference, relation: str, found: list[FieldDifference]) -> None:
    assert differences(parsed, RECORD, relation) == found


JOURNAL = Paper(record_ref="rec_j", title="面向典型案例的违约金制度完善", authors=["罗怡", "朱思"], year=2025, document_type="期刊")
THESIS = Paper(record_ref="rec_t", title="面向典型案例的违约金制度完善", authors=["沈明"], year=2024, document_type="硕士")
LONGER = Paper(record_ref="rec_l", title="面向典型案例的违约金制度完善：以司法裁判为中心", authors=["沈明"], year=2024)
TWINS = [(JOURNAL, SAME), (THESIS, SAME)]


@pytest.mark.parametrize(
    ("parsed", "candidates", "chosen", "tied"),
    [
        (ParsedReference(title=JOURNAL.title), TWINS, None, ["rec_j", "rec_t"]),
        (ParsedReference(title=JOURNAL.title, authors=["沈明"]), TWINS, "rec_t", []),
        (ParsedReference(title=JOURNAL.title, year=2025), TWINS, "rec_j", []),
        (ParsedReference(title=JOURNAL.title, type_code="D"), TWINS, "rec_t", []),
        (ParsedReference(title=JOURNAL.title), [(JOURNAL, SAME), (LONGER, PARTIAL)], "rec_j", []),
        (ParsedReference(title="Penalty clauses", authors=["Luo Yi"]), [(JOURNAL, TRANSLATED)], "rec_j", []),
        (ParsedReference(title="Penalty clauses", year=2025), [(JOURNAL, TRANSLATED)], None, []),
        (ParsedReference(title=JOURNAL.title), [], None, []),
        (ParsedReference(title=JOURNAL.title, authors=["周志华"], year=2016), TWINS, None, []),
        (ParsedReference(title=JOURNAL.title, authors=["朱思", "罗怡"], year=2019), TWINS, "rec_j", []),
        (ParsedReference(title=JOURNAL.title, authors=["周志华"]), [(JOURNAL, SAME)], None, []),
    ],
    ids=["title only", "author", "year", "type code", "same before partial", "translated with author",
         "translated without author", "none", "another work", "two wrong facts but one author", "no author in common"],
)
def test_choose(parsed: ParsedReference, candidates: list[tuple[Paper, str]], chosen: str | None, tied: list[str]) -> None:
    paper, leaders = choose(parsed, candidates)
    assert ((paper.record_ref if paper else None), [p.record_ref for p in leaders]) == (chosen, tied)


# --- refcheck's pure parts --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("title", "phrase"),
    [
        ("数字经济的影响机制研究：基于省级面板数据的分析", "数字经济的影响机制研究"),
        ("數字經濟的影響機制研究", "数字经济的影响机制研究"),
        ("“AI+教育”背景下教师数字素养的提升路径", "背景下教师数字素养的提升路径"),
        ("数据要素(市场)化配置的法律规制:以个人信息为例", "化配置的法律规制"),
        ("基于Transformer-XL的长文本检索模型研究", "基于Transformer-XL的长文本检索模型研究"),
        ("基于 BERT 的中文文本分类方法", "的中文文本分类方法"),
        ("自动驾驶产品责任研究 007", "自动驾驶产品责任研究"),
        ("A Survey of Retrieval-Augmented Generation: Evidence from Benchmarks", "A Survey of Retrieval-Augmented Generation"),
        ("论AI", "论AI"),
        ("字" * 130, "字" * 100),
    ],
)
def test_search_phrase(title: str, phrase: str) -> None:
    assert search_phrase(title) == phrase


@pytest.mark.parametrize(
    ("phrase", "row_title", "belongs"),
    [
        ("数字经济的影响机制研究", RECORD.title, True),
        ("化配置的法律规制", "数据要素（市场）化配置的法律规制：以个人信息为例", True),
        ("绿色金融", RECORD.title, False),
        ("Mechanisms of the digital economy", RECORD.title, True),
        ("A Survey of Retrieval", "A Survey of Retrieval-Augmented Generation", True),
        ("A Survey of Retrieval", "Graph Neural Networks", False),
    ],
)
def test_related(phrase: str, row_title: str, belongs: bool) -> None:
    assert related(phrase, row_title) is belongs


def test_corrected_text_has_no_leading_number() -> None:
    assert corrected_text(RECORD, "gbt7714") == (
        "王利明, 陈晓红, 欧阳修. 数字经济的影响机制研究：基于省级面板数据的分析[J/OL]. 经济研究评论, 2020, 40(5): 101-109. "
        "DOI:10.13840/j.cnki.jjyj.2020.05.001."
    )


def test_corrected_text_in_vancouver_has_no_leading_number() -> None:
    assert corrected_text(RECORD, "vancouver").startswith("王利明, 陈晓红, 欧阳修. ")


@pytest.mark.parametrize(
    ("parsed", "words"),
    [
        (ParsedReference(title="合同法原理", type_code="M"), ["不能证明", "图书（[M]）"]),
        (ParsedReference(title="Economic Analysis of Law"), ["不能证明", "外文文献"]),
        (ParsedReference(title="国家标准编写规则", type_code="S"), ["不能证明", "标准（[S]）"]),
        (ParsedReference(title="区块链赋能乡村振兴", type_code="J"), ["不能证明", "灰色文献"]),
    ],
)
def test_not_found_message_names_what_cnki_lacks(parsed: ParsedReference, words: list[str]) -> None:
    assert [word in not_found_message(parsed) for word in words] == [True] * len(words)


@pytest.mark.parametrize(
    ("parsed", "paper", "relation", "fields"),
    [
        (entry(), RECORD, SAME, []),
        (entry(doi="10.1/x"), Paper(title=RECORD.title, authors=RECORD.authors, source="经济研究评论", year=2020), SAME,
         ["pages", "volume", "issue", "doi"]),
        (entry(source="Economic Research Review"), RECORD, SAME, ["source"]),
        (entry(title="Mechanisms"), RECORD, TRANSLATED, ["source"]),
        (entry(year=0, authors=[], source=""), Paper(title=RECORD.title), SAME, ["pages", "volume", "issue"]),
    ],
    ids=["all confirmed", "no detail page", "english source", "translated", "bare record"],
)
def test_not_compared(parsed: ParsedReference, paper: Paper, relation: str, fields: list[str]) -> None:
    assert not_compared(parsed, paper, relation) == fields
