"""download_paper's files: names, what a finished download really is, and placing it for good.

Everything here is blocking disk work or pure logic: call the disk functions from
``asyncio.to_thread``.

What a download is comes from its first bytes (docs/site-notes.md, "Downloads"): ``%PDF-`` is a PDF; ``CAJ``,
``HN``, ``KDH `` (an encrypted PDF wrapper), ``TEB`` (encrypted) and a first byte 0xC8 are the CAJ
family; a page of HTML is CNKI's error page sent as the file. A CAJ order may deliver a plain PDF and
a PDF order a CAJ: the file is kept either way and the result says what it is. A default name takes
the extension of the content (so the right program opens it); a name the caller chose is kept as
given. Only an HTML page is never kept as a paper (the caller gets DOWNLOAD_REFUSED with its words).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import shutil
import unicodedata
from pathlib import Path

import msgspec

from cnki_mcp.core.clock import utc_now_iso
from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.files import (
    MAX_NAME_BYTES,
    WrittenFile,
    adopt_file,
    copy_file,
    cut_to_bytes,
    fit_name,
    invalid_name,
    is_reserved,
    refuse_existing,
    replace_unsafe_chars,
    safe_folder,
    validate_filename,
)
from cnki_mcp.core.model import Artifact, DownloadResult
from cnki_mcp.core.tool_args import FILE_FORMATS

log = logging.getLogger(__name__)

FORMATS = FILE_FORMATS
MIN_FILE_BYTES = 100
HEAD_BYTES = 1024
PDF_TRAILER_WINDOW = 2048
TITLE_RUNES = 75
REF_CHARS = 8
# First bytes → (label, format). Longer prefixes first.
HEADERS: tuple[tuple[bytes, str, str], ...] = (
    (b"%PDF-", "PDF", "pdf"),
    (b"CAJ", "CAJ", "caj"),
    (b"KDH", "KDH", "caj"),
    (b"TEB", "TEB", "caj"),
    (b"HN", "HN", "caj"),
    (b"\xc8", "C8", "caj"),
)
_HTML_START = re.compile(rb"\s*(?:<!doctype\s+html|<html|<head|<body|<meta|<title|<!--|<script|<div|<p[\s>])", re.I)
_GUID = re.compile(r"[A-Za-z0-9-]+")
_LABELS = {"pdf": "PDF", "caj": "CAJ"}


class DownloadRequest(msgspec.Struct):
    format: str = "auto"
    filename: str = ""
    subdirectory: str = ""
    wait_seconds: int = 120
    retry: bool = False

    def __post_init__(self) -> None:
        # A name longer than a file system takes is shortened here, before any check or click, not refused
        # when the file is published.
        self.filename = fit_name(self.filename)


class Body(msgspec.Struct, frozen=True):
    """What a downloaded file is, from its first and last bytes."""

    format: str  # pdf | caj | html | unknown
    header: str  # PDF, CAJ, HN, KDH, TEB, C8, HTML, or the first bytes in hex when unknown
    complete: bool  # a PDF ends with %%EOF; the other kinds cannot tell and count as complete


# --------------------------------------------------------------------------------------------
# Names


def artifact_key(record_ref: str, fmt: str) -> str:
    return f"{record_ref}:{fmt}"


def default_filename(title: str, record_ref: str, fmt: str) -> str:
    """「题名_编号前8位.<fmt>」 with the title made safe for every file system."""
    name = replace_unsafe_chars(unicodedata.normalize("NFC", title)).strip(". ")
    name = name[:TITLE_RUNES].strip(". ")
    if not name or is_reserved(name):
        name = f"论文_{name}"
    suffix = record_ref[4:] if record_ref.startswith("rec_") else record_ref
    tail = f"_{suffix[:REF_CHARS]}.{fmt}"
    # 75 characters of 4-byte script (CJK extension B, emoji) would pass 255 bytes: the title is cut, the ref kept.
    return cut_to_bytes(name, MAX_NAME_BYTES - len(tail.encode("utf-8", "surrogatepass"))).rstrip(". ") + tail


def extension(filename: str) -> str:
    return os.path.splitext(filename)[1].lower().lstrip(".")


def check_filename(filename: str, fmt: str) -> str:
    """A caller's file name: a safe single name whose extension is .pdf/.caj (and ``fmt``'s unless auto)."""
    validate_filename(filename)
    ext = extension(filename)
    if ext not in FORMATS or (fmt in FORMATS and ext != fmt):
        wanted = f".{fmt}" if fmt in FORMATS else ".pdf 或 .caj"
        raise invalid_name(f"文件名“{filename}”的扩展名须为 {wanted}，与下载格式一致。", filename=filename, format=fmt)
    return filename


def wanted_format(request: DownloadRequest) -> str:
    """The format asked for: explicit, else the extension of the caller's file name, else auto."""
    if request.format in FORMATS or not request.filename:
        return request.format
    ext = extension(request.filename)
    return ext if ext in FORMATS else request.format


