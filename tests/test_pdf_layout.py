"""The pure layout of a PDF's lines (cnki_mcp/documents/pdf_layout.py) across page and column breaks: lines
as pdf_text.py gives them, two pages at a time, with a running head, a page number and CNKI's line
between the parts of a paragraph."""

from __future__ import annotations

from cnki_mcp.documents.pdf_layout import Layout, layout
from cnki_mcp.documents.pdf_text import Line

HEAD = "法学研究 2024年第3期"
CNKI = "(C)1994-2024 China Academic Journal Electronic Publishing House. All rights reserved. http://www.cnki.net"
LEFT, SIZE, STEP = 72.0, 12.0, 18.0
HAN_FULL = 36  # Han characters of a full line (432 pt); a first line has 2 of indent and 34


class Page:
    """One page's lines top to bottom: the running head, then body lines, then the foot."""

    def __init__(self, number: int, *, head: str = HEAD, column: int = 0, x: float = LEFT) -> None:
        self.number, self.column, self.x = number, column, x
        self.y = 742.0
        self.lines: list[Line] = [self._at(head, LEFT, 800, 9)] if head else []

    def _at(self, text: str, x0: float, top: float, size: float, width: float | None = None) -> Line:
        right = x0 + (width if width is not None else len(text) * size * (1.0 if not text.isascii() else 0.5))
        return Line(text=text, page=self.number, x0=x0, x1=right, bottom=top - size, top=top, size=size, column=self.column)

    def line(self, text: str, *, indent: bool = False, full: bool = False, size: float = SIZE, x: float | None = None) -> Page:
        """A body line; ``full`` reaches the right edge (justified), ``indent`` is a first line's."""
        left = (self.x if x is None else x) + (2 * SIZE if indent else 0.0)
        width = 432.0 - (2 * SIZE if indent else 0.0) if full else None
        self.lines.append(self._at(text, left, self.y, size, width))
        self.y -= STEP if size == SIZE else size * 1.4
        return self

    def foot(self, *, cnki: bool = True) -> list[Line]:
        lines = [*self.lines, self._at(f"· {self.number + 1} ·", 285, 58, 9)]
        return lines + ([self._at(CNKI, LEFT, 36, 7, width=330)] if cnki else [])


def han(count: int, seed: str = "违约金的调整应当以实际损失为基础兼顾合同履行情况与当事人过错") -> str:
    return "".join(seed[i % len(seed)] for i in range(count))


def paragraphs(shape: Layout) -> list[str]:
    return [text for level, text in shape.blocks if level == 0]


def text_of(shape: Layout) -> str:
    return "\n\n".join(text for _, text in shape.blocks)


def starts_with(shape: Layout, page: int, expected: str) -> None:
    """The page's text begins with ``expected`` (the text of its first line)."""
    text = text_of(shape)
    at = shape.page_starts[page]
    assert text[at : at + len(expected)] == expected, (page, text[at : at + 20])


def test_a_chinese_paragraph_cut_mid_sentence_at_the_page_foot_is_one() -> None:
    first, second, third = han(34), han(35) + "，", "法院应当综合衡量" + "。"
    before = han(20, "数字经济的发展对合同法提出新的挑战") + "。"
    one = Page(0).line(before, indent=True).line(first, indent=True, full=True).line(second, full=True).foot()
    two = Page(1).line(third).line("第二段开头。", indent=True).foot()
    shape = layout(one + two, [], 2)
    assert paragraphs(shape) == [before, first + second + third, "第二段开头。"]
    starts_with(shape, 1, "法院应当综合衡量")


def test_an_english_word_hyphenated_across_the_break_and_a_sentence_cut_without_a_hyphen() -> None:
    one = (Page(0, head="Journal of Contract Studies")
           .line("Liquidated damages clauses are common in com-", indent=True, full=True).foot())
    two = (Page(1, head="Journal of Contract Studies")
           .line("mercial contracts and courts reduce them", full=True).foot())
    three = Page(2, head="Journal of Contract Studies").line("when the loss is small.").foot()
    shape = layout(one + two + three, [], 3)
    assert paragraphs(shape) == [
        "Liquidated damages clauses are common in commercial contracts and courts reduce them when the loss is small."
    ]
    starts_with(shape, 1, "mercial contracts")
    starts_with(shape, 2, "when the loss")


def test_a_paragraph_ending_at_the_last_line_stays_two_before_an_indent_or_a_heading() -> None:
    first, ended = han(34), han(HAN_FULL - 1) + "。"

    def page_one() -> list[Line]:
        return Page(0).line("引言。", indent=True).line(first, indent=True, full=True).line(ended, full=True).foot()

    indented = Page(1).line(han(34, "下一段开头"), indent=True, full=True).line(han(36, "接着写"), full=True).line("完。")
    shape = layout(page_one() + indented.foot(), [], 2)
    assert shape.blocks == [(0, "引言。"), (0, first + ended), (0, han(34, "下一段开头") + han(36, "接着写") + "完。")]
    starts_with(shape, 1, "下一段开头")
    heading = Page(1).line("一、研究方法", size=16).line(han(34, "本文的方法"), indent=True, full=True).line("完。")
    shape = layout(page_one() + heading.foot(), [], 2)
    assert shape.blocks == [(0, "引言。"), (0, first + ended), (1, "一、研究方法"), (0, han(34, "本文的方法") + "完。")]
    english = Page(0, head="Vol. 3").line("Each question is answered in a section of its own below:", full=True).foot()
    shape = layout(english + Page(1, head="Vol. 3").line("The first question asks.", indent=True).foot(), [], 2)
    assert paragraphs(shape) == ["Each question is answered in a section of its own below:", "The first question asks."]
    period = Page(0, head="Vol. 3").line("The coding was done twice by two readers.", full=True).foot()
    heading = Page(1, head="Vol. 3").line("1 Method", size=16).line("We read the cases.", indent=True).foot()
    shape = layout(period + heading, [], 2)
    assert shape.blocks == [(0, "The coding was done twice by two readers."), (1, "1 Method"), (0, "We read the cases.")]
    starts_with(shape, 1, "1 Method")


