"""PDFs with a real text layer, made with reportlab for the tests of reading downloaded files.

Chinese text uses reportlab's built-in Adobe-GB1 font (STSong-Light, not embedded: PDF readers and
PDFium map it to Unicode without a font file). Pages carry what CNKI's files carry: a running head
(journal and issue, or a thesis's university line), a page number foot (``· N ·``, ``- N -``, roman),
CNKI's copyright line, words hyphenated across line ends, a two-column page, a scanned page (an
image, no text).
"""

from __future__ import annotations

import io

from reportlab.lib.utils import ImageReader
from reportlab.pdfbase import pdfmetrics
from reportlab.pdfbase.cidfonts import UnicodeCIDFont
from reportlab.pdfgen import canvas

HAN = "STSong-Light"
pdfmetrics.registerFont(UnicodeCIDFont(HAN))
WIDTH, HEIGHT = 595.0, 842.0
LEFT, RIGHT = 72.0, 523.0
CNKI_LINE = "(C)1994-2024 China Academic Journal Electronic Publishing House. All rights reserved. http://www.cnki.net"
JOURNAL_HEAD = "法学研究 2024年第3期"

# The Chinese article: (outline level, heading, paragraphs of lines). Lines are drawn as given.
ARTICLE = [
    (1, "一、引言", [
        ["数字经济的发展对传统合同法提出了新的挑", "战，本文讨论违约金的调整规则与司法实践。"],
        ["违约金条款在商事合同中普遍存在，其调整的", "标准长期以来存在争议。"],
    ]),
    (1, "二、违约金调整的规范基础", [
        ["民法典第五百八十五条规定了违约金的酌减", "与酌增规则。"],
    ]),
    (2, "（一）酌减规则", [
        ["当事人约定的违约金过分高于造成的损失的，", "人民法院可以根据当事人的请求予以适当减少。"],
    ]),
    (2, "（二）酌增规则", [
        ["约定的违约金低于造成的损失的，当事人可以", "请求予以增加。"],
    ]),
    (1, "三、结论", [
        ["违约金调整应当兼顾合同自由与实质公平。"],
    ]),
]
ENGLISH = [
    (1, "1 Introduction", [
        ["Liquidated damages clauses are common in com-", "mercial contracts and their adjustment is con-",
         "troversial."],
        ["Courts apply a proportionality test."],
    ]),
    (1, "2 Method", [["We read 120 judgments from 2015 to 2023."]]),
    (2, "2.1 Data", [["The judgments come from a public database."]]),
    (1, "3 Results", [["Reductions were granted in most cases."]]),
    (1, "References", [["[1] Wang F. Contract law. Beijing: Law Press, 2020."]]),
]


class Pdf:
    """A reportlab canvas with the furniture of a CNKI file on every page."""

    def __init__(self, head: str = JOURNAL_HEAD, foot: str = "· {n} ·", cnki: bool = True) -> None:
        self.buffer = io.BytesIO()
        # invariant: the same bytes every time (no creation date, no random document id)
        self.canvas = canvas.Canvas(self.buffer, pagesize=(WIDTH, HEIGHT), invariant=True)
        self.head, self.foot, self.cnki = head, foot, cnki
        self.page = 0
        self.y = 0.0
        self.new_page()

    def new_page(self, furniture: bool = True) -> None:
        if self.page:
            self.canvas.showPage()
        self.page += 1
        self.y = HEIGHT - 110
        if not furniture:
            return
        c = self.canvas
        c.setFont(HAN, 9)
        if self.head:
            c.drawString(LEFT, HEIGHT - 50, self.head)
        c.drawCentredString(WIDTH / 2, 50, self.foot.format(n=self.page))
        if self.cnki:
            c.setFont("Helvetica", 7)
            c.drawString(LEFT, 30, CNKI_LINE)

    def line(self, text: str, size: float = 12, x: float = LEFT, gap: float = 18) -> None:
        if self.y < 100:
            self.new_page()
        font = "Helvetica" if text.isascii() else HAN
        self.canvas.setFont(font, size)
        self.canvas.drawString(x, self.y, text)
        self.y -= gap

    def heading(self, text: str, level: int, outline: bool) -> None:
        self.y -= 6
        if outline:
            name = f"h{self.page}-{self.y:.0f}"
            self.canvas.bookmarkPage(name, fit="XYZ", top=self.y + 16)
            self.canvas.addOutlineEntry(text, name, level=level - 1)
        self.line(text, size=16 if level == 1 else 14, gap=24)

    def paragraphs(self, paragraphs: list[list[str]]) -> None:
        for lines in paragraphs:
            for index, text in enumerate(lines):
                self.line(text, x=LEFT + (24 if index == 0 else 0))
            self.y -= 10

    def two_columns(self, left: list[str], right: list[str]) -> None:
        """A page set in two columns (the left one drawn first, as typesetters do)."""
        self.new_page()
        c = self.canvas
        c.setFont(HAN, 11)
        for column, lines in ((LEFT, left), (WIDTH / 2 + 10, right)):
            y = HEIGHT - 110
            for text in lines:
                c.drawString(column, y, text)
                y -= 16

    def scanned(self) -> None:
        """A page with an image of text and no text layer (a scan)."""
        from PIL import Image, ImageDraw

        self.new_page(furniture=False)
        image = Image.new("L", (400, 200), 255)
        ImageDraw.Draw(image).rectangle((20, 20, 380, 60), fill=0)
        self.canvas.drawImage(ImageReader(image), LEFT, 400, width=400, height=200)

    def save(self) -> bytes:
        self.canvas.save()
        return self.buffer.getvalue()


