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


# --- paragraphs across page and column breaks -------------------------------------------------------
# Pages drawn line by line, so each break falls where the test needs it. Han lines are 36 characters
# of 12 pt (a first line: 2 characters of indent and 34), so every line but a paragraph's last reaches
# the right edge as justified text does; English lines are justified by word spacing.
FULL = 432.0  # the text width of a page: LEFT to LEFT + FULL
COLUMN = 204.0  # the text width of a column on a two-column page
_POOL = (
    "违约金是当事人约定的一方违约时应当向对方支付的一定数额的金钱其功能在于填补损失并督促履行人民法院在调整违约金"
    "时应当以实际损失为基础兼顾合同的履行情况当事人的过错程度以及预期利益等因素综合衡量并根据公平原则和诚实信用原则"
    "予以裁量商事合同的当事人具有更强的风险预见能力对其约定的违约金应当更加尊重当事人的意思自治"
)


def han(count: int, start: int, end: str = "。") -> str:
    """``count`` characters of Chinese prose from the pool (at ``start``), the last one ``end``."""
    body = "".join(_POOL[(start + i) % len(_POOL)] for i in range(count - len(end)))
    return body + end


def han_lines(text: str, per_line: int = 36, indent: int = 2) -> list[str]:
    """``text`` cut into lines of ``per_line`` characters, the first ``indent`` shorter."""
    lines, at = [text[: per_line - indent]], per_line - indent
    while at < len(text):
        lines.append(text[at : at + per_line])
        at += per_line
    return lines


class Flow(Pdf):
    """Pages written line by line: paragraph lines (the first indented, full ones justified), headings,
    a figure with its caption, a footnote above the page foot, a table, a two-column page."""

    def text(self, text: str, *, x: float = LEFT, size: float = 12, width: float | None = None, gap: float = 18) -> None:
        font = "Helvetica" if text.isascii() else HAN
        natural = pdfmetrics.stringWidth(text, font, size)
        out = self.canvas.beginText(x, self.y)
        out.setFont(font, size)
        if width is not None and text.isascii() and " " in text:
            assert natural <= width + 0.5, (text, natural)
            out.setWordSpace((width - natural) / text.count(" "))
        out.textLine(text)
        self.canvas.drawText(out)
        self.y -= gap

    def paragraph(self, lines: list[str], *, first: bool = True, last: bool = True, width: float = FULL, x: float = LEFT) -> None:
        """Lines of one paragraph; ``first``: its first line (indented), ``last``: its last line (not justified)."""
        for index, text in enumerate(lines):
            indent = 24.0 if first and index == 0 else 0.0
            final = last and index == len(lines) - 1
            self.text(text, x=x + indent, width=None if final else width - indent)
        if last:
            self.y -= 10

    def heading_line(self, text: str) -> None:
        self.y -= 6
        self.text(text, size=16, gap=26)

    def figure(self, caption: str, size: float = 10.5) -> None:
        """A figure (a framed box, no text) and its caption centred below it."""
        self.canvas.rect(LEFT + 100, self.y - 120, FULL - 200, 120)
        self.y -= 140
        self.canvas.setFont("Helvetica" if caption.isascii() else HAN, size)
        self.canvas.drawCentredString(LEFT + FULL / 2, self.y, caption)
        self.y -= 28

    def table(self, caption: str, rows: list[str]) -> None:
        """A caption, then the table's rows in a smaller size (8 pt)."""
        self.text(caption, x=LEFT + 120, size=10, gap=16)
        for row in rows:
            self.text(row, x=LEFT + 60, size=8, gap=11)
        self.y -= 12

    def footnote(self, text: str) -> None:
        self.canvas.line(LEFT, 96, LEFT + 120, 96)
        self.canvas.setFont("Helvetica" if text.isascii() else HAN, 9)
        self.canvas.drawString(LEFT, 84, text)

    def columns(self, left: list[tuple[list[str], bool, bool]], right: list[tuple[list[str], bool, bool]]) -> None:
        """The current page in two columns: each a list of (lines, first, last) paragraph pieces."""
        top = self.y
        for x, pieces in ((LEFT, left), (WIDTH / 2 + 10, right)):
            self.y = top
            for lines, first, last in pieces:
                self.paragraph(lines, first=first, last=last, width=COLUMN, x=x)