def check_names(downloads: Path, request: DownloadRequest) -> Path:
    """The caller's file name and folder, checked before anything else answers (creates the folder)."""
    if request.filename:
        check_filename(request.filename, request.format)
    return safe_folder(downloads, request.subdirectory or None)


def check_target(downloads: Path, request: DownloadRequest, title: str = "", record_ref: str = "") -> None:
    """Reject a bad name or folder before anything reaches CNKI (blocking: creates the folder).

    Also FILE_EXISTS when the final name is already known (a filename, or an explicit format
    with a known title).
    """
    folder = check_names(downloads, request)
    name = request.filename
    if not name and request.format in FORMATS and title and record_ref:
        name = default_filename(title, record_ref, request.format)
    if name:
        refuse_existing(folder / name, "未点击下载，请换一个文件名或子目录")


# --------------------------------------------------------------------------------------------
# What a file is


def tiny_file(path: Path) -> bytes | None:
    """The bytes of a regular file shorter than any paper (MIN_FILE_BYTES): an error text sent as the file."""
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size >= MIN_FILE_BYTES:
            return None
        return path.read_bytes()[:MIN_FILE_BYTES]
    except OSError:
        return None


def tiny_text(data: bytes) -> str:
    """A tiny download as text: UTF-8, else GB18030 (CNKI's older pages), whitespace collapsed."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("gb18030", "replace")
    return " ".join(text.replace("\x00", " ").split())


def read_body(path: Path) -> Body:
    """Classify a downloaded file; INVALID_FILE when it is missing, not a regular file or too short."""
    if path.is_symlink() or not path.is_file():
        raise CnkiError("INVALID_FILE", "下载文件不存在或不是普通文件。", details={"path": str(path)})
    size = path.stat().st_size
    if size < MIN_FILE_BYTES:
        raise CnkiError("INVALID_FILE", "下载文件不完整", details={"bytes": size})
    with open(path, "rb") as handle:
        head = handle.read(HEAD_BYTES)
        handle.seek(max(0, size - PDF_TRAILER_WINDOW))
        tail = handle.read()
    for prefix, label, fmt in HEADERS:
        if head.startswith(prefix):
            return Body(format=fmt, header=label, complete=fmt != "pdf" or b"%%EOF" in tail)
    if _HTML_START.match(head.removeprefix(b"\xef\xbb\xbf")):
        return Body(format="html", header="HTML", complete=True)
    return Body(format="unknown", header=head[:4].hex(" "), complete=False)


def file_warnings(requested: str, body: Body, name: str) -> list[str]:
    """What the client must know about a kept file, in Chinese (empty for an ordinary PDF/CAJ)."""
    notes: list[str] = []
    if body.format == "unknown":
        notes.append(f"文件头（{body.header}）不属于已知的 PDF/CAJ 格式；文件已原样保留为 {name}，请自行检查能否打开。")
    elif body.format != requested:
        reader = "任意 PDF 阅读器" if body.format == "pdf" else "CAJViewer"
        notes.append(f"请求的是 {_LABELS[requested]}，知网给的是 {_LABELS[body.format]} 文件（文件头 {body.header}），需用{reader}打开。")
        if extension(name) != body.format:
            notes.append(f"文件按你指定的名称保存为 {name}，扩展名与内容不一致；改为 .{body.format} 后更容易打开。")
    if body.header == "TEB":
        notes.append("文件头为 TEB，是加密的 CAJ 文件：可能只能在下载它的账号或设备上用 CAJViewer 打开。")
    if body.format == "pdf" and not body.complete:
        notes.append("PDF 末尾没有 %%EOF 结束标记，文件可能不完整。")
    return notes


def stored_names(artifact: Artifact, body: Body) -> list[str]:
    """Names to try, best first: a default name takes the content's extension, then the name checked before the click."""
    if artifact.chosen_name or body.format not in FORMATS or extension(artifact.name) == body.format:
        return [artifact.name]
    return [f"{os.path.splitext(artifact.name)[0]}.{body.format}", artifact.name]


# --------------------------------------------------------------------------------------------
# The ledger's files


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def holds(path: Path, artifact: Artifact) -> bool:
    """``path`` is a regular file with the artifact's size and SHA-256 (blocking)."""
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size != artifact.bytes:
            return False
        return _sha256(path) == artifact.sha256
    except OSError:
        return False


def unchanged(artifact: Artifact) -> bool:
    """The completed file is still there with the recorded size and SHA-256 (blocking)."""
    return bool(artifact.path) and holds(Path(artifact.path), artifact)


def remove_empty(folder: Path) -> None:
    with contextlib.suppress(OSError):
        folder.rmdir()


