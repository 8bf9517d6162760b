"""Writing files into the data directory without ever overwriting or escaping it.

Used by citation exports (``exports/``), downloads (``downloads/[subdirectory/]``) and the store's
own small files. The rules:

* a file name must pass :func:`validate_filename` (``INVALID_FILENAME``);
* a caller-chosen subfolder is created segment by segment inside its base and may not climb out,
  be absolute, name a drive or share, or pass through a symlink (``UNSAFE_OUTPUT_PATH``);
* a new file appears under its final name only when complete: the bytes go to a hidden temp file
  that is fsynced and then hard-linked to the name, which fails if the name exists
  (``FILE_EXISTS``), so an existing file is never touched.

All functions here block on disk I/O: call them from ``asyncio.to_thread`` in async code.
"""

from __future__ import annotations

import errno
import hashlib
import logging
import os
import re
import secrets
import sys
import time
from collections.abc import Iterable, Iterator
from datetime import datetime
from pathlib import Path

import msgspec

from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.text import is_format_char, without_format_chars

log = logging.getLogger(__name__)

MAX_NAME_RUNES = 180
# A name's bytes as ext4, XFS, btrfs and APFS count them (UTF-8); NTFS counts 255 UTF-16 units, which this also
# keeps. 180 characters of Chinese are 540 bytes: such a name is shortened (``fit_name``), never refused late.
MAX_NAME_BYTES = 255
FORBIDDEN_CHARS = '/\\<>:"|?*'
# Windows also reserves COM¹–³ and LPT¹–³ (superscript digits).
_RESERVED = re.compile(r"(?:CON|PRN|AUX|NUL|COM[1-9¹²³]|LPT[1-9¹²³])(?:\..*)?", re.IGNORECASE | re.DOTALL)
_UNSAFE_CHARS = re.compile(f"[\\x00-\\x1f\\x7f{re.escape(FORBIDDEN_CHARS)}]")
_DRIVE = re.compile(r"^[A-Za-z]:")
_CHUNK = 1 << 20
_IS_WINDOWS = sys.platform == "win32"
# What a POSIX filesystem without hard links (FAT, some network mounts) answers to link().
_NO_LINK_ERRNOS = frozenset({errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK, errno.ENOSYS})


class WrittenFile(msgspec.Struct):
    path: str
    bytes: int
    sha256: str


def is_reserved(name: str) -> bool:
    """A Windows device name (CON, NUL, COM1 …), with or without an extension: unusable as a file name."""
    return _RESERVED.fullmatch(name) is not None


def replace_unsafe_chars(text: str) -> str:
    """``text`` as a file name: separators, ``:*?"<>|`` and controls as ``_``; bidi controls and
    zero-width characters dropped (they would make a name read differently from what it is)."""
    return _UNSAFE_CHARS.sub("_", without_format_chars(text))


def _name_problem(name: object) -> str | None:
    """Why ``name`` is not an acceptable file or folder name, in Chinese; ``None`` if it is."""
    if not isinstance(name, str) or name == "":
        return "名称不能为空"
    if len(name) > MAX_NAME_RUNES:
        return f"名称不能超过 {MAX_NAME_RUNES} 个字符"
    if name.startswith("."):
        return "名称不能以“.”开头"
    if name.endswith(".") or name.endswith(" "):
        return "名称不能以“.”或空格结尾"
    for char in name:
        if char in FORBIDDEN_CHARS:
            return f"名称不能包含字符“{char}”（不允许 / \\ < > : \" | ? *）"
        if ord(char) < 0x20:
            return "名称不能包含控制字符"
        if is_format_char(char):
            return f"名称不能包含不可见的格式字符 U+{ord(char):04X}（双向控制符、零宽字符等）"
    if is_reserved(name):
        return "名称不能是 Windows 保留名（CON、PRN、AUX、NUL、COM1–9、LPT1–9，含 COM¹–³、LPT¹–³）"
    return None


