"""read_online_html with ``source`` download or auto: the downloaded file's text, read locally.

The file is the download ledger's (``artifacts``: the PDF entry first, then the CAJ one), still on disk
with its recorded size and SHA-256. A PDF — or a CAJ that is a PDF inside — is read with PDFium off
the event loop (pdf_text.py) and laid out like the online reader's text (pdf_layout.py): the same
``sections``, ``offset``/``max_characters`` paging and result shape, with a ``FileCoverage`` saying
``scope: download`` and which pages the returned text comes from. No CNKI request is ever made.

Pages without a text layer (scans) are named in an error and the status is ``partial``; a file
with no text layer at all is NO_TEXT_LAYER. With ``auto``, a file that gives no text at all (a scan,
a CAJ that is no PDF) leaves the reading to the online reader. Texts stay in memory (8 files, by
path and SHA-256).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import msgspec

from cnki_mcp.core.clock import within
from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.model import Artifact, FileCoverage, LocalReply, Paper, ReadResult
from cnki_mcp.core.tool_args import FILE_FORMATS
from cnki_mcp.documents.download_files import artifact_key, read_body, unchanged
from cnki_mcp.documents.online_reader import TextWindow, reader_result
from cnki_mcp.documents.pdf_layout import layout, titled
from cnki_mcp.documents.pdf_text import Budget, Stopped, read_file
from cnki_mcp.pages.reader import ReaderDocument, sections_of
from cnki_mcp.store.library import Store

PARSE_SECONDS = 120.0
CACHE_FILES = 8
MIN_TEXT_CHARACTERS = 20  # less than this in the whole file is no text layer
_NO_TEXT = frozenset({"NO_TEXT_LAYER", "CAJ_UNSUPPORTED", "INVALID_FILE"})


class FileDocument(msgspec.Struct):
    document: ReaderDocument
    page_starts: list[int]  # offset of each page's first block in the text, -1 for a page without one

    @property
    def coverage(self) -> FileCoverage:
        """The coverage ``read_document`` gave the text: a file's, with its pages."""
        coverage = self.document.coverage
        if not isinstance(coverage, FileCoverage):
            raise TypeError("the text of a downloaded file carries a FileCoverage")
        return coverage


def _coverage(
    path: Path, header: str, pages: tuple[int, int], empty: list[int], raw: int, text: str, missing: list[str]
) -> FileCoverage:
    """``pages``: (the file's pages, the pages read)."""
    total, read = pages
    return FileCoverage(
        container=path.name,
        dom_characters=raw,
        extracted_characters=sum(1 for char in text if not char.isspace()),
        missing_catalog_headings=missing,
        non_text_elements=len(empty),
        scope="download",
        generation="pdf" if header == "PDF" else "caj_pdf",
        file=str(path),
        pages=total,
        pages_read=read,
        pages_with_text=read - len(empty),
        pages_without_text=[page + 1 for page in empty],
    )


def read_document(path: Path, title: str, budget: Budget | None = None) -> FileDocument:
    """The text of a downloaded file (blocking): CAJ_UNSUPPORTED, NO_TEXT_LAYER or INVALID_FILE when it has none,
    PDF_TOO_COMPLEX past ``budget``."""
    header = read_body(path).header
    pdf = read_file(path, header, budget)
    shape = layout(pdf.lines, pdf.outline, pdf.pages)
    text = "\n\n".join(block for _, block in shape.blocks)
    if sum(1 for char in text if not char.isspace()) < MIN_TEXT_CHARACTERS:
        raise CnkiError(
            "NO_TEXT_LAYER",
            f"下载的文件 {path.name}（{pdf.pages} 页）没有文字层（是扫描图像），读不出正文；"
            "可以改用 source=online 在线阅读，或用 OCR 软件识别后再读。",
            details={"path": str(path), "pages": pdf.pages},
        )
    heading_sections = titled(sections_of(shape.blocks), shape.titles)
    coverage = _coverage(path, header, (pdf.total_pages, pdf.pages), pdf.empty_pages, pdf.raw_characters, text, shape.missing)
    document = ReaderDocument(title=title, text=text, sections=heading_sections, trial=False, coverage=coverage)
    return FileDocument(document=document, page_starts=shape.page_starts)


def pages_covered(page_starts: list[int], start: int, end: int, total: int) -> list[int]:
    """The 1-based pages whose text lies in ``[start, end)`` of the whole text."""
    spans = [(page, at) for page, at in enumerate(page_starts) if at >= 0]
    covered = []
    for index, (page, at) in enumerate(spans):
        until = spans[index + 1][1] if index + 1 < len(spans) else total
        if at < max(end, start + 1) and until > start:
            covered.append(page + 1)
    return covered


