"""End to end: download_paper against the variants the real site answers with.

Through the real MCP client over stdio, ``python -m cnki_mcp serve`` and a real headless Chromium
pointed at the simulator (tests/kns): theses downloaded whole, refusals recognised at once, every
CAJ-family file kept, a snapshot for every page that ends a download, and names checked before the
local ledger answers. Helpers come from test_e2e_documents.
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import Any

import pytest

from cnki_mcp.store.library import Store
from tests.harness import AWAITING, chromium_path
from tests.kns import pages
from tests.kns.corpus import Paper as SimPaper
from tests.kns.downloads import TINY_FILE
from tests.kns.server import KnsSimulator
from tests.test_e2e_documents import (
    EntrySimulator,
    answer,
    entry_sim,  # noqa: F401  (its fixture ``sim``)
    entry_simulator,  # noqa: F401  (its fixture ``sim_server``)
    error_code,
    journal_papers,
    seed,
    serve,
)

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.timeout(300),
    pytest.mark.skipif(chromium_path() is None, reason="没有可用的 Chromium"),
]

# A refusal must end the operation within this many seconds of the site's answer (never the 120 s wait).
REFUSAL_SECONDS = 10.0


def papers_of(sim: KnsSimulator, resource: str, count: int, **where: Any) -> list[SimPaper]:
    found = [p for p in sim.corpus.papers if p.resource == resource and all(getattr(p, k) == v for k, v in where.items())]
    return found[:count]


def order_kinds(sim: KnsSimulator) -> list[str]:
    """The kind of every order URL the browser opened (pdf, caj, html, catalog, downpage)."""
    kinds = []
    for request in sim.requests:
        if request.endpoint == "download":
            parts = pages.decode_token(request.query.get("id", "")) or []
            kinds.append(parts[2] if len(parts) == 4 else "?")
    return kinds


def snapshot_of(data_dir: Path, reply: dict[str, Any], *, screenshot: bool = True) -> str:
    """The saved page named in the error's details (and its screenshot); returns its text."""
    name = reply["errors"][0]["details"]["snapshot"]
    saved = data_dir / "diagnostics" / name
    assert saved.is_file(), name
    assert saved.with_suffix(".png").is_file() == screenshot, name
    return saved.read_text(encoding="utf-8")


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def last_request_at(sim: KnsSimulator, endpoint: str) -> float:
    return max(r.at for r in sim.requests if r.endpoint == endpoint)


def clicked_entries(data_dir: Path) -> list[str]:
    store = Store.open(data_dir)
    try:
        return [key for key, artifact in store.data.artifacts.items() if artifact.state == "clicked"]
    finally:
        store.close_sync()


