"""Finding the user's Chrome, Edge or Chromium, and checking that a path really is one.

Candidates come, in order, from ``CNKI_BROWSER_PATH``, then the places each OS installs these
browsers: ``/Applications`` and ``~/Applications`` on macOS; Program Files, LocalAppData and the
registry's App Paths on Windows; the usual command names on ``PATH`` on Linux, followed by Flatpak
exports. A snap-packaged Chromium is found as ``/snap/bin/chromium`` on PATH; it cannot use a
profile in a hidden folder under home, so the data directory should not live in one.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.model import Config
from cnki_mcp.core.settings import is_placeholder, normalise_os

log = logging.getLogger(__name__)

MAC_APP_NAMES = ("Google Chrome", "Microsoft Edge", "Chromium", "Google Chrome for Testing")
WINDOWS_EXES = (
    ("Google", "Chrome", "Application", "chrome.exe"),
    ("Microsoft", "Edge", "Application", "msedge.exe"),
    ("Chromium", "Application", "chrome.exe"),
)
WINDOWS_APP_PATHS = ("chrome.exe", "msedge.exe")
LINUX_COMMANDS = (
    "google-chrome-stable",
    "google-chrome",
    "chromium",
    "chromium-browser",
    "microsoft-edge",
    "microsoft-edge-stable",
)
FLATPAK_APPS = ("com.google.Chrome", "org.chromium.Chromium", "com.microsoft.Edge")
# System-wide install roots; module constants so tests can point them into a temp tree.
MAC_SYSTEM_APPLICATIONS = Path("/Applications")
FLATPAK_SYSTEM_EXPORTS = Path("/var/lib/flatpak/exports/bin")

_VERSION = re.compile(r"\d+\.\d+")


def _mac_candidates(home: Path) -> Iterator[Path]:
    for base in (MAC_SYSTEM_APPLICATIONS, home / "Applications"):
        for name in MAC_APP_NAMES:
            yield base / f"{name}.app" / "Contents" / "MacOS" / name


def _windows_candidates(env: Mapping[str, str]) -> Iterator[Path]:
    for variable in ("PROGRAMFILES", "PROGRAMFILES(X86)", "LOCALAPPDATA"):
        base = _env_value(env, variable)
        if base:
            for parts in WINDOWS_EXES:
                yield Path(base).joinpath(*parts)
    if sys.platform == "win32":
        yield from _registry_app_paths()


def _registry_app_paths() -> Iterator[Path]:
    if sys.platform != "win32":  # the registry exists only there (and the type checker reads it so)
        return
    import winreg

    for hive in (winreg.HKEY_CURRENT_USER, winreg.HKEY_LOCAL_MACHINE):
        for exe in WINDOWS_APP_PATHS:
            key_name = rf"SOFTWARE\Microsoft\Windows\CurrentVersion\App Paths\{exe}"
            try:
                with winreg.OpenKey(hive, key_name) as key:
                    value, _ = winreg.QueryValueEx(key, "")
            except OSError:
                continue
            if isinstance(value, str) and value.strip():
                yield Path(os.path.expandvars(value.strip().strip('"')))


def _linux_candidates(env: Mapping[str, str], home: Path) -> Iterator[Path]:
    search_path = env.get("PATH", os.defpath)
    for name in LINUX_COMMANDS:
        found = shutil.which(name, path=search_path)
        if found:
            yield Path(found)
    # Flatpak's exported launchers accept Chrome's own flags and pass them through.
    for base in (FLATPAK_SYSTEM_EXPORTS, home / ".local" / "share" / "flatpak" / "exports" / "bin"):
        for app in FLATPAK_APPS:
            yield base / app


def _env_value(env: Mapping[str, str], name: str) -> str:
    # Windows environment names are case-insensitive.
    for key, value in env.items():
        if key.upper() == name and value.strip() and not is_placeholder(value):
            return value.strip()
    return ""


def _usable(path: Path, system: str) -> bool:
    try:
        if not path.is_file():
            return False
    except OSError:
        return False
    return system == "windows" or os.access(path, os.X_OK)


def browser_candidates(os_name: str | None = None, env: Mapping[str, str] | None = None) -> list[Path]:
    """Existing browser executables, best first, without duplicates."""
    system = normalise_os(os_name)
    env = os.environ if env is None else env
    home = Path(_env_value(env, "USERPROFILE" if system == "windows" else "HOME") or Path.home())
    found: list[Path] = []
    seen: set[str] = set()

    def add(path: Path) -> None:
        key = " ".join(str(path).split())
        if system in ("darwin", "windows"):
            key = key.lower()
        try:
            real = os.path.realpath(path)
        except OSError:
            real = key
        if key in seen or real in seen or not _usable(path, system):
            return
        seen.update((key, real))
        found.append(path)

    explicit = _env_value(env, "CNKI_BROWSER_PATH")
    if explicit:
        add(Path(explicit.strip('"')))
    if system == "darwin":
        sources: Iterator[Path] = _mac_candidates(home)
    elif system == "windows":
        sources = _windows_candidates(env)
    else:
        sources = _linux_candidates(env, home)
    for path in sources:
        add(path)
    return found


def _windows_version_dir(path: Path) -> str:
    # chrome.exe/msedge.exe print nothing for --version; the installer keeps a folder named after it.
    versions = [child.name for child in path.parent.iterdir() if child.is_dir() and re.fullmatch(r"\d+(\.\d+){3}", child.name)]
    return max(versions, key=lambda name: tuple(int(part) for part in name.split(".")), default="")


def _not_found(path: Path, message: str) -> CnkiError:
    return CnkiError("BROWSER_NOT_FOUND", message, details={"path": str(path)})


def probe_version(path: Path, timeout: float = 10) -> str:
    """Run ``<path> --version`` and return what the browser says, e.g. ``Chromium 156.0.7779.96``."""
    path = Path(path)
    if not path.is_file():
        raise _not_found(path, f"浏览器路径 {path} 不存在或不是文件；请指定 Chrome、Edge 或 Chromium 的可执行文件。")
    flags = 0
    if sys.platform == "win32":
        flags = subprocess.CREATE_NO_WINDOW
    try:
        done = subprocess.run(
            [str(path), "--version"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout,
            creationflags=flags,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise _not_found(path, f"{path} --version 在 {timeout:g} 秒内没有结束，它可能不是浏览器。") from None
    except OSError as exc:
        raise _not_found(path, f"无法运行 {path}：{exc.strerror or exc}。") from exc
    output = done.stdout.decode("utf-8", "replace").strip()
    if done.returncode != 0:
        raise CnkiError(
            "BROWSER_NOT_FOUND",
            f"{path} --version 失败（退出码 {done.returncode}），它可能不是 Chrome、Edge 或 Chromium。",
            details={"path": str(path), "stderr": done.stderr.decode("utf-8", "replace")[-500:]},
        )
    line = output.splitlines()[0].strip() if output else ""
    if not line and sys.platform == "win32":
        version = _windows_version_dir(path)
        line = f"{path.stem} {version}" if version else ""
    if not _VERSION.search(line):
        raise CnkiError(
            "BROWSER_NOT_FOUND",
            f"{path} 没有报告版本号，它可能不是 Chrome、Edge 或 Chromium。",
            details={"path": str(path), "output": output[:200]},
        )
    return line


def resolve_browser(config: Config, env: Mapping[str, str] | None = None, os_name: str | None = None) -> Path:
    """The browser to launch: CNKI_BROWSER_PATH, else config.json's choice, else the first one found."""
    env = os.environ if env is None else env
    explicit = _env_value(env, "CNKI_BROWSER_PATH").strip('"')
    if explicit:
        path = Path(explicit)
        if not path.is_file():
            raise _not_found(path, f"CNKI_BROWSER_PATH 指向的 {path} 不存在或不是文件。")
        return path
    configured = config.browser_path.strip()
    if configured:
        path = Path(configured)
        if path.is_file():
            return path
        log.warning("configured browser %s is missing; looking for another one", path)
    candidates = browser_candidates(os_name, env)
    if candidates:
        return candidates[0]
    hint = f"config.json 中的 {configured} 已不存在，且" if configured else ""
    raise CnkiError(
        "BROWSER_NOT_FOUND",
        f"{hint}没有找到 Chrome、Edge 或 Chromium；请运行 cnki-mcp setup --browser <路径>，或设置 CNKI_BROWSER_PATH。",
    )


def browser_report(config: Config, env: Mapping[str, str] | None = None, os_name: str | None = None) -> dict[str, Any]:
    """For `doctor`: which browser would be launched and why; runs nothing."""
    env = os.environ if env is None else env
    try:
        path = resolve_browser(config, env, os_name)
    except CnkiError as error:
        # Which setting named a browser that is gone (the doctor says it in the CLI's language).
        explicit = _env_value(env, "CNKI_BROWSER_PATH").strip('"')
        named = ("CNKI_BROWSER_PATH", explicit) if explicit else ("config.json", config.browser_path.strip())
        missing = {"missing_from": named[0], "missing_path": named[1]} if named[1] else {}
        return {"found": False, "message": error.message, **missing}
    if _env_value(env, "CNKI_BROWSER_PATH"):
        source = "CNKI_BROWSER_PATH"
    elif config.browser_path.strip() and Path(config.browser_path.strip()) == path:
        source = "config.json"
    else:
        source = "detected"
    return {"found": True, "path": str(path), "source": source}