def file_result(paper: Paper, read: FileDocument, *, section: str, offset: int, max_characters: int) -> ReadResult:
    """The read_online_html answer for one page of a downloaded file's text."""
    document = read.document
    result = reader_result(paper, document, section=section, offset=offset, max_characters=max_characters)
    base = (result.section.offset if result.section is not None else 0) + offset
    covered = pages_covered(read.page_starts, base, base + len(result.text), len(document.text))
    coverage = msgspec.structs.replace(read.coverage, pages_covered=covered)
    whole = not read.coverage.pages_without_text
    return msgspec.structs.replace(result, coverage=coverage, complete_article=whole)


def ledger_entry(store: Store, record_ref: str) -> Artifact | None:
    """The completed download of a paper (PDF first, then CAJ), whatever its file's state."""
    for fmt in FILE_FORMATS:
        artifact = store.data.artifacts.get(artifact_key(record_ref, fmt))
        if artifact is not None and artifact.state == "completed" and artifact.path:
            return artifact
    return None


class _Parse:
    """A parse in a worker thread, the reads waiting for it, and its budget (whose flag stops it)."""

    def __init__(self, task: asyncio.Future[FileDocument], budget: Budget) -> None:
        self.task, self.budget, self.waiters = task, budget, 0


class LocalFiles:
    """Downloaded files read as texts for one process: the cache and the reply."""

    def __init__(self, capacity: int = CACHE_FILES) -> None:
        self.capacity = capacity
        self._texts: dict[tuple[str, str], FileDocument] = {}
        self._parsing: dict[tuple[str, str], _Parse] = {}  # one parse per file, however many reads wait for it

    async def _document(self, artifact: Artifact, title: str) -> FileDocument:
        key = (artifact.path, artifact.sha256)
        cached = self._texts.get(key)
        if cached is not None:
            return cached
        parse = self._parsing.get(key)
        if parse is None:
            budget = Budget()
            task = asyncio.ensure_future(asyncio.to_thread(read_document, Path(artifact.path), title, budget))
            parse = self._parsing[key] = _Parse(task, budget)
            task.add_done_callback(lambda _t: self._parsing.pop(key, None))
        parse.waiters += 1
        try:
            read = await within(asyncio.shield(parse.task), PARSE_SECONDS)
        except TimeoutError:
            parse.budget.stop.set()
            raise CnkiError(
                "OPERATION_FAILED", f"读取 {Path(artifact.path).name} 超过 {PARSE_SECONDS:.0f} 秒，已放弃。"
            ) from None
        except Stopped:
            raise CnkiError("OPERATION_FAILED", f"读取 {Path(artifact.path).name} 已停止。") from None
        finally:
            parse.waiters -= 1
            if parse.waiters == 0 and not parse.task.done():
                parse.budget.stop.set()  # the last read waiting for it ended (cancelled or timed out): stop the parse
        while len(self._texts) >= self.capacity:
            self._texts.pop(next(iter(self._texts)))
        self._texts[key] = read
        return read

    async def read(
        self, store: Store, record_ref: str, source: str, window: TextWindow
    ) -> LocalReply | None:
        """The reply from the downloaded file; None for ``auto`` without a usable file (read online
        then); NOT_DOWNLOADED for ``download`` without one."""
        artifact = ledger_entry(store, record_ref) if record_ref else None
        usable = artifact is not None and await asyncio.to_thread(unchanged, artifact)
        if artifact is None or not usable:
            if source == "auto":
                return None
            why = "下载文件已不在原处或已被改动" if artifact is not None else "本地没有这篇论文的下载记录"
            raise CnkiError(
                "NOT_DOWNLOADED",
                f"{why}；请先下载（download_paper），或改用 source=online 在线阅读。",
                details={"record_ref": record_ref, **({"path": artifact.path} if artifact is not None else {})},
            )
        paper = store.data.papers.get(record_ref) or Paper(record_ref=record_ref, title=artifact.title)
        try:
            read = await self._document(artifact, paper.title or artifact.title)
        except CnkiError as exc:
            if source == "auto" and exc.code in _NO_TEXT:
                return None  # a file that gives no text: auto reads online
            raise
        result = file_result(paper, read, **msgspec.structs.asdict(window))
        reply = LocalReply(source="download", requests=0, result=result)
        empty = read.coverage.pages_without_text
        if not empty:
            return reply
        problem = CnkiError(
            "NO_TEXT_LAYER",
            f"下载的文件有 {len(empty)} 页没有文字层（扫描图像），这些页的内容不在正文中。",
            details={"pages": empty},
        ).problem()
        return msgspec.structs.replace(reply, status="partial", errors=[problem])
