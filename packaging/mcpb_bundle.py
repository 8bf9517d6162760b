"""The Claude Desktop bundle: `cnki-mcp-<version>-<platform>.mcpb`, an MCP Bundle of the frozen program,
for macOS and Windows (the systems Claude Desktop is built for).

An MCP Bundle is a zip with `manifest.json` at its root (manifest_version 0.3). Ours is a `binary`
server: the frozen onedir folder sits under `server/`, and Claude Desktop runs
`${__dirname}/server/cnki-mcp serve`. Two settings are asked for when the bundle is installed and
reach the program as environment variables: the browser (`CNKI_BROWSER_PATH`, optional: empty means
"find it") and the data directory (`CNKI_DATA_DIR`, by default the per-user folder a pip install
uses, because Claude Desktop replaces the bundle's own folder on every update). Files keep their
Unix modes in the zip, so the executable stays executable when the host unpacks it.
"""

from __future__ import annotations

import json
import time
import tomllib
import zipfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MANIFEST_VERSION = "0.3"

# Release label prefix → the platform name MCP Bundles use, and where a pip install keeps its data.
# No Linux: the one host that installs MCP Bundles, Claude Desktop, is built for macOS and Windows only
# (docs/site-notes.md, "MCP Bundle hosts"), so a Linux bundle would have nothing to open it.
PLATFORMS = {"macOS": "darwin", "Windows": "win32"}
DATA_DEFAULTS = {
    "darwin": "${HOME}/Library/Application Support/cnki-mcp",
    "win32": "${HOME}/AppData/Local/cnki-mcp",
}


def has_bundle(label: str) -> bool:
    """Whether the release for this platform label (e.g. "macOS-arm64") carries a bundle."""
    return label.split("-")[0] in PLATFORMS


def bundle_name(version: str, label: str) -> str:
    return f"cnki-mcp-{version}-{label}.mcpb"


def project_urls() -> dict[str, str]:
    """[project.urls] of pyproject.toml: the one place the project's addresses are written."""
    with open(ROOT / "pyproject.toml", "rb") as handle:
        return dict(tomllib.load(handle)["project"]["urls"])


def manifest(version: str, label: str, executable: str, tools: list[dict[str, Any]]) -> dict[str, Any]:
    """manifest.json for one platform's bundle; ``tools`` as `cnki-mcp schema` lists them."""
    platform = PLATFORMS[label.split("-")[0]]
    urls = project_urls()
    return {
        "manifest_version": MANIFEST_VERSION,
        "name": "cnki-mcp",
        "display_name": "知网 CNKI（cnki-mcp）",
        "version": version,
        "description": "通过你自己的浏览器和登录检索、阅读、下载和引用知网（CNKI）文献。",
        "long_description": (
            "cnki-mcp 在你的电脑上运行，用一个专用的 Chrome、Edge 或 Chromium 窗口访问知网，使用你自己的个人或机构登录。"
            "账号密码只在浏览器窗口里输入，从不经过 MCP。遇到验证码或登录页面时，任务会暂停并把窗口切到前台，由你处理。"
        ),
        "author": {"name": "cnki-mcp contributors", "url": urls["Homepage"]},
        "repository": {"type": "git", "url": urls["Repository"]},
        "homepage": urls["Homepage"],
        "documentation": urls["Documentation"],
        "support": urls["Issues"],
        "license": "AGPL-3.0-or-later",
        "keywords": ["cnki", "知网", "research", "citations", "papers"],
        "server": {
            "type": "binary",
            "entry_point": f"server/{executable}",
            "mcp_config": {
                "command": f"${{__dirname}}/server/{executable}",
                "args": ["serve"],
                "env": {
                    "CNKI_BROWSER_PATH": "${user_config.browser_path}",
                    "CNKI_DATA_DIR": "${user_config.data_dir}",
                },
            },
        },
        "tools": [{"name": tool["name"], "description": _first_sentence(tool["description"])} for tool in tools],
        "compatibility": {"platforms": [platform]},
        "user_config": {
            "browser_path": {
                "type": "file",
                "title": "浏览器（可不填）",
                "description": "Chrome、Edge 或 Chromium 的可执行文件。不填时自动查找本机安装的浏览器。",
                "required": False,
            },
            "data_dir": {
                "type": "directory",
                "title": "数据目录",
                "description": "保存登录状态、题录、下载的论文和导出的参考文献。更新扩展时这个目录保持不变。",
                "required": True,
                "default": DATA_DEFAULTS[platform],
            },
        },
    }


def _first_sentence(text: str) -> str:
    head = text.split("\n", 1)[0]
    return head.split("。", 1)[0] + "。" if "。" in head else head


def _entries(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*"), key=lambda path: path.relative_to(folder).as_posix())


def _add_file(archive: zipfile.ZipFile, path: Path, name: str) -> None:
    info = zipfile.ZipInfo.from_file(path, name)  # carries the Unix mode in external_attr
    info.compress_type = zipfile.ZIP_DEFLATED
    with open(path, "rb") as source:
        archive.writestr(info, source.read(), compresslevel=9)


def write_bundle(frozen: Path, destination: Path, document: dict[str, Any], documents: list[Path]) -> Path:
    """Pack the frozen program (a onedir folder or one file) under `server/`, with `manifest.json` and
    ``documents`` (the licence and notices) at the top."""
    destination.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(destination, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        info = zipfile.ZipInfo("manifest.json", time.localtime()[:6])
        info.external_attr = 0o644 << 16
        text = json.dumps(document, ensure_ascii=False, indent=2) + "\n"
        archive.writestr(info, text.encode("utf-8"), compress_type=zipfile.ZIP_DEFLATED)
        for path in documents:
            _add_file(archive, path, path.name)
        if frozen.is_file():
            _add_file(archive, frozen, f"server/{document['server']['entry_point'].split('/', 1)[1]}")
        else:
            for path in _entries(frozen):
                if path.is_file():
                    _add_file(archive, path, f"server/{path.relative_to(frozen).as_posix()}")
    return destination
