"""Reading downloaded files (read_online_html source=download) without a browser: real PDFs made by
tests/pdfs.py, read by PDFium, laid out, paged and answered from the download ledger."""

from __future__ import annotations

import asyncio
import hashlib
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import msgspec
import pytest

from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.model import Artifact, Paper
from cnki_mcp.documents import local_read
from cnki_mcp.documents.local_read import LocalFiles, pages_covered, read_document
from cnki_mcp.documents.online_reader import TextWindow
from cnki_mcp.documents.pdf_layout import drop_furniture, layout
from cnki_mcp.documents.pdf_text import MAX_PAGES, Budget, Line, Stopped, pdf_bytes_of, read_pdf
from cnki_mcp.store.library import Store
from tests import pdfs
from tests.harness import conforms

REF = "rec_0123456789abcdef01234567"
TITLE = "数字经济背景下违约金调整规则研究"
PAGE = TextWindow("", 0, 200_000)


def text_of(data: bytes, tmp_path: Path, name: str = "paper.pdf") -> tuple[str, list, object]:
    path = tmp_path / name
    path.write_bytes(data)
    read = read_document(path, TITLE)
    return read.document.text, read.document.sections, read


def test_outline_titles_verbatim_each_section_starts_with_its_heading(tmp_path: Path) -> None:
    text, sections, read = text_of(pdfs.article_pdf(), tmp_path)
    assert [(s.level, s.title) for s in sections] == [(level, title) for level, title, _ in pdfs.ARTICLE]
    for section in sections:
        assert text[section.offset :].startswith(section.title)
    # The (一)/(二) sub-sections lie inside 二、; 三、 runs to the end (the two-column page included).
    second, first_sub, second_sub, last = sections[1], sections[2], sections[3], sections[4]
    assert second.offset < first_sub.offset < second_sub.offset < second.offset + second.length
    assert last.offset + last.length == len(text)
    assert read.document.coverage.scope == "download"
    assert read.document.coverage.generation == "pdf"
    assert read.document.coverage.missing_catalog_headings == []


def test_running_heads_feet_page_numbers_and_the_cnki_line_are_dropped(tmp_path: Path) -> None:
    text, _, _ = text_of(pdfs.article_pdf(), tmp_path)
    assert pdfs.JOURNAL_HEAD not in text
    assert "2024年第3期" not in text
    assert "·" not in text
    assert "China Academic Journal" not in text
    assert "cnki.net" not in text
    english, _, _ = text_of(pdfs.english_pdf(), tmp_path, "en.pdf")
    assert "Journal of Contract Studies" not in english
    assert "- 1 -" not in english and "- 2 -" not in english
    thesis, _, _ = text_of(pdfs.thesis_pdf(), tmp_path, "thesis.pdf")
    assert "华东政法大学硕士学位论文" not in thesis
    assert not any(line.strip().isdigit() for line in thesis.split("\n"))


def test_chinese_line_breaks_and_hyphenated_words_are_joined(tmp_path: Path) -> None:
    text, _, _ = text_of(pdfs.article_pdf(), tmp_path)
    assert "数字经济的发展对传统合同法提出了新的挑战，本文讨论违约金的调整规则与司法实践。" in text
    assert "\n\n违约金条款在商事合同中普遍存在，其调整的标准长期以来存在争议。\n\n" in text
    english, _, _ = text_of(pdfs.english_pdf(), tmp_path, "en.pdf")
    assert "common in commercial contracts and their adjustment is controversial." in english
    assert "\ufffe" not in english and "\x02" not in english and "\xad" not in english


def test_a_two_column_page_reads_the_left_column_first(tmp_path: Path) -> None:
    text, _, _ = text_of(pdfs.article_pdf(), tmp_path)
    left = "左栏第一行文字说明违约金的功能在于填补损失，左栏第二行继续讨论惩罚性违约金的问题。"
    right = "右栏第一行讨论比较法上的经验，右栏第二行说明德国法的做法，右栏第三行总结本文观点。"
    assert left in text and right in text
    assert text.index(left) < text.index(right)


def test_without_an_outline_numbered_headings_are_the_sections(tmp_path: Path) -> None:
    _, sections, _ = text_of(pdfs.article_pdf(outline=False), tmp_path)
    assert [(s.level, s.title) for s in sections] == [(level, title) for level, title, _ in pdfs.ARTICLE]
    _, english, _ = text_of(pdfs.english_pdf(), tmp_path, "en.pdf")
    assert [(s.level, s.title) for s in english] == [(level, title) for level, title, _ in pdfs.ENGLISH]