async def test_theses_download_whole_and_foreign_pages_have_no_entry(sim: EntrySimulator, isolated_data_dir: Path) -> None:
    whole, short, with_pdf, only_parts = papers_of(sim, "DISSERTATION", 4)
    (meeting,) = papers_of(sim, "CONFERENCE", 1)
    (foreign,) = [p for p in sim.corpus.papers if p.language != "zh"][:1]
    refs = seed(isolated_data_dir, sim, [whole, short, with_pdf, only_parts, meeting, foreign])
    sim.configure(download="ok", login="institution")
    async with serve(isolated_data_dir, sim) as session:
        # 在线阅读, 分章下载 and 分页下载 come before CAJ整本下载: auto takes the whole thesis as CAJ.
        sim.configure(thesis_downloads="whole")
        got = await session.wait(await session.call("download_paper", {"record_ref": refs[0]}))
        assert got["status"] == "completed", got
        assert got["result"]["format"] == "caj"
        assert got["result"]["sha256"] == sha(pages.caj_bytes(whole, "HN"))
        assert order_kinds(sim) == ["caj"]
        conference = await session.wait(await session.call("download_paper", {"record_ref": refs[4], "format": "caj"}))
        assert conference["status"] == "completed", conference
        assert conference["result"]["sha256"] == sha(pages.caj_bytes(meeting, "HN"))

        # 整本下载 without the CAJ prefix is the same whole-document entry.
        sim.configure(thesis_downloads="whole_short")
        got = await session.wait(await session.call("download_paper", {"record_ref": refs[1], "format": "caj"}))
        assert got["status"] == "completed", got
        assert got["result"]["sha256"] == sha(pages.caj_bytes(short, "HN"))

        # A thesis PDF (anchor id pdfDown1) is still preferred by auto.
        sim.configure(thesis_downloads="whole_pdf")
        got = await session.wait(await session.call("download_paper", {"record_ref": refs[2]}))
        assert got["status"] == "completed", got
        assert got["result"]["format"] == "pdf"
        assert got["result"]["sha256"] == sha(pages.pdf_bytes(with_pdf))
        assert order_kinds(sim) == ["caj", "caj", "caj", "pdf"]

        # Asking for a PDF the thesis page does not offer: no click, the page's entries named, the page kept.
        sim.configure(thesis_downloads="whole")
        missing = await session.wait(await session.call("download_paper", {"record_ref": refs[3], "format": "pdf"}))
        assert missing["status"] == "failed", missing
        assert error_code(missing) == "DOWNLOAD_ENTRY_NOT_FOUND", missing
        assert "分章下载、分页下载" in missing["errors"][0]["message"]
        assert "CAJ整本下载" in snapshot_of(isolated_data_dir, missing)

        # A foreign-language (WWJD) page has no PDF/CAJ entry at all.
        sim.configure(foreign_detail=True)
        abroad = await session.wait(await session.call("download_paper", {"record_ref": refs[5]}))
        assert abroad["status"] == "failed", abroad
        assert error_code(abroad) == "DOWNLOAD_ENTRY_NOT_FOUND", abroad
        assert "外文文献" in abroad["errors"][0]["message"]
        assert "原文链接" in snapshot_of(isolated_data_dir, abroad)
        assert order_kinds(sim) == ["caj", "caj", "caj", "pdf"]  # nothing was clicked for either

        # A detail page that cannot be read (cut short before its title) is kept as it was.
        sim.configure(foreign_detail=False)
        sim.fault("detail", "truncate", fraction=0.2, times=1)
        unread = await session.wait(await session.call("download_paper", {"record_ref": refs[3]}))
        assert unread["status"] in ("failed", "partial"), unread
        assert error_code(unread) in ("PARSER_UNSUPPORTED", "CONTENT_NOT_READY"), unread
        assert "detail-tab" in unread["errors"][0]["details"]["snapshot"]
        snapshot_of(isolated_data_dir, unread)
        assert order_kinds(sim) == ["caj", "caj", "caj", "pdf"]
    assert "catalog" not in order_kinds(sim)
    assert "downpage" not in order_kinds(sim)


# (scenario, the site's words, the endpoint whose answer is the refusal)
REFUSALS_AFTER_THE_CLICK = [
    ({"download": "abstract_only"}, "只收录题录信息", "error"),
    ({"download": "abstract_only", "error_page": "blank"}, "只收录题录信息", "error"),
    ({"download": "balance"}, "余额不足", "download"),
    ({"download": "unsubscribed"}, "未订购", "download"),
    ({"download": "session_end"}, "会话已经结束", "download"),
    ({"download": "not_valid"}, "产品不在有效期范围之内", "download"),
    ({"download": "too_frequent"}, "操作太过频繁", "download"),
    ({"download": "html_file"}, "下载链接已过期", "file"),
]


async def test_refusals_end_at_once_with_the_sites_words(sim: EntrySimulator, isolated_data_dir: Path) -> None:
    paper, tipped = journal_papers(sim, 2)
    refs = seed(isolated_data_dir, sim, [paper, tipped])
    seconds: dict[str, float] = {}
    async with serve(isolated_data_dir, sim) as session:
        # Before the click: the detail page says so; nothing reaches the order URL.
        for refusal, words in (("organization_tip", "没有订购该专辑"), ("entries_unavailable", "未订购该产品")):
            sim.configure(download="ok", detail_refusal=refusal)
            no = await session.wait(await session.call("download_paper", {"record_ref": refs[1]}))
            seconds[refusal] = time.time() - last_request_at(sim, "detail")
            assert no["status"] == "failed", no
            assert error_code(no) == "DOWNLOAD_REFUSED", no
            assert words in no["errors"][0]["message"]
            assert words in snapshot_of(isolated_data_dir, no)
        assert sim.count("download") == 0
        sim.configure(detail_refusal="none")

        # After the click, one paper again and again: no refusal leaves a click behind to block the next.
        for scenario, words, endpoint in REFUSALS_AFTER_THE_CLICK:
            sim.configure(**scenario)
            no = await session.wait(await session.call("download_paper", {"record_ref": refs[0]}))
            label = "+".join(scenario.values())
            seconds[label] = time.time() - last_request_at(sim, endpoint)
            assert no["status"] == "failed", (label, no)
            assert error_code(no) == "DOWNLOAD_REFUSED", (label, no)
            assert words in no["errors"][0]["message"], label
            assert seconds[label] < REFUSAL_SECONDS, (label, seconds[label])
            snapshot_of(isolated_data_dir, no, screenshot=endpoint != "file")  # a file has no tab to photograph
            sim.configure(download="ok", error_page="text")
        got = await session.wait(await session.call("download_paper", {"record_ref": refs[0]}))
        assert got["status"] == "completed", got
    assert clicked_entries(isolated_data_dir) == []
    assert list((isolated_data_dir / "incoming").iterdir()) == []
    print("seconds from the refusal to DOWNLOAD_REFUSED:", {k: round(v, 2) for k, v in seconds.items()})


