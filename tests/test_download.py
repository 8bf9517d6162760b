"""download_paper without a browser: names, file checks, safe targets and ledger decisions."""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.model import Artifact
from cnki_mcp.documents.download import ENTRIES, DownloadPage, Entry, choose_entry, prior
from cnki_mcp.documents.download_files import (
    Body,
    DownloadRequest,
    artifact_key,
    check_filename,
    check_names,
    check_target,
    default_filename,
    file_warnings,
    publish,
    read_body,
    reconcile,
    stored_names,
    wanted_format,
)
from cnki_mcp.store.library import Store

REF = "rec_8f6f38fc3ab3f5b8e4637434"
PDF = b"%PDF-1.7\n" + b"x" * 200 + b"\n%%EOF\n"


async def prior_reply(store: Store, ref: str, request: DownloadRequest) -> Any:
    """``prior``'s answer as the client receives it (None when a new click is due)."""
    return msgspec.to_builtins(await prior(store, ref, request))


@pytest.fixture
def store(isolated_data_dir: Path) -> Iterator[Store]:
    opened = Store.open(isolated_data_dir)
    yield opened
    opened.close_sync()


def test_default_filename() -> None:
    assert default_filename("再论违约金调整", REF, "pdf") == "再论违约金调整_8f6f38fc.pdf"
    assert default_filename('a/b\\c<d>e:f"g|h?i*j\x01k', REF, "caj") == "a_b_c_d_e_f_g_h_i_j_k_8f6f38fc.caj"
    assert default_filename(" ..题名.. ", REF, "pdf") == "题名_8f6f38fc.pdf"
    long = default_filename("长" * 100, REF, "pdf")
    assert long == "长" * 75 + "_8f6f38fc.pdf"
    assert default_filename("", REF, "pdf") == "论文__8f6f38fc.pdf"
    assert default_filename("CON", REF, "pdf") == "论文_CON_8f6f38fc.pdf"
    assert default_filename("...", REF, "pdf").startswith("论文_")


def test_default_filename_drops_bidi_and_zero_width_characters() -> None:
    name = default_filename("合同\u202efdp.exe\u200b研究\u2066", REF, "pdf")

    assert name == "合同fdp.exe研究_8f6f38fc.pdf"


def test_default_filename_of_a_reserved_title() -> None:
    assert default_filename("COM¹", REF, "pdf") == "论文_COM¹_8f6f38fc.pdf"


@pytest.mark.parametrize("name", ["a.pdf", "报告.PDF", "x.caj"])
def test_acceptable_filenames(name: str) -> None:
    assert check_filename(name, "auto") == name


@pytest.mark.parametrize(
    ("name", "fmt"),
    [("a.caj", "pdf"), ("a.pdf", "caj"), ("a.txt", "auto"), ("a", "pdf"), ("../a.pdf", "pdf"), ("a/b.pdf", "pdf"),
     ("C:a.pdf", "pdf"), ("CON.pdf", "pdf"), (".hidden.pdf", "pdf"), ("a.pdf ", "pdf"), ("x" * 181 + ".pdf", "pdf")],
)
def test_rejected_filenames(name: str, fmt: str) -> None:
    with pytest.raises(CnkiError) as error:
        check_filename(name, fmt)
    assert error.value.code == "INVALID_FILENAME"


def test_short_missing_or_linked_files_are_invalid(tmp_path: Path) -> None:
    good = tmp_path / "good"
    good.write_bytes(PDF)
    short = tmp_path / "short"
    short.write_bytes(b"%PDF-1.7 %%EOF")
    link = tmp_path / "link"
    link.symlink_to(good)
    for path in (short, link, tmp_path / "missing"):
        with pytest.raises(CnkiError) as error:
            read_body(path)
        assert error.value.code == "INVALID_FILE", path.name


@pytest.mark.parametrize(
    "subdirectory",
    ["..", "../outside", "a/../../outside", "/abs", "\\\\server\\share", "C:\\x", "c:x", "CON", "a/NUL.txt", "a/./b"],
)
def test_subdirectories_cannot_leave_downloads(store: Store, subdirectory: str) -> None:
    before = sorted(p for p in store.root.parent.rglob("*"))
    with pytest.raises(CnkiError) as error:
        check_target(store.downloads_dir, DownloadRequest(subdirectory=subdirectory))
    assert error.value.code in ("UNSAFE_OUTPUT_PATH", "INVALID_FILENAME")
    after = sorted(p for p in store.root.parent.rglob("*") if not str(p).startswith(str(store.downloads_dir)))
    assert [p for p in after if p not in before] == []