def test_a_table_of_contents_with_dot_leaders_is_not_the_sections(tmp_path: Path) -> None:
    text, sections, _ = text_of(pdfs.thesis_pdf(), tmp_path)
    assert [(s.level, s.title) for s in sections] == [
        (1, "第一章 绪论"), (2, "第一节 研究背景"), (1, "第二章 违约金的功能"), (1, "结论"),
    ]
    for section in sections:  # each once, at the heading in the body, not at the contents line
        assert text[section.offset :].startswith(section.title + "\n\n")
    assert "第一章 绪论....." in text  # the contents stay text


def test_pages_covered_and_page_starts(tmp_path: Path) -> None:
    text, sections, read = text_of(pdfs.article_pdf(), tmp_path)
    starts = read.page_starts
    assert starts[0] == 0 and 0 < starts[1] < starts[2] < len(text)
    assert text[starts[1] :].startswith("（一）酌减规则")
    assert pages_covered(starts, 0, 10, len(text)) == [1]
    assert pages_covered(starts, starts[1] - 5, starts[1] + 5, len(text)) == [1, 2]
    assert pages_covered(starts, 0, len(text), len(text)) == [1, 2, 3]


def test_a_scanned_file_has_no_text_layer(tmp_path: Path) -> None:
    path = tmp_path / "scan.pdf"
    path.write_bytes(pdfs.scanned_pdf())
    with pytest.raises(CnkiError) as caught:
        read_document(path, TITLE)
    assert caught.value.code == "NO_TEXT_LAYER"
    assert "2 页" in caught.value.message


def test_caj_kinds(tmp_path: Path) -> None:
    pdf = pdfs.article_pdf(two_columns=False)
    decoded = pdf_bytes_of(pdfs.kdh(pdf), "KDH")
    assert decoded is not None and decoded.endswith(b"%%EOF") and pdf.startswith(decoded)
    kdh_text, _, read = text_of(pdfs.kdh(pdf), tmp_path, "kdh.caj")
    assert read.document.coverage.generation == "caj_pdf"
    assert "一、引言" in kdh_text
    wrapped = b"CAJ".ljust(64, b"\x00") + pdf
    assert "一、引言" in text_of(wrapped, tmp_path, "wrapped.caj")[0]
    for head in (b"HN", b"\xc8", b"TEB", b"CAJ"):
        path = tmp_path / "other.caj"
        path.write_bytes(head.ljust(8, b"\x00") + b"\x01" * 400)
        with pytest.raises(CnkiError) as caught:
            read_document(path, TITLE)
        assert caught.value.code == "CAJ_UNSUPPORTED", head
        assert "CAJViewer" in caught.value.message


def test_furniture_rules_on_lines() -> None:
    def line(text: str, page: int, top: float, size: float = 10) -> Line:
        return Line(text=text, page=page, x0=72, x1=300, bottom=top - size, top=top, size=size)

    lines = []
    for page in range(3):
        lines += [line("北京大学博士学位论文", page, 800, 9),
                  line("第三章 研究方法", page, 780, 16) if page == 1 else line(f"正文{page}开头。", page, 780),
                  line(f"正文第{page}页的内容。", page, 700), line("正文续行。", page, 650), line("正文末行。", page, 600),
                  line(["iv", "- 2 -", "第 3 页"][page], page, 40, 9)]
    kept = [kept.text for kept in drop_furniture(lines)]
    assert "北京大学博士学位论文" not in kept
    assert not {"iv", "- 2 -", "第 3 页"} & set(kept)
    assert "第三章 研究方法" in kept  # a large line at the top is a heading, not a running head
    assert "正文第1页的内容。" in kept
    assert layout(lines, [], 3).page_starts[0] == 0


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = Store.open(tmp_path / "data")
    yield opened
    opened.close_sync()


def ledger(store: Store, data: bytes, fmt: str = "pdf", name: str = "paper.pdf") -> Path:
    path = store.downloads_dir / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    store.data.papers[REF] = Paper(record_ref=REF, title=TITLE, url="https://kns.cnki.net/kcms2/article/abstract?v=x")
    store.data.artifacts[f"{REF}:{fmt}"] = Artifact(
        state="completed", record_ref=REF, title=TITLE, format=fmt, name=name, path=str(path),
        bytes=len(data), sha256=hashlib.sha256(data).hexdigest(), source="download",
    )
    return path


