"""link_references: span finding and rendering, and the tool over local records."""

from __future__ import annotations

from pathlib import Path

import pytest

from cnki_mcp.app import App
from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.model import Paper
from cnki_mcp.references.links import Match, find_spans, render
from cnki_mcp.store.library import Store
from cnki_mcp.surface.tools import dispatch, parse_arguments
from tests.fake_site import FakeSite, sim_paper
from tests.harness import call_tool, conforms


def test_nested_titles_links_and_code_spans() -> None:
    text = "参考《论《民法典》违约金》，已有[《另一篇》](https://example.test)，代码 `《代码》`。"
    spans = find_spans(text)
    assert [s.title for s in spans] == ["论《民法典》违约金"]
    assert text[spans[0].start : spans[0].end] == "《论《民法典》违约金》"


@pytest.mark.parametrize(
    ("text", "titles"),
    [
        ("《甲》和《乙》", ["甲", "乙"]),
        ("《论〈民法典〉中的违约金》", ["论〈民法典〉中的违约金"]),
        ("``code 《不算》`` 然后《算》", ["算"]),
        ("`未闭合的反引号 《算》", ["算"]),
        ("《未闭合 《甲》", []),  # an unclosed 《 swallows the rest
        ("[孤立的方括号 《甲》", ["甲"]),
        ("《 带空格 》", [" 带空格 "]),
        ("", []),
    ],
)
def test_span_cases(text: str, titles: list[str]) -> None:
    assert [s.title for s in find_spans(text)] == titles


def test_render_statuses_and_escaping() -> None:
    table = {
        "唯一": [Match(record_ref="rec_a", url="https://kns.cnki.net/kcms2/article/abstract?v=(x)")],
        "无链接": [Match(record_ref="rec_b")],
        "同名": [Match(record_ref="rec_c", url="u1"), Match(record_ref="rec_d", url="u2")],
        "方[括]号": [Match(record_ref="rec_e", url="https://e.test")],
    }
    text = "见《唯一》《无链接》《同名》《没有》《方[括]号》《唯一》。"
    rendered, refs = render(text, find_spans(text), lambda t: table.get(t, []))
    assert rendered == (
        "见[《唯一》](https://kns.cnki.net/kcms2/article/abstract?v=%28x%29)《无链接》《同名》《没有》"
        "[《方\\[括\\]号》](https://e.test)[《唯一》](https://kns.cnki.net/kcms2/article/abstract?v=%28x%29)。"
    )
    assert [r.status for r in refs] == ["linked", "matched_without_link", "ambiguous", "unresolved", "linked", "linked"]
    assert refs[2].record_refs == ["rec_c", "rec_d"] and refs[3].record_refs == []


@pytest.fixture
def site() -> FakeSite:
    return FakeSite()


@pytest.fixture
async def app(isolated_data_dir: Path, site: FakeSite):
    store = Store.open(isolated_data_dir)
    store.data.papers["rec_1"] = Paper(record_ref="rec_1", title="再论违约金调整——以民法典第585条为中心",
                                       url="https://kns.cnki.net/kcms2/article/abstract?v=abc")
    store.data.papers["rec_2"] = Paper(record_ref="rec_2", title="没有公开链接的论文")
    store.mark_dirty()
    await store.close()
    application = App(isolated_data_dir, site_factory=lambda: site)
    yield application
    await application.close()


async def test_tool_links_local_records(app: App) -> None:
    text = "参见《再论违约金调整 ——以民法典第585条为中心》与《没有公开链接的论文》及《未知》。"
    reply = await call_tool(app, "link_references", {"text": text})
    assert reply["status"] == "completed"
    assert reply["text"].startswith("参见[《再论违约金调整 ——以民法典第585条为中心》](https://kns.cnki.net/kcms2/article/abstract?v=abc)")
    assert [r["status"] for r in reply["references"]] == ["linked", "matched_without_link", "unresolved"]
    assert reply["references"][0]["record_refs"] == ["rec_1"]
    assert list(conforms("link_references", reply)) == ["status", "text", "references"]


async def test_tool_limits(app: App) -> None:
    many = "".join(f"《题{i}》" for i in range(101))
    with pytest.raises(CnkiError) as too_many:
        await dispatch(app, "link_references", parse_arguments("link_references", {"text": many}), None)
    assert too_many.value.code == "TOO_MANY_REFERENCES"
    with pytest.raises(CnkiError) as too_large:
        parse_arguments("link_references", {"text": "字" * (200 * 1024)})
    assert too_large.value.code == "INPUT_TOO_LARGE"


async def test_lookup_missing_locates_titles_on_cnki(app: App, site: FakeSite) -> None:
    known = sim_paper(7)
    text = f"已有《没有公开链接的论文》，待查《{known.title}》与《知网上也没有》。"
    reply = await call_tool(app, "link_references", {"text": text, "lookup_missing": True})
    assert reply["kind"] == "links"
    assert reply["status"] == "partial"
    result = reply["result"]
    assert [r["status"] for r in result["references"]] == ["matched_without_link", "linked", "unresolved"]
    assert f"[《{known.title}》](https://kns.cnki.net/kcms2/article/abstract?v=7)" in result["text"]
    assert [e["code"] for e in reply["errors"]] == ["DOCUMENT_NOT_FOUND"]
    assert site.counts["locate"] == 1  # both missing titles in one exact-title search
    conforms("link_references", reply)  # an operation, the linked text its result

    again = await call_tool(app, "link_references", {"text": text})
    assert [r["status"] for r in again["references"]] == ["matched_without_link", "linked", "unresolved"]