async def test_bar_verify_page_goes_to_the_person_and_the_download_goes_on(
    sim: EntrySimulator, isolated_data_dir: Path
) -> None:
    first, second, third = journal_papers(sim, 3)
    refs = seed(isolated_data_dir, sim, [first, second, third])
    sim.configure(download="ok")
    async with serve(isolated_data_dir, sim) as session:
        sim.captcha("download", after=1, style="bar")  # the puzzle after a run of downloads
        got = await session.wait(await session.call("download_paper", {"record_ref": refs[0]}))
        assert got["status"] == "completed", got
        waiting = await session.wait(await session.call("download_paper", {"record_ref": refs[1]}), until=AWAITING)
        assert waiting["status"] == "awaiting_user", waiting
        assert "验证" in waiting["message"]
        assert [r.host for r in sim.requests if r.path.startswith("/bar/verify/")] == ["bar.cnki.net"]
        sim.solve()
        done = await session.wait(waiting)
        assert done["status"] == "completed", done
        assert done["result"]["sha256"] == sha(pages.pdf_bytes(second))

        sim.captcha("download", style="bar_words")  # 请依次点击：X X X
        waiting = await session.wait(await session.call("download_paper", {"record_ref": refs[2]}), until=AWAITING)
        assert waiting["status"] == "awaiting_user", waiting
        sim.solve()
        done = await session.wait(waiting)
        assert done["status"] == "completed", done
        assert done["result"]["sha256"] == sha(pages.pdf_bytes(third))
    assert sim.count("file") == 3


async def test_a_challenge_left_unanswered_is_kept_as_a_snapshot(sim: EntrySimulator, isolated_data_dir: Path) -> None:
    (paper,) = journal_papers(sim, 1)
    refs = seed(isolated_data_dir, sim, [paper])
    sim.configure(download="ok")
    sim.captcha("download", style="bar_words")
    async with serve(isolated_data_dir, sim, CNKI_VERIFICATION_WAIT_SECONDS="3") as session:
        late = await session.wait(await session.call("download_paper", {"record_ref": refs[0]}))
        assert error_code(late) == "VERIFICATION_TIMEOUT", late
        assert "3 秒" in late["errors"][0]["message"]
        assert "请依次点击" in snapshot_of(isolated_data_dir, late)


CAJ_KINDS = [  # (caj_magic, content_format, a warning says)
    ("CAJ", "caj", None),
    ("KDH", "caj", None),
    ("C8", "caj", None),
    ("TEB", "caj", "加密"),
    ("UNKNOWN", "unknown", "不属于已知"),
]


async def test_every_caj_kind_is_kept_and_said_what_it_is(sim: EntrySimulator, isolated_data_dir: Path) -> None:
    papers = journal_papers(sim, len(CAJ_KINDS) + 3)
    refs = seed(isolated_data_dir, sim, papers)
    downloads = isolated_data_dir / "downloads"
    sim.configure(download="ok")
    async with serve(isolated_data_dir, sim) as session:
        for (magic, content, warning), paper, ref in zip(CAJ_KINDS, papers, refs, strict=False):
            sim.configure(caj_magic=magic)
            got = await session.wait(await session.call("download_paper", {"record_ref": ref, "format": "caj"}))
            assert got["status"] == "completed", (magic, got)
            result = got["result"]
            assert result["content_format"] == content, magic
            assert result["sha256"] == sha(pages.caj_bytes(paper, magic)), magic
            assert Path(result["path"]).suffix == ".caj", magic
            if warning is None:
                assert "warnings" not in result, magic
            else:
                assert warning in result["warnings"][0], magic

        # A PDF for a CAJ order: said so; a default name follows the content, a chosen one stays.
        pdf_default, pdf_chosen, html = papers[len(CAJ_KINDS):]
        ref_default, ref_chosen, ref_html = refs[len(CAJ_KINDS):]
        sim.configure(caj_magic="PDF")
        got = await session.wait(await session.call("download_paper", {"record_ref": ref_default, "format": "caj"}))
        assert got["status"] == "completed", got
        assert got["result"]["content_format"] == "pdf"
        assert got["result"]["format"] == "caj"
        assert Path(got["result"]["path"]) == downloads / f"{pdf_default.title}_{ref_default[4:12]}.pdf"
        assert "知网给的是 PDF" in got["result"]["warnings"][0]
        chosen = await session.wait(await session.call("download_paper", {"record_ref": ref_chosen, "filename": "我的.caj"}))
        assert chosen["status"] == "completed", chosen
        assert Path(chosen["result"]["path"]) == downloads / "我的.caj"
        assert chosen["result"]["sha256"] == sha(pages.pdf_bytes(pdf_chosen))
        assert len(chosen["result"]["warnings"]) == 2

        # An error page sent as the file itself is a refusal with its words, never a paper.
        sim.configure(download="html_file")
        no = await session.wait(await session.call("download_paper", {"record_ref": ref_html, "format": "caj"}))
        assert error_code(no) == "DOWNLOAD_REFUSED", no
        assert "下载链接已过期" in no["errors"][0]["message"]
        assert "下载链接已过期" in snapshot_of(isolated_data_dir, no, screenshot=False)
        assert not list(downloads.glob(f"{html.title}*"))
    assert list((isolated_data_dir / "incoming").iterdir()) == []


