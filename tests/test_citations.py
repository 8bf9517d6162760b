"""Unit tests for cnki_mcp.references.citations: every format, every document type, escaping and template errors.

The expected prose strings for the fixture set were produced by citeproc-js with the official CSL styles
(see test_citations_oracle.py, which re-checks them whenever Node and the styles are available).
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import msgspec
import pytest

from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.model import CitationResult, Paper
from cnki_mcp.references import citations
from cnki_mcp.references.citations import FORMATS, Name, csl_item, parse_name, render, title_case, validate_template
from cnki_mcp.references.citations._prose import _page_range

FIXTURE = Path(__file__).parent / "fixtures" / "citations_papers.json"


def load_fixture() -> list[Paper]:
    return msgspec.json.decode(FIXTURE.read_bytes(), type=list[Paper])


@pytest.fixture(scope="module")
def papers() -> list[Paper]:
    return load_fixture()


def by_ref(papers: list[Paper], ref: str) -> Paper:
    return next(p for p in papers if p.record_ref == ref)


GOLDEN = {
    "gbt7714": [
        "[1] 王利明, 陈晓红, 刘建华, 等. 数字经济对制造业高质量发展的影响机制研究[J]. 中国工业经济, 2023(05): 5-23.",
        "[2] CARTER E R, MOREAU J P, TANAKA H, et al. Deep learning for citation recommendation: a survey of methods and evaluation practices[J/OL]. Journal of Informetrics, 2021, 15(3): 101128. DOI:10.1016/j.joi.2021.101128.",
        "[3] 赵磊. 基于知识图谱的学术文献推荐方法研究[D]. 武汉大学, 2022.",
        "[4] 孙悦. 高校图书馆数字资源利用效率评价[D]. 南京大学, 2021.",
        "[5] 周杰, 吴敏. 面向中文科技文献的命名实体识别方法[C]//第十九届中国计算语言学大会论文集. 2020: 112-120.",
        "[6] 何平. 加快建设世界一流科技期刊[N]. 光明日报, 2024-03-15(05).",
        "[7] 李强, 王芳. 大模型驱动的科研范式变革与图书馆服务创新[J/OL]. 图书情报工作, 2025. https://kns.cnki.net/kcms2/article/abstract?v=fixture-online-first. DOI:10.13266/j.issn.0252-3116.2025.01.001.",
        "[8] 王知津. 信息检索导论[M]. 科学出版社, 2019.",
        "[9] [作者未取得]. 关于学术不端检测阈值的初步讨论[Z]. [来源未取得], [年份未取得].",
    ],
    "gbt7714_2025": [
        "[1] 王利明，陈晓红，刘建华，等. 数字经济对制造业高质量发展的影响机制研究[J]. 中国工业经济，2023（05）：5-23.",
        "[2] Carter E R，Moreau J-P，Tanaka H，等. Deep learning for citation recommendation: a survey of methods and evaluation practices[J/OL]. Journal of Informetrics，2021，15（3）：101128. DOI:10.1016/j.joi.2021.101128.",
        "[3] 赵磊. 基于知识图谱的学术文献推荐方法研究[D]. 武汉大学，2022.",
        "[4] 孙悦. 高校图书馆数字资源利用效率评价[D]. 南京大学，2021.",
        "[5] 周杰，吴敏. 面向中文科技文献的命名实体识别方法[C]//第十九届中国计算语言学大会论文集. 2020：112-120.",
        "[6] 何平. 加快建设世界一流科技期刊[N]. 光明日报，2024-03-15（05）.",
        "[7] 李强，王芳. 大模型驱动的科研范式变革与图书馆服务创新[J/OL]. 图书情报工作，2025. https://kns.cnki.net/kcms2/article/abstract?v=fixture-online-first. DOI:10.13266/j.issn.0252-3116.2025.01.001.",
        "[8] 王知津. 信息检索导论[M]. 科学出版社，2019.",
        "[9] [作者未取得]. 关于学术不端检测阈值的初步讨论[Z]. [来源未取得]，[年份未取得].",
    ],
    "gbt7714_author_date": [
        "何平, 2024. 加快建设世界一流科技期刊[N]. 光明日报, 2024-03-15(05).",
        "李强, 王芳, 2025. 大模型驱动的科研范式变革与图书馆服务创新[J/OL]. 图书情报工作. https://kns.cnki.net/kcms2/article/abstract?v=fixture-online-first. DOI:10.13266/j.issn.0252-3116.2025.01.001.",
        "孙悦, 2021. 高校图书馆数字资源利用效率评价[D]. 南京大学.",
        "王利明, 陈晓红, 刘建华, 等, 2023. 数字经济对制造业高质量发展的影响机制研究[J]. 中国工业经济(05): 5-23.",
        "王知津, 2019. 信息检索导论[M]. 科学出版社.",
        "赵磊, 2022. 基于知识图谱的学术文献推荐方法研究[D]. 武汉大学.",
        "周杰, 吴敏, 2020. 面向中文科技文献的命名实体识别方法[C]//第十九届中国计算语言学大会论文集. 112-120.",
        "[作者未取得], [年份未取得]. 关于学术不端检测阈值的初步讨论[Z]. [来源未取得].",
        "CARTER E R, MOREAU J P, TANAKA H, et al., 2021. Deep learning for citation recommendation: a survey of methods and evaluation practices[J/OL]. Journal of Informetrics, 15(3): 101128. DOI:10.1016/j.joi.2021.101128.",
    ],
    "apa": [
        "Carter, E. R., Moreau, J.-P., Tanaka, H., & Schmidt, A. (2021). Deep learning for citation recommendation: a survey of methods and evaluation practices. Journal of Informetrics, 15(3), 101128. https://doi.org/10.1016/j.joi.2021.101128",
        "何平. (2024, March 15). 加快建设世界一流科技期刊. 光明日报, 05.",
        "[作者未取得]. ([年份未取得]). 关于学术不端检测阈值的初步讨论. [来源未取得].",
        "周杰 & 吴敏. (2020). 面向中文科技文献的命名实体识别方法. 第十九届中国计算语言学大会论文集, 112–120.",
        "孙悦. (2021). 高校图书馆数字资源利用效率评价 [硕士学位论文]. 南京大学.",
        "李强 & 王芳. (2025). 大模型驱动的科研范式变革与图书馆服务创新. 图书情报工作. https://doi.org/10.13266/j.issn.0252-3116.2025.01.001",
        "王利明, 陈晓红, 刘建华, 张伟, & 李娜. (2023). 数字经济对制造业高质量发展的影响机制研究. 中国工业经济, (05), 5–23.",
        "王知津. (2019). 信息检索导论. 科学出版社.",
        "赵磊. (2022). 基于知识图谱的学术文献推荐方法研究 [博士学位论文]. 武汉大学.",
    ],
    "mla": [
        "Carter, Emily R., et al. “Deep Learning for Citation Recommendation: A Survey of Methods and Evaluation Practices.” Journal of Informetrics, vol. 15, no. 3, 2021, p. 101128, https://doi.org/10.1016/j.joi.2021.101128.",
        "何平. “加快建设世界一流科技期刊.” 光明日报, 15 Mar. 2024, p. 05.",
        "[作者未取得]. “关于学术不端检测阈值的初步讨论.” [来源未取得], [年份未取得].",
        "周杰 and 吴敏. “面向中文科技文献的命名实体识别方法.” 第十九届中国计算语言学大会论文集, 2020, pp. 112–20.",
        "孙悦. 高校图书馆数字资源利用效率评价. 2021. 南京大学, 硕士学位论文.",
        "李强 and 王芳. “大模型驱动的科研范式变革与图书馆服务创新.” 图书情报工作, 2025, https://doi.org/10.13266/j.issn.0252-3116.2025.01.001.",
        "王利明, et al. “数字经济对制造业高质量发展的影响机制研究.” 中国工业经济, no. 05, 2023, pp. 5–23.",
        "王知津. 信息检索导论. 科学出版社, 2019.",
        "赵磊. 基于知识图谱的学术文献推荐方法研究. 2022. 武汉大学, 博士学位论文.",
    ],
    "chicago": [
        "Carter, Emily R., Jean-Paul Moreau, Hiroshi Tanaka, and Anna Schmidt. 2021. “Deep Learning for Citation Recommendation: A Survey of Methods and Evaluation Practices.” Journal of Informetrics 15 (3): 101128. https://doi.org/10.1016/j.joi.2021.101128.",
        "何平. 2024. “加快建设世界一流科技期刊.” 光明日报, March 15.",
        "[作者未取得]. [年份未取得]. “关于学术不端检测阈值的初步讨论.” [来源未取得].",
        "周杰 and 吴敏. 2020. “面向中文科技文献的命名实体识别方法.” 第十九届中国计算语言学大会论文集, 112–20.",
        "孙悦. 2021. “高校图书馆数字资源利用效率评价.” 硕士学位论文, 南京大学.",
        "李强 and 王芳. 2025. “大模型驱动的科研范式变革与图书馆服务创新.” 图书情报工作, ahead of print. https://doi.org/10.13266/j.issn.0252-3116.2025.01.001.",
        "王利明, 陈晓红, 刘建华, 张伟, and 李娜. 2023. “数字经济对制造业高质量发展的影响机制研究.” 中国工业经济, no. 05: 5–23.",
        "王知津. 2019. 信息检索导论. 科学出版社.",
        "赵磊. 2022. “基于知识图谱的学术文献推荐方法研究.” 博士学位论文, 武汉大学.",
    ],
    "vancouver": [
        "1. 王利明, 陈晓红, 刘建华, 张伟, 李娜. 数字经济对制造业高质量发展的影响机制研究. 中国工业经济. 2023;(05):5–23.",
        "2. Carter ER, Moreau JP, Tanaka H, Schmidt A. Deep learning for citation recommendation: a survey of methods and evaluation practices. Journal of Informetrics. 2021;15(3):101128. doi:10.1016/j.joi.2021.101128",
        "3. 赵磊. 基于知识图谱的学术文献推荐方法研究 [博士学位论文]. 武汉大学; 2022.",
        "4. 孙悦. 高校图书馆数字资源利用效率评价 [硕士学位论文]. 南京大学; 2021.",
        "5. 周杰, 吴敏. 面向中文科技文献的命名实体识别方法. In: 第十九届中国计算语言学大会论文集. 2020. p. 112–20.",
        "6. 何平. 加快建设世界一流科技期刊. 光明日报. 2024 Mar 15:05.",
        "7. 李强, 王芳. 大模型驱动的科研范式变革与图书馆服务创新. 图书情报工作. 2025. doi:10.13266/j.issn.0252-3116.2025.01.001",
        "8. 王知津. 信息检索导论. 科学出版社; 2019.",
        "9. [作者未取得]. 关于学术不端检测阈值的初步讨论. [来源未取得]; [年份未取得].",
    ],
}


# --- formats and shape ------------------------------------------------------------------------


def test_formats_are_the_contracts_thirteen_the_two_gbt_additions_and_cnkis_two() -> None:
    assert FORMATS == (
        "gbt7714", "gbt7714_2025", "gbt7714_author_date", "apa", "mla", "chicago", "vancouver", "bibtex", "ris", "endnote",
        "csl_json", "json", "csv", "markdown", "custom", "refworks", "noteexpress",
    )


@pytest.mark.parametrize("alias, name", [("", "gbt7714"), ("gbt7714-2015", "gbt7714"), ("GBT7714-2025", "gbt7714_2025"), ("csl-json", "csl_json"), ("APA", "apa")])
def test_aliases(papers: list[Paper], alias: str, name: str) -> None:
    assert render(papers[:1], alias).format == name


def test_unknown_format_is_rejected(papers: list[Paper]) -> None:
    with pytest.raises(CnkiError) as info:
        render(papers, "harvard")
    assert info.value.code == "INVALID_FORMAT"


@pytest.mark.parametrize("fmt", [f for f in FORMATS if f != "custom"])
def test_every_format_renders_every_fixture_record(papers: list[Paper], fmt: str) -> None:
    result = render(papers, fmt)
    assert result.format == fmt and result.count == len(papers)
    for paper in papers:
        if fmt != "csv" or paper.title:
            assert paper.title in result.text or title_case(paper.title) in result.text


def test_rendered_shape_and_missing_fields(papers: list[Paper]) -> None:
    result = render(papers, "gbt7714")
    assert result.missing_fields == {"missing-authors-year-source": ["authors", "source", "year"]}
    data = msgspec.to_builtins(result)
    assert set(data) == {"format", "count", "text", "missing_fields"}
    complete = render(papers[:2], "apa")
    assert "missing_fields" not in msgspec.to_builtins(complete)


def test_missing_fields_are_listed_in_order() -> None:
    paper = Paper(record_ref="r", title="T", authors=["  "], source="S", year=0)
    assert render([paper], "bibtex").missing_fields == {"r": ["authors", "year"]}


# --- document types ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "document_type, online_first, key, gb",
    [
        ("期刊", False, "journal", "J"),
        ("期刊", True, "online_first", "J"),
        ("博士", False, "phd", "D"),
        ("博士学位论文", False, "phd", "D"),
        ("硕士", False, "master", "D"),
        ("学位论文", False, "thesis", "D"),
        ("国际会议", False, "conference", "C"),
        ("报纸", False, "newspaper", "N"),
        ("图书", False, "book", "M"),
        ("年鉴", False, "unknown", "Z"),
        ("", False, "unknown", "Z"),
    ],
)
def test_document_type_classification(document_type: str, online_first: bool, key: str, gb: str) -> None:
    kind = citations.doc_type(Paper(document_type=document_type, online_first=online_first))
    assert (kind.key, kind.gb) == (key, gb)


# --- names ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw, name",
    [
        ("王利明", Name(literal="王利明")),
        ("  欧阳 修 ", Name(literal="欧阳 修")),
        ("Emily R. Carter", Name(family="Carter", given="Emily R.")),
        ("Schmidt, Anna Maria", Name(family="Schmidt", given="Anna Maria")),
        ("Maria de Souza", Name(family="de Souza", given="Maria")),
        ("Plato", Name(literal="Plato")),
        ("WANG Fang", Name(family="Wang", given="Fang")),
        ("Fang WANG", Name(family="Wang", given="Fang")),
        ("OUYANG Xiu-wen", Name(family="Ouyang", given="Xiu-wen")),
        ("LI J.", Name(family="Li", given="J.")),
        ("John F. KENNEDY", Name(family="Kennedy", given="John F.")),
        ("WANG FANG", Name(family="FANG", given="WANG")),  # all capitals: nothing tells which is the surname
    ],
)
def test_parse_name(raw: str, name: Name) -> None:
    assert parse_name(raw) == name


def test_capitalised_surname_is_cited_like_the_plain_spelling() -> None:
    def cite(author: str, style: str) -> str:
        paper = Paper(record_ref="r", title="Deep learning", authors=[author], source="Journal of AI", year=2021,
                      document_type="期刊", volume="3", issue="2", pages="1-9")
        return render([paper], style).text

    for style in ("apa", "mla", "chicago", "vancouver", "gbt7714"):
        assert cite("WANG Fang", style) == cite("Fang Wang", style), style


# --- prose styles -----------------------------------------------------------------------------


@pytest.mark.parametrize("style", citations.PROSE_FORMATS)
def test_prose_styles_match_the_citeproc_rendering_of_the_fixture(papers: list[Paper], style: str) -> None:
    assert render(papers, style).text.split("\n\n") == GOLDEN[style]


def test_gbt_author_lists_follow_the_standard() -> None:
    three = Paper(record_ref="a", title="题", authors=["甲", "乙", "丙"], source="刊", year=2020, document_type="期刊")
    four = Paper(record_ref="b", title="题", authors=["甲", "乙", "丙", "丁"], source="刊", year=2020, document_type="期刊")
    western = Paper(
        record_ref="c", title="Title", authors=["Ann Lee", "Tom Brown", "Kim Ng", "Yi Tay"], source="J", year=2020,
        document_type="期刊",
    )
    text = render([three, four, western], "gbt7714").text.split("\n\n")
    assert text[0].startswith("[1] 甲, 乙, 丙. 题[J].")
    assert text[1].startswith("[2] 甲, 乙, 丙, 等. 题[J].")
    assert text[2].startswith("[3] LEE A, BROWN T, NG K, et al. Title[J].")


def test_gbt_online_marks() -> None:
    with_doi = Paper(record_ref="a", title="题", authors=["甲"], source="刊", year=2020, document_type="期刊", doi="10.1/x")
    first = Paper(
        record_ref="b", title="题", authors=["甲"], source="刊", year=2025, document_type="期刊", online_first=True,
        url="https://kns.cnki.net/x",
    )
    plain = Paper(record_ref="c", title="题", authors=["甲"], source="刊", year=2020, document_type="期刊", url="https://kns.cnki.net/y")
    text = render([with_doi, first, plain], "gbt7714").text.split("\n\n")
    assert text[0] == "[1] 甲. 题[J/OL]. 刊, 2020. DOI:10.1/x."
    assert text[1] == "[2] 甲. 题[J/OL]. 刊, 2025. https://kns.cnki.net/x."
    # A database abstract page is not an access path for a printed article.
    assert text[2] == "[3] 甲. 题[J]. 刊, 2020."


def test_placeholders_in_every_prose_style(papers: list[Paper]) -> None:
    missing = [by_ref(papers, "missing-authors-year-source")]
    for style in citations.PROSE_FORMATS:
        text = render(missing, style).text
        assert "[作者未取得]" in text and "[来源未取得]" in text and "[年份未取得]" in text, style


def test_terminal_punctuation_is_not_doubled() -> None:
    paper = Paper(record_ref="q", title="Efficient transformers!", authors=["Yi Tay"], source="ACM Computing Surveys", year=2022, document_type="期刊", volume="55", issue="6", pages="109")
    assert render([paper], "mla").text == "Tay, Yi. \u201cEfficient Transformers!\u201d ACM Computing Surveys, vol. 55, no. 6, 2022, p. 109."
    assert render([paper], "apa").text == "Tay, Y. (2022). Efficient transformers! ACM Computing Surveys, 55(6), 109."


def test_author_date_styles_sort_and_mla_substitutes_repeated_authors() -> None:
    a = Paper(record_ref="a", title="Zebras", authors=["Ann Lee"], source="J", year=2001, document_type="期刊")
    b = Paper(record_ref="b", title="Apples", authors=["Ann Lee"], source="J", year=2005, document_type="期刊")
    c = Paper(record_ref="c", title="Middle", authors=["Tom Brown"], source="J", year=2003, document_type="期刊")
    assert [e.split(".")[0] for e in render([a, b, c], "apa").text.split("\n\n")] == ["Brown, T", "Lee, A", "Lee, A"]
    mla = render([a, b, c], "mla").text.split("\n\n")
    assert mla[1].startswith("Lee, Ann. \u201cApples.\u201d") and mla[2].startswith("\u2014\u2014\u2014. \u201cZebras.\u201d")
    assert render([a, b, c], "vancouver").text.split("\n\n")[0].startswith("1. Lee A. Zebras.")


def test_year_suffixes_for_works_cited_alike() -> None:
    a = Paper(record_ref="a", title="Beta", authors=["Ann Lee"], source="J", year=2019, document_type="期刊")
    b = Paper(record_ref="b", title="Alpha", authors=["Ann Lee"], source="J", year=2019, document_type="期刊")
    c = Paper(record_ref="c", title="Gamma", authors=["Ann Lee"], source="J", year=2020, document_type="期刊")
    apa = render([a, b, c], "apa").text.split("\n\n")
    assert [e[:16] for e in apa] == ["Lee, A. (2019a).", "Lee, A. (2019b).", "Lee, A. (2020). "]
    assert "Alpha" in apa[0]
    chicago = render([a, b, c], "chicago").text.split("\n\n")
    assert [e.split(". ")[1] for e in chicago] == ["2019a", "2019b", "2020"]


def test_year_suffixes_go_past_z() -> None:
    same = [Paper(record_ref=f"r{i:02d}", title=f"T{i:02d}", authors=["甲"], source="刊", year=2020, document_type="期刊") for i in range(28)]
    years = [e.split(". ")[1] for e in render(same, "chicago").text.split("\n\n")]
    assert years[0] == "2020a" and years[25] == "2020z" and years[26:] == ["2020aa", "2020ab"]


def test_thesis_details() -> None:
    thesis = Paper(
        record_ref="t", title="Neural ranking", authors=["Amy Adams"], source="harvard university", year=1999,
        document_type="博士", volume="3", issue="2", pages="1-200", doi="10.1/t",
    )
    assert render([thesis], "apa").text == (
        "Adams, A. (1999). Neural ranking [Doctoral dissertation, harvard university]. https://doi.org/10.1/t"
    )
    # Volume, issue and pages of a thesis are data slips; Chicago capitalises the school's first letter.
    assert render([thesis], "chicago").text == (
        "Adams, Amy. 1999. \u201cNeural Ranking.\u201d Doctoral dissertation, Harvard university. https://doi.org/10.1/t."
    )
    assert render([thesis], "gbt7714").text == "[1] ADAMS A. Neural ranking[D/OL]. harvard university, 1999. DOI:10.1/t."


@pytest.mark.parametrize(
    "raw, expected",
    [
        ("attention is all you need", "Attention Is All You Need"),
        ("a survey of methods: the state of the art", "A Survey of Methods: The State of the Art"),
        ("large-scale evaluation of over-fitting", "Large-Scale Evaluation of over-Fitting"),
        ("what we talk about", "What We Talk About"),
        ("BERT and its friends", "BERT and Its Friends"),
        ("数字经济 and growth", "数字经济 and Growth"),
    ],
)
def test_title_case(raw: str, expected: str) -> None:
    assert title_case(raw) == expected


@pytest.mark.parametrize(
    "pages, form, expected",
    [
        ("112-120", "minimal-two", "112\u201320"),
        ("1205-1213", "minimal", "1205\u201313"),
        ("10-19", "minimal", "10\u20139"),
        ("5-23", "expanded", "5\u201323"),
        ("101-108", "chicago-16", "101\u20138"),
        ("321-328", "chicago-16", "321\u201328"),
        ("71-72", "chicago-16", "71\u201372"),
        ("e0231", "minimal", "e0231"),
    ],
)
def test_page_ranges(pages: str, form: str, expected: str) -> None:
    assert _page_range(pages, form, "\u2013") == expected


# --- BibTeX -----------------------------------------------------------------------------------


def test_bibtex_entry_types_and_source_fields(papers: list[Paper]) -> None:
    text = render(papers, "bibtex").text
    for head in (
        "@article{cjfd-2023-gyjj-0501,",
        "@article{sjes-2021-joi-101128,",
        "@phdthesis{cdfd-2022-whu-zhaolei,",
        "@mastersthesis{cmfd-2021-nju-sunyue,",
        "@inproceedings{cpfd-2020-ccl-zhoujie,",
        "@misc{ccnd-2024-gmrb-0315,",
        "@article{cjfd-2025-tsqbgz-wlsf,",
        "@book{book-2019-kxcbs-wzj,",
        "@misc{missing-authors-year-source,",
    ):
        assert head in text
    assert "  school = {武汉大学}," in text
    assert "  booktitle = {第十九届中国计算语言学大会论文集}," in text
    assert "  howpublished = {光明日报}," in text
    assert "  author = {{王利明} and {陈晓红} and {刘建华} and {张伟} and {李娜}}," in text
    assert "  author = {Carter, Emily R. and Moreau, Jean-Paul and Tanaka, Hiroshi and Schmidt, Anna}," in text
    assert "  pages = {5--23}," in text


def test_bibtex_escaping_and_keys() -> None:
    paper = Paper(
        record_ref="a b{1}", title="题名{A}&B_测试 100% $x$ #1 \\ ~^", authors=["O'Brien, Pat"], year=2020,
        url="https://example.test/a{b}%20c", doi="10.1/x_y",
    )
    twin = Paper(record_ref="a b{1}", title="Second", year=2021)
    text = render([paper, twin], "bibtex").text
    assert "@misc{a_b_1_," in text and "@misc{a_b_1__2," in text
    assert (
        "  title = {题名\\{A\\}\\&B\\_测试 100\\% \\$x\\$ \\#1 \\textbackslash{} \\textasciitilde{}\\textasciicircum{}},"
        in text
    )
    assert "  url = {https://example.test/a%7Bb%7D%20c}," in text
    assert "  doi = {10.1/x_y}," in text


def test_bibtex_unbalanced_braces_and_awkward_names() -> None:
    paper = Paper(
        record_ref="u", title="a{b} c}", authors=["Smith and Sons", "Doe, Jane, Jr.", "Plato"], url="http://x/a\\b"
    )
    text = render([paper], "bibtex").text
    # BibTeX counts braces even after a backslash: unpaired ones must not appear at all.
    assert "  title = {a\\textbraceleft{}b\\textbraceright{} c\\textbraceright{}}," in text
    assert "  author = {{Smith and Sons} and {Doe, Jane, Jr.} and {Plato}}," in text
    assert "  url = {http://x/a%5Cb}," in text


# --- RIS and EndNote --------------------------------------------------------------------------


def test_ris_records(papers: list[Paper]) -> None:
    text = render(papers, "ris").text
    assert text.endswith("ER  - \r\n") and "\n" not in text.replace("\r\n", "")
    records = text.split("\r\n\r\n")
    assert len(records) == len(papers)
    types = [r.split("\r\n")[0] for r in records]
    assert types == [
        "TY  - JOUR", "TY  - JOUR", "TY  - THES", "TY  - THES", "TY  - CONF", "TY  - NEWS", "TY  - JOUR",
        "TY  - BOOK", "TY  - GEN",
    ]
    first = records[0].split("\r\n")
    assert [line for line in first if line.startswith("AU  - ")] == [f"AU  - {a}" for a in papers[0].authors]
    assert "SP  - 5" in first and "EP  - 23" in first and first[-1] == "ER  - "


def test_endnote_records(papers: list[Paper]) -> None:
    records = render(papers, "endnote").text.split("\n\n")
    assert [r.split("\n")[0] for r in records] == [
        "%0 Journal Article", "%0 Journal Article", "%0 Thesis", "%0 Thesis", "%0 Conference Paper",
        "%0 Newspaper Article", "%0 Journal Article", "%0 Book", "%0 Generic",
    ]
    assert "%A Emily R. Carter\n%A Jean-Paul Moreau" in records[1]
    assert "%I 武汉大学\n%D 2022\n%9 博士学位论文" in records[2]
    assert "%8 2024-03-15" in records[5]


def test_tagged_values_are_single_line() -> None:
    paper = Paper(record_ref="a", title="line one\nline two", abstract="a\r\nb\tc", year=2020)
    assert "TI  - line one line two\r\n" in render([paper], "ris").text
    assert "%X a b c" in render([paper], "endnote").text


# --- CSL-JSON and JSON ------------------------------------------------------------------------


def test_csl_json(papers: list[Paper]) -> None:
    items = json.loads(render(papers, "csl_json").text)
    assert [i["type"] for i in items] == [
        "article-journal", "article-journal", "thesis", "thesis", "paper-conference", "article-newspaper",
        "article-journal", "book", "document",
    ]
    assert items[0]["author"][0] == {"literal": "王利明"} and items[0]["language"] == "zh-CN"
    assert items[1]["author"][3] == {"family": "Schmidt", "given": "Anna"}
    assert items[1]["issued"] == {"date-parts": [[2021]]} and items[1]["DOI"] == "10.1016/j.joi.2021.101128"
    assert items[5]["issued"] == {"date-parts": [[2024, 3, 15]]}
    assert items[2]["publisher"] == "武汉大学" and items[2]["genre"] == "博士学位论文"
    assert "author" not in items[8] and "issued" not in items[8] and items[8]["title"]


def test_json_is_the_public_record(papers: list[Paper]) -> None:
    records = json.loads(render(papers, "json").text)
    assert len(records) == len(papers)
    assert records[0]["record_ref"] == "cjfd-2023-gyjj-0501" and records[0]["authors"][4] == "李娜"
    assert all("locator" not in r for r in records)


# --- CSV --------------------------------------------------------------------------------------


def test_csv_layout(papers: list[Paper]) -> None:
    text = render(papers, "csv").text
    assert text.startswith("\ufefftitle,authors,source,year,volume,issue,pages,doi,url,clc\r\n")
    assert text.endswith("\r\n")
    rows = list(csv.reader(io.StringIO(text.lstrip("\ufeff"), newline="")))
    assert len(rows) == len(papers) + 1
    assert rows[2][1] == "Emily R. Carter; Jean-Paul Moreau; Hiroshi Tanaka; Schmidt, Anna"
    assert rows[9][1:4] == ["", "", ""]


def test_clc_codes_reach_every_format_with_a_place_for_them() -> None:
    paper = Paper(record_ref="rec_clc", title="深度学习研究", authors=["王芳"], source="软件学报", year=2024,
                  document_type="期刊", clc_codes=["TP18", "TP311.13"])
    assert csl_item(paper)["call-number"] == "TP18; TP311.13"
    assert "CN  - TP18; TP311.13" in render([paper], "ris").text.splitlines()
    assert "%L TP18; TP311.13" in render([paper], "endnote").text.splitlines()
    assert "  clc = {TP18; TP311.13}," in render([paper], "bibtex").text.splitlines()
    assert list(csv.reader(io.StringIO(render([paper], "csv").text.lstrip("\ufeff"))))[1][-1] == "TP18; TP311.13"
    assert render([paper], "custom", "{title} [{clc}]").text == "深度学习研究 [TP18; TP311.13]"
    assert json.loads(render([paper], "json").text)[0]["clc_codes"] == ["TP18", "TP311.13"]


@pytest.mark.parametrize(
    "title, cell",
    [
        ("=HYPERLINK(\"http://x\")", "'=HYPERLINK(\"http://x\")"),
        ("+1", "'+1"),
        ("-2+3", "'-2+3"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("  =1", "'  =1"),
        ("\t=1", "'\t=1"),
        ("\rtext", "'\rtext"),
        ("normal - title", "normal - title"),
    ],
)
def test_csv_formula_injection_guard(title: str, cell: str) -> None:
    text = render([Paper(record_ref="x", title=title)], "csv").text
    rows = list(csv.reader(io.StringIO(text.lstrip("\ufeff"), newline="")))
    assert rows[1][0] == cell


def test_csv_quotes_commas_and_newlines() -> None:
    text = render([Paper(record_ref="x", title='a, "b"\nc', authors=["甲"])], "csv").text
    assert '"a, ""b""\nc"' in text


# --- Markdown ---------------------------------------------------------------------------------


def test_markdown_links() -> None:
    linked = Paper(record_ref="a", title="论[数据]与*模型*", url="https://kns.cnki.net/a?(1) b")
    plain = Paper(record_ref="b", title="无链接")
    assert render([linked, plain], "markdown").text == (
        "- [论\\[数据\\]与\\*模型\\*](https://kns.cnki.net/a?%281%29%20b)\n\n- 无链接"
    )


# --- custom templates -------------------------------------------------------------------------


def test_custom_template(papers: list[Paper]) -> None:
    template = "{authors}. {title}[J]. {journal}, {year}, {volume}({issue}): {pages}. {{{type}}} {record_ref}"
    text = render(papers, "custom", template).text.split("\n\n")
    assert text[0] == (
        "王利明, 陈晓红, 刘建华, 张伟, 李娜. 数字经济对制造业高质量发展的影响机制研究[J]. 中国工业经济, 2023, (05): 5-23. "
        "{期刊} cjfd-2023-gyjj-0501"
    )
    assert text[8] == "[作者未取得]. 关于学术不端检测阈值的初步讨论[J]. , , (): . {} missing-authors-year-source"


def test_custom_values_are_not_reinterpreted() -> None:
    paper = Paper(record_ref="r", title="{authors} {{x}}", authors=["甲"])
    assert render([paper], "custom", "{title}|{doi}|{url}").text == "{authors} {{x}}||"


def test_custom_empty_template_renders_empty_entries(papers: list[Paper]) -> None:
    assert render(papers[:3], "custom", "").text == "\n\n\n\n"


@pytest.mark.parametrize(
    "template",
    ["{Title}", "{authors.__class__}", "{title", "title}", "{ title }", "{abstract}", "{}", "a\x00b", "x" * 5001],
)
def test_invalid_templates(papers: list[Paper], template: str) -> None:
    with pytest.raises(CnkiError) as info:
        validate_template(template)
    assert info.value.code == "INVALID_TEMPLATE"
    with pytest.raises(CnkiError):
        render(papers, "custom", template)


def test_unknown_placeholder_message_lists_the_allowed_ones() -> None:
    with pytest.raises(CnkiError) as info:
        validate_template("{author}")
    assert "{author}" in info.value.message and "{authors}" in info.value.message
    assert info.value.details["placeholder"] == "author"


def test_valid_template_passes() -> None:
    validate_template("{{literal}} " + " ".join("{" + f + "}" for f in citations.TEMPLATE_FIELDS))


def test_result_is_the_model_struct() -> None:
    assert isinstance(render([Paper(record_ref="a", title="t")], "json"), CitationResult)


# --- export: saving and the size rule ---------------------------------------------------------


def test_export_saves_under_exports_without_overwriting(tmp_path: Path, papers: list[Paper]) -> None:
    result = citations.export(papers, "bibtex", data_dir=tmp_path, filename="refs.bib")
    saved = tmp_path / "exports" / "refs.bib"
    assert result.path == str(saved) and result.text
    assert saved.read_text(encoding="utf-8") == result.text
    with pytest.raises(CnkiError) as info:
        citations.export(papers[:1], "ris", data_dir=tmp_path, filename="refs.bib")
    assert info.value.code == "FILE_EXISTS"
    assert saved.read_text(encoding="utf-8") == result.text


@pytest.mark.parametrize("name", ["../escape.txt", "sub/dir.txt", "..", ".hidden", "CON.txt", "a:b"])
def test_export_rejects_names_that_leave_the_folder(tmp_path: Path, papers: list[Paper], name: str) -> None:
    with pytest.raises(CnkiError) as info:
        citations.export(papers, "csv", data_dir=tmp_path, filename=name)
    assert info.value.code == "INVALID_FILENAME"
    assert not (tmp_path / "escape.txt").exists() and not (tmp_path / "exports").exists()


def test_export_size_rule(tmp_path: Path) -> None:
    def exactly(size: int) -> list[Paper]:
        return [Paper(record_ref="r", title="x" * size)]

    assert citations.export(exactly(citations.MAX_TEXT_BYTES), "custom", "{title}").text
    with pytest.raises(CnkiError) as info:
        citations.export(exactly(citations.MAX_TEXT_BYTES + 1), "custom", "{title}")
    assert info.value.code == "OUTPUT_TOO_LARGE"
    big = [Paper(record_ref=f"r{i}", title="题" * 2000) for i in range(100)]  # 6 KB of UTF-8 each
    result = citations.export(big, "markdown", data_dir=tmp_path, filename="big.md")
    assert result.text == "" and result.count == 100
    assert (tmp_path / "exports" / "big.md").stat().st_size > citations.MAX_TEXT_BYTES
    assert "text" not in msgspec.to_builtins(result)
