"""download_paper without a browser: names, file checks, safe targets and ledger decisions."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from cnki_mcp.download import (
    DownloadRequest,
    artifact_key,
    check_filename,
    check_target,
    default_filename,
    prior,
    publish,
    reconcile,
    validate_download,
)
from cnki_mcp.errors import CnkiError
from cnki_mcp.model import Artifact
from cnki_mcp.store import Store

REF = "rec_8f6f38fc3ab3f5b8e4637434"
PDF = b"%PDF-1.7\n" + b"x" * 200 + b"\n%%EOF\n"


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


def test_validate_download(tmp_path: Path) -> None:
    good = tmp_path / "good"
    good.write_bytes(PDF)
    validate_download(good, "pdf")
    cases = {
        "short": (b"%PDF-1.7 %%EOF", "pdf", "下载文件不完整"),
        "html": (b"<html>" + b"x" * 200 + b"%%EOF", "pdf", "不一致"),
        "no_eof": (b"%PDF-1.7" + b"x" * 300, "pdf", "结束标记"),
        "eof_too_early": (b"%PDF-1.7%%EOF" + b"x" * 3000, "pdf", "结束标记"),
        "bad_caj": (b"PK\x03\x04" + b"x" * 200, "caj", "不一致"),
    }
    for name, (data, fmt, words) in cases.items():
        path = tmp_path / name
        path.write_bytes(data)
        with pytest.raises(CnkiError) as error:
            validate_download(path, fmt)
        assert error.value.code == "INVALID_FILE" and words in error.value.message, name
    for magic in (b"CAJ", b"KDH", b"HN"):
        path = tmp_path / magic.decode()
        path.write_bytes(magic + b"\x00" * 200)
        validate_download(path, "caj")
    link = tmp_path / "link"
    link.symlink_to(good)
    with pytest.raises(CnkiError):
        validate_download(link, "pdf")


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
        await prior(store, REF, "auto", retry=False)
    assert error.value.code == "SIDE_EFFECT_UNCERTAIN" and error.value.retryable
    assert error.value.details["state"] == "clicked"
    assert await prior(store, REF, "pdf", retry=True) is None  # retry: a new click is due
    assert await prior(store, REF, "caj", retry=False) is None  # another format is another download


async def test_late_file_is_found_and_then_served_from_cache(store: Store) -> None:
    artifact = _clicked(store)
    Path(artifact.incoming, "0f0e-guid-1").write_bytes(PDF)
    Path(artifact.incoming, "1f0e-guid-2.crdownload").write_bytes(b"partial")
    found = await prior(store, REF, "auto", retry=False)
    assert found is not None and found["requests"] == 0
    result = found["result"]
    assert result["state"] == "completed" and result["source"] == "download"
    assert result["sha256"] == hashlib.sha256(PDF).hexdigest() and result["bytes"] == len(PDF)
    assert Path(result["path"]) == store.downloads_dir / "题名_8f6f38fc.pdf"
    assert not Path(artifact.incoming, "0f0e-guid-1").exists()

    again = await prior(store, REF, "auto", retry=False)
    assert again is not None and again["source"] == "cache" and again["result"]["source"] == "cache"

    Path(result["path"]).write_bytes(PDF + b"changed")  # changed on disk: downloaded afresh
    assert await prior(store, REF, "auto", retry=False) is None


async def test_partial_late_file_keeps_the_click_uncertain(store: Store) -> None:
    artifact = _clicked(store, guid="abc-123")
    Path(artifact.incoming, "abc-123").write_bytes(b"%PDF-1.7\n" + b"x" * 300)  # no %%EOF yet
    Path(artifact.incoming, "other").write_bytes(PDF)  # not this click's GUID
    assert reconcile(store.downloads_dir, artifact) is None
    with pytest.raises(CnkiError) as error:
        await prior(store, REF, "pdf", retry=False)
    assert error.value.code == "SIDE_EFFECT_UNCERTAIN"


def test_publish_never_overwrites(store: Store) -> None:
    artifact = _clicked(store)
    src = Path(artifact.incoming, "guid")
    src.write_bytes(PDF)
    store.downloads_dir.mkdir(exist_ok=True)
    (store.downloads_dir / artifact.name).write_bytes(b"mine")
    with pytest.raises(CnkiError) as error:
        publish(store.downloads_dir, artifact, src)
    assert error.value.code == "FILE_EXISTS"
    assert (store.downloads_dir / artifact.name).read_bytes() == b"mine"
    assert src.exists()  # the download is kept when it could not be placed
    os.unlink(store.downloads_dir / artifact.name)
    done = publish(store.downloads_dir, artifact, src)
    assert done.state == "completed" and done.incoming == "" and not src.parent.exists()
