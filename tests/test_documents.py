"""read_online_html without a browser: paging, sections, the text cache, records."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.model import Paper, ReaderCoverage, Section
from cnki_mcp.documents.online_reader import (
    ReaderCache,
    complete_article,
    continues,
    page_of,
    reader_result,
    select_section,
)
from cnki_mcp.pages.reader import ReaderDocument, parse_reader
from cnki_mcp.research.detail_tab import local_ref
from cnki_mcp.store.catalog import Catalog
from cnki_mcp.store.library import Store

READER_HTML = """<html><head><meta name="citation_title" content="数据治理研究"></head><body>
<div class="catalogboxs"><p class="tit">一、引言</p><p class="tit">二、 Data  Model</p><p class="tit">（一）概念</p>
<p class="tit">三、结论</p></div>
<div id="paperRead">
<h1 class="Chapter">一、引言</h1><p>引言第一段，说明研究背景与问题的由来，篇幅足以通过正文最短长度的检查。</p><p>引言第二段。</p>
<h1 class="Chapter">二、 Data  Model</h1><p>模型总述。</p>
<h2 class="Chapter">（一）概念</h2><p>概念的界定与说明。</p>
<h1 class="Chapter">三、结论</h1><p>结论部分文字。😀尾</p>
</div></body></html>"""


def document(**coverage: object) -> ReaderDocument:
    url = "https://kns.cnki.net/nzkhtml/xmlRead/xml.html?invoice=x"
    doc = parse_reader(READER_HTML, url=url, expected_title="数据治理研究")
    if coverage:
        doc.coverage = ReaderCoverage(**{**{"scope": "unknown"}, **coverage})  # type: ignore[arg-type]
    return doc


PAPER = Paper(
    record_ref="rec_0123456789abcdef01234567", title="数据治理研究", url="https://kns.cnki.net/kcms2/article/abstract?v=abc"
)


def test_page_of_counts_code_points_and_ends_with_none() -> None:
    text = "ab😀cd"
    assert page_of(text, 0, 3) == ("ab😀", 3)
    assert page_of(text, 3, 3) == ("cd", None)
    assert page_of(text, 5, 3) == ("", None)
    assert page_of(text, 99, 3) == ("", None)


def test_sections_select_case_and_whitespace_insensitively_with_subsections() -> None:
    doc = document()
    chosen = select_section(doc.sections, "  二、data model ")
    assert chosen.title == "二、 Data Model"
    part = doc.text[chosen.offset : chosen.offset + chosen.length]
    assert part.startswith("二、 Data Model") and part.endswith("概念的界定与说明。")
    assert "三、结论" not in part


def test_missing_and_duplicate_sections() -> None:
    doc = document()
    with pytest.raises(CnkiError) as missing:
        select_section(doc.sections, "四、展望")
    assert missing.value.code == "SECTION_NOT_FOUND"
    assert "一、引言" in missing.value.details["available"]
    twice = [Section(level=1, title="附录", offset=0, length=3), Section(level=1, title="附 录", offset=5, length=3)]
    with pytest.raises(CnkiError) as ambiguous:
        select_section(twice, "附录")
    assert ambiguous.value.code == "SECTION_AMBIGUOUS"
    assert ambiguous.value.details["offsets"] == [0, 5]


def test_result_pages_through_a_section_and_keeps_the_whole_catalogue() -> None:
    doc = document()
    whole = reader_result(PAPER, doc, section="", offset=0, max_characters=20_000)
    assert whole.text == doc.text
    assert whole.next_offset is None
    assert whole.total_characters == len(doc.text)
    assert "\n\n" in whole.text  # paragraphs separated by a blank line
    assert whole.complete_article is True
    assert whole.trial is False
    assert whole.url == PAPER.url
    assert "section" not in msgspec.to_builtins(whole)

    first = reader_result(PAPER, doc, section="一、引言", offset=0, max_characters=10)
    assert first.text == doc.text[:10]
    assert first.next_offset == 10
    assert first.section is not None
    assert first.section.title == "一、引言"
    assert first.sections == doc.sections
    rest = reader_result(PAPER, doc, section="一、引言", offset=10, max_characters=10_000)
    assert first.text + rest.text == doc.text[: first.section.length]
    assert rest.next_offset is None
    assert rest.total_characters == first.section.length


def test_complete_article_from_the_judged_scope() -> None:
    assert complete_article(document()) is True  # the whole catalogue has its text
    assert complete_article(document(scope="unknown")) is None
    assert complete_article(document(scope="partial")) is False
    assert complete_article(document(scope="full", missing_catalog_headings=["三、结论"])) is False
    trial = document()
    trial.trial = True
    assert complete_article(trial) is False


def test_a_call_continues_a_text_with_an_offset_or_a_section() -> None:
    assert continues("", 20_000)
    assert continues("一、引言", 0)
    assert not continues("  ", 0)


def test_cache_keeps_full_texts_thirty_minutes_and_sixteen_at_most() -> None:
    now = [1000.0]
    cache = ReaderCache(clock=lambda: now[0])
    doc = document()
    cache.put(PAPER, doc)
    assert cache.get(PAPER.record_ref, resume=False) == (PAPER, doc)
    now[0] += 30 * 60 + 1
    assert cache.get(PAPER.record_ref, resume=True) is None

    for i in range(20):
        now[0] += 1
        cache.put(Paper(record_ref=f"rec_{i}", title="t"), doc)
    assert len(cache) == 16
    assert cache.get("rec_0", resume=False) is None and cache.get("rec_3", resume=False) is None  # the oldest went first
    assert cache.get("rec_4", resume=False) is not None and cache.get("rec_19", resume=False) is not None


def test_texts_without_a_verdict_are_kept_like_full_texts() -> None:
    cache = ReaderCache()
    unknown = document(scope="unknown")
    cache.put(PAPER, unknown)
    assert cache.get(PAPER.record_ref, resume=False) == (PAPER, unknown)


@pytest.mark.parametrize("coverage", [{"scope": "trial"}, {"scope": "partial"}, {"missing_catalog_headings": ["三、结论"]}])
def test_incomplete_texts_serve_only_calls_that_continue_them_for_ten_minutes(coverage: dict[str, object]) -> None:
    now = [1000.0]
    cache = ReaderCache(clock=lambda: now[0])
    incomplete = document(**coverage)
    cache.put(PAPER, incomplete)
    assert cache.get(PAPER.record_ref, resume=True) == (PAPER, incomplete)
    assert cache.get(PAPER.record_ref, resume=False) is None  # a call from the start reads again
    now[0] += 10 * 60 + 1
    assert cache.get(PAPER.record_ref, resume=True) is None


def test_a_new_read_replaces_the_cached_copy() -> None:
    cache = ReaderCache()
    cache.put(PAPER, document())
    trial = document()
    trial.trial = True
    cache.put(PAPER, trial)
    assert cache.get(PAPER.record_ref, resume=False) is None  # the older full copy is not served instead
    assert cache.get(PAPER.record_ref, resume=True) == (PAPER, trial)
    assert len(cache) == 1


def test_local_ref(isolated_data_dir: Path) -> None:
    store = Store.open(isolated_data_dir)
    try:
        store.put_paper(PAPER)
        store.put_paper(Paper(record_ref="rec_b", title="同名"))
        store.put_paper(Paper(record_ref="rec_c", title="同名"))
        catalog = Catalog(store)
        assert local_ref(catalog, PAPER.record_ref, "") == PAPER.record_ref
        assert local_ref(catalog, "", "数据治理研究") == PAPER.record_ref
        assert local_ref(catalog, "", "同名") == ""  # ambiguous locally: located on CNKI instead
        assert local_ref(catalog, "", "没有的题名") == ""
        with pytest.raises(CnkiError) as missing:
            local_ref(catalog, "rec_nope", "")
        assert missing.value.code == "RECORD_NOT_FOUND"
    finally:
        store.close_sync()