async def test_the_reply_pages_and_sections_like_the_online_reader(store: Store) -> None:
    ledger(store, pdfs.article_pdf())
    files = LocalFiles()
    whole = await files.read(store, REF, "download", PAGE)
    data = msgspec.to_builtins(whole)
    assert data["status"] == "completed" and data["source"] == "download" and data["requests"] == 0
    result = data["result"]
    text = result["text"]
    assert result["complete_article"] is True and result["trial"] is False
    assert result["coverage"]["scope"] == "download"
    assert result["coverage"]["pages"] == 3 and result["coverage"]["pages_covered"] == [1, 2, 3]
    pieces, offset = [], 0
    while offset is not None:
        page = msgspec.to_builtins(await files.read(store, REF, "download", TextWindow("", offset, 50)))
        pieces.append(page["result"]["text"])
        offset = page["result"]["next_offset"]
    assert "".join(pieces) == text
    part = msgspec.to_builtins(await files.read(store, REF, "download", TextWindow("（一）酌减规则", 0, 1000)))
    assert part["result"]["text"].startswith("（一）酌减规则")
    assert "（二）" not in part["result"]["text"]
    assert part["result"]["coverage"]["pages_covered"] == [2]
    with pytest.raises(CnkiError) as caught:
        await files.read(store, REF, "download", TextWindow("没有这一节", 0, 10))
    assert caught.value.code == "SECTION_NOT_FOUND"


async def test_scanned_pages_make_the_reply_partial(store: Store) -> None:
    ledger(store, pdfs.article_pdf(scanned=True))
    data = msgspec.to_builtins(await LocalFiles().read(store, REF, "download", PAGE))
    assert data["status"] == "partial"
    assert list(conforms("read_online_html", data)) == ["status", "source", "requests", "result", "errors"]
    assert data["errors"][0]["code"] == "NO_TEXT_LAYER"
    assert data["errors"][0]["details"]["pages"] == [4]
    assert data["result"]["complete_article"] is False
    assert data["result"]["coverage"]["pages_without_text"] == [4]


async def test_without_a_usable_file(store: Store) -> None:
    files = LocalFiles()
    assert await files.read(store, REF, "auto", PAGE) is None
    with pytest.raises(CnkiError) as caught:
        await files.read(store, REF, "download", PAGE)
    assert caught.value.code == "NOT_DOWNLOADED"
    path = ledger(store, pdfs.article_pdf())
    path.write_bytes(b"%PDF-1.4 changed")
    assert await files.read(store, REF, "auto", PAGE) is None
    with pytest.raises(CnkiError) as caught:
        await files.read(store, REF, "download", PAGE)
    assert caught.value.code == "NOT_DOWNLOADED"
    assert "改动" in caught.value.message


async def test_a_caj_download_that_is_a_pdf_inside_is_read(store: Store) -> None:
    ledger(store, pdfs.kdh(pdfs.article_pdf()), fmt="caj", name="paper.caj")
    data = msgspec.to_builtins(await LocalFiles().read(store, REF, "download", PAGE))
    assert data["result"]["coverage"]["generation"] == "caj_pdf"
    assert [s["title"] for s in data["result"]["sections"]][0] == "一、引言"
    ledger(store, b"HN".ljust(400, b"\x00"), fmt="caj", name="other.caj")
    with pytest.raises(CnkiError) as caught:
        await LocalFiles().read(store, REF, "download", PAGE)
    assert caught.value.code == "CAJ_UNSUPPORTED"
    assert await LocalFiles().read(store, REF, "auto", PAGE) is None  # auto reads online instead


async def test_a_scan_read_with_auto_goes_online(store: Store) -> None:
    ledger(store, pdfs.scanned_pdf())
    assert await LocalFiles().read(store, REF, "auto", PAGE) is None
    with pytest.raises(CnkiError) as caught:
        await LocalFiles().read(store, REF, "download", PAGE)
    assert caught.value.code == "NO_TEXT_LAYER"


def test_read_pdf_outline_pages() -> None:
    outline = read_pdf(pdfs.article_pdf()).outline
    assert [(e.title, e.level, e.page) for e in outline] == [
        ("一、引言", 1, 0), ("二、违约金调整的规范基础", 1, 0), ("（一）酌减规则", 2, 1), ("（二）酌增规则", 2, 1), ("三、结论", 1, 1),
    ]


