"""The tools that work without CNKI, through App.call with parsed arguments and a seeded store."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from cnki_mcp.app import App
from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.model import Evidence, Paper, SearchEntry, SearchRecord
from cnki_mcp.store.library import Store
from cnki_mcp.surface.tools import parse_arguments
from cnki_mcp.tools import export_citations
from tests.fake_site import FakeSite
from tests.harness import call_tool, conforms


def _papers() -> list[Paper]:
    return [
        Paper(record_ref=f"rec_{i:024x}", title=f"违约金调整的基本标准研究{i}", authors=["王利明", f"作者{i}"],
              source="法学研究", document_type="期刊", year=2020 + i % 5, url=f"https://kns.cnki.net/kcms2/article/abstract?v=v{i}",
              locator=f"https://kns.cnki.net/private/{i}", abstract=f"摘要{i}", keywords=["违约金"])
        for i in range(12)
    ]


@pytest.fixture
async def seeded(isolated_data_dir: Path) -> Path:
    store = Store.open(isolated_data_dir)
    for paper in _papers():
        store.data.papers[paper.record_ref] = paper
    store.data.papers["rec_dup_a"] = Paper(record_ref="rec_dup_a", title="同名论文", authors=["甲"])
    store.data.papers["rec_dup_b"] = Paper(record_ref="rec_dup_b", title="同名 论文".replace(" ", ""), authors=["乙"])
    entries = [
        SearchEntry(record_ref=p.record_ref, score=1 - i / 20, eligible=i < 8, selected=i < 5,
                    evidence=Evidence(relevance=0.5))
        for i, p in enumerate(_papers())
    ]
    store.put_search(SearchRecord(search_id="op_search", status="completed", query="违约金", entries=entries,
                                  created_at="2026-11-30T00:00:00.000Z"), None)
    await store.close()
    return isolated_data_dir




@pytest.fixture
async def app(seeded: Path):
    application = App(seeded)
    yield application
    await application.close()


async def test_diagnostics_does_not_open_the_store(isolated_data_dir: Path) -> None:
    app = App(isolated_data_dir)
    report = await call_tool(app, "diagnostics", {})
    assert report["status"] == "completed"
    assert report["data_dir"] == str(isolated_data_dir)
    assert "store" not in report
    assert not (isolated_data_dir / "cnki.lock").exists()
    assert not (isolated_data_dir / "browser").exists()


async def test_diagnostics_answers_in_its_keys_order(app: App, isolated_data_dir: Path) -> None:
    runtime = ["status", "version", "runtime", "platform", "browser_configured", "data_dir", "process_id", "owner_pid",
               "heap_bytes", "request_interval_ms", "max_inflight", "workers", "inline_wait_seconds", "route"]
    report = conforms("diagnostics", await call_tool(app, "diagnostics", {}))
    assert list(report) == runtime and report["owner_pid"] is None
    await call_tool(app, "operation_status", {})  # opens the store and the jobs
    loaded = conforms("diagnostics", await call_tool(app, "diagnostics", {}))
    assert list(loaded) == [*runtime, "store", "downloads_today", "daily_download_limit", "browser"]
    assert loaded["browser"] == {"running": False}


async def test_search_results_answers_in_its_keys_order(app: App) -> None:
    last = conforms("search_results", await call_tool(app, "search_results", {"search_id": "op_search", "offset": 4}))
    assert list(last) == ["search_id", "status", "scope", "total", "offset", "next_offset", "results"]
    assert last["next_offset"] is None
    for view in ("compact", "records"):
        conforms("search_results", await call_tool(app, "search_results", {"search_id": "op_search", "view": view}))


async def test_search_results_scopes_views_and_paging(app: App) -> None:
    first = await call_tool(app, "search_results", {"search_id": "op_search", "limit": 2})
    assert first["scope"] == "selected" and first["total"] == 5
    assert first["offset"] == 0 and first["next_offset"] == 2
    assert [r["record_ref"] for r in first["results"]] == [f"rec_{i:024x}" for i in range(2)]
    assert set(first["results"][0]) == {"record_ref", "title", "url"}

    last = await call_tool(app, "search_results", {"search_id": "op_search", "offset": 4, "limit": 2})
    assert len(last["results"]) == 1 and last["next_offset"] is None

    eligible = await call_tool(app, "search_results", {"search_id": "op_search", "scope": "eligible", "view": "compact"})
    assert eligible["total"] == 8
    row = eligible["results"][0]
    assert row["authors"] == ["王利明", "作者0"] and row["eligible"] is True and row["score"] == 1.0
    assert "url" not in row and "locator" not in row

    records = await call_tool(app, "search_results", {"search_id": "op_search", "scope": "candidates", "view": "records", "limit": 100})
    assert records["total"] == 12
    assert records["results"][11]["eligible"] is False
    assert "locator" not in records["results"][0]["record"]
    assert records["results"][0]["evidence"]["relevance"] == 0.5


async def test_search_results_reads_live_paper_fields(app: App) -> None:
    store = await app.store()
    ref = f"rec_{0:024x}"
    store.put_paper(msgspec.structs.replace(store.data.papers[ref], abstract="后来补充的摘要"))
    page = await call_tool(app, "search_results", {"search_id": "op_search", "view": "compact", "limit": 1})
    assert page["results"][0]["abstract"] == "后来补充的摘要"


async def test_unknown_search_id(app: App) -> None:
    with pytest.raises(CnkiError) as missing:
        await call_tool(app, "search_results", {"search_id": "missing"})
    assert missing.value.code == "SEARCH_NOT_FOUND"


async def test_get_metadata_local_only(app: App) -> None:
    reply = await call_tool(app, "get_metadata", {
        "local_only": True,
        "record_refs": [f"rec_{3:024x}", "rec_unknown"],
        "titles": ["违约金调整的基本标准研究7", "同名论文", "不存在的论文"],
        "fields": ["year"],
    })
    assert reply["status"] == "completed" and reply["source"] == "local"
    records = reply["result"]["records"]
    assert [r["record_ref"] for r in records] == [f"rec_{3:024x}", f"rec_{7:024x}"]
    assert set(records[0]) == {"record_ref", "title", "year"}
    codes = sorted(e["code"] for e in reply["result"]["errors"])
    assert codes == ["DOCUMENT_NOT_FOUND", "IDENTITY_AMBIGUOUS", "RECORD_NOT_FOUND"]

    by_search = await call_tool(app, "get_metadata", {"local_only": True, "search_id": "op_search", "offset": 1, "limit": 2})
    assert [r["record_ref"] for r in by_search["result"]["records"]] == [f"rec_{1:024x}", f"rec_{2:024x}"]


async def test_export_citations_from_a_search_and_to_a_file(app: App, seeded: Path) -> None:
    reply = await call_tool(app, "export_citations", {"search_id": "op_search", "format": "gbt7714"})
    data = reply["data"]
    assert reply["status"] == "completed" and data["count"] == 5 and data["format"] == "gbt7714"
    assert data["text"].startswith("[1] 王利明, 作者0. 违约金调整的基本标准研究0[J]. 法学研究, 2020")
    saved = await call_tool(app, "export_citations", {"record_refs": [f"rec_{1:024x}", f"rec_{1:024x}"], "format": "bibtex", "filename": "refs.bib"})
    assert saved["data"]["count"] == 1
    assert Path(saved["data"]["path"]) == seeded / "exports" / "refs.bib"
    assert list(conforms("export_citations", saved)) == ["status", "data"]
    assert list(saved["data"]) == ["format", "count", "text", "path"]
    with pytest.raises(CnkiError) as exists:
        await call_tool(app, "export_citations", {"record_refs": [f"rec_{1:024x}"], "filename": "refs.bib"})
    assert exists.value.code == "FILE_EXISTS"
    with pytest.raises(CnkiError) as nothing:
        await call_tool(app, "export_citations", {"record_refs": ["rec_unknown"]})
    assert nothing.value.code == "RECORD_NOT_FOUND"  # issue 30: an unknown ref is named as such


async def test_an_export_cut_at_the_limit_says_so_and_pages_on(app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(export_citations, "EXPORT_MAX", 5)

    first = (await call_tool(app, "export_citations", {"search_id": "op_search", "scope": "candidates"}))["data"]
    last = (await call_tool(app, "export_citations", {"search_id": "op_search", "scope": "candidates", "offset": 10}))["data"]

    assert first["count"] == 5
    assert first["search_total"] == 12
    assert first["next_offset"] == 5
    assert first["warnings"] == ["检索 op_search 共 12 篇，本次导出第 1–5 篇；用 offset=5 再调用一次导出其余部分。"]
    assert last["count"] == 2
    assert last["search_total"] == 12
    assert "next_offset" not in last
    assert "warnings" not in last


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        ({"record_refs": ["rec_x"] * 1001}, "BATCH_TOO_LARGE"),
        ({"search_id": "op_search", "offset": -1}, "INVALID_OFFSET"),
        ({"record_refs": ["rec_x"], "format": "custom"}, "INVALID_TEMPLATE"),
        ({"record_refs": ["rec_x"], "format": "custom", "template": "{authors.__class__}"}, "INVALID_TEMPLATE"),
        ({"record_refs": ["rec_x"], "filename": "../escape.txt"}, "INVALID_FILENAME"),
        ({"record_refs": ["rec_x"], "filename": "CON"}, "INVALID_FILENAME"),
    ],
)
def test_export_arguments_are_rejected_before_any_work(raw: dict, code: str) -> None:
    with pytest.raises(CnkiError) as failure:
        parse_arguments("export_citations", raw)
    assert failure.value.code == code


async def test_operation_status_idle_and_control(app: App) -> None:
    assert (await call_tool(app, "operation_status", {}))["status"] == "idle"
    with pytest.raises(CnkiError) as unknown:
        await call_tool(app, "operation_status", {"operation_id": "op_missing"})
    assert unknown.value.code == "OPERATION_NOT_FOUND"
    with pytest.raises(CnkiError) as show:
        await call_tool(app, "operation_control", {"action": "show"})
    assert show.value.code == "VERIFICATION_NOT_FOUND"
    recovered = await call_tool(app, "operation_control", {"action": "recover"})
    assert recovered["status"] == "completed"
    assert list(conforms("operation_control", recovered)) == ["status", "message"]


async def test_second_server_on_the_same_directory_is_refused(app: App, seeded: Path) -> None:
    await app.store()
    other = App(seeded)
    with pytest.raises(CnkiError) as busy:
        await call_tool(other, "search_results", {"search_id": "op_search"})
    assert busy.value.code == "DATA_DIRECTORY_IN_USE"


@pytest.mark.parametrize(
    ("expression", "code"),
    [
        ({"op": "or", "items": [{"field": "title", "value": "a"}, {"op": "not", "items": [{"field": "title", "value": "b"}]}]}, "UNBOUNDED_QUERY"),
        ({"field": "nonsense", "value": "a"}, "INVALID_CONDITION"),
        ({"field": "subject", "value": "a", "match": "exact"}, "QUERY_UNSUPPORTED"),
    ],
)
async def test_structured_search_checks_the_expression_first(app: App, expression: dict, code: str) -> None:
    with pytest.raises(CnkiError) as failure:
        await call_tool(app, "structured_search", {"expression": expression})
    assert failure.value.code == code


async def test_a_download_that_fails_leaves_no_empty_folder_behind(seeded: Path) -> None:
    application = App(seeded, site_factory=FakeSite)
    try:
        reply = await call_tool(
            application, "download_paper", {"title": "知网上也没有的论文", "subdirectory": "读过/新", "wait_seconds": 5}
        )
    finally:
        await application.close()

    assert reply["status"] == "failed"
    assert reply["errors"][0]["code"] == "DOCUMENT_NOT_FOUND"
    assert not (seeded / "downloads" / "读过").exists()