# The Chinese paper's paragraphs and its blocks as a reader should give them (text order).
ZH_P1 = han(80, 0)
ZH_P2 = han(34 + 36 * 3 + 12, 20)  # cut mid-sentence after its third line
ZH_P3 = han(70, 40) + han(50, 90)  # its first sentence ends the page's last line; the next page goes on
ZH_P4 = han(34 + 36 * 2, 60)  # ends exactly at the page's last line
ZH_P5 = han(34 + 36 * 2 + 20, 100)  # cut mid-sentence; a footnote, then a figure between its parts
ZH_P6 = han(70, 130)  # ends at the page's last line, a heading follows
ZH_P7 = han(50, 150)
ZH_P8 = han(15 + 17 * 3 + 10, 170)  # a two-column page: cut at the left column's foot
ZH_P9 = han(40, 10)
ZH_TITLE = "数字经济背景下违约金调整规则研究"
ZH_FOOTNOTE = "① 参见王利明：《合同法研究》第二卷，中国人民大学出版社2018年版，第688页。"
ZH_CAPTION = "图1 违约金调整案件数量（2015—2023年）"
ZH_BLOCKS = [
    ZH_TITLE, "王芳", "一、引言", ZH_P1, ZH_P2, ZH_P3, ZH_P4, ZH_P5, ZH_FOOTNOTE, ZH_CAPTION, ZH_P6,
    "二、违约金调整的规范基础", ZH_P7, ZH_P8, ZH_P9,
]


def zh_break_page_tops() -> list[list[str]]:
    """The first body line of pages 2 to 7 of ``zh_breaks_pdf`` (page 1 starts with the title)."""
    p2, p3, p5, p8 = han_lines(ZH_P2), han_lines(ZH_P3), han_lines(ZH_P5), han_lines(ZH_P8, per_line=17)
    return [p2[3:], p3[2:], han_lines(ZH_P5), p5[3:], ["二、违约金调整的规范基础"], p8]


def zh_breaks_pdf() -> bytes:
    """Seven pages whose paragraphs run across page and column breaks (no outline: numbered headings)."""
    pdf = Flow()
    pdf.text(ZH_TITLE, size=18, gap=30)
    pdf.text("王芳", gap=24)
    pdf.heading_line("一、引言")
    pdf.paragraph(han_lines(ZH_P1))
    p2 = han_lines(ZH_P2)
    pdf.paragraph(p2[:3], last=False)
    pdf.new_page()
    pdf.paragraph(p2[3:], first=False)
    p3 = han_lines(ZH_P3)
    pdf.paragraph(p3[:2], last=False)
    pdf.new_page()
    pdf.paragraph(p3[2:], first=False)
    pdf.paragraph(han_lines(ZH_P4))
    pdf.new_page()
    p5 = han_lines(ZH_P5)
    pdf.paragraph(p5[:3], last=False)
    pdf.footnote(ZH_FOOTNOTE)
    pdf.new_page()
    pdf.figure(ZH_CAPTION)
    pdf.paragraph(p5[3:], first=False)
    pdf.paragraph(han_lines(ZH_P6))
    pdf.new_page()
    pdf.heading_line("二、违约金调整的规范基础")
    pdf.paragraph(han_lines(ZH_P7))
    pdf.new_page()
    p8 = han_lines(ZH_P8, per_line=17)
    pdf.columns([(p8[:4], True, False)], [(p8[4:], False, True), (han_lines(ZH_P9, per_line=17), True, True)])
    for lines in (p2[:3], p3[:2], p5[:3], p8[:4]):  # where a break must join: a full line, no sentence end
        assert len(lines[-1]) == len(lines[1]), lines
    assert not ZH_P2[: 34 + 72].endswith("。") and ZH_P3[:70].endswith("。")
    return pdf.save()


# The English paper: the lines as drawn and the paragraphs a reader should give.
EN_TITLE = "Liquidated Damages across Page Breaks"
EN_P1 = [
    "Liquidated damages clauses are common in contracts between firms of",
    "every size, and courts have long disagreed on how far a clause that",
    "looks like a penalty may be reduced when the loss proves small, com-",
]
EN_P1_NEXT = ["mercial parties included."]
EN_P2 = [
    "We read the judgments of the higher courts of three provinces and the",
    "published cases of the supreme court, and we coded every reduction of",
]
EN_P2_NEXT = ["the agreed sum by its share of the claim."]
EN_P3 = [
    "The coding was done twice by two readers who did not know each other",
    "and who met only to settle the cases where their codes did not agree.",
]
EN_P4 = [
    "Three questions guide the analysis of the courts' reasons for their",
    "decisions, and each of them is answered in a section of its own below:",
]
EN_P5 = [
    "The first question asks whether the courts start from the actual loss",
    "of the creditor or from the sum the parties agreed in their contract.",
]
EN_P5_NEXT = ["Most start from the loss."]
EN_P6 = [
    "The reductions granted differ widely between the provinces and also",
    "between the years, as the table shows for the decisions of the higher",
]
EN_P6_NEXT = ["courts from 2015 to 2023."]
EN_TABLE = ["Year    Cases    Reduced", "2015    40    12", "2023    95    51"]
EN_CAPTION = "Table 1 Reductions granted by year"
EN_BLOCKS = [
    EN_TITLE, "1 Introduction",
    ("Liquidated damages clauses are common in contracts between firms of every size, and courts have long "
     "disagreed on how far a clause that looks like a penalty may be reduced when the loss proves small, "
     "commercial parties included."),
    ("We read the judgments of the higher courts of three provinces and the published cases of the supreme "
    "court, and we coded every reduction of the agreed sum by its share of the claim."),
    ("The coding was done twice by two readers who did not know each other and who met only to settle the "
    "cases where their codes did not agree."),
    "2 Method",
    ("Three questions guide the analysis of the courts' reasons for their decisions, and each of them is "
    "answered in a section of its own below:"),
    ("The first question asks whether the courts start from the actual loss of the creditor or from the sum "
    "the parties agreed in their contract. Most start from the loss."),
    ("The reductions granted differ widely between the provinces and also between the years, as the table "
    "shows for the decisions of the higher courts from 2015 to 2023."),
    EN_CAPTION, "Year Cases Reduced 2015 40 12 2023 95 51",
]


