"""End to end, the store on research.db: a real server with a real headless Chromium on the CNKI simulator
finds a library an earlier version left as research.json, carries it over, reads a detail page for one of
its records, and is SIGKILLed right after it answered; the next server (through the official MCP client)
still has what the first one answered, and diagnostics says how many records the database holds and its size.
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest

from cnki_mcp.core.model import Paper, StoreData
from tests.harness import McpSession, RawServer, serve_params
from tests.store_faults import persisted
from tests.test_e2e_documents import journal_papers, serve
from tests.test_e2e_relations import reset, richest, seed


def legacy_library(data: Path, sim: Any, count: int) -> list[str]:
    """research.json as a search of an earlier version left it: records from the listing, no detail read."""
    papers = journal_papers(sim, count)
    refs = [f"rec_{hashlib.sha256(p.filename.encode()).hexdigest()[:24]}" for p in papers]
    library = StoreData(papers={
        ref: Paper(record_ref=ref, title=p.title, authors=list(p.authors), source=p.source, year=p.year, document_type="期刊",
                   url=sim.detail_url(p), locator=sim.detail_url(p))
        for p, ref in zip(papers, refs, strict=True)
    })
    data.mkdir(parents=True)
    (data / "research.json").write_bytes(msgspec.json.encode(library))
    return refs


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.timeout(300)
async def test_a_carried_over_library_keeps_what_a_killed_server_answered(kns: Any, tmp_path: Path) -> None:
    data = tmp_path / "data"
    refs = legacy_library(data, kns, 3)
    raw = (data / "research.json").read_bytes()
    with open(tmp_path / "stderr.txt", "wb") as errlog:
        first = await RawServer.start(serve_params(data, kns.browser_args, CNKI_INLINE_WAIT_SECONDS="50"), errlog, read_timeout=120)
        try:
            local = await first.call("get_metadata", {"local_only": True, "record_refs": refs})
            migrated = (await first.call("diagnostics", {}))["store"]["migration"]
            read = await first.wait(await first.call("get_metadata", {"record_refs": [refs[0]]}), timeout=120)
        finally:
            first.proc.kill()  # SIGKILL right after the answer: no close, no last commit
            await first.proc.wait()
        on_disk = persisted(data)
        params = serve_params(data, kns.browser_args)
        async with McpSession.serving(params, errlog=errlog) as second:
            again = await second.call("get_metadata", {"local_only": True, "record_refs": [refs[0]]})
            store = (await second.call("diagnostics", {}))["store"]
    assert [record["record_ref"] for record in local["result"]["records"]] == refs
    assert migrated["counts"]["papers"] == 3 and migrated["kept_as"] == str(data / "research.json.migrated")
    assert (data / "research.json.migrated").read_bytes() == raw and not (data / "research.json").exists()
    assert read["status"] == "completed", read
    (answered,) = read["result"]["records"]
    assert answered["abstract"]
    assert on_disk.papers[refs[0]].abstract == answered["abstract"]  # what the client was told was committed
    assert on_disk.papers[refs[0]].detail_observed_at
    assert again["result"]["records"][0]["abstract"] == answered["abstract"]
    assert store["records"] == 3
    assert 0 < (data / "research.db").stat().st_size <= store["database"]["size_bytes"]  # the WAL was folded in at close
    assert store["migration"]["counts"]["papers"] == 3  # told by every later start too


@pytest.mark.browser
@pytest.mark.timeout(300)
async def test_half_a_surrogate_pair_from_the_citation_api_never_stops_the_saves(kns: Any, tmp_path: Path) -> None:
    """Issue 42: an abstract of CNKI's citation API ending with ``\\ud83d`` (JSON's escape of half a pair) used
    to kill the writer thread — every later answer waited 10 s and nothing acknowledged afterwards was on disk.
    Now the text is cleaned where it enters (U+FFFD), every answer is quick and without STORE_NOT_SAVED, and
    research.db holds every record the client was told of."""
    reset(kns)
    kns.configure(citation_lone_surrogate=True)
    data = tmp_path / "data"
    thesis = richest(kns, "DISSERTATION")
    (ref,) = seed(data, kns, [thesis])
    times = []
    async with serve(data, kns) as session:
        replies = []
        for relation in ("references", "citing"):
            began = time.monotonic()
            replies.append(await session.wait(await session.call("related_papers", {"record_ref": ref, "relation": relation, "limit": 50})))
            times.append(time.monotonic() - began)
        began = time.monotonic()
        listed = await session.call("operation_status", {"limit": 5})
        times.append(time.monotonic() - began)
    for reply in (*replies, listed):
        assert not [w for w in reply.get("warnings", []) if w["code"] == "STORE_NOT_SAVED"], reply
    assert all(reply["status"] == "completed" for reply in replies), replies
    assert times[-1] < 5.0, times  # before: 10 s (the wait for a writer that was gone)
    linked = [p["record_ref"] for reply in replies for p in reply["result"]["papers"] if p["record_ref"]]
    assert linked
    on_disk = persisted(data)
    assert set(linked) <= set(on_disk.papers)  # before: none of them (the writer died on the first)
    abstracts = [on_disk.papers[r].abstract for r in linked if on_disk.papers[r].abstract]
    assert abstracts and all(text.endswith("\ufffd") for text in abstracts)
    assert {op.kind for op in on_disk.operations.values()} >= {"related"}
