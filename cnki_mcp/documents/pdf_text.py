"""A PDF's text layer and outline, read with pypdfium2 (PDFium); blocking: call from ``asyncio.to_thread``.

PDFium gives the characters of a page with their origins, font sizes and boxes; they are cut into runs
(``_Chars``) and the runs grouped into lines per column: a page whose runs sit either left or right of the
middle, side by side down the page, is read as two columns (the left one first), with what spans the
middle (a title, a running head, a table) kept in its place above or below them. Nothing here judges
what a line means (pdf_layout.py does).

A CAJ download can be a PDF inside: a ``%PDF`` body behind another header, or ``KDH `` — a PDF whose
bytes after a fixed header are XOR-ed with a short fixed key. Those are opened as PDFs; the other CAJ
kinds (``CAJ``, ``HN``, ``C8``, ``TEB``) are CNKI's own formats: CAJ_UNSUPPORTED.
"""

from __future__ import annotations

import ctypes
import threading
import time
import unicodedata
from pathlib import Path

import msgspec

from cnki_mcp.core.errors import CnkiError

MAX_PAGES = 2000
PAGE_CHARS_MAX = 200_000  # a dense real page has ~5,000; more is a crafted file, not a paper
PAGE_SECONDS = 10.0  # one page's reading
CHECK_EVERY = 4096  # characters between looks at the clock and the stop flag
_COLUMN_LINES = 3  # runs on each side needed before a page counts as two columns
# KDH: the PDF starts after this many bytes and is XOR-ed with this key, repeated.
KDH_SKIP = 254
KDH_KEY = b"FZHMEI"
_HYPHENS = frozenset("-\u00ad\u2010\u2011\ufffe\x02")  # what PDFium may mark as a soft hyphen at a line end
_OPEN_LOCK = threading.Lock()  # PDFium is not thread-safe: one document call at a time


class Budget:
    """What one parse may spend, and the flag that stops it with the call (the thread checks it)."""

    def __init__(self, page_seconds: float = PAGE_SECONDS, page_chars: int = PAGE_CHARS_MAX) -> None:
        self.page_seconds, self.page_chars = page_seconds, page_chars
        self.stop = threading.Event()
        self._page_deadline = 0.0
        self.page = 0

    def start_page(self, index: int, chars: int) -> None:
        self.page = index
        self.check()
        if chars > self.page_chars:
            raise _too_complex(index, f"有 {chars} 个字符（上限 {self.page_chars}）")
        self._page_deadline = time.monotonic() + self.page_seconds

    def check(self) -> None:
        if self.stop.is_set():
            raise Stopped
        if self._page_deadline and time.monotonic() > self._page_deadline:
            raise _too_complex(self.page, f"解析超过 {self.page_seconds:g} 秒")


class Stopped(Exception):
    """The call this parse was for has ended: nobody waits for the text any more."""


def _too_complex(page: int, why: str) -> CnkiError:
    return CnkiError(
        "PDF_TOO_COMPLEX",
        f"PDF 第 {page + 1} 页{why}，不像正常的论文页面，已停止读取。请改用 source=online 在线阅读，或重新下载这篇论文。",
        details={"page": page + 1},
    )


class Line(msgspec.Struct):
    """One line of a page: its text and box (PDF points, y upwards), page index and column (0 whole width, 1 left, 2 right)."""

    text: str
    page: int
    x0: float
    x1: float
    bottom: float
    top: float
    size: float = 0.0  # font size (points)
    column: int = 0


class OutlineEntry(msgspec.Struct):
    title: str
    level: int  # 1 = top
    page: int  # 0-based, -1 when the entry names no page


class PdfText(msgspec.Struct):
    pages: int  # read
    total_pages: int
    lines: list[Line]
    outline: list[OutlineEntry]
    empty_pages: list[int]  # 0-based pages without any text (scanned)
    raw_characters: int