def en_breaks_pdf() -> bytes:
    """Seven pages of an English paper: a word hyphenated across a page break, a sentence cut without a
    hyphen, paragraphs ending at a page's last line, a heading and a table at the top of a page."""
    pdf = Flow(head="Journal of Contract Studies, Vol. 3", foot="- {n} -")
    pdf.text(EN_TITLE, size=18, gap=30)
    pdf.heading_line("1 Introduction")
    pdf.paragraph(EN_P1, last=False)
    pdf.new_page()
    pdf.paragraph(EN_P1_NEXT, first=False)
    pdf.paragraph(EN_P2, last=False)
    pdf.new_page()
    pdf.paragraph(EN_P2_NEXT, first=False)
    pdf.paragraph(EN_P3, last=False)  # a full last line ending the sentence: the next page has a heading
    pdf.new_page()
    pdf.heading_line("2 Method")
    pdf.paragraph(EN_P4, last=False)  # ends with ':' at the page's last line: an indented paragraph follows
    pdf.new_page()
    pdf.paragraph(EN_P5, last=False)  # ends a sentence at the page's last line, and goes on unindented
    pdf.new_page()
    pdf.paragraph(EN_P5_NEXT, first=False)
    pdf.paragraph(EN_P6, last=False)
    pdf.new_page()
    pdf.table(EN_CAPTION, EN_TABLE)
    pdf.paragraph(EN_P6_NEXT, first=False)
    return pdf.save()


# --- hostile files, written by hand: tiny on disk, expensive to read ------------------------------------


def _pdf(objects: list[bytes]) -> bytes:
    """A PDF of ``objects`` (object 1 the catalog), with its cross-reference table."""
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def dense_pdf(pages: int = 2, chars: int = 2_500_000, side: float = 14_400.0) -> bytes:
    """``pages`` pages of ``side`` points square, each with ``chars`` one-point characters in one compressed
    stream (the red team's 20 KB file: 2 pages of 14,400 pt, 5 M characters)."""
    import zlib

    per_line = 10_000
    rows = b"".join(b"0 -1 Td (%s) Tj\n" % (b"A" * per_line) for _ in range(chars // per_line))
    stream = zlib.compress(b"BT /F1 1 Tf 0 %d Td\n" % int(side) + rows + b"ET\n", 9)
    kids = " ".join(f"{4 + i} 0 R" for i in range(pages)).encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, pages),
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(stream) + stream + b"\nendstream",
    ]
    font = 4 + pages
    objects += [
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 %d %d] /Contents 3 0 R /Resources << /Font << /F1 %d 0 R >> >> >>"
        % (int(side), int(side), font)
        for _ in range(pages)
    ]
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    return _pdf(objects)


def long_pdf(pages: int = 10_000) -> bytes:
    """``pages`` pages, each with a sentence of its own (a repeated one would be a running head)."""
    font = 3 + 2 * pages
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [%s] /Count %d >>" % (" ".join(f"{3 + 2 * i} 0 R" for i in range(pages)).encode(), pages),
    ]
    for i in range(pages):
        words = " ".join(("alpha", "beta", "gamma", "delta", "omega", "sigma")[(i >> k) % 6] for k in range(0, 24, 3))
        text = b"BT /F1 12 Tf 72 700 Td (Paragraph %d of a long file reads %s here.) Tj ET" % (i, words.encode())
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Contents %d 0 R /Resources << /Font << /F1 %d 0 R >> >> >>"
            % (4 + 2 * i, font)
        )
        objects.append(b"<< /Length %d >>\nstream\n" % len(text) + text + b"\nendstream")
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    return _pdf(objects)
