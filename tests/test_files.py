"""Safe file writes: name rules, folder confinement, no overwrite, correct size and hash."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

import pytest

from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.files import (
    adopt_file,
    atomic_replace,
    remove_empty_folders,
    safe_folder,
    validate_filename,
    write_new_file,
)


def code_of(call, *args) -> str:  # type: ignore[no-untyped-def]
    with pytest.raises(CnkiError) as info:
        call(*args)
    return info.value.code


@pytest.mark.parametrize(
    "name",
    ["论文.pdf", "a", "报告 2024（终稿）.docx", "x" * 180, "CONSOLE.txt", "nullable", "COM0", "LPT10.txt", "a.b.c"],
)
def test_valid_names(name: str) -> None:
    assert validate_filename(name) == name


@pytest.mark.parametrize(
    "name",
    [
        "",
        "x" * 181,
        ".hidden",
        "..",
        "trailing.",
        "trailing ",
        "a/b",
        "..\\evil",
        "C:evil",
        'quote".txt',
        "pipe|.txt",
        "what?.txt",
        "star*.txt",
        "lt<.txt",
        "gt>.txt",
        "tab\t.txt",
        "nl\n.txt",
        "nul\x00.txt",
        "CON",
        "con",
        "nul.txt",
        "Aux.tar.gz",
        "com1",
        "LPT9.pdf",
        "prn.",
        "COM¹.pdf",
        "lpt³",
        "invoice\u202egpj.exe",
        "report\u2066x\u2069.bib",
        "zero\u200bwidth.csv",
        "joiner\u200d.ris",
        "\ufeffbom.txt",
    ],
)
def test_invalid_names(name: str) -> None:
    with pytest.raises(CnkiError) as info:
        validate_filename(name)
    assert info.value.code == "INVALID_FILENAME"
    assert info.value.message.startswith("文件名无效")


def test_invalid_name_of_wrong_type() -> None:
    assert code_of(validate_filename, None) == "INVALID_FILENAME"


def test_write_new_file_returns_size_and_hash(tmp_path: Path) -> None:
    data = "参考文献\n[1] 张三. 题名[J]. 2024.".encode()
    written = write_new_file(tmp_path, "refs.txt", data)
    target = tmp_path / "refs.txt"
    assert written.path == str(target)
    assert written.bytes == len(data)
    assert written.sha256 == hashlib.sha256(data).hexdigest()
    assert target.read_bytes() == data
    if os.name == "posix":
        assert stat.S_IMODE(target.stat().st_mode) == 0o600
    # No temp files are left behind.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["refs.txt"]


def test_empty_file(tmp_path: Path) -> None:
    written = write_new_file(tmp_path, "empty.txt", b"")
    assert written.bytes == 0
    assert written.sha256 == hashlib.sha256(b"").hexdigest()


def test_existing_file_is_never_overwritten(tmp_path: Path) -> None:
    target = tmp_path / "paper.pdf"
    target.write_bytes(b"original bytes")
    with pytest.raises(CnkiError) as info:
        write_new_file(tmp_path, "paper.pdf", b"new bytes")
    assert info.value.code == "FILE_EXISTS"
    assert info.value.details == {"path": str(target)}
    assert target.read_bytes() == b"original bytes"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["paper.pdf"]


def test_existing_symlink_counts_as_existing(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"keep me")
    folder = safe_folder(tmp_path / "exports")
    (folder / "link.txt").symlink_to(outside)
    assert code_of(write_new_file, folder, "link.txt", b"x") == "FILE_EXISTS"
    # A dangling symlink is also a taken name, and writing must not follow it.
    (folder / "dangling.txt").symlink_to(tmp_path / "nowhere.txt")
    assert code_of(write_new_file, folder, "dangling.txt", b"x") == "FILE_EXISTS"
    assert not (tmp_path / "nowhere.txt").exists()
    assert outside.read_bytes() == b"keep me"


def test_write_rejects_bad_name_before_touching_disk(tmp_path: Path) -> None:
    assert code_of(write_new_file, tmp_path, "../escape.txt", b"x") == "INVALID_FILENAME"
    assert code_of(write_new_file, tmp_path, "nul.txt", b"x") == "INVALID_FILENAME"
    assert list(tmp_path.iterdir()) == []


def test_safe_folder_creates_nested_folders_inside_base(tmp_path: Path) -> None:
    base = tmp_path / "downloads"
    folder = safe_folder(base, "机器学习/2024")
    assert folder == base / "机器学习" / "2024"
    assert folder.is_dir()
    assert safe_folder(base, None) == base
    assert safe_folder(base, "") == base
    # Both separators split segments, and repeated separators fold.
    assert safe_folder(base, "a\\b//c/") == base / "a" / "b" / "c"
    if os.name == "posix":
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700


@pytest.mark.parametrize(
    ("subdirectory", "code"),
    [
        ("..", "UNSAFE_OUTPUT_PATH"),
        ("../outside", "UNSAFE_OUTPUT_PATH"),
        ("a/../../outside", "UNSAFE_OUTPUT_PATH"),
        ("a\\..\\..\\outside", "UNSAFE_OUTPUT_PATH"),
        ("./a", "UNSAFE_OUTPUT_PATH"),
        ("/etc", "UNSAFE_OUTPUT_PATH"),
        ("/tmp/x", "UNSAFE_OUTPUT_PATH"),
        ("C:\\Windows", "UNSAFE_OUTPUT_PATH"),
        ("c:relative", "UNSAFE_OUTPUT_PATH"),
        ("\\\\server\\share", "UNSAFE_OUTPUT_PATH"),
        ("//server/share", "UNSAFE_OUTPUT_PATH"),
        ("\\rooted", "UNSAFE_OUTPUT_PATH"),
        ("CON", "INVALID_FILENAME"),
        ("ok/nul.txt/deeper", "INVALID_FILENAME"),
        ("ok/aux", "INVALID_FILENAME"),
        ("trailing./x", "INVALID_FILENAME"),
        ("x/trailing ", "INVALID_FILENAME"),
        (".hidden", "INVALID_FILENAME"),
        ("a:b", "UNSAFE_OUTPUT_PATH"),  # drive-relative on Windows
        ("ab:c", "INVALID_FILENAME"),
        ("ctl\x01", "INVALID_FILENAME"),
    ],
)
def test_safe_folder_rejects_escapes(tmp_path: Path, subdirectory: str, code: str) -> None:
    base = tmp_path / "downloads"
    assert code_of(safe_folder, base, subdirectory) == code
    # Nothing was created outside the base.
    assert sorted(p.name for p in tmp_path.iterdir()) in ([], ["downloads"])


def test_safe_folder_rejects_planted_symlink(tmp_path: Path) -> None:
    base = tmp_path / "downloads"
    outside = tmp_path / "outside"
    outside.mkdir()
    safe_folder(base, "real")
    (base / "real" / "escape").symlink_to(outside, target_is_directory=True)
    assert code_of(safe_folder, base, "real/escape") == "UNSAFE_OUTPUT_PATH"
    assert code_of(safe_folder, base, "real/escape/deeper") == "UNSAFE_OUTPUT_PATH"
    assert list(outside.iterdir()) == []
    # Writing straight into a symlinked folder is refused too.
    assert code_of(write_new_file, base / "real" / "escape", "a.txt", b"x") == "UNSAFE_OUTPUT_PATH"
    assert list(outside.iterdir()) == []


def test_safe_folder_rejects_symlinked_base(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "exports").symlink_to(outside, target_is_directory=True)
    assert code_of(safe_folder, tmp_path / "exports", None) == "UNSAFE_OUTPUT_PATH"


def test_safe_folder_rejects_file_in_the_way(tmp_path: Path) -> None:
    base = safe_folder(tmp_path / "downloads")
    (base / "notadir").write_bytes(b"x")
    assert code_of(safe_folder, base, "notadir/sub") == "UNSAFE_OUTPUT_PATH"


def test_adopt_file_moves_without_overwriting(tmp_path: Path) -> None:
    incoming = tmp_path / "incoming" / "op_1"
    incoming.mkdir(parents=True)
    payload = b"%PDF-1.7\n" + os.urandom(3 * 1024 * 1024 + 17) + b"\n%%EOF\n"
    src = incoming / "8d6c0b0e-guid"
    src.write_bytes(payload)
    folder = safe_folder(tmp_path / "downloads", "课题")
    written = adopt_file(src, folder, "论文.pdf")
    assert written.bytes == len(payload)
    assert written.sha256 == hashlib.sha256(payload).hexdigest()
    assert (folder / "论文.pdf").read_bytes() == payload
    assert not src.exists()
    assert sorted(p.name for p in folder.iterdir()) == ["论文.pdf"]

    # A second download under a taken name stays where it is and the old file is untouched.
    src2 = incoming / "other-guid"
    src2.write_bytes(b"%PDF-other")
    assert code_of(adopt_file, src2, folder, "论文.pdf") == "FILE_EXISTS"
    assert src2.read_bytes() == b"%PDF-other"
    assert (folder / "论文.pdf").read_bytes() == payload


def test_adopt_missing_source(tmp_path: Path) -> None:
    assert code_of(adopt_file, tmp_path / "missing", tmp_path, "a.pdf") == "DISK_WRITE_FAILED"


def test_atomic_replace(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    atomic_replace(path, b"{}")
    atomic_replace(path, b'{"browser_path": "/usr/bin/chromium"}')
    assert path.read_bytes() == b'{"browser_path": "/usr/bin/chromium"}'
    assert [p.name for p in tmp_path.iterdir()] == ["config.json"]
    if os.name == "posix":
        assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_name_taken_during_the_write_is_not_overwritten(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_link = os.link

    def racing_link(src: str, dst: str) -> None:
        Path(dst).write_bytes(b"arrived first")
        real_link(src, dst)

    monkeypatch.setattr(os, "link", racing_link)
    assert code_of(write_new_file, tmp_path, "race.txt", b"late") == "FILE_EXISTS"
    assert (tmp_path / "race.txt").read_bytes() == b"arrived first"
    assert [p.name for p in tmp_path.iterdir()] == ["race.txt"]


def test_fallback_when_hard_links_are_unsupported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import errno

    def no_links(src: str, dst: str) -> None:
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_links)
    data = b"exported text"
    written = write_new_file(tmp_path, "out.txt", data)
    assert (tmp_path / "out.txt").read_bytes() == data
    assert written.sha256 == hashlib.sha256(data).hexdigest()
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]
    assert code_of(write_new_file, tmp_path, "out.txt", b"other") == "FILE_EXISTS"
    assert (tmp_path / "out.txt").read_bytes() == data


def test_disk_failure_is_reported_and_cleaned_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import errno

    def full_disk(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full_disk)
    assert code_of(write_new_file, tmp_path, "big.pdf", b"x" * 100) == "DISK_WRITE_FAILED"
    assert list(tmp_path.iterdir()) == []


def test_empty_folders_of_a_write_that_did_not_happen_are_removed(tmp_path: Path) -> None:
    safe_folder(tmp_path, "读过/2024/一月")
    (tmp_path / "读过" / "keep.txt").write_text("x", encoding="utf-8")

    remove_empty_folders(tmp_path, "读过/2024/一月")

    assert not (tmp_path / "读过" / "2024").exists()
    assert (tmp_path / "读过" / "keep.txt").exists()


def test_removing_empty_folders_never_leaves_the_base(tmp_path: Path) -> None:
    base = tmp_path / "downloads"
    base.mkdir()

    remove_empty_folders(base, "../downloads")

    assert base.is_dir()


def test_a_name_over_255_bytes_is_shortened_keeping_its_extension() -> None:
    from cnki_mcp.core.files import MAX_NAME_BYTES, fit_name

    assert fit_name("短名.pdf") == "短名.pdf"
    fitted = fit_name("长" * 170 + ".pdf")
    assert fitted.endswith(".pdf") and len(fitted.encode()) <= MAX_NAME_BYTES and fitted == "长" * 83 + ".pdf"
    assert fit_name("a" * 250 + ". .caj") == "a" * 250 + ".caj"


def test_a_default_name_of_four_byte_characters_keeps_its_ref() -> None:
    from cnki_mcp.core.files import MAX_NAME_BYTES
    from cnki_mcp.documents.download_files import DownloadRequest, default_filename

    name = default_filename("𠀀" * 75, "rec_0123456789abcdef", "pdf")
    assert name.endswith("_01234567.pdf") and len(name.encode()) <= MAX_NAME_BYTES
    assert DownloadRequest(filename="长" * 170 + ".pdf").filename == "长" * 83 + ".pdf"