def publish(downloads: Path, artifact: Artifact, src: Path, body: Body) -> Artifact:
    """Place the browser's file under downloads/ without overwriting, and record what it is (blocking)."""
    folder = safe_folder(downloads, artifact.folder or None)
    name, written = _adopt_first_free(src, folder, stored_names(artifact, body))
    remove_empty(src.parent)
    return msgspec.structs.replace(
        artifact,
        state="completed",
        name=name,
        path=written.path,
        bytes=written.bytes,
        sha256=written.sha256,
        source="download",
        incoming="",
        content_format=body.format,
        warnings=file_warnings(artifact.format, body, name),
        updated_at=utc_now_iso(),
    )


def _adopt_first_free(src: Path, folder: Path, names: list[str]) -> tuple[str, WrittenFile]:
    for name in names[:-1]:
        try:
            return name, adopt_file(src, folder, name)
        except CnkiError as exc:
            if exc.code != "FILE_EXISTS":
                raise
    return names[-1], adopt_file(src, folder, names[-1])


def arrivals(artifact: Artifact) -> list[Path]:
    """Files the browser may have finished for an earlier click (its GUID, else any GUID-named file)."""
    if not artifact.incoming:
        return []
    incoming = Path(artifact.incoming)
    if artifact.download_guid:
        names = [artifact.download_guid] if valid_guid(artifact.download_guid) else []
    else:
        try:
            names = sorted(entry.name for entry in incoming.iterdir() if valid_guid(entry.name))
        except OSError:
            return []
    return [incoming / name for name in names if (incoming / name).is_file()]


def gather_stray(expected: Path, reported: str, browser_cwd: Path) -> Path | None:
    """Bring a finished download the browser wrote outside incoming/ to ``expected`` (its place there).

    A browser that cannot encode the data directory's name (a C locale with a path in Chinese) writes the
    file where it reports (``reported``) or into its working directory under the same GUID name. Returns
    where the file was found, None when it is already in place or nowhere to be found (blocking)."""
    if expected.exists() or not valid_guid(expected.name):
        return None
    for candidate in (Path(reported) if reported else None, browser_cwd / expected.name):
        if candidate is None or candidate == expected or candidate.is_symlink() or not candidate.is_file():
            continue
        try:
            shutil.move(str(candidate), str(expected))
        except OSError as exc:
            log.warning("could not move the stray download %s into %s: %s", candidate, expected.parent, exc)
            continue
        log.warning("the browser saved download %s outside incoming/ (%s); moved it in", expected.name, candidate)
        return candidate
    return None


def valid_guid(guid: str) -> bool:
    return bool(_GUID.fullmatch(guid))


def reconcile(downloads: Path, artifact: Artifact) -> Artifact | None:
    """Finish an uncertain click whose file has arrived since; None while nothing complete is there.

    Without the browser's word that the transfer ended, only a file that shows its own end (a PDF's
    %%EOF) or a CAJ-family header counts; anything else may still be written and stays uncertain.
    """
    for candidate in arrivals(artifact):
        try:
            body = read_body(candidate)
        except CnkiError as exc:
            log.info("late download %s is not complete yet: %s", candidate.name, exc.message)
            continue
        if body.format in FORMATS and body.complete:
            return publish(downloads, artifact, candidate, body)
        log.info("late download %s is not a complete PDF/CAJ (%s)", candidate.name, body.header)
    return None


def view(artifact: Artifact, source: str | None = None, copied_from: str = "") -> DownloadResult:
    """The result shown to clients: the file once completed, else where the download is expected."""
    shown = DownloadResult(state=artifact.state, record_ref=artifact.record_ref, format=artifact.format)
    if artifact.state != "completed":
        return msgspec.structs.replace(
            shown, folder=artifact.folder, name=artifact.name, operation_id=artifact.operation_id
        )
    return msgspec.structs.replace(
        shown,
        path=artifact.path,
        bytes=artifact.bytes,
        sha256=artifact.sha256,
        source=source or artifact.source,
        content_format=artifact.content_format or artifact.format,
        warnings=list(artifact.warnings),
        copied_from=copied_from,
    )


def deliver(downloads: Path, artifact: Artifact, request: DownloadRequest, source: str | None = None) -> DownloadResult:
    """A completed download as the caller asks for it now (blocking).

    No name or folder asked for, or the file's own place → the file (as ``source``). Another place
    → a copy made from the local file (``local_copy``, no CNKI request); the same file already
    there is that copy; anything else there is FILE_EXISTS.
    """
    if not request.filename and not request.subdirectory:
        return view(artifact, source)
    folder = safe_folder(downloads, request.subdirectory or None)
    target = folder / (request.filename or Path(artifact.path).name)
    if target == Path(artifact.path):
        return view(artifact, source)
    if os.path.lexists(target):
        if not holds(target, artifact):
            raise CnkiError(
                "FILE_EXISTS",
                f"这篇论文已下载为 {artifact.path}；要复制到的 {target} 已被另一个文件占用，未覆盖。",
                details={"path": str(target), "downloaded": artifact.path},
            )
    else:
        copy_file(Path(artifact.path), folder, target.name)
    return view(msgspec.structs.replace(artifact, path=str(target)), "local_copy", copied_from=artifact.path)