def test_a_sentence_ended_on_a_full_last_line_goes_on_when_the_next_page_is_not_indented() -> None:
    first, second = han(34), han(HAN_FULL - 1) + "。"
    one = Page(0).line(first, indent=True, full=True).line(second, full=True).foot()
    two = Page(1).line("新的一句接着写完。").line("另一段。", indent=True).foot()
    shape = layout(one + two, [], 2)
    assert paragraphs(shape) == [first + second + "新的一句接着写完。", "另一段。"]
    starts_with(shape, 1, "新的一句")
    # A one-line paragraph (indented) ending its sentence is a paragraph of its own, however wide.
    alone = Page(0).line(han(33) + "。", indent=True, full=True).foot()
    shape = layout(alone + Page(1).line("下一页的段落。").foot(), [], 2)
    assert paragraphs(shape) == [han(33) + "。", "下一页的段落。"]


def test_references_across_a_page_break_stay_items() -> None:
    one = Page(0).line("[3] 王利明. 违约金的调整规则研究[J]. 法学研究, 2019(4): 1-12. 以及相关文献.", full=True).foot()
    two = Page(1).line("[4] 韩世远. 合同法总论[M]. 北京: 法律出版社, 2018.").foot()
    shape = layout(one + two, [], 2)
    assert len(paragraphs(shape)) == 2


def test_a_two_column_page_joins_the_left_columns_foot_to_the_right_columns_top() -> None:
    left, right = Page(0, head="", column=1), Page(0, head="", column=2, x=307.5)
    for index in range(4):
        left.line(han(15) if index == 0 else han(17), indent=index == 0, full=False)
    right.line(han(9, "右栏接着写完这一句") + "。").line(han(16, "另一段在右栏开头") + "。", indent=True).line(han(10, "这段的第二行"))
    lines = left.foot()[:-2] + right.lines + left.foot()[-2:]
    shape = layout(lines, [], 1)
    assert paragraphs(shape) == [han(15) + han(17) * 3 + "右栏接着写完这一句。", han(16, "另一段在右栏开头") + "。" + han(10, "这段的第二行")]
    # A short last line in the left column ends the paragraph there.
    short = Page(0, head="", column=1)
    short.line(han(15), indent=True).line(han(17)).line("到此结束。")
    other = Page(0, head="", column=2, x=307.5).line(han(17, "右栏另起一段")).line("完。")
    shape = layout(short.lines + other.lines, [], 1)
    assert paragraphs(shape) == [han(15) + han(17) + "到此结束。", han(17, "右栏另起一段") + "完。"]


def test_a_caption_or_a_footnote_between_the_parts_follows_the_paragraph() -> None:
    cut = han(34)
    one = Page(0).line(cut, indent=True, full=True)
    one.line("① 参见王利明：《合同法研究》第二卷，第688页。", size=9, x=LEFT)
    two = Page(1)
    two.lines.append(Line(text="图1 违约金调整案件数量", page=1, x0=230, x1=370, bottom=560, top=570.5, size=10.5))
    two.y = 530
    two.line("这一段在图下接着写完。").line("新的一段。", indent=True)
    shape = layout(one.foot() + two.foot(), [], 2)
    assert paragraphs(shape) == [
        cut + "这一段在图下接着写完。", "① 参见王利明：《合同法研究》第二卷，第688页。", "图1 违约金调整案件数量", "新的一段。",
    ]
    starts_with(shape, 1, "这一段在图下")


def test_a_caption_after_an_ended_paragraph_or_a_heading_at_the_top_are_not_joined() -> None:
    ended = han(HAN_FULL - 1) + "。"
    one = Page(0).line("前一段。", indent=True).line(han(34), indent=True, full=True).line(ended, full=True).foot()
    caption = Page(1).line("图2 各省调减比例", x=200, size=10.5)
    caption.y -= 20  # the space below a caption
    caption.line("正文另起一段。", indent=True)
    caption = caption.foot()
    assert paragraphs(layout(one + caption, [], 2)) == ["前一段。", han(34) + ended, "图2 各省调减比例", "正文另起一段。"]
    cut = Page(0).line(han(34), indent=True, full=True).foot()
    heading = Page(1).line("（二）酌增规则", size=14).line("约定的违约金低于损失的可以增加。", indent=True).foot()
    shape = layout(cut + heading, [], 2)
    assert shape.blocks == [(0, han(34)), (1, "（二）酌增规则"), (0, "约定的违约金低于损失的可以增加。")]
    starts_with(shape, 1, "（二）酌增规则")


def test_page_starts_count_the_characters_the_text_drops() -> None:
    # A soft hyphen PDFium marked (U+FFFE) and a control character inside the paragraph before the break.
    one = (Page(0, head="Vol. 3").line("Courts weigh the con\ufffe", indent=True, full=True)
           .line("tract's terms and the\x02\x03 parties' loss and", full=True).foot())
    two = Page(1, head="Vol. 3").line("reduce the sum.").foot()
    shape = layout(one + two, [], 2)
    assert paragraphs(shape) == ["Courts weigh the contract's terms and the parties' loss and reduce the sum."]
    starts_with(shape, 1, "reduce the sum.")
