"""What the client is told about the data directory: unsaved changes and entries left out in every
result, the save state in diagnostics, a broken config.json, and records removed by retention."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cnki_mcp.app import App
from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.model import Operation, Route, SearchRecord
from cnki_mcp.store import db as db_module
from cnki_mcp.store import library as store_module
from cnki_mcp.store.library import Store
from cnki_mcp.surface import server
from tests.harness import call_tool
from tests.store_faults import failing_apply


def warning_codes(reply: dict[str, Any]) -> list[str]:
    return [warning["code"] for warning in reply.get("warnings", [])]


@pytest.fixture
async def app(isolated_data_dir: Path):
    application = App(isolated_data_dir)
    yield application
    await application.close()


async def fail_a_save(app: App, monkeypatch: pytest.MonkeyPatch) -> Store:
    """A change whose commit meets a full disk (the disk stays full for the test)."""
    store = await app.store()
    monkeypatch.setattr(db_module, "apply", failing_apply(lambda: True))
    store.put_search(SearchRecord(search_id="s_1", status="completed", created_at="2026-05-01T12:00:00.000Z"))
    await store.settle()  # the writer's first attempt, at once
    assert store.dirty
    return store


# --- unsaved changes --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("search_results", {"search_id": "s_1"}),
        ("operation_status", {}),
        ("session_status", {}),
        ("diagnostics", {}),
        ("get_metadata", {"local_only": True, "search_id": "s_1"}),
        ("link_references", {"text": "没有题名的文字"}),
    ],
)
async def test_every_result_warns_while_changes_are_unsaved(
    app: App, monkeypatch: pytest.MonkeyPatch, tool: str, arguments: dict[str, Any]
) -> None:
    await fail_a_save(app, monkeypatch)
    reply = await call_tool(app, tool, arguments)
    assert warning_codes(reply) == ["STORE_NOT_SAVED"]


async def test_a_failure_carries_the_warning_too(app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    await fail_a_save(app, monkeypatch)
    with pytest.raises(CnkiError) as missing:
        await call_tool(app, "search_results", {"search_id": "s_missing"})
    answer = server.failure(missing.value).structured_content
    assert answer["errors"][0]["code"] == "SEARCH_NOT_FOUND"
    assert warning_codes(answer) == ["STORE_NOT_SAVED"]


async def test_the_warning_goes_once_a_save_succeeds(app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    store = await fail_a_save(app, monkeypatch)
    monkeypatch.undo()
    await store.flush_async()  # this one or the loop's (woken by the finished search) writes
    assert not store.dirty and store.save.failed_writes == 0
    reply = await call_tool(app, "search_results", {"search_id": "s_1"})
    assert "warnings" not in reply


async def test_diagnostics_shows_the_save_state(app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    await fail_a_save(app, monkeypatch)
    save = (await call_tool(app, "diagnostics", {}))["store"]["save"]
    assert save["dirty"] is True
    assert (save["cause"], save["error"]) == ("disk_full", "OperationalError: database or disk is full")
    assert save["failing_since"] >= save["unsaved_since"]
    assert save["failed_writes"] == 1


# --- entries left out when the store was read -----------------------------------------------------------


async def test_dropped_entries_are_told_in_results_and_diagnostics(app: App, isolated_data_dir: Path) -> None:
    isolated_data_dir.mkdir(parents=True)
    (isolated_data_dir / "research.json").write_bytes(
        b'{"version":5,"papers":{"rec_1":{"record_ref":"rec_1","title":"A"},"rec_2":{"record_ref":"rec_2","year":"2020"}}}'
    )
    reply = await call_tool(app, "get_metadata", {"local_only": True, "record_refs": ["rec_1"]})
    report = await call_tool(app, "diagnostics", {})
    (recovered,) = report["store"]["recovered"]
    assert [record["record_ref"] for record in reply["result"]["records"]] == ["rec_1"]
    assert warning_codes(reply) == ["STORE_ENTRIES_DROPPED"]
    assert recovered["path"] in reply["warnings"][0]["message"]
    assert recovered["dropped"] == [{"section": "papers", "key": "rec_2", "reason": recovered["dropped"][0]["reason"]}]
    assert "year" in recovered["dropped"][0]["reason"]
    assert warning_codes(report) == ["STORE_ENTRIES_DROPPED"]


async def test_a_newer_store_is_refused_and_diagnostics_says_why(app: App, isolated_data_dir: Path) -> None:
    isolated_data_dir.mkdir(parents=True)
    (isolated_data_dir / "research.json").write_bytes(b'{"version":7}')
    with pytest.raises(CnkiError) as refused:
        await call_tool(app, "search_results", {"search_id": "s_1"})
    report = await call_tool(app, "diagnostics", {})
    assert refused.value.code == "STORE_UNAVAILABLE"
    assert report["store_error"]["code"] == "STORE_UNAVAILABLE"
    assert "格式版本 7" in report["store_error"]["message"]
    assert (isolated_data_dir / "research.json").read_bytes() == b'{"version":7}'


# --- config.json ------------------------------------------------------------------------------------


async def test_a_broken_config_fails_tools_but_not_diagnostics_until_fixed(isolated_data_dir: Path) -> None:
    isolated_data_dir.mkdir(parents=True)
    config = isolated_data_dir / "config.json"
    config.write_text("{not json", encoding="utf-8")
    app = App(isolated_data_dir)
    try:
        with pytest.raises(CnkiError) as broken:
            await call_tool(app, "search_results", {"search_id": "s_1"})
        report = await call_tool(app, "diagnostics", {})
        config.write_text('{"browser_path": "/opt/chromium"}', encoding="utf-8")
        after = await call_tool(app, "diagnostics", {})
        with pytest.raises(CnkiError) as fixed:
            await call_tool(app, "search_results", {"search_id": "s_1"})
    finally:
        await app.close()
    assert broken.value.code == "CONFIG_INVALID"
    assert str(config) in broken.value.message
    assert report["config_error"]["code"] == "CONFIG_INVALID"
    assert "config_error" not in after  # read again on the next call: no restart needed
    assert app.config.browser_path == "/opt/chromium"
    assert fixed.value.code == "SEARCH_NOT_FOUND"


# A route an older version (or a hand edit) left in config.json, each one the gateway rules refuse.
REFUSED_ROUTES = {
    "loopback": {"kind": "wrdvpn", "gateway": "127.0.0.1", "segment": "https"},
    "decimal_ip": {"kind": "prefix", "gateway": "2130706433", "prefix": "/-----"},
    "idn": {"kind": "host_rewrite", "gateway": "xn--webvpn-9g4f.example.edu.cn"},
    "long_url": {"kind": "prefix", "gateway": "lib.example.edu.cn", "prefix": "/" + "a" * 3000 + "/-----"},
}


@pytest.mark.parametrize("stored", REFUSED_ROUTES.values(), ids=list(REFUSED_ROUTES))
async def test_a_stored_route_the_gateway_rules_refuse_is_not_used_and_said(isolated_data_dir: Path, stored: dict[str, str]) -> None:
    isolated_data_dir.mkdir(parents=True)
    config = isolated_data_dir / "config.json"
    config.write_text(json.dumps({"browser_path": "/opt/chromium", "route": stored}), encoding="utf-8")
    app = App(isolated_data_dir)
    try:
        report = await call_tool(app, "diagnostics", {})
        answer = await call_tool(app, "session_status", {})
    finally:
        await app.close()
    assert app.config.route == Route() and app.config.browser_path == "/opt/chromium"
    assert report["route"] == {"kind": "direct"} and "config_error" not in report
    for reply in (report, answer):
        (refused,) = [warning for warning in reply["warnings"] if warning["code"] == "CONFIG_ROUTE_REFUSED"]
        assert refused["details"]["host"] == stored["gateway"][:100]
        assert "login" in refused["message"] and "cnki-mcp setup --remote-access" in refused["message"]
    assert json.loads(config.read_text("utf-8"))["route"] == stored  # left for a login or setup to replace


async def test_a_good_stored_route_loads_unchanged(isolated_data_dir: Path) -> None:
    isolated_data_dir.mkdir(parents=True)
    stored = {"kind": "wrdvpn", "gateway": "webvpn.example.edu.cn", "segment": "https"}
    (isolated_data_dir / "config.json").write_text(json.dumps({"route": stored}), encoding="utf-8")
    app = App(isolated_data_dir)
    try:
        report = await call_tool(app, "diagnostics", {})
    finally:
        await app.close()
    assert app.config.route == Route(kind="wrdvpn", gateway="webvpn.example.edu.cn", segment="https")
    assert report["route"] == {"kind": "wrdvpn", "gateway": "webvpn.example.edu.cn"}
    assert "CONFIG_ROUTE_REFUSED" not in warning_codes(report)


# --- retention --------------------------------------------------------------------------------------------


async def test_a_search_removed_by_retention_says_so(app: App) -> None:
    store = await app.store()
    store.data.retired_searches.append("s_old")
    with pytest.raises(CnkiError) as removed:
        await call_tool(app, "search_results", {"search_id": "s_old"})
    with pytest.raises(CnkiError) as by_metadata:
        await call_tool(app, "get_metadata", {"local_only": True, "search_id": "s_old"})
    with pytest.raises(CnkiError) as unknown:
        await call_tool(app, "search_results", {"search_id": "s_never"})
    assert removed.value.code == "SEARCH_NOT_FOUND"
    assert removed.value.details["reason"] == "retention"
    assert "自动删除" in removed.value.message
    assert "300" in removed.value.message
    assert by_metadata.value.details["reason"] == "retention"
    assert unknown.value.details is None
    assert "300" in unknown.value.message


async def test_a_search_removed_by_retention_is_reported_as_removed(app: App) -> None:
    store = await app.store()
    for n in range(store_module.KEEP_SEARCHES + 1):
        store.put_search(SearchRecord(search_id=f"s_{n:03d}", status="completed", created_at=f"2026-01-01T00:{n // 60:02d}:{n % 60:02d}.000Z"))
    await store.flush_async()
    with pytest.raises(CnkiError) as removed:
        await call_tool(app, "search_results", {"search_id": "s_000"})
    assert removed.value.details["reason"] == "retention"


async def test_an_operation_removed_by_retention_says_so(app: App) -> None:
    store = await app.store()
    for n in range(store_module.KEEP_OPERATIONS + 1):
        store.put_operation(Operation(operation_id=f"op_{n:03d}", kind="read", status="completed", created_at=f"2026-01-01T00:{n // 60:02d}:{n % 60:02d}.000Z"))
    await store.flush_async()
    with pytest.raises(CnkiError) as removed:
        await call_tool(app, "operation_status", {"operation_id": "op_000"})
    assert removed.value.code == "OPERATION_NOT_FOUND"
    assert removed.value.details["reason"] == "retention"
    assert "200" in removed.value.message