def cut_to_bytes(text: str, limit: int) -> str:
    """``text`` cut at a character boundary so that its UTF-8 form has at most ``limit`` bytes."""
    raw = text.encode("utf-8", "surrogatepass")
    if len(raw) <= limit:
        return text
    return raw[: max(limit, 0)].decode("utf-8", "ignore")


def fit_name(name: str, limit: int = MAX_NAME_BYTES) -> str:
    """``name`` with its stem shortened (whole characters, no trailing dot or space) to fit ``limit`` bytes;
    the extension is kept."""
    if len(name.encode("utf-8", "surrogatepass")) <= limit:
        return name
    stem, ext = os.path.splitext(name)
    return cut_to_bytes(stem, limit - len(ext.encode("utf-8", "surrogatepass"))).rstrip(". ") + ext


def validate_filename(name: str) -> str:
    """Return ``name`` unchanged when it is a safe single file name, else raise INVALID_FILENAME."""
    problem = _name_problem(name)
    if problem is not None:
        raise invalid_name(f"文件名无效：{problem}。", filename=name if isinstance(name, str) else None, reason=problem)
    return name


def invalid_name(message: str, **details: object) -> CnkiError:
    """INVALID_FILENAME for a file or folder name the caller gave."""
    return CnkiError("INVALID_FILENAME", message, details=details)


def _unsafe(message: str, path: object) -> CnkiError:
    return CnkiError("UNSAFE_OUTPUT_PATH", message, details={"path": str(path)})


def _segments(subdirectory: str) -> list[str]:
    if not isinstance(subdirectory, str):
        raise invalid_name("子目录必须是字符串。", subdirectory=None)
    if subdirectory[:1] in ("/", "\\") or _DRIVE.match(subdirectory) or os.path.isabs(subdirectory):
        raise _unsafe("子目录必须是相对路径，不能是绝对路径、盘符或网络共享路径。", subdirectory)
    # Both separators count on every platform, so a name behaves the same wherever it is used.
    parts = [part for part in re.split(r"[\\/]", subdirectory) if part != ""]
    for part in parts:
        if part in ("..", "."):
            raise _unsafe("子目录不能包含“..”或“.”，只能写入数据目录内。", subdirectory)
        problem = _name_problem(part)
        if problem is not None:
            raise invalid_name(f"子目录名“{part}”无效：{problem}。", subdirectory=subdirectory, reason=problem)
    return parts


def remove_empty_folders(base: Path, subdirectory: str | None) -> None:
    """Remove the folders of ``subdirectory`` under ``base`` that are empty, deepest first (blocking).

    For a write that did not happen: the folders made for it must not stay behind. A folder with
    anything in it, or one that is not a plain folder, ends the walk.
    """
    if not subdirectory:
        return
    try:
        parts = _segments(subdirectory)
    except CnkiError:
        return
    for depth in range(len(parts), 0, -1):
        try:
            os.rmdir(Path(base).joinpath(*parts[:depth]))
        except OSError:
            return


def make_private_dir(path: Path) -> None:
    """``path`` created 0700 with every parent it lacks (each 0700 too: ``mkdir(parents=True)`` would make
    them by the umask, often world-readable); folders that exist are left as they are."""
    path = Path(path)
    missing: list[Path] = []
    current = path
    while not current.exists() and current.parent != current and len(missing) < 256:
        missing.append(current)
        current = current.parent
    for folder in reversed(missing):
        try:
            os.mkdir(folder, 0o700)
        except FileExistsError:
            continue
        if os.name != "nt":
            os.chmod(folder, 0o700)  # the umask may have taken bits away; never added any
    if not path.is_dir():
        raise FileExistsError(errno.EEXIST, "not a directory", str(path))