@pytest.mark.parametrize(("make", "blocks", "name"), [
    (pdfs.zh_breaks_pdf, pdfs.ZH_BLOCKS, "breaks.pdf"),
    (lambda: pdfs.kdh(pdfs.zh_breaks_pdf()), pdfs.ZH_BLOCKS, "breaks.caj"),
    (pdfs.en_breaks_pdf, pdfs.EN_BLOCKS, "breaks-en.pdf"),
])
def test_paragraphs_across_page_and_column_breaks_are_one(
    make: Callable[[], bytes], blocks: list[str], name: str, tmp_path: Path
) -> None:
    text, sections, read = text_of(make(), tmp_path, name)
    assert text.split("\n\n") == blocks
    assert read.document.coverage.generation == ("caj_pdf" if name.endswith(".caj") else "pdf")
    # Each page starts at its own first line, inside the paragraph it continues.
    firsts = {
        "breaks-en.pdf": [pdfs.EN_TITLE, "mercial parties", "the agreed sum", "2 Method", "The first question",
                          "Most start from", "courts from 2015"],
    }.get(name, [pdfs.ZH_TITLE, *(lines[0] for lines in pdfs.zh_break_page_tops())])
    assert [text[at : at + len(first)] for at, first in zip(read.page_starts, firsts, strict=True)] == firsts
    assert [s.title for s in sections] == (["1 Introduction", "2 Method"] if "en" in name else ["一、引言", "二、违约金调整的规范基础"])
    page = pages_covered(read.page_starts, text.index(blocks[7]), text.index(blocks[7]) + 1, len(text))
    assert page == ([4] if "en" not in name else [5])  # where the paragraph starts


# --- hostile files ----------------------------------------------------------------------------------------


def test_a_page_of_millions_of_one_point_characters_is_too_complex() -> None:
    with pytest.raises(CnkiError) as caught:
        read_pdf(pdfs.dense_pdf())
    assert caught.value.code == "PDF_TOO_COMPLEX"
    assert caught.value.details == {"page": 1}
    assert "online" in caught.value.message


def test_a_page_over_its_time_is_too_complex() -> None:
    with pytest.raises(CnkiError) as caught:
        read_pdf(pdfs.dense_pdf(pages=1, chars=150_000), Budget(page_seconds=0.0))
    assert caught.value.code == "PDF_TOO_COMPLEX"
    assert "秒" in caught.value.message


def test_a_stopped_parse_ends_at_once() -> None:
    budget = Budget()
    budget.stop.set()
    with pytest.raises(Stopped):
        read_pdf(pdfs.article_pdf(), budget)


@pytest.mark.slow  # ~10 s: 2,000 pages read
def test_a_ten_thousand_page_file_says_ten_thousand_pages(tmp_path: Path) -> None:
    path = tmp_path / "long.pdf"
    path.write_bytes(pdfs.long_pdf(10_000))
    coverage = read_document(path, TITLE).coverage
    assert (coverage.pages, coverage.pages_read) == (10_000, MAX_PAGES)


async def test_concurrent_reads_of_one_file_share_one_parse(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    ledger(store, pdfs.article_pdf())
    calls: list[Path] = []

    def counted(path: Path, title: str, budget: Budget | None = None) -> object:
        calls.append(path)
        return read_document(path, title, budget)

    monkeypatch.setattr(local_read, "read_document", counted)
    files = LocalFiles()
    replies = await asyncio.gather(*(files.read(store, REF, "download", PAGE) for _ in range(6)))
    assert len(calls) == 1
    assert len({msgspec.json.encode(reply) for reply in replies}) == 1


async def test_a_cancelled_read_stops_its_parse(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    ledger(store, pdfs.article_pdf())
    started, ended = threading.Event(), threading.Event()

    def endless(path: Path, title: str, budget: Budget | None = None) -> object:
        assert budget is not None
        started.set()
        try:
            for _ in range(6000):  # bounded: 60 s at most
                budget.check()
                time.sleep(0.01)
            raise AssertionError("the parse was never stopped")
        finally:
            ended.set()

    monkeypatch.setattr(local_read, "read_document", endless)
    reading = asyncio.create_task(LocalFiles().read(store, REF, "download", PAGE))
    await asyncio.to_thread(started.wait, 10)
    reading.cancel()
    with pytest.raises(asyncio.CancelledError):
        await reading
    assert await asyncio.to_thread(ended.wait, 5)