async def test_names_are_checked_before_the_ledger_answers(sim: EntrySimulator, isolated_data_dir: Path) -> None:
    (paper,) = journal_papers(sim, 1)
    (ref,) = seed(isolated_data_dir, sim, [paper])
    downloads = isolated_data_dir / "downloads"
    sim.configure(download="ok")
    async with serve(isolated_data_dir, sim) as session:
        got = await session.wait(await session.call("download_paper", {"record_ref": ref}))
        assert got["status"] == "completed", got
        original = Path(got["result"]["path"])
        requests = len(sim.requests)

        # A bad name or folder is refused although the paper is downloaded.
        for extra, code in (({"filename": "../x.pdf"}, "INVALID_FILENAME"), ({"filename": "CON.pdf"}, "INVALID_FILENAME"),
                            ({"filename": "x.caj", "format": "pdf"}, "INVALID_FILENAME"),
                            ({"subdirectory": "../outside"}, "UNSAFE_OUTPUT_PATH")):
            reply = await session.result("download_paper", {"record_ref": ref, **extra})
            assert reply.is_error, extra
            assert answer(reply)["errors"][0]["code"] == code, extra

        # A good new name: a copy of the local file, no CNKI request; asked again, the same copy.
        copy = await session.call("download_paper", {"record_ref": ref, "filename": "精读.pdf", "subdirectory": "课题"})
        assert copy["requests"] == 0, copy
        assert copy["result"]["source"] == "local_copy", copy
        assert Path(copy["result"]["path"]) == downloads / "课题" / "精读.pdf"
        assert Path(copy["result"]["path"]).read_bytes() == original.read_bytes()
        assert copy["result"]["copied_from"] == str(original)
        again = await session.call("download_paper", {"record_ref": ref, "filename": "精读.pdf", "subdirectory": "课题"})
        assert again["result"]["path"] == copy["result"]["path"]
        moved = await session.call("download_paper", {"record_ref": ref, "subdirectory": "另存"})
        assert Path(moved["result"]["path"]) == downloads / "另存" / original.name

        # A taken name is FILE_EXISTS, and the file there is left alone.
        (downloads / "别人的.pdf").write_bytes(b"mine")
        reply = await session.result("download_paper", {"record_ref": ref, "filename": "别人的.pdf"})
        assert reply.is_error
        assert answer(reply)["errors"][0]["code"] == "FILE_EXISTS"
        assert (downloads / "别人的.pdf").read_bytes() == b"mine"
        assert len(sim.requests) == requests


LEGACY_ALERTS = [
    "对不起，贵单位没有订购该专辑，请您与贵单位图书馆联系订购！",
    "产品不在有效期范围之内！",
    "对不起，您的操作太过频繁！请退出后重新登录。",
]