def _ensure_real_dir(path: Path) -> None:
    """Create ``path`` (0700) if missing; refuse a symlink, junction or non-directory in its place."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        raise CnkiError("DISK_WRITE_FAILED", f"无法创建文件夹 {path}：{exc.strerror or exc}。", details={"path": str(path)}) from exc
    if path.is_symlink() or _is_junction(path):
        raise _unsafe(f"输出文件夹 {path} 是符号链接，不会写入。", path)
    if not path.is_dir():
        raise _unsafe(f"{path} 已存在但不是文件夹。", path)


def _is_junction(path: Path) -> bool:
    check = getattr(os.path, "isjunction", None)  # Python 3.12+; older versions rely on resolve()
    return bool(check and check(path))


def safe_folder(base: Path, subdirectory: str | None = None) -> Path:
    """The folder ``base[/subdirectory]``, created if needed, guaranteed to lie inside ``base``."""
    base = Path(base)
    parts = _segments(subdirectory) if subdirectory else []
    _ensure_real_dir(base)
    folder = base
    for part in parts:
        folder = folder / part
        _ensure_real_dir(folder)
    real_base = base.resolve()
    real_folder = folder.resolve()
    if real_folder != real_base and real_base not in real_folder.parents:
        raise _unsafe("输出路径不在数据目录内，不会写入。", folder)
    return folder


def _check_target(folder: Path, name: str) -> Path:
    validate_filename(name)
    folder = Path(folder)
    if folder.is_symlink() or _is_junction(folder):
        raise _unsafe(f"输出文件夹 {folder} 是符号链接，不会写入。", folder)
    if not folder.is_dir():
        raise _unsafe(f"输出文件夹 {folder} 不存在或不是文件夹。", folder)
    target = folder / name
    if os.path.lexists(target):
        raise _file_exists(target)
    return target


def _file_exists(target: Path, advice: str = "") -> CnkiError:
    tail = f"；{advice}" if advice else ""
    return CnkiError("FILE_EXISTS", f"文件 {target} 已存在，未覆盖{tail}。", details={"path": str(target)})


def refuse_existing(target: Path, advice: str = "") -> None:
    """FILE_EXISTS (with ``advice``: what to do) when anything, a dangling link included, is at ``target``."""
    if os.path.lexists(target):
        raise _file_exists(target, advice)


def _disk_failed(target: Path, exc: OSError) -> CnkiError:
    return CnkiError(
        "DISK_WRITE_FAILED",
        f"写入 {target} 失败：{exc.strerror or exc}。",
        details={"path": str(target), "errno": exc.errno},
    )


def fsync_dir(folder: Path) -> None:
    """Make a rename or link in ``folder`` durable (POSIX only; Windows has no directory handles)."""
    if _IS_WINDOWS:
        return
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems refuse fsync on directories; the data itself is already synced
    finally:
        os.close(fd)


def _fill(fd: int, path: Path, chunks: Iterable[bytes]) -> None:
    """Write every chunk to ``fd`` (a new file at ``path``), fsync and close it; on failure remove ``path``."""
    try:
        for chunk in chunks:
            view = memoryview(chunk)
            while view:
                view = view[os.write(fd, view):]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        _remove_quietly(path)
        raise
    os.close(fd)


def _write_temp(folder: Path, chunks: Iterable[bytes]) -> tuple[Path, int, str]:
    """Write ``chunks`` to a new hidden temp file in ``folder``; return its path, size and SHA-256."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0) | getattr(os, "O_NOFOLLOW", 0)
    temp = folder / f".write_{secrets.token_hex(12)}"
    digest = hashlib.sha256()
    size = 0

    def measured() -> Iterator[bytes]:
        nonlocal size
        for chunk in chunks:
            digest.update(chunk)
            size += len(chunk)
            yield chunk

    _fill(os.open(temp, flags, 0o600), temp, measured())
    return temp, size, digest.hexdigest()


def _publish(temp: Path, target: Path) -> None:
    """Give the finished temp file its final name, failing rather than replacing an existing one."""
    try:
        os.link(temp, target)
        return
    except FileExistsError:
        raise _file_exists(target) from None
    except OSError as exc:
        if not _IS_WINDOWS and exc.errno not in _NO_LINK_ERRNOS:
            raise
        log.info("hard links unsupported in %s (%s); using a non-overwriting fallback", target.parent, exc)
    if _IS_WINDOWS:
        # Windows rename never replaces an existing name, so it is atomic and safe here.
        try:
            os.rename(temp, target)
        except FileExistsError:
            raise _file_exists(target) from None
        return
    # POSIX without hard links (e.g. FAT): create the name exclusively and copy; a crash here can
    # leave a partial file under the new name, but never touches an existing one.
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    try:
        out = os.open(target, flags, 0o600)
    except FileExistsError:
        raise _file_exists(target) from None
    _fill(out, target, _read_chunks(temp))