def pdf_bytes_of(data: bytes, header: str) -> bytes | None:
    """The PDF inside a downloaded file: itself, a ``%PDF`` body behind a CAJ header, or a KDH file
    decoded; None when the file is not a PDF in any of these ways."""
    if data.startswith(b"%PDF-"):
        return data
    if header == "KDH":
        body = data[KDH_SKIP:]
        key = (KDH_KEY * (len(body) // len(KDH_KEY) + 1))[: len(body)]
        plain = bytes(a ^ b for a, b in zip(body, key, strict=True))
        end = plain.rfind(b"%%EOF")
        if plain.startswith(b"%PDF-"):
            return plain[: end + 5] if end >= 0 else plain
        return None
    start = data.find(b"%PDF-", 0, 1 << 16)
    return data[start:] if start > 0 and b"%%EOF" in data[-4096:] else None


class _Chars:
    """A text page's characters as runs: PDFium's own line breaks, a jump back or a change of
    baseline, or a gap wide enough to be a gutter between columns start a new run. Each run's box is
    its baseline and font size (PDFium gives Han characters of unembedded fonts no height)."""

    def __init__(self, raw: object, textpage: object, page: int, budget: Budget | None = None) -> None:
        self.raw, self.textpage, self.page = raw, textpage, page
        self.budget = budget or Budget()
        self.runs: list[Line] = []
        self._text: list[str] = []
        self._x0 = self._x1 = self._y = self._size = 0.0

    def _end(self) -> None:
        # Where the platform's wchar_t is 16 bits (Windows) a character beyond the BMP comes as two halves.
        text = "".join(self._text).encode("utf-16", "surrogatepass").decode("utf-16", "replace").strip()
        if text:
            size = self._size or 1.0
            self.runs.append(Line(
                text=text, page=self.page, x0=self._x0, x1=self._x1,
                bottom=self._y - 0.15 * size, top=self._y + 0.85 * size, size=size,
            ))
        self._text = []

    def read(self) -> list[Line]:
        raw, page = self.raw, self.textpage
        x, y = ctypes.c_double(), ctypes.c_double()
        box = raw.FS_RECTF()  # type: ignore[attr-defined]
        x_ref, y_ref, box_ref = ctypes.byref(x), ctypes.byref(y), ctypes.byref(box)
        unicode, origin = raw.FPDFText_GetUnicode, raw.FPDFText_GetCharOrigin  # type: ignore[attr-defined]
        loose, font_size = raw.FPDFText_GetLooseCharBox, raw.FPDFText_GetFontSize  # type: ignore[attr-defined]
        check = self.budget.check
        for index in range(raw.FPDFText_CountChars(page)):  # type: ignore[attr-defined]
            if index % CHECK_EVERY == 0:
                check()
            code = unicode(page, index)
            char = chr(code) if 0 < code < 0x110000 else ""
            if char in ("\r", "\n") or not char:
                self._end()
                continue
            if char.isspace():  # typed or generated by PDFium between words
                if self._text:
                    self._text.append(" ")
                continue
            if char in _HYPHENS and raw.FPDFText_IsHyphen(page, index) == 1:  # type: ignore[attr-defined]
                char = "\ufffe"
            origin(page, index, x_ref, y_ref)
            loose(page, index, box_ref)
            size = float(font_size(page, index)) or abs(box.top - box.bottom) or 1.0
            left, right = min(box.left, box.right), max(box.left, box.right)
            if self._text:
                span = max(size, self._size)
                moved = abs(y.value - self._y) > 0.5 * span or left < self._x0 - span
                if moved or left - self._x1 > 2.5 * span:
                    self._end()
            if not self._text:
                self._x0, self._y, self._size = left, y.value, size
            self._x1 = max(self._x1, right) if len(self._text) else right
            self._size = max(self._size, size)
            self._text.append(char)
        self._end()
        return self.runs


def _columns(runs: list[Line], width: float) -> bool:
    """Whether the runs form two columns: several runs on each side of the middle, beside each other."""
    middle = width / 2
    left = [r for r in runs if r.x1 < middle]
    right = [r for r in runs if r.x0 > middle]
    if len(left) < _COLUMN_LINES or len(right) < _COLUMN_LINES:
        return False
    beside = sum(1 for r in right if any(line.bottom < r.top and r.bottom < line.top for line in left))
    return beside >= _COLUMN_LINES


def _joined(runs: list[Line]) -> Line:
    """Runs on one line, left to right, as one line (a space where a gap is wide and neither side is Han)."""
    runs = sorted(runs, key=lambda r: r.x0)
    text = runs[0].text
    for before, run in zip(runs, runs[1:], strict=False):
        gap = run.x0 - before.x1
        wide = gap > 0.25 * max(before.size, run.size, 1.0)
        if wide and not (_wide_char(text[-1:]) and _wide_char(run.text[:1])):
            text += " "
        text += run.text
    first = runs[0]
    return Line(
        text=text, page=first.page, column=first.column, x0=first.x0, x1=max(r.x1 for r in runs),
        bottom=min(r.bottom for r in runs), top=max(r.top for r in runs), size=max(r.size for r in runs),
    )


def _wide_char(char: str) -> bool:
    return bool(char) and unicodedata.east_asian_width(char) in ("W", "F")


def _lines(runs: list[Line]) -> list[Line]:
    """Runs grouped into lines top to bottom (runs overlapping by half their height share a line)."""
    lines: list[list[Line]] = []
    for run in sorted(runs, key=lambda r: (-r.top, r.x0)):
        current = lines[-1] if lines else None
        if current is not None:
            low, high = min(r.bottom for r in current), max(r.top for r in current)
            overlap = min(high, run.top) - max(low, run.bottom)
            if overlap >= 0.5 * min(high - low, run.top - run.bottom):
                current.append(run)
                continue
        lines.append([run])
    return [_joined(group) for group in lines]


def page_lines(runs: list[Line], width: float) -> list[Line]:
    """A page's lines in reading order: one column, or bands of whole-width lines and two columns."""
    if not _columns(runs, width):
        return _lines(runs)
    middle = width / 2
    for run in runs:
        run.column = 1 if run.x1 < middle else 2 if run.x0 > middle else 0
    out: list[Line] = []
    band: list[Line] = []

    def flush() -> None:
        out.extend(_lines([r for r in band if r.column == 1]))
        out.extend(_lines([r for r in band if r.column == 2]))
        band.clear()

    for run in sorted(runs, key=lambda r: -r.top):
        if run.column:
            band.append(run)
            continue
        flush()
        out.append(_joined([run]))
    flush()
    return out


def _outline(document: object) -> list[OutlineEntry]:
    entries = []
    for mark in document.get_toc(max_depth=8):  # type: ignore[attr-defined]
        title = (mark.get_title() or "").strip()
        if not title:
            continue
        dest = mark.get_dest()
        page = dest.get_index() if dest is not None else None
        entries.append(OutlineEntry(title=title, level=mark.level + 1, page=page if isinstance(page, int) else -1))
    return entries


def read_pdf(data: bytes, budget: Budget | None = None) -> PdfText:
    """Lines per page, the outline and the pages without text of a PDF's bytes; INVALID_FILE when PDFium cannot
    open it, PDF_TOO_COMPLEX when a page exceeds ``budget``, Stopped when its flag is set."""
    import pypdfium2 as pdfium  # loaded on first use: most sessions never read a PDF

    with _OPEN_LOCK:
        try:
            document = pdfium.PdfDocument(data)
        except pdfium.PdfiumError as exc:
            raise CnkiError("INVALID_FILE", f"PDF 文件无法打开：{exc}") from None
        try:
            return _read(document, budget or Budget())
        finally:
            document.close()


def _read(document: object, budget: Budget) -> PdfText:
    import pypdfium2.raw as raw

    total_pages = len(document)  # type: ignore[arg-type]
    count = min(total_pages, MAX_PAGES)
    lines: list[Line] = []
    empty: list[int] = []
    total = 0
    for index in range(count):
        page = document[index]  # type: ignore[index]
        textpage = page.get_textpage()
        try:
            chars = textpage.count_chars()
            budget.start_page(index, chars)
            total += chars
            runs = _Chars(raw, textpage.raw, index, budget).read()
            if not runs:
                empty.append(index)
            lines.extend(page_lines(runs, page.get_width()))
        finally:
            textpage.close()
            page.close()
    return PdfText(
        pages=count, total_pages=total_pages, lines=lines, outline=_outline(document), empty_pages=empty, raw_characters=total
    )


def read_file(path: Path, header: str, budget: Budget | None = None) -> PdfText:
    """A ledger file's text (blocking): a PDF, or a CAJ that is a PDF inside; CAJ_UNSUPPORTED otherwise."""
    data = path.read_bytes()
    pdf = pdf_bytes_of(data, header)
    if pdf is None:
        raise CnkiError(
            "CAJ_UNSUPPORTED",
            f"下载的文件是知网的 {header} 格式（不是内含 PDF 的 CAJ），无法直接读取正文。"
            "可以用 CAJViewer 打开后“另存为”或打印为 PDF，或重新下载 PDF 格式（format=pdf）。",
            details={"path": str(path), "header": header},
        )
    return read_pdf(pdf, budget)