async def test_alert_refusals_and_tiny_files_are_answered_with_the_sites_words(
    sim: EntrySimulator, isolated_data_dir: Path
) -> None:
    papers = journal_papers(sim, 2)
    refs = seed(isolated_data_dir, sim, papers)
    sim.configure(download="ok")
    async with serve(isolated_data_dir, sim) as session:
        # An alert() as the detail page loads: refused before any click, the dialog answered (the tab goes on).
        sim.configure(alert_refusal="load", alert_text=LEGACY_ALERTS[0])
        no = await session.wait(await session.call("download_paper", {"record_ref": refs[0]}))
        assert no["status"] == "failed", no
        assert error_code(no) == "DOWNLOAD_REFUSED", no
        assert LEGACY_ALERTS[0] in no["errors"][0]["message"]
        assert no["errors"][0]["details"]["dialog"] is True
        assert no["errors"][0]["details"]["where"] == "detail_page"
        snapshot_of(isolated_data_dir, no)
        assert sim.count("download") == 0

        # An alert() instead of the download after the click: each legacy text, at once.
        for text in LEGACY_ALERTS:
            sim.configure(alert_refusal="click", alert_text=text)
            started = time.time()
            no = await session.wait(await session.call("download_paper", {"record_ref": refs[0]}))
            assert no["status"] == "failed", (text, no)
            assert error_code(no) == "DOWNLOAD_REFUSED", (text, no)
            assert text in no["errors"][0]["message"], no
            assert no["errors"][0]["details"]["dialog"] is True
            assert time.time() - started < 30, text  # never the 120 s wait for a file
        assert sim.count("download") == 0

        # A "file" of 36 bytes: the refusal it says, its text kept under the data directory.
        sim.configure(alert_refusal="none", download="tiny")
        tiny = await session.wait(await session.call("download_paper", {"record_ref": refs[1]}))
        assert tiny["status"] == "failed", tiny
        assert error_code(tiny) == "DOWNLOAD_REFUSED", tiny
        assert "产品不在有效期范围之内" in tiny["errors"][0]["message"]
        assert tiny["errors"][0]["details"]["bytes"] == len(TINY_FILE.encode())
        assert "产品不在有效期范围之内" in snapshot_of(isolated_data_dir, tiny, screenshot=False)
        assert sim.count("file") == 1

        # Nothing was left clicked: the same papers download once the site allows it.
        sim.configure(download="ok")
        got = await session.wait(await session.call("download_paper", {"record_ref": refs[1]}))
        assert got["status"] == "completed", got
        assert got["result"]["sha256"] == sha(pages.pdf_bytes(papers[1]))
    assert clicked_entries(isolated_data_dir) == []
    assert list((isolated_data_dir / "incoming").iterdir()) == []


async def test_a_transfer_that_never_ends_or_is_too_large_is_cancelled_and_a_long_name_is_shortened(
    sim: EntrySimulator, isolated_data_dir: Path
) -> None:
    """Issue 42 item 7: a transfer still running at the end of the wait is cancelled (its connection closed),
    one announcing more than the size cap is cancelled at once, and a name over 255 bytes is shortened before
    the click."""
    endless, huge, named = journal_papers(sim, 3)
    refs = seed(isolated_data_dir, sim, [endless, huge, named])
    sim.configure(download="ok")
    async with serve(isolated_data_dir, sim) as session:
        sim.fault("file", "truncate", mode="stall", fraction=0.3, seconds=60, times=1)
        stuck = await session.wait(await session.call("download_paper", {"record_ref": refs[0], "wait_seconds": 3}))
        answered = time.time()
        assert stuck["status"] in ("failed", "partial"), stuck  # (retryable: partial)
        assert (error_code(stuck), stuck["errors"][0]["details"]["reason"]) == ("DOWNLOAD_CANCELLED", "timeout"), stuck
        for _ in range(50):
            if sim.stalls_ended:
                break
            time.sleep(0.1)
        assert sim.stalls_ended and sim.stalls_ended[0] - answered < 5, sim.stalls_ended  # not left running to exit

        sim.fault("file", "truncate", mode="stall", fraction=0.3, seconds=60, times=1, claimed_bytes=600 << 20)
        large = await session.wait(await session.call("download_paper", {"record_ref": refs[1], "wait_seconds": 30}))
        assert (error_code(large), large["errors"][0]["details"]["reason"]) == ("DOWNLOAD_CANCELLED", "too_large"), large
        assert len(sim.stalls_ended) == 2

        long_name = "长" * 170 + ".pdf"  # 514 bytes in UTF-8: more than any file system takes
        got = await session.wait(await session.call("download_paper", {"record_ref": refs[2], "filename": long_name}))
        assert got["status"] == "completed", got
        saved = Path(got["result"]["path"]).name
        assert saved.endswith(".pdf") and saved.startswith("长" * 80) and len(saved.encode()) <= 255, saved
    assert not list((isolated_data_dir / "incoming").rglob("*.crdownload")) if (isolated_data_dir / "incoming").exists() else True
