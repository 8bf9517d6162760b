"""reflist: a pasted reference list split into entries, and each entry read into its fields."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cnki_mcp.core.refcheck_model import ParsedReference
from cnki_mcp.references.reflist import line_count, read_entry, split_entries

# --- splitting ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "entries"),
    [
        ("参考文献\n[1] 甲. 论违约金[J].\n[2] 乙. 论定金[J].", ["[1] 甲. 论违约金[J].", "[2] 乙. 论定金[J]."]),
        ("References:\n1. A. Title one.\n2. B. Title two.", ["1. A. Title one.", "2. B. Title two."]),
        ("（1）甲. 论违约金[J].\r\n（2）乙. 论定金[J].", ["（1）甲. 论违约金[J].", "（2）乙. 论定金[J]."]),
        ("[1] 甲. 违约金司法调\n整研究[J].\n[2] 乙. 论定金[J].", ["[1] 甲. 违约金司法调整研究[J].", "[2] 乙. 论定金[J]."]),
        ("[1] Smith J. Deep\nlearning. Nature.", ["[1] Smith J. Deep learning. Nature."]),
        ("甲. 论违约金[J].\n\n乙. 论定金[J].", ["甲. 论违约金[J].", "乙. 论定金[J]."]),
        ("Smith J. A long\ntitle. Nature.\n\nDoe A. Another\none. Cell.", ["Smith J. A long title. Nature.", "Doe A. Another one. Cell."]),
        ("\n  \n参考文献：\n", []),
    ],
)
def test_split_entries(text: str, entries: list[str]) -> None:
    assert split_entries(text) == entries


def test_a_year_at_the_start_of_a_line_is_no_number() -> None:
    assert split_entries("[1] 甲. 论违约金[J]. 法学,\n2021. 12.\n[2] 乙. 论定金[J].") == [
        "[1] 甲. 论违约金[J]. 法学, 2021. 12.",
        "[2] 乙. 论定金[J].",
    ]


# --- whole lists: every shape, every numbering ---------------------------------------------------------

# Whole references of each style, without numbers (the lists below number them).
SHAPES = {
    "gbt7714": [
        "王利明, 陈晓红. 违约金司法调整的理论基础研究[J]. 法学评论, 2021, 39(3): 12-25.",
        "张三, 李四, 等. 数字经济的影响机制研究：基于省级面板数据的分析[J]. 经济研究, 2020(05): 101-109.",
        "王五. 个人信息保护的规范路径研究[D]. 北江: 北江大学, 2019.",
        "刘伟. 绿色金融导论[M]. 北京: 东湖大学出版社, 2019: 10-20.",
        "王洋. 医学影像优化策略的再思考[C]//第七届智能教育国际研讨会论文集. 西安: 2022: 268.",
        "高华. 本省推进检索增强生成建设[N]. 华东教育报, 2023-01-07(009).",
    ],
    "gbt7714_author_date": [
        "陈明, 2020. 湿地生态系统服务评价[J]. 生态学研究, 40(2): 1-10.",
        "李强, 王芳, 2018. 城市更新中的社区参与机制[J]. 城市规划, 42(7): 33-41.",
        "Smith J, Doe A, 2019. Deep learning for things[J]. Nature, 521(7553): 436-444.",
    ],
    "apa": [
        "Wang, L., & Chen, X. (2021). The theoretical basis of liquidated damages. Law Review, 39(3), 12-25.",
        "Xu, W., Yu, Y. Y., & Zhao, Y. (2020). 数字经济的影响机制研究. 经济研究, 55(5), 101-109.",
        "van Dijk, T. A. (2008). Discourse and context: A sociocognitive approach. Cambridge University Press.",
    ],
    "mla": [
        'Smith, John. "Deep Learning for Things." Nature, vol. 521, no. 7553, 2019, pp. 436-444.',
        'Doe, Ann, et al. "Attention in Neural Translation." Machine Learning, vol. 12, no. 2, 2018, pp. 1-20.',
    ],
    "chicago": [
        'Smith, John, and Ann Doe. 2019. "Deep Learning for Things." Nature 521 (7553): 436-44.',
        'Brown, Kate. 2017. "Urban Heat Islands Revisited." Climate Research 30 (2): 11-29.',
    ],
    "vancouver": [
        "Smith J, Doe A. Deep learning for things. Nature. 2019;521(7553):436-44.",
        "Brown K, Green L, White M. Urban heat islands revisited. Clim Res. 2017;30(2):11-29.",
    ],
    "loose": ["王利明：《违约金的理论基础研究》，《法学评论》2021年第3期。"],
}
ALL = [(style, entry) for style, entries in SHAPES.items() for entry in entries]
NUMBERINGS = [
    lambda n: f"[{n}] ",
    lambda n: f"{n}. ",
    lambda n: f"{n}、",
    lambda n: f"（{n}）",
    lambda n: f"({n}) ",
    lambda n: "",
]
# Lines a copy leaves in a list that are no reference (a note, a rule, a page number, a continuation mark).
GARBAGE = ["见第三章", "————", "12", "* * *", "（续）", "第 3 页"]


def numbered(entries: list[str], numbering: list[int]) -> list[str]:
    return [NUMBERINGS[kind](n) + entry for n, (entry, kind) in enumerate(zip(entries, numbering, strict=True), 1)]


@pytest.mark.parametrize("style", list(SHAPES))
@pytest.mark.parametrize("kind", range(len(NUMBERINGS)), ids=["[n]", "n.", "n、", "（n）", "(n)", "none"])
def test_a_list_of_one_style_and_one_numbering_reads_one_entry_a_line(style: str, kind: int) -> None:
    lines = numbered(SHAPES[style], [kind] * len(SHAPES[style]))

    entries = split_entries("参考文献\n" + "\n".join(lines))

    assert entries == lines
    assert [read_entry(entry).parsed.style for entry in entries] == [style] * len(lines)


def test_one_list_mixing_every_style_and_numbering_reads_one_entry_a_line() -> None:
    entries = [entry for _, entry in ALL]
    lines = numbered(entries, [i % len(NUMBERINGS) for i in range(len(entries))])

    assert split_entries("\n".join(lines)) == lines


def test_a_word_copy_whose_tail_lost_its_numbers_reads_every_entry() -> None:
    entries = [entry for _, entry in ALL]
    lines = numbered(entries[:5], [0] * 5) + entries[5:]

    read = split_entries("参考文献\n" + "\n".join(lines))

    assert (len(read), read) == (len(entries), lines)


def test_a_blank_line_separated_list_reads_one_entry_a_paragraph() -> None:
    text = (
        "王利明, 陈晓红. 违约金司法调整的理论基础研究[J].\n法学评论, 2021, 39(3): 12-25.\n\n"
        "Wang, L., & Chen, X. (2021). The theoretical basis of liquidated damages.\nLaw Review, 39(3), 12-25.\n\n"
        "陈明, 2020. 湿地生态系统服务评价[J]. 生态学研究, 40(2): 1-10.\n\n\n"
        "面向典型案例的违约金制度完善\n\n"
    )

    assert split_entries(text) == [
        "王利明, 陈晓红. 违约金司法调整的理论基础研究[J]. 法学评论, 2021, 39(3): 12-25.",
        "Wang, L., & Chen, X. (2021). The theoretical basis of liquidated damages. Law Review, 39(3), 12-25.",
        "陈明, 2020. 湿地生态系统服务评价[J]. 生态学研究, 40(2): 1-10.",
        "面向典型案例的违约金制度完善",
    ]


@pytest.mark.parametrize(
    ("wrapped", "entry"),
    [
        # right after a comma
        ("[1] 王利明, 陈晓红. 违约金司法调整的理论基础研究[J]. 法学评论,\n2021, 39(3): 12-25.",
         "[1] 王利明, 陈晓红. 违约金司法调整的理论基础研究[J]. 法学评论, 2021, 39(3): 12-25."),
        # in the middle of a Han title
        ("2. 张三, 李四, 等. 数字经济的影响机制研究：基于省级面板\n数据的分析[J]. 经济研究, 2020(05): 101-109.",
         "2. 张三, 李四, 等. 数字经济的影响机制研究：基于省级面板数据的分析[J]. 经济研究, 2020(05): 101-109."),
        # three lines: inside the names, then before the place
        ("（3）王五, 赵六,\n钱七. 个人信息保护的规范路径研究[D].\n北江: 北江大学, 2019.",
         "（3）王五, 赵六, 钱七. 个人信息保护的规范路径研究[D]. 北江: 北江大学, 2019."),
        # inside the names, before a line that would read whole on its own
        ("van Dijk,\nT. A. (2008). Discourse and context: A sociocognitive approach. Cambridge University Press.",
         "van Dijk, T. A. (2008). Discourse and context: A sociocognitive approach. Cambridge University Press."),
        # three lines: in the middle of an English title, then after a comma
        ("Wang, L., & Chen, X. (2021). The theoretical basis of\nliquidated damages. Law Review,\n39(3), 12-25.",
         "Wang, L., & Chen, X. (2021). The theoretical basis of liquidated damages. Law Review, 39(3), 12-25."),
        # inside an English title before a capital word, and a title whose end kept the type code to itself
        ("Smith, J. (2019). Deep Learning for\nThings That Matter. Nature, 521, 436-444.",
         "Smith, J. (2019). Deep Learning for Things That Matter. Nature, 521, 436-444."),
        ("陈明, 2020. 湿地生态系统服务评价\n[J]. 生态学研究, 40(2): 1-10.", "陈明, 2020. 湿地生态系统服务评价[J]. 生态学研究, 40(2): 1-10."),
        ("陈明, 2020. 湿地生态系统服务评价[J].\n生态学研究, 40(2): 1-10.", "陈明, 2020. 湿地生态系统服务评价[J]. 生态学研究, 40(2): 1-10."),
        # MLA inside the quoted title; Chicago inside the journal's name; Vancouver before the journal
        ('Smith, John. "Deep Learning\nfor Things." Nature, vol. 521, no. 7553, 2019, pp. 436-444.',
         'Smith, John. "Deep Learning for Things." Nature, vol. 521, no. 7553, 2019, pp. 436-444.'),
        ('Brown, Kate. 2017. "Urban Heat Islands Revisited." Climate\nResearch 30 (2): 11-29.',
         'Brown, Kate. 2017. "Urban Heat Islands Revisited." Climate Research 30 (2): 11-29.'),
        ("Smith J, Doe A. Deep learning for things.\nNature. 2019;521(7553):436-44.",
         "Smith J, Doe A. Deep learning for things. Nature. 2019;521(7553):436-44."),
        # a DOI on a line of its own, a page range cut at its hyphen
        ("刘伟. 绿色金融导论[M]. 北京: 东湖大学出版社, 2019: 10-\n20.\nDOI: 10.13594/j.cnki.fxpl.2019.03.001",
         "刘伟. 绿色金融导论[M]. 北京: 东湖大学出版社, 2019: 10-20. DOI: 10.13594/j.cnki.fxpl.2019.03.001"),
    ],
    ids=["after-comma", "mid-han-title", "three-lines-names", "names-then-whole", "three-lines-english", "before-capital",
         "type-code-alone", "journal-alone", "mla-title", "chicago-journal", "vancouver", "doi-and-hyphen"],
)
def test_a_wrapped_entry_is_joined_back_between_whole_neighbours(wrapped: str, entry: str) -> None:
    before, after = SHAPES["gbt7714"][3], SHAPES["apa"][0]

    assert split_entries(f"{before}\n{wrapped}\n{after}") == [before, entry, after]


@pytest.mark.parametrize("garbage", GARBAGE)
def test_a_stray_line_in_the_middle_is_an_entry_of_its_own_and_reads_as_no_reference(garbage: str) -> None:
    whole = numbered(SHAPES["gbt7714"][:2], [0, 0]) + SHAPES["vancouver"]
    lines = [*whole[:2], garbage, *whole[2:]]

    entries = split_entries("\n".join(lines))

    assert entries == lines
    assert [bool(read_entry(entry).why) for entry in entries] == [False, False, True, False, False]


def test_a_stray_line_after_an_unfinished_entry_is_not_merged_either() -> None:
    text = "[1] 王利明. 违约金司法调整的理论\n见第三章\n[2] 乙. 论定金[J]. 法学, 2020."

    assert split_entries(text) == ["[1] 王利明. 违约金司法调整的理论", "见第三章", "[2] 乙. 论定金[J]. 法学, 2020."]


def test_bare_titles_are_one_a_line() -> None:
    titles = ["面向典型案例的违约金制度完善", "自动驾驶产品责任研究", "Deep learning for things", "Attention is all you need"]

    assert split_entries("\n".join(titles)) == titles


def test_headings_of_each_part_are_no_entries() -> None:
    text = f"中文参考文献：\n{SHAPES['gbt7714'][0]}\n外文文献\n{SHAPES['apa'][0]}\nReferences\n"

    assert split_entries(text) == [SHAPES["gbt7714"][0], SHAPES["apa"][0]]
    assert line_count(text) == 2


def test_a_limit_stops_reading_at_the_entry_after_it() -> None:
    lines = numbered(SHAPES["gbt7714"], [0] * 6)

    assert split_entries("\n".join(lines), limit=3) == lines[:4]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(range(len(ALL))), st.sampled_from(range(len(NUMBERINGS)))), min_size=1, max_size=40))
def test_n_whole_entries_in_any_numbering_mix_read_back_as_n_entries(picks: list[tuple[int, int]]) -> None:
    lines = numbered([ALL[i][1] for i, _ in picks], [kind for _, kind in picks])

    assert split_entries("\n".join(lines)) == lines


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(range(len(ALL))), st.sampled_from(range(len(NUMBERINGS))), st.booleans()),
        min_size=1,
        max_size=30,
    )
)
def test_n_entries_some_wrapped_after_their_first_comma_read_back_as_n_entries(picks: list[tuple[int, int, bool]]) -> None:
    lines = numbered([ALL[i][1] for i, _, _ in picks], [kind for _, kind, _ in picks])
    text = "\n".join(line.replace(", ", ",\n", 1) if wrap else line for line, (_, _, wrap) in zip(lines, picks, strict=True))

    assert split_entries(text) == lines


def test_a_word_copy_with_wrapped_entries_and_a_tail_without_numbers_reads_every_entry() -> None:
    entries = [entry for _, entry in ALL]
    lines = numbered(entries[:10], [1] * 10) + entries[10:]
    text = "\n".join(line.replace(", ", ",\n", 1) if i % 2 else line for i, line in enumerate(lines))

    assert split_entries(text) == lines


@pytest.mark.timeout(20)
@pytest.mark.parametrize("text", ["(2020," * 87_000, "“" * 170_000, "(2020,\n" * 70_000], ids=["apa", "quotes", "lines"])
def test_reading_is_linear_in_the_input(text: str) -> None:
    # Quadratic patterns took minutes on these (issue 33: 209 s for the first); linear ones take well under a second.
    entries = split_entries(text)

    assert [read_entry(entry).why != "" for entry in entries[:3]] == [True] * min(3, len(entries))


# --- reading entries ---------------------------------------------------------------------------------


def read(text: str) -> dict[str, object]:
    return msgspec.to_builtins(read_entry(text).parsed)


GBT = "[1] 王利明, 陈晓红. 违约金司法调整的理论基础研究[J]. 法学评论, 2021, 39(3): 12-25."
FULL_WIDTH = "［２］张三，李四等．数字经济的影响机制研究：基于省级面板数据的分析［Ｊ］．经济研究评论，２０２０（０５）：１０１–９．"
AUTHOR_DATE = "陈明, 2020. 湿地生态系统服务评价[J]. 生态学研究, 40(2): 1-10."
APA = "Wang, L., & Chen, X. (2021). 违约金的理论基础研究. 法学评论, 39(3), 12-25."
VANCOUVER = "10. Smith J, Doe A. Deep learning for things. Nature. 2019;521(7553):436-44."
MLA = 'Smith, John. "Deep Learning for Things." Nature, vol. 521, no. 7553, 2019, pp. 436-444.'
CHICAGO = 'Smith, John, and Ann Doe. 2019. "Deep Learning for Things." Nature 521 (7553): 436-44.'
LOOSE = "王利明：《违约金的理论基础研究》，《法学评论》2021年第3期。"
THESIS = "王五. 个人信息保护的规范路径研究[D]. 北江: 北江大学, 2019."
CONFERENCE = "王洋. 医学影像优化策略的再思考[C]//第七届智能教育国际研讨会论文集. 西安: 2022: 268."
NEWSPAPER = "高华. 本省推进检索增强生成建设[N]. 华东教育报, 2023-01-07(009)."
BOOK = "刘伟. 绿色金融导论[M]. 北京: 东湖大学出版社, 2019: 10-20."
DOI = "王利明. 违约金的理论基础研究[J]. 法学评论, 2021, 39(3): 12-25. DOI: 10.13594/j.cnki.fxpl.2021.03.001."


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (GBT, {"style": "gbt7714", "authors": ["王利明", "陈晓红"], "title": "违约金司法调整的理论基础研究", "type_code": "J",
               "source": "法学评论", "year": 2021, "volume": "39", "issue": "3", "pages": "12-25"}),
        (FULL_WIDTH, {"style": "gbt7714", "authors": ["张三", "李四"], "et_al": True,
                      "title": "数字经济的影响机制研究：基于省级面板数据的分析", "type_code": "J", "source": "经济研究评论",
                      "year": 2020, "issue": "05", "pages": "101-9"}),
        (AUTHOR_DATE, {"style": "gbt7714_author_date", "authors": ["陈明"], "title": "湿地生态系统服务评价", "type_code": "J",
                       "source": "生态学研究", "year": 2020, "volume": "40", "issue": "2", "pages": "1-10"}),
        (APA, {"style": "apa", "authors": ["Wang, L.", "Chen, X"], "title": "违约金的理论基础研究", "source": "法学评论",
               "year": 2021, "volume": "39", "issue": "3", "pages": "12-25"}),
        (VANCOUVER, {"style": "vancouver", "authors": ["Smith J", "Doe A"], "title": "Deep learning for things",
                     "source": "Nature", "year": 2019, "volume": "521", "issue": "7553", "pages": "436-44"}),
        (MLA, {"style": "mla", "authors": ["Smith, John"], "title": "Deep Learning for Things", "source": "Nature",
               "year": 2019, "volume": "521", "issue": "7553", "pages": "436-444"}),
        (CHICAGO, {"style": "chicago", "authors": ["Smith, John", "Ann Doe"], "title": "Deep Learning for Things",
                   "source": "Nature", "year": 2019, "volume": "521", "issue": "7553", "pages": "436-44"}),
        (LOOSE, {"style": "loose", "authors": ["王利明"], "title": "违约金的理论基础研究", "source": "法学评论", "year": 2021,
                 "issue": "3"}),
        (THESIS, {"style": "gbt7714", "authors": ["王五"], "title": "个人信息保护的规范路径研究", "type_code": "D",
                  "source": "北江大学", "year": 2019}),
        (CONFERENCE, {"style": "gbt7714", "authors": ["王洋"], "title": "医学影像优化策略的再思考", "type_code": "C",
                      "source": "第七届智能教育国际研讨会论文集", "year": 2022, "pages": "268"}),
        (NEWSPAPER, {"style": "gbt7714", "authors": ["高华"], "title": "本省推进检索增强生成建设", "type_code": "N",
                     "source": "华东教育报", "year": 2023, "pages": "009"}),
        (BOOK, {"style": "gbt7714", "authors": ["刘伟"], "title": "绿色金融导论", "type_code": "M", "source": "东湖大学出版社",
                "year": 2019, "pages": "10-20"}),
        (DOI, {"style": "gbt7714", "authors": ["王利明"], "title": "违约金的理论基础研究", "type_code": "J", "source": "法学评论",
               "year": 2021, "volume": "39", "issue": "3", "pages": "12-25", "doi": "10.13594/j.cnki.fxpl.2021.03.001"}),
    ],
    ids=["gbt", "full-width", "author-date", "apa", "vancouver", "mla", "chicago", "loose", "thesis", "conference",
         "newspaper", "book", "doi"],
)
def test_read_entry(text: str, expected: dict[str, object]) -> None:
    assert read(text) == expected


def test_a_title_keeps_the_characters_the_entry_wrote() -> None:
    assert read_entry("［１］張三．數字經濟的影響機制研究［Ｊ］．經濟研究，２０２０．").parsed.title == "數字經濟的影響機制研究"


def test_a_bare_title_is_a_title() -> None:
    assert read_entry("面向典型案例的违约金制度完善").parsed == ParsedReference(style="loose", title="面向典型案例的违约金制度完善")


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("[7] 见第三章", "没有识别出题名"),
        ("[8]", "这一行只有编号，没有内容。"),
        ("同上，第45页。", "同上"),
        ("Ibid., 45.", "同上"),
        ("[9] https://example.com/page", "没有识别出题名（只有网址）"),
    ],
)
def test_lines_without_a_title_say_why(text: str, why: str) -> None:
    assert why in read_entry(text).why
