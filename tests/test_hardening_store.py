"""Round 4 of the hardening (issue 42) on the store: a value that cannot be encoded, a writer thread that is
gone, a hostile research.db (triggers, views, zlib bombs, huge rows) and a WAL held open by another reader."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest

from cnki_mcp.core.text import loads_site_json, without_lone_surrogates
from cnki_mcp.store import db as db_module
from cnki_mcp.store.library import Store
from tests.fake_site import sim_paper
from tests.store_faults import stored_keys


def codes(problems: list[Any]) -> list[str]:
    return [problem.code for problem in problems]


# --- item 2: one lone surrogate ------------------------------------------------------------------------


def test_json_from_the_site_keeps_no_lone_surrogate() -> None:
    value = loads_site_json('{"abstract": "a\\ud83d b \\ud83d\\ude00 c\\udc00", "k\\ud800": ["\\udfff"]}')
    assert value == {"abstract": "a\ufffd b \U0001f600 c\ufffd", "k\ufffd": ["\ufffd"]}
    msgspec.json.encode(value)  # encodable: nothing left to fail a save
    assert without_lone_surrogates("plain 中文") == "plain 中文"


def test_a_value_that_cannot_be_encoded_is_dropped_alone_and_later_writes_commit(tmp_path: Path) -> None:
    store = Store.open(tmp_path)
    try:
        good, bad = sim_paper(1), sim_paper(2)
        bad.abstract = "摘要\ud83d"
        store.put_paper(good)
        store.put_paper(bad)
        assert store.flush()
        warnings = store.warnings()
        assert codes(warnings) == ["STORE_NOT_SAVED"]
        assert warnings[0].details["cause"] == "rejected"
        assert stored_keys(tmp_path, "papers") == {good.record_ref}
        for n in range(3, 6):  # the next writes commit, and the warning goes with the next commit
            store.put_paper(sim_paper(n))
            assert store.flush()
        assert store.warnings() == []
        assert stored_keys(tmp_path, "papers") == {good.record_ref, *(sim_paper(n).record_ref for n in range(3, 6))}
    finally:
        store.close_sync()


class _Gone(BaseException):
    """Not an Exception: nothing in the writer's loop may catch it, so the thread ends."""


def test_a_writer_that_is_gone_is_told_in_every_answer_never_a_timeout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store.open(tmp_path)
    real = db_module.apply

    def apply(conn: sqlite3.Connection, puts: Any) -> None:
        if any(put.table == "papers" for put in puts):
            raise _Gone("the thread ends here")
        real(conn, puts)

    monkeypatch.setattr(db_module, "apply", apply)
    try:
        store.put_paper(sim_paper(1))

        async def answers() -> list[float]:
            took = []
            for n in range(3):
                began = time.monotonic()
                store.put_paper(sim_paper(10 + n))
                await store.settle()
                took.append(time.monotonic() - began)
            return took

        took = asyncio.run(answers())
        assert max(took) < 1.0, took  # before: 10 s each (SETTLE_SECONDS)
        began = time.monotonic()
        assert not store.flush()
        assert time.monotonic() - began < 1.0
        warnings = store.warnings()
        assert codes(warnings) == ["STORE_NOT_SAVED"]
        assert warnings[0].details["cause"] == "writer_stopped"
    finally:
        store.close_sync()