def test_planted_symlink_is_refused(store: Store, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    store.downloads_dir.mkdir(exist_ok=True)
    (store.downloads_dir / "papers").symlink_to(outside, target_is_directory=True)
    with pytest.raises(CnkiError) as error:
        check_target(store.downloads_dir, DownloadRequest(subdirectory="papers/new"))
    assert error.value.code == "UNSAFE_OUTPUT_PATH"
    assert list(outside.iterdir()) == []


def test_existing_target_is_reported_before_any_click(store: Store) -> None:
    check_target(store.downloads_dir, DownloadRequest(format="pdf", subdirectory="sub"), "题名", REF)
    target = store.downloads_dir / "sub" / "题名_8f6f38fc.pdf"
    target.write_bytes(b"mine")
    with pytest.raises(CnkiError) as error:
        check_target(store.downloads_dir, DownloadRequest(format="pdf", subdirectory="sub"), "题名", REF)
    assert error.value.code == "FILE_EXISTS"
    (store.downloads_dir / "x.pdf").write_bytes(b"mine")
    with pytest.raises(CnkiError):
        check_target(store.downloads_dir, DownloadRequest(filename="x.pdf"))
    assert target.read_bytes() == b"mine"
    # auto without a filename: the name depends on the format the page offers
    check_target(store.downloads_dir, DownloadRequest(subdirectory="sub"), "题名", REF)


def _clicked(store: Store, guid: str = "", fmt: str = "pdf", name: str = "题名_8f6f38fc.pdf") -> Artifact:
    incoming = store.incoming_dir("op_" + "a" * 24)
    artifact = Artifact(state="clicked", record_ref=REF, title="题名", format=fmt, name=name,
                        incoming=str(incoming), download_guid=guid, operation_id="op_" + "a" * 24)
    store.put_artifact(artifact_key(REF, fmt), artifact)
    return artifact


async def test_uncertain_click_is_never_repeated_without_retry(store: Store) -> None:
    _clicked(store)
    with pytest.raises(CnkiError) as error:
        await prior_reply(store, REF, DownloadRequest())
    assert error.value.code == "SIDE_EFFECT_UNCERTAIN" and error.value.retryable
    assert error.value.details["state"] == "clicked"
    assert await prior_reply(store, REF, DownloadRequest(format="pdf", retry=True)) is None  # retry: a new click is due
    assert await prior_reply(store, REF, DownloadRequest(format="caj")) is None  # another format is another download


async def test_late_file_is_found_and_then_served_from_cache(store: Store) -> None:
    artifact = _clicked(store)
    Path(artifact.incoming, "0f0e-guid-1").write_bytes(PDF)
    Path(artifact.incoming, "1f0e-guid-2.crdownload").write_bytes(b"partial")
    found = await prior_reply(store, REF, DownloadRequest())
    assert found is not None
    assert found["requests"] == 0
    result = found["result"]
    assert result["state"] == "completed"
    assert result["source"] == "download"
    assert result["sha256"] == hashlib.sha256(PDF).hexdigest()
    assert result["bytes"] == len(PDF)
    assert Path(result["path"]) == store.downloads_dir / "题名_8f6f38fc.pdf"
    assert not Path(artifact.incoming, "0f0e-guid-1").exists()

    again = await prior_reply(store, REF, DownloadRequest())
    assert again is not None
    assert again["source"] == "cache"
    assert again["result"]["source"] == "cache"

    Path(result["path"]).write_bytes(PDF + b"changed")  # changed on disk: downloaded afresh
    assert await prior_reply(store, REF, DownloadRequest()) is None


async def test_partial_late_file_keeps_the_click_uncertain(store: Store) -> None:
    artifact = _clicked(store, guid="abc-123")
    Path(artifact.incoming, "abc-123").write_bytes(b"%PDF-1.7\n" + b"x" * 300)  # no %%EOF yet
    Path(artifact.incoming, "other").write_bytes(PDF)  # not this click's GUID
    assert reconcile(store.downloads_dir, artifact) is None
    with pytest.raises(CnkiError) as error:
        await prior_reply(store, REF, DownloadRequest(format="pdf"))
    assert error.value.code == "SIDE_EFFECT_UNCERTAIN"


def test_publish_never_overwrites(store: Store) -> None:
    artifact = _clicked(store)
    src = Path(artifact.incoming, "guid")
    src.write_bytes(PDF)
    store.downloads_dir.mkdir(exist_ok=True)
    (store.downloads_dir / artifact.name).write_bytes(b"mine")
    with pytest.raises(CnkiError) as error:
        publish(store.downloads_dir, artifact, src, read_body(src))
    assert error.value.code == "FILE_EXISTS"
    assert (store.downloads_dir / artifact.name).read_bytes() == b"mine"
    assert src.exists()  # the download is kept when it could not be placed
    os.unlink(store.downloads_dir / artifact.name)
    done = publish(store.downloads_dir, artifact, src, read_body(src))
    assert done.state == "completed" and done.incoming == "" and not src.parent.exists()


# --- what a finished download is ----------------------------------------------------------------

CAJ_FAMILY = {b"CAJ\x00": "CAJ", b"HN\x00\x00\xc8\x00": "HN", b"\xc8\x00": "C8", b"KDH ": "KDH", b"TEB\x00": "TEB"}


@pytest.mark.parametrize(("head", "label"), list(CAJ_FAMILY.items()))
def test_every_caj_family_header_is_a_caj(tmp_path: Path, head: bytes, label: str) -> None:
    path = tmp_path / "f"
    path.write_bytes(head + b"\x00" * 200)
    body = read_body(path)
    assert body.format == "caj"
    assert body.header == label
    assert body.complete is True


def test_pdf_html_and_unknown_bodies(tmp_path: Path) -> None:
    cases = {
        "pdf": (PDF, ("pdf", "PDF", True)),
        "pdf_no_eof": (b"%PDF-1.7" + b"x" * 3000, ("pdf", "PDF", False)),
        "html": (b"\xef\xbb\xbf\n  <!DOCTYPE html><html><body>" + b"x" * 200, ("html", "HTML", True)),
        "fragment": (b"<div class='tips'>" + b"x" * 200, ("html", "HTML", True)),
        "zip": (b"PK\x03\x04" + b"x" * 200, ("unknown", "50 4b 03 04", False)),
    }
    for name, (data, expected) in cases.items():
        path = tmp_path / name
        path.write_bytes(data)
        body = read_body(path)
        assert (body.format, body.header, body.complete) == expected, name


def test_warnings_say_what_is_odd_about_a_kept_file() -> None:
    pdf = Body(format="pdf", header="PDF", complete=True)
    assert file_warnings("pdf", pdf, "a.pdf") == []
    assert file_warnings("caj", Body(format="caj", header="KDH", complete=True), "a.caj") == []
    as_caj = file_warnings("caj", pdf, "我的.caj")
    assert len(as_caj) == 2
    assert "知网给的是 PDF" in as_caj[0]
    assert "我的.caj" in as_caj[1]
    assert len(file_warnings("caj", pdf, "a.pdf")) == 1  # the default name already follows the content
    assert "加密" in file_warnings("caj", Body(format="caj", header="TEB", complete=True), "a.caj")[0]
    assert "c8 00" in file_warnings("caj", Body(format="unknown", header="c8 00", complete=False), "a.caj")[0]
    assert "%%EOF" in file_warnings("pdf", Body(format="pdf", header="PDF", complete=False), "a.pdf")[0]


def test_default_names_follow_the_content_chosen_names_stay() -> None:
    pdf = Body(format="pdf", header="PDF", complete=True)
    default = Artifact(state="clicked", record_ref=REF, format="caj", name="题名_8f6f38fc.caj")
    assert stored_names(default, pdf) == ["题名_8f6f38fc.pdf", "题名_8f6f38fc.caj"]
    assert stored_names(default, Body(format="caj", header="HN", complete=True)) == ["题名_8f6f38fc.caj"]
    assert stored_names(default, Body(format="unknown", header="00", complete=False)) == ["题名_8f6f38fc.caj"]
    chosen = msgspec.structs.replace(default, chosen_name=True, name="我的.caj")
    assert stored_names(chosen, pdf) == ["我的.caj"]


def test_a_pdf_for_a_caj_order_is_published_as_pdf_unless_that_name_is_taken(store: Store) -> None:
    artifact = _clicked(store, fmt="caj", name="题名_8f6f38fc.caj")
    first = Path(artifact.incoming, "g1")
    first.write_bytes(PDF)
    done = publish(store.downloads_dir, artifact, first, read_body(first))
    assert Path(done.path).name == "题名_8f6f38fc.pdf"
    assert done.content_format == "pdf"
    assert done.name == "题名_8f6f38fc.pdf"
    assert "知网给的是 PDF" in done.warnings[0]
    artifact = _clicked(store, fmt="caj", name="题名_8f6f38fc.caj")
    second = Path(artifact.incoming, "g2")
    second.write_bytes(PDF)
    again = publish(store.downloads_dir, artifact, second, read_body(second))
    assert Path(again.path).name == "题名_8f6f38fc.caj"  # the .pdf name is taken: the name checked before the click


def test_a_late_html_or_unknown_file_keeps_the_click_uncertain(store: Store) -> None:
    artifact = _clicked(store, guid="abc-123")
    Path(artifact.incoming, "abc-123").write_bytes(b"<html><body>" + "下载失败".encode() * 40)
    assert reconcile(store.downloads_dir, artifact) is None
    Path(artifact.incoming, "abc-123").write_bytes(b"\x00\x01" * 200)
    assert reconcile(store.downloads_dir, artifact) is None


# --- names asked for again ----------------------------------------------------------------------


def _completed(store: Store) -> Artifact:
    artifact = _clicked(store)
    src = Path(artifact.incoming, "guid-1")
    src.write_bytes(PDF)
    done = publish(store.downloads_dir, artifact, src, read_body(src))
    store.put_artifact(artifact_key(REF, "pdf"), done)
    return done


async def test_a_new_name_for_a_downloaded_paper_is_a_local_copy(store: Store) -> None:
    done = _completed(store)
    check_names(store.downloads_dir, DownloadRequest(filename="副本.pdf", subdirectory="读过"))
    answer = await prior_reply(store, REF, DownloadRequest(filename="副本.pdf", subdirectory="读过"))
    assert answer is not None
    result = answer["result"]
    assert answer["requests"] == 0
    assert result["source"] == "local_copy"
    assert result["copied_from"] == done.path
    assert Path(result["path"]) == store.downloads_dir / "读过" / "副本.pdf"
    assert Path(result["path"]).read_bytes() == PDF
    assert Path(done.path).read_bytes() == PDF  # the original stays
    same = await prior_reply(store, REF, DownloadRequest(filename="副本.pdf", subdirectory="读过"))
    assert same is not None
    assert same["result"]["path"] == result["path"]  # asking again is the same copy
    own = await prior_reply(store, REF, DownloadRequest(filename=Path(done.path).name))
    assert own is not None
    assert own["result"]["source"] == "cache"


async def test_a_new_name_that_is_taken_is_file_exists(store: Store) -> None:
    _completed(store)
    (store.downloads_dir / "别人的.pdf").write_bytes(b"mine")
    with pytest.raises(CnkiError) as error:
        await prior_reply(store, REF, DownloadRequest(filename="别人的.pdf"))
    assert error.value.code == "FILE_EXISTS"
    assert (store.downloads_dir / "别人的.pdf").read_bytes() == b"mine"


async def test_a_filename_picks_the_ledger_entry_of_its_extension(store: Store) -> None:
    _completed(store)
    assert await prior_reply(store, REF, DownloadRequest(filename="论文.caj")) is None  # no CAJ yet: a download is due


# --- the detail page's entries ----------------------------------------------------------------


def _page(*texts: str, tips: tuple[str, ...] = ()) -> DownloadPage:
    return DownloadPage(entries=[Entry(text=t) for t in texts], tips=list(tips))


THESIS = ("在线阅读", "分章下载", "分页下载", "CAJ整本下载")


@pytest.mark.parametrize(
    ("texts", "wanted", "expected"),
    [
        (("HTML阅读", "PDF下载", "CAJ下载"), "auto", ("pdf", "PDF下载")),
        (("HTML阅读", "CAJ下载"), "auto", ("caj", "CAJ下载")),
        (THESIS, "auto", ("caj", "CAJ整本下载")),
        (THESIS, "caj", ("caj", "CAJ整本下载")),
        (("分章下载", "分页下载", "整本下载"), "caj", ("caj", "整本下载")),
        ((*THESIS, "PDF下载"), "auto", ("pdf", "PDF下载")),
        (("CAJ分章下载", "CAJ分页下载", "CAJ 整本下载"), "caj", ("caj", "CAJ 整本下载")),
        (("下载PDF", "下载CAJ"), "caj", ("caj", "下载CAJ")),
    ],
)
def test_the_whole_document_entry_is_chosen(texts: tuple[str, ...], wanted: str, expected: tuple[str, str]) -> None:
    fmt, entry = choose_entry(_page(*texts), wanted)
    assert (fmt, entry.text) == expected


@pytest.mark.parametrize("text", ["分章下载", "分页下载", "在线阅读", "CAJ分章下载", "PDF分页下载", "PDF整本下载"])
def test_partial_entries_never_pass_for_a_caj(text: str) -> None:
    assert not re.search(ENTRIES["caj"], text, re.I)


def test_a_thesis_without_a_whole_entry_names_what_it_offers() -> None:
    with pytest.raises(CnkiError) as error:
        choose_entry(_page("在线阅读", "分章下载", "分页下载"), "auto")
    assert error.value.code == "DOWNLOAD_ENTRY_NOT_FOUND"
    assert error.value.details["offered"] == ["分章下载", "分页下载"]
    assert "分章下载、分页下载" in error.value.message


def test_a_foreign_language_page_says_why_there_is_no_entry() -> None:
    with pytest.raises(CnkiError) as error:
        choose_entry(_page("原文链接"), "auto", "WWJD")
    assert error.value.code == "DOWNLOAD_ENTRY_NOT_FOUND"
    assert "外文文献" in error.value.message


def test_an_unsubscribed_tip_refuses_before_any_click() -> None:
    with pytest.raises(CnkiError) as error:
        choose_entry(_page("PDF下载", tips=("对不起，贵单位没有订购该专辑，请您与贵单位图书馆联系订购！",)), "auto")
    assert error.value.code == "DOWNLOAD_REFUSED"
    assert "没有订购该专辑" in error.value.message
    fmt, _ = choose_entry(_page("PDF下载", tips=("欢迎示例大学图书馆的用户",)), "auto")
    assert fmt == "pdf"  # a tip that refuses nothing is no refusal


def test_unavailable_entries_refuse_and_auto_takes_an_available_one() -> None:
    grey = DownloadPage(entries=[Entry(text="PDF下载", classes="btn-dlpdf disabled"),
                                 Entry(text="CAJ下载", title="您所在机构未订购该产品")])
    with pytest.raises(CnkiError) as error:
        choose_entry(grey, "auto")
    assert error.value.code == "DOWNLOAD_REFUSED"
    mixed = DownloadPage(entries=[Entry(text="PDF下载", disabled=True), Entry(text="CAJ下载")])
    assert choose_entry(mixed, "auto")[0] == "caj"
    logged_out = DownloadPage(entries=[Entry(text="PDF下载", classes="downloadlink icon-notlogged")])
    assert choose_entry(logged_out, "pdf")[0] == "pdf"  # not logged in yet is no refusal


def test_a_file_name_says_which_format_auto_means() -> None:
    assert wanted_format(DownloadRequest()) == "auto"
    assert wanted_format(DownloadRequest(filename="我的.CAJ")) == "caj"
    assert wanted_format(DownloadRequest(filename="我的.pdf")) == "pdf"
    assert wanted_format(DownloadRequest(format="pdf", filename="我的.pdf")) == "pdf"


def test_a_tiny_file_is_read_as_the_text_it_is(tmp_path: Path) -> None:
    from cnki_mcp.documents.download_files import MIN_FILE_BYTES, tiny_file, tiny_text

    small = tmp_path / "a"
    small.write_bytes("产品不在有效期范围之内！".encode())
    large = tmp_path / "b"
    large.write_bytes(b"%PDF-" + b"0" * MIN_FILE_BYTES)
    assert tiny_file(small) == "产品不在有效期范围之内！".encode()
    assert tiny_file(large) is None
    assert tiny_file(tmp_path / "missing") is None
    assert tiny_text("对不起，您的操作太过频繁！".encode("gb18030")) == "对不起，您的操作太过频繁！"
    assert tiny_text(b"  error \x00 code=-1\n") == "error code=-1"


def test_a_download_written_outside_incoming_is_moved_in(tmp_path: Path) -> None:
    from cnki_mcp.documents.download_files import gather_stray

    guid = "5121f30a-a8bb-49c0-acb1-9bbf3b663006"
    incoming = tmp_path / "数据" / "incoming" / "op_1"
    incoming.mkdir(parents=True)
    expected = incoming / guid
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    (cwd / guid).write_bytes(b"%PDF-1.4 stray")
    assert gather_stray(expected, str(expected), cwd) == cwd / guid  # reported in place, found in the working directory
    assert expected.read_bytes() == b"%PDF-1.4 stray"
    assert not (cwd / guid).exists()
    assert gather_stray(expected, "", cwd) is None  # already in place: nothing moves

    other = incoming / "7d0c4f7e-0000-4000-8000-000000000001"
    elsewhere = tmp_path / "elsewhere.pdf"
    elsewhere.write_bytes(b"%PDF-1.4 reported")
    assert gather_stray(other, str(elsewhere), cwd) == elsewhere  # where the browser said it wrote it
    assert other.read_bytes() == b"%PDF-1.4 reported"
    assert gather_stray(incoming / "8e1d5a8f-0000-4000-8000-000000000002", "", cwd) is None  # nowhere
