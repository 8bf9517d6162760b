"""reflist: a pasted reference list split into entries, and each entry read into its fields."""

from __future__ import annotations

import msgspec
import pytest

from cnki_mcp.core.model import ParsedReference
from cnki_mcp.references.reflist import read_entry, split_entries

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