def article_pdf(*, outline: bool = True, two_columns: bool = True, scanned: bool = False) -> bytes:
    """The Chinese article: outline (or not), a two-column page, optionally a scanned last page."""
    pdf = Pdf()
    pdf.line("数字经济背景下违约金调整规则研究", size=18, gap=30)
    pdf.line("王芳", gap=24)
    for index, (level, title, paragraphs) in enumerate(ARTICLE):
        if index == 2:
            pdf.new_page()
        pdf.heading(title, level, outline)
        pdf.paragraphs(paragraphs)
    if two_columns:
        pdf.two_columns(
            ["左栏第一行文字说明违约金的功", "能在于填补损失，左栏第二行继", "续讨论惩罚性违约金的问题。"],
            ["右栏第一行讨论比较法上的经验，", "右栏第二行说明德国法的做法，", "右栏第三行总结本文观点。"],
        )
    if scanned:
        pdf.scanned()
    return pdf.save()


def english_pdf() -> bytes:
    """An English paper without an outline: numbered headings, hyphenated line ends, ``- N -`` feet."""
    pdf = Pdf(head="Journal of Contract Studies, Vol. 3", foot="- {n} -")
    pdf.line("Liquidated Damages in the Digital Economy", size=18, gap=30)
    for index, (level, title, paragraphs) in enumerate(ENGLISH):
        if index == 3:
            pdf.new_page()
        pdf.heading(title, level, outline=False)
        pdf.paragraphs(paragraphs)
    return pdf.save()


def thesis_pdf() -> bytes:
    """A thesis without an outline: a dot-leader table of contents, 第一章 headings, roman page numbers
    in the front matter, the university line on every page."""
    pdf = Pdf(head="华东政法大学硕士学位论文", foot="{n}", cnki=False)
    pdf.line("目  录", size=16, gap=30)
    for entry, page in (("第一章 绪论", 1), ("第一节 研究背景", 1), ("第二章 违约金的功能", 2), ("结论", 3)):
        pdf.line(f"{entry}{'.' * 30}{page}")
    pdf.new_page()
    pdf.heading("第一章 绪论", 1, outline=False)
    pdf.heading("第一节 研究背景", 2, outline=False)
    pdf.paragraphs([["违约金制度是合同法的重要组成部分，", "本章介绍研究背景。"]])
    pdf.new_page()
    pdf.heading("第二章 违约金的功能", 1, outline=False)
    pdf.paragraphs([["违约金兼具补偿与惩罚两种功能。"]])
    pdf.heading("结论", 1, outline=False)
    pdf.paragraphs([["本文认为应当区分两种功能分别调整。"]])
    return pdf.save()


def scanned_pdf(pages: int = 2) -> bytes:
    pdf = Pdf(head="", cnki=False)
    pdf.page = 0
    pdf.buffer = io.BytesIO()
    pdf.canvas = canvas.Canvas(pdf.buffer, pagesize=(WIDTH, HEIGHT), invariant=True)
    for _ in range(pages):
        pdf.scanned()
    return pdf.save()


def wrap(text: str, size: float = 12, width: float = RIGHT - LEFT - 24) -> list[str]:
    """``text`` cut into lines no wider than ``width`` (Han text anywhere, Latin text at spaces)."""
    font = "Helvetica" if text.isascii() else HAN
    lines, current = [], ""
    for piece in text.split(" ") if text.isascii() else list(text):
        candidate = f"{current} {piece}" if current and text.isascii() else current + piece
        hanging = piece in "，。；：、！？”）》"  # never at the start of a line, as typesetters do
        if current and not hanging and pdfmetrics.stringWidth(candidate, font, size) > width:
            lines.append(current)
            current = piece
        else:
            current = candidate
    return [*lines, current] if current else lines


def paper_pdf(title: str, authors: list[str], head: str, sections: list[tuple[int, str, list[str]]]) -> bytes:
    """A paper's PDF as CNKI serves it: title, authors, the sections (an outline entry each), running
    head and page-number foot, CNKI's line on every page."""
    pdf = Pdf(head=head)
    for line in wrap(title, 18):
        pdf.line(line, size=18, gap=26)
    pdf.line("；".join(authors) or "佚名", gap=26)
    for level, heading, paragraphs in sections:
        pdf.heading(heading, level, outline=True)
        pdf.paragraphs([wrap(paragraph) for paragraph in paragraphs])
    return pdf.save()


def kdh(pdf: bytes) -> bytes:
    """``pdf`` wrapped as a KDH file: a 254-byte header, then the bytes XOR-ed with the format's key."""
    head = b"KDH ".ljust(254, b"\x00")
    key = b"FZHMEI"
    return head + bytes(byte ^ key[i % len(key)] for i, byte in enumerate(pdf))
