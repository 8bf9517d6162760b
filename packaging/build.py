"""Build the release archive of cnki-mcp for the platform this runs on.

    .venv/bin/python packaging/build.py [--layout onedir|onefile] [--out dist] [--check]

Steps: freeze the program with PyInstaller (packaging/cnki-mcp.spec), stage it in a folder
`cnki-mcp/` with the platform's setup script, README.md, README.en.md, LICENSE, the research skill
(`skills/cnki-deep-research/`) and a
THIRD_PARTY_NOTICES.md regenerated from the build environment (so it lists exactly what was
bundled), then pack `cnki-mcp-<version>-<platform>.tar.gz` (`.zip` on Windows) and, on macOS and Windows, the
Claude Desktop bundle `cnki-mcp-<version>-<platform>.mcpb` (packaging/mcpb_bundle.py), each with its
`.sha256`.
With --check the archive is unpacked into a folder whose path has spaces and Chinese characters and
the frozen program checks itself there: `version`, `schema` (equal to the source tree's) and
`doctor --protocol --json` (a real MCP round trip with a second copy of itself).

PyInstaller cannot cross-compile: each platform is built on its own kind of machine (see
.github/workflows/release.yml). The archive path is the only line written to stdout.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import importlib.util
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SPEC = HERE / "cnki-mcp.spec"
sys.path.insert(0, str(HERE))

from mcpb_bundle import bundle_name, has_bundle, manifest, write_bundle  # noqa: E402  (packaging/ is not a package)

# (sys.platform, normalised machine) → release label.
PLATFORMS: dict[tuple[str, str], str] = {
    ("darwin", "arm64"): "macOS-arm64",
    ("darwin", "x86_64"): "macOS-x64",
    ("win32", "x86_64"): "Windows-x64",
    ("linux", "x86_64"): "Linux-x64",
    ("linux", "arm64"): "Linux-arm64",
}
_MACHINES = {"amd64": "x86_64", "x64": "x86_64", "x86_64": "x86_64", "aarch64": "arm64", "arm64": "arm64"}

# Chosen from the measurements in docs/packaging.md: onedir starts as fast as plain Python, while
# onefile unpacks ~60 MB to a temporary folder on every start (and on macOS/Windows every unpacked
# file is checked again by Gatekeeper or the virus scanner). MCP clients start the server each time
# they open, so start-up wins over having a single file.
LAYOUTS: dict[str, str] = {label: "onedir" for label in PLATFORMS.values()}

INSTALLERS = {"macOS": "安装设置.command", "Windows": "安装设置.cmd", "Linux": "安装设置.sh"}
DOCUMENTS = ("README.md", "README.en.md", "LICENSE")
SKILLS = ROOT / "docs" / "skills"  # shipped as skills/ so users of a release can install the skill too
TOP_FOLDER = "cnki-mcp"  # no version in it: unpacking a new release over the old keeps data/ and client configs valid


def platform_label(system: str | None = None, machine: str | None = None) -> str:
    """The release label of a platform, e.g. ("linux", "x86_64") → "Linux-x64"."""
    system = sys.platform if system is None else system
    machine = platform.machine() if machine is None else machine
    key = ("linux" if system.startswith("linux") else system, _MACHINES.get(machine.lower(), machine.lower()))
    try:
        return PLATFORMS[key]
    except KeyError:
        raise SystemExit(f"no release is built for {system}/{machine}") from None


def is_windows(label: str) -> bool:
    return label.startswith("Windows")


def executable_name(label: str) -> str:
    return "cnki-mcp.exe" if is_windows(label) else "cnki-mcp"


def installer_name(label: str) -> str:
    return INSTALLERS[label.split("-")[0]]


def archive_name(version: str, label: str) -> str:
    return f"cnki-mcp-{version}-{label}" + (".zip" if is_windows(label) else ".tar.gz")


def project_version() -> str:
    text = (ROOT / "cnki_mcp" / "__init__.py").read_text(encoding="utf-8")
    found = re.search(r'^__version__\s*=\s*"([^"]+)"', text, re.MULTILINE)
    if not found:
        raise SystemExit("cnki_mcp/__init__.py has no __version__")
    return found.group(1)


def notices_text() -> str:
    """THIRD_PARTY_NOTICES.md for the environment that is freezing the program."""
    spec = importlib.util.spec_from_file_location("cnki_notices", ROOT / "scripts" / "notices.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return str(module.render())


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --- freezing and staging ---------------------------------------------------------------------------


def freeze(layout: str, work: Path) -> Path:
    """Run PyInstaller; return the folder (onedir) or the file (onefile) it produced."""
    dist = work / "dist"
    shutil.rmtree(dist, ignore_errors=True)
    command = [
        sys.executable, "-m", "PyInstaller", str(SPEC), "--noconfirm",
        "--distpath", str(dist), "--workpath", str(work / "pyinstaller"), "--log-level", "WARN",
        "--", "--layout", layout,
    ]
    subprocess.run(command, check=True, cwd=ROOT, stdout=sys.stderr)
    name = "cnki-mcp.exe" if sys.platform == "win32" else "cnki-mcp"
    return dist / "cnki-mcp" if layout == "onedir" else dist / name


def stage(frozen: Path, label: str, target: Path) -> Path:
    """Lay out the folder users will see after unpacking; return it."""
    shutil.rmtree(target, ignore_errors=True)
    if frozen.is_dir():
        shutil.copytree(frozen, target, symlinks=True)
    else:
        target.mkdir(parents=True)
        shutil.copy2(frozen, target / executable_name(label))
    installer = target / installer_name(label)
    shutil.copyfile(ROOT / "installers" / installer.name, installer)
    installer.chmod(0o755)
    for name in DOCUMENTS:
        shutil.copyfile(ROOT / name, target / name)
    shutil.copytree(SKILLS, target / "skills")
    (target / "THIRD_PARTY_NOTICES.md").write_bytes(notices_text().encode("utf-8"))
    return target


# --- archives ---------------------------------------------------------------------------------------


def _entries(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*"), key=lambda path: path.relative_to(folder).as_posix())


def write_archive(folder: Path, destination: Path) -> Path:
    """Pack `folder` under its own name; sorted entries, owner and group cleared, modes kept."""
    destination.parent.mkdir(parents=True, exist_ok=True)
    prefix = folder.name
    if destination.name.endswith(".zip"):
        with zipfile.ZipFile(destination, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
            for path in [folder, *_entries(folder)]:
                name = prefix if path == folder else f"{prefix}/{path.relative_to(folder).as_posix()}"
                if path.is_dir() and not path.is_symlink():
                    info = zipfile.ZipInfo(name + "/", time.localtime(path.stat().st_mtime)[:6])
                    info.external_attr = (0o40755 << 16) | 0x10
                    archive.writestr(info, b"")
                else:
                    info = zipfile.ZipInfo.from_file(path, name)
                    info.compress_type = zipfile.ZIP_DEFLATED
                    with open(path, "rb") as source:
                        archive.writestr(info, source.read(), compresslevel=9)
        return destination

    def reset(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        return info

    with open(destination, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=9, mtime=0) as packed:
        with tarfile.open(fileobj=packed, mode="w", format=tarfile.PAX_FORMAT) as archive:
            archive.add(folder, prefix, recursive=False, filter=reset)
            for path in _entries(folder):
                archive.add(path, f"{prefix}/{path.relative_to(folder).as_posix()}", recursive=False, filter=reset)
    return destination


def unpack(archive: Path, into: Path) -> Path:
    """Unpack a release archive; return its top folder."""
    into.mkdir(parents=True, exist_ok=True)
    if archive.name.endswith(".zip"):
        with zipfile.ZipFile(archive) as packed:
            packed.extractall(into)
            for info in packed.infolist():
                mode = (info.external_attr >> 16) & 0o777
                if mode and not info.is_dir():
                    (into / info.filename).chmod(mode)
    else:
        with tarfile.open(archive) as packed:
            packed.extractall(into, filter="tar")
    return into / TOP_FOLDER


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def folder_size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(item.stat().st_size for item in path.rglob("*") if item.is_file() and not item.is_symlink())


# --- self-check -------------------------------------------------------------------------------------


def _run(argv: list[str], env: dict[str, str], timeout: float, accepted: tuple[int, ...] = (0,)) -> str:
    done = subprocess.run(argv, env=env, capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL)
    if done.returncode not in accepted:
        raise SystemExit(
            f"{' '.join(argv[1:])} failed (exit {done.returncode}):\n{done.stderr.decode('utf-8', 'replace')}"
        )
    return done.stdout.decode("utf-8")


def source_tools() -> list[dict[str, Any]]:
    """tools/list as the source tree serves it."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONIOENCODING="utf-8")
    tools: list[dict[str, Any]] = json.loads(_run([sys.executable, "-m", "cnki_mcp", "schema"], env, 60))["tools"]
    return tools