def _remove_quietly(path: Path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        log.warning("could not remove temporary file %s: %s", path, exc)


def _place(folder: Path, name: str, chunks: Iterable[bytes]) -> WrittenFile:
    target = _check_target(folder, name)
    temp: Path | None = None
    try:
        temp, size, sha = _write_temp(target.parent, chunks)
        _publish(temp, target)
    except OSError as exc:
        raise _disk_failed(target, exc) from exc
    finally:
        if temp is not None:
            _remove_quietly(temp)
    fsync_dir(target.parent)
    return WrittenFile(path=str(target), bytes=size, sha256=sha)


def write_new_file(folder: Path, name: str, data: bytes) -> WrittenFile:
    """Create ``folder/name`` holding ``data``; FILE_EXISTS if the name is taken (never overwrites).

    ``folder`` should come from :func:`safe_folder`.
    """
    return _place(Path(folder), name, [bytes(data)])


def _read_chunks(src: Path) -> Iterable[bytes]:
    with open(src, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            yield chunk


def copy_file(src: Path, folder: Path, name: str) -> WrittenFile:
    """Copy a regular file to ``folder/name`` (synced temp file, then the name), never overwriting."""
    src = Path(src)
    if src.is_symlink() or not src.is_file():
        raise CnkiError("DISK_WRITE_FAILED", f"待复制的文件 {src} 不存在或不是普通文件。", details={"path": str(src)})
    return _place(Path(folder), name, _read_chunks(src))


def adopt_file(src: Path, folder: Path, name: str) -> WrittenFile:
    """Move a finished file (a browser download) to ``folder/name`` without overwriting anything.

    The bytes are copied through a synced temp file while hashing, published under the final name
    and only then is ``src`` removed, so a failure at any point leaves the download where it was.
    """
    written = copy_file(src, folder, name)
    _remove_quietly(Path(src))
    return written


def atomic_replace(path: Path, data: bytes, mode: int = 0o600) -> None:
    """Replace ``path`` with ``data`` atomically (temp file, fsync, rename): for the program's own files.

    Readers see either the old or the new content, never a mixture. Raises OSError on failure.
    """
    path = Path(path)
    temp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    _fill(os.open(temp, flags, mode), temp, [data])
    try:
        os.replace(temp, path)
    except BaseException:
        _remove_quietly(temp)
        raise
    fsync_dir(path.parent)


BACKUP_MARK = ".cnki-backup-"  # between a file's name and the time of its backup


def write_backup(target: Path, data: bytes) -> Path:
    """Keep ``data`` (a file's old content) beside ``target`` as a new timestamped backup; synced, 0600."""
    now = time.time_ns()
    stamp = datetime.fromtimestamp(now / 1e9).strftime("%Y%m%d-%H%M%S")
    backup = target.with_name(f"{target.name}{BACKUP_MARK}{stamp}.{now % 1_000_000_000:09d}")
    fd = os.open(backup, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    return backup


def replace_if_unchanged(target: Path, expected: bytes, data: bytes) -> bool:
    """Replace ``target`` with ``data`` atomically, but only while it still holds ``expected``.

    A file someone else changed meanwhile is left as it is (False). The new file keeps the old one's
    permissions (0600 for a new file). Raises OSError on a disk failure; no temp file is left behind.
    """
    temp = target.with_name(f"{target.name}.cnki-{secrets.token_hex(12)}")
    try:
        mode = target.stat().st_mode & 0o777
    except FileNotFoundError:
        mode = 0o600
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if not _IS_WINDOWS:
            os.chmod(temp, mode)
        try:
            current = target.read_bytes()
        except FileNotFoundError:
            current = b""
        if current != expected:
            return False
        os.replace(temp, target)
        return True
    finally:
        _remove_quietly(temp)
