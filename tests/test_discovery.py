"""Browser discovery on each OS (fake installs in a temp tree), version probing and resolution."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.model import Config
from cnki_mcp.site import discovery

posix_only = pytest.mark.skipif(sys.platform == "win32", reason="fake browsers are shell scripts")


def fake_exe(path: Path, body: str = 'echo "Chromium 123.0.6312.58"') -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\n{body}\n", "utf-8")
    path.chmod(0o755)
    return path


@posix_only
def test_linux_path_names_in_order_with_duplicates_removed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(discovery, "FLATPAK_SYSTEM_EXPORTS", tmp_path / "flatpak")
    first, second = tmp_path / "bin1", tmp_path / "bin2"
    chromium = fake_exe(second / "chromium")
    stable = fake_exe(first / "google-chrome-stable")
    (first / "google-chrome").symlink_to(stable)  # same browser under two names
    (first / "chromium-browser").write_text("not executable")
    (first / "microsoft-edge").mkdir()  # a directory is not a browser
    flatpak = fake_exe(tmp_path / "home" / ".local" / "share" / "flatpak" / "exports" / "bin" / "org.chromium.Chromium")
    custom = fake_exe(tmp_path / "custom" / "my-chrome")
    env = {"PATH": f"{first}{os.pathsep}{second}", "HOME": str(tmp_path / "home"), "CNKI_BROWSER_PATH": str(custom)}
    assert discovery.browser_candidates("linux", env) == [custom, stable, chromium, flatpak]
    env["CNKI_BROWSER_PATH"] = str(chromium)  # listed once, first
    assert discovery.browser_candidates("linux", env) == [chromium, stable, flatpak]
    assert discovery.browser_candidates("linux", {"PATH": str(tmp_path / "nothing"), "HOME": str(tmp_path)}) == []


@posix_only
def test_macos_applications(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    system = tmp_path / "Applications"
    monkeypatch.setattr(discovery, "MAC_SYSTEM_APPLICATIONS", system)
    home = tmp_path / "home"
    edge = fake_exe(system / "Microsoft Edge.app" / "Contents" / "MacOS" / "Microsoft Edge")
    chrome = fake_exe(home / "Applications" / "Google Chrome.app" / "Contents" / "MacOS" / "Google Chrome")
    testing = fake_exe(system / "Google Chrome for Testing.app" / "Contents" / "MacOS" / "Google Chrome for Testing")
    assert discovery.browser_candidates("darwin", {"HOME": str(home)}) == [edge, testing, chrome]


def test_windows_program_files_and_local_app_data(tmp_path: Path) -> None:
    program_files = tmp_path / "Program Files"
    local = tmp_path / "Local"
    chrome = program_files / "Google" / "Chrome" / "Application" / "chrome.exe"
    edge = tmp_path / "x86" / "Microsoft" / "Edge" / "Application" / "msedge.exe"
    chromium = local / "Chromium" / "Application" / "chrome.exe"
    for exe in (chrome, edge, chromium):
        exe.parent.mkdir(parents=True)
        exe.write_bytes(b"MZ")
    env = {
        "ProgramFiles": str(program_files),  # Windows variable names are case-insensitive
        "PROGRAMFILES(X86)": str(tmp_path / "x86"),
        "LOCALAPPDATA": str(local),
        "USERPROFILE": str(tmp_path),
    }
    found = discovery.browser_candidates("windows", env)
    assert found[:3] == [chrome, edge, chromium]
    # Paths differing only in case are the same file on Windows.
    env["CNKI_BROWSER_PATH"] = str(chrome).upper() if sys.platform == "win32" else str(chrome)
    assert discovery.browser_candidates("windows", env).count(chrome) == 1


@posix_only
def test_probe_version_reads_the_browser_answer(tmp_path: Path) -> None:
    exe = fake_exe(tmp_path / "chrome", 'echo "Google Chrome 131.0.6778.85 "; echo extra')
    assert discovery.probe_version(exe) == "Google Chrome 131.0.6778.85"


@posix_only
@pytest.mark.parametrize(("body", "fragment"), [
    ("exit 3", "退出码 3"),
    ("echo hello", "没有报告版本号"),
    ("sleep 5", "秒内没有结束"),
])
def test_probe_version_failures(tmp_path: Path, body: str, fragment: str) -> None:
    exe = fake_exe(tmp_path / "not-a-browser", body)
    with pytest.raises(CnkiError) as caught:
        discovery.probe_version(exe, timeout=0.5)
    assert caught.value.code == "BROWSER_NOT_FOUND" and fragment in caught.value.message


def test_probe_version_missing_or_unrunnable(tmp_path: Path) -> None:
    with pytest.raises(CnkiError) as caught:
        discovery.probe_version(tmp_path / "nope")
    assert caught.value.code == "BROWSER_NOT_FOUND" and "不存在" in caught.value.message
    data = tmp_path / "data.bin"
    data.write_bytes(b"\x00\x01")
    with pytest.raises(CnkiError) as caught:
        discovery.probe_version(data)
    assert caught.value.code == "BROWSER_NOT_FOUND"


@posix_only
def test_resolve_browser_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(discovery, "FLATPAK_SYSTEM_EXPORTS", tmp_path / "flatpak")
    detected = fake_exe(tmp_path / "bin" / "chromium")
    configured = fake_exe(tmp_path / "opt" / "edge")
    explicit = fake_exe(tmp_path / "env" / "chrome")
    env = {"PATH": str(tmp_path / "bin"), "HOME": str(tmp_path)}
    assert discovery.resolve_browser(Config(), env, "linux") == detected
    assert discovery.resolve_browser(Config(browser_path=str(configured)), env, "linux") == configured
    env_with = {**env, "CNKI_BROWSER_PATH": str(explicit)}
    assert discovery.resolve_browser(Config(browser_path=str(configured)), env_with, "linux") == explicit
    # A browser that was uninstalled since setup: fall back to one that is there.
    assert discovery.resolve_browser(Config(browser_path=str(tmp_path / "gone")), env, "linux") == detected


@posix_only
def test_an_unfilled_bundle_setting_means_find_the_browser(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(discovery, "FLATPAK_SYSTEM_EXPORTS", tmp_path / "flatpak")
    detected = fake_exe(tmp_path / "bin" / "chromium")
    env = {"PATH": str(tmp_path / "bin"), "HOME": str(tmp_path), "CNKI_BROWSER_PATH": "${user_config.browser_path}"}
    assert discovery.resolve_browser(Config(), env, "linux") == detected
    assert discovery.browser_report(Config(), env, "linux")["source"] == "detected"


def test_resolve_browser_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(discovery, "FLATPAK_SYSTEM_EXPORTS", tmp_path / "flatpak")
    empty = {"PATH": str(tmp_path / "empty"), "HOME": str(tmp_path)}
    with pytest.raises(CnkiError) as caught:
        discovery.resolve_browser(Config(), empty, "linux")
    assert caught.value.code == "BROWSER_NOT_FOUND" and "setup" in caught.value.message
    with pytest.raises(CnkiError) as caught:
        discovery.resolve_browser(Config(browser_path="/gone/chrome"), empty, "linux")
    assert "/gone/chrome" in caught.value.message
    with pytest.raises(CnkiError) as caught:
        discovery.resolve_browser(Config(), {**empty, "CNKI_BROWSER_PATH": str(tmp_path / "missing")}, "linux")
    assert caught.value.code == "BROWSER_NOT_FOUND" and "CNKI_BROWSER_PATH" in caught.value.message


@pytest.mark.browser
def test_probe_version_of_real_chromium(chromium: str) -> None:
    version = discovery.probe_version(Path(chromium))
    assert version.startswith(("Chromium ", "Google Chrome ")), version


@posix_only
def test_browser_report_says_where_the_browser_comes_from(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(discovery, "FLATPAK_SYSTEM_EXPORTS", tmp_path / "flatpak")
    detected = fake_exe(tmp_path / "bin" / "chromium")
    configured = fake_exe(tmp_path / "opt" / "edge")
    env = {"PATH": str(tmp_path / "bin"), "HOME": str(tmp_path)}
    assert discovery.browser_report(Config(), env, "linux") == {"found": True, "path": str(detected), "source": "detected"}
    assert discovery.browser_report(Config(browser_path=str(configured)), env, "linux")["source"] == "config.json"
    with_env = {**env, "CNKI_BROWSER_PATH": str(detected)}
    assert discovery.browser_report(Config(browser_path=str(configured)), with_env, "linux")["source"] == "CNKI_BROWSER_PATH"
    missing = discovery.browser_report(Config(), {"PATH": str(tmp_path / "none"), "HOME": str(tmp_path)}, "linux")
    assert missing["found"] is False and "setup" in missing["message"]


@posix_only
def test_a_missing_browser_report_names_the_setting_that_points_nowhere(tmp_path: Path) -> None:
    nowhere = {"PATH": str(tmp_path / "none"), "HOME": str(tmp_path)}
    gone = str(tmp_path / "gone" / "chrome")
    by_config = discovery.browser_report(Config(browser_path=gone), nowhere, "linux")
    by_env = discovery.browser_report(Config(browser_path=gone), {**nowhere, "CNKI_BROWSER_PATH": gone + "2"}, "linux")
    by_nothing = discovery.browser_report(Config(), nowhere, "linux")
    assert (by_config["missing_from"], by_config["missing_path"]) == ("config.json", gone)
    assert (by_env["missing_from"], by_env["missing_path"]) == ("CNKI_BROWSER_PATH", gone + "2")
    assert "missing_from" not in by_nothing and "missing_path" not in by_nothing