def self_check(executable: Path, version: str) -> dict[str, object]:
    """Run the frozen program's own checks; raise SystemExit on the first failure."""
    with tempfile.TemporaryDirectory(prefix="cnki-check-") as scratch:
        home = Path(scratch) / "home"  # no client config of the build machine's user is read
        home.mkdir()
        env = dict(os.environ, CNKI_DATA_DIR=str(Path(scratch) / "data"), HOME=str(home), USERPROFILE=str(home),
                   PYTHONIOENCODING="utf-8")
        reported = _run([str(executable), "version"], env, 60).strip()
        if reported != version:
            raise SystemExit(f"the executable reports version {reported!r}, the source says {version!r}")
        frozen_tools = json.loads(_run([str(executable), "schema"], env, 60))["tools"]
        if frozen_tools != source_tools():
            raise SystemExit("the executable's tools/list differs from the source tree's")
        # Exit 1 means "a check failed", e.g. no browser on the build machine; only the round trip matters here.
        report = json.loads(_run([str(executable), "doctor", "--protocol", "--json"], env, 90, accepted=(0, 1)))
        probe = report.get("protocol") or {}
        if probe.get("passed") is not True or probe.get("browser_started") is not False:
            raise SystemExit(f"doctor --protocol did not pass: {probe}")
    return {"version": reported, "tools": len(frozen_tools), "protocol": probe}


# --- main -------------------------------------------------------------------------------------------


def build(layout: str | None, out: Path, work: Path, check: bool) -> Path:
    label = platform_label()
    layout = layout or LAYOUTS[label]
    version = project_version()
    began = time.monotonic()
    log(f"building cnki-mcp {version} for {label} ({layout}) …")
    frozen = freeze(layout, work)
    folder = stage(frozen, label, work / "stage" / TOP_FOLDER)
    archive = write_archive(folder, out / archive_name(version, label))
    artifacts = [archive]
    if has_bundle(label):
        document = manifest(version, label, executable_name(label), source_tools())
        documents = [folder / "LICENSE", folder / "THIRD_PARTY_NOTICES.md"]
        artifacts.append(write_bundle(frozen, out / bundle_name(version, label), document, documents))
    for artifact in artifacts:
        Path(f"{artifact}.sha256").write_text(f"{sha256(artifact)}  {artifact.name}\n", encoding="utf-8")
    log(
        f"built {archive.name}: {archive.stat().st_size / 2**20:.1f} MB packed, "
        f"{folder_size(folder) / 2**20:.1f} MB unpacked, {time.monotonic() - began:.0f} s"
        + "".join(f"; {bundle.name}: {bundle.stat().st_size / 2**20:.1f} MB" for bundle in artifacts[1:])
    )
    if check:
        with tempfile.TemporaryDirectory(prefix="cnki-release-") as scratch:
            top = unpack(archive, Path(scratch) / "检查 目录")
            result = self_check(top / executable_name(label), version)
            log(f"self-check passed in {top}: {json.dumps(result, ensure_ascii=False)}")
    return archive


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layout", choices=("onedir", "onefile"), help="default: the platform's release layout")
    parser.add_argument("--out", type=Path, default=ROOT / "dist", help="where the archive goes (default dist/)")
    parser.add_argument("--work", type=Path, default=ROOT / "build" / "packaging", help="scratch folder")
    parser.add_argument("--check", action="store_true", help="unpack the archive and run the program's self-checks")
    options = parser.parse_args(argv)
    archive = build(options.layout, options.out.resolve(), options.work.resolve(), options.check)
    print(archive)
    return 0


if __name__ == "__main__":
    sys.exit(main())
