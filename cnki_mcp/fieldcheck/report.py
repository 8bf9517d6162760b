"""``cnki-mcp doctor --report``: one zip under ``<data>/diagnostics/`` that is safe to attach to a public issue.

It holds a README saying what is inside, the environment (version, OS, browser and its version, pacing),
the last field check (``doctor --site``), the error codes operations met lately with their counts, and the
page snapshots (already redacted when saved: cookies, tokens, input values, scripts; here also the names
the page header shows, and the person's and institution's names the store knows of). It never takes
research.db, downloads, exports, the browser profile or screenshots (a screenshot may show a name).

Before anything is written, every file of the report is scanned for what looks like a cookie, a ticket
or token, or a name the store knows of (also HTML-escaped or percent-encoded): one hit and nothing is
written (REPORT_UNSAFE, naming the file and what was seen, never the value).

Blocking file I/O: call ``build_report`` through ``asyncio.to_thread`` from async code.
"""

from __future__ import annotations

import html
import io
import json
import platform
import re
import sys
import zipfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import msgspec

from cnki_mcp import __version__
from cnki_mcp.core import settings
from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.files import write_new_file
from cnki_mcp.core.model import PARSER_VERSION, Config, StoreData
from cnki_mcp.core.redact import COOKIE_NAMES, REDACTED, SECRET_KEY_WORDS, readings, redact_markup, redact_page
from cnki_mcp.fieldcheck.tour import render
from cnki_mcp.store.library import TOKEN_FILE, error_counts, peek_store

REPORT_PREFIX = "report-"
SNAPSHOTS_MAX = 40
SNAPSHOT_BYTES_MAX = 2 * 1024 * 1024
HIDDEN = "[已隐去]"
_SNAPSHOT_SUFFIXES = (".html", ".json")

# Elements of a page header that show who is logged in: their text and title are hidden.
_IDENTITY_ELEMENT = re.compile(
    r"(<(\w+)\b[^>]*\b(?:class|id)\s*=\s*[\"'][^\"']*"
    r"(?:unitName|personalName|orgName|LoginShowName|AccountName|userName|user-name)[^\"']*[\"'][^>]*>)([^<]*)",
    re.I,
)
_TITLE_ATTRIBUTE = re.compile(r"(\btitle\s*=\s*)(\"[^\"]*\"|'[^']*')", re.I)

_SECRET_WORDS = "|".join(word for word in SECRET_KEY_WORDS if word not in ("sign", "cookie"))
_NOT_REDACTED = rf"(?!{REDACTED})"
_LOOKS_SECRET = (
    ("Cookie", re.compile(rf"\b(?:{COOKIE_NAMES})={_NOT_REDACTED}[^;\"'\s<>&]{{4,}}")),
    ("Cookie", re.compile(rf"\b(?:set-)?cookie\s*[:=]\s*[\"']?[\w.-]+={_NOT_REDACTED}[^;\s\"'<>]{{4,}}", re.I)),
    ("票据或令牌", re.compile(rf"[?&#;]\s*[\w.-]*(?:{_SECRET_WORDS})[\w.-]*={_NOT_REDACTED}[^&\"'\s<>#]{{6,}}", re.I)),
    ("票据或令牌", re.compile(rf"[\"'][\w-]*(?:{_SECRET_WORDS})[\w-]*[\"']\s*:\s*[\"']{_NOT_REDACTED}[^\"']{{6,}}", re.I)),
    ("票据或令牌", re.compile(r"\b(?:Bearer|Basic)\s+(?!REDACTED)[A-Za-z0-9._~+/=-]{12,}")),
    ("票据或令牌", re.compile(r"\beyJ[\w-]{8,}\.[\w-]{8,}\.")),
)


class ReportFile(msgspec.Struct):
    name: str
    text: str
    source: str = ""  # the diagnostics file it came from, for a refusal


def known_names(data: StoreData | None) -> list[str]:
    """The person's and institution's names the store keeps (two characters at least)."""
    return [name for name in (data.known_names if data is not None else []) if len(name.strip()) >= 2]


def scrub_identity(text: str, names: list[str]) -> str:
    """``text`` without the header's identity elements and without ``names`` (also HTML-escaped or
    percent-encoded)."""

    def hide(match: re.Match[str]) -> str:
        opening = _TITLE_ATTRIBUTE.sub(rf'\1"{HIDDEN}"', match[1])
        return opening + (HIDDEN if match[3].strip() else match[3])

    text = _IDENTITY_ELEMENT.sub(hide, text)
    for name in sorted(names, key=len, reverse=True):
        for form in {name, html.escape(name), quote(name), quote(name).lower(), quote(name, safe="")}:
            text = re.sub(re.escape(form), HIDDEN, text, flags=re.I)
    return text


def find_secret(text: str, names: list[str], keys: tuple[str, ...] = ()) -> str:
    """What in ``text`` looks like a cookie, a ticket or token, one of ``keys`` or a known name ("" when
    nothing does), read also decoded (``redact.readings``)."""
    forms = readings(text)
    for kind, pattern in _LOOKS_SECRET:
        if any(pattern.search(form) for form in forms):
            return kind
    if any(key in form for key in keys for form in forms):
        return "访问令牌"
    for name in names:
        if any(name.lower() in form.lower() for form in forms):
            return "你的姓名或机构名称"
    return ""


def own_keys(root: Path) -> tuple[str, ...]:
    """The data directory's own secrets (the HTTP token): hidden wherever a file quotes them."""
    try:
        value = (Path(root) / TOKEN_FILE).read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return ()
    return (value,) if len(value) >= 16 else ()


def _home_hidden(value: str) -> str:
    home = str(Path.home())
    return value.replace(home, "~") if home and home != "/" else value


def environment(root: Path, config: Config, data: StoreData | None) -> dict[str, Any]:
    from cnki_mcp.site.discovery import browser_report

    browser = browser_report(config)
    if "path" in browser:
        browser["path"] = _home_hidden(str(browser["path"]))
    check = data.last_site_check if data is not None else None
    return {
        "cnki_mcp": __version__,
        "parser": PARSER_VERSION,
        "os": platform.platform(),
        "python": platform.python_version(),
        "frozen": bool(getattr(sys, "frozen", False)),
        "browser": browser,
        "browser_version": check.browser if check is not None else "",
        "settings": {
            "request_interval_ms": settings.request_interval_ms(),
            "max_inflight": settings.max_inflight(),
            "workers": settings.workers(),
            "inline_wait_seconds": settings.inline_wait_seconds(),
        },
        "research_json_readable": data is not None,
    }


def pick_snapshots(folder: Path, data: StoreData | None) -> list[Path]:
    """The snapshots to include: the last check's first, then the newest, at most 40, none over 2 MB."""
    if not folder.is_dir():
        return []
    found = [
        path
        for path in folder.iterdir()
        if path.suffix in _SNAPSHOT_SUFFIXES and path.is_file() and not path.is_symlink()
        and path.stat().st_size <= SNAPSHOT_BYTES_MAX
    ]
    found.sort(key=lambda path: path.stat().st_mtime, reverse=True)
    named = {step.snapshot for step in data.last_site_check.steps} if data is not None and data.last_site_check else set()
    found.sort(key=lambda path: path.name not in named)
    return found[:SNAPSHOTS_MAX]


def _readme(stamp: str, files: list[ReportFile], checked: bool, snapshots: int) -> str:
    check = (
        "- `site-check.txt`、`site-check.json`：最近一次现场检查（cnki-mcp doctor --site）逐项的结果"
        if checked
        else "- 还没有运行过现场检查；先运行 `cnki-mcp doctor --site` 再生成报告，报告会更有用"
    )
    listed = "\n".join(f"  - `{item.name}`" for item in files)
    return f"""# cnki-mcp 诊断报告

生成于 {stamp}，cnki-mcp {__version__}（解析器版本 {PARSER_VERSION}）。这份报告用来告诉开发者知网的页面哪里变了，
可以直接附在公开的 issue 中。

## 内容

- `environment.json`：版本、操作系统、浏览器及其版本、限速设置
{check}
- `errors.json`：最近的任务遇到过的错误代码和次数
- `snapshots/`：解析失败时保存的页面快照（{snapshots} 个）。保存时已去掉 Cookie、令牌、表单中的值和脚本；
  打包时又去掉了页面头部显示的用户名、机构名称，以及本机记录的你的姓名和机构名称。

不包含：本地数据库 research.db（你的检索和文献记录）、下载和导出的文件、浏览器配置（登录状态）、截图（截图可能显示
你的姓名；需要时请自己确认后再附上）。

写入前已逐个检查下面的文件，没有发现像 Cookie、票据或你的姓名、机构名称的内容：

{listed}

## English

A cnki-mcp diagnostic report, safe to attach to a public issue: environment, the last site check, recent
error codes with counts, and redacted page snapshots. It never contains research.db, downloads, exports,
the browser profile or screenshots.
"""


def report_files(root: Path, config: Config, now: datetime | None = None) -> list[ReportFile]:
    """Every file of the report, scrubbed (not yet scanned)."""
    data = peek_store(root)
    names = known_names(data)
    stamp = (now or datetime.now(UTC)).strftime("%Y-%m-%d %H:%M:%S UTC")
    files = [ReportFile("environment.json", json.dumps(environment(root, config, data), ensure_ascii=False, indent=2))]
    check = data.last_site_check if data is not None else None
    if check is not None:
        files.append(ReportFile("site-check.txt", "\n".join(render(check)) + "\n"))
        files.append(ReportFile("site-check.json", msgspec.json.format(msgspec.json.encode(check), indent=2).decode()))
    errors = error_counts(data.recent_errors) if data is not None else []
    files.append(ReportFile("errors.json", json.dumps(errors, ensure_ascii=False, indent=2)))
    snapshots = pick_snapshots(root / "diagnostics", data)
    for path in snapshots:
        text = path.read_text(encoding="utf-8", errors="replace")
        text = redact_page(text) if path.suffix == ".html" else redact_markup(text)
        files.append(ReportFile(f"snapshots/{path.name}", text, source=f"diagnostics/{path.name}"))
    keys = own_keys(root)
    files = [msgspec.structs.replace(item, text=_without(scrub_identity(item.text, names), keys)) for item in files]
    files.insert(0, ReportFile("README.md", _readme(stamp, files, check is not None, len(snapshots))))
    return files


def _without(text: str, keys: tuple[str, ...]) -> str:
    for key in keys:
        text = text.replace(key, REDACTED)
    return text


def check_files(files: list[ReportFile], names: list[str], keys: tuple[str, ...] = ()) -> None:
    """REPORT_UNSAFE at the first file that still holds something like a cookie, a ticket, one of ``keys``
    or a known name."""
    for item in files:
        kind = find_secret(item.text, names, keys)
        if kind:
            where = item.source or f"报告中的 {item.name}"
            advice = (
                f"请删除 {item.source} 后重新运行 cnki-mcp doctor --report。"
                if item.source
                else "这部分由 cnki-mcp 自己生成，请在 issue 中说明这个情况，但不要附上报告。"
            )
            raise CnkiError(
                "REPORT_UNSAFE",
                f"诊断报告没有写入：{where} 中有像{kind}的内容，附到公开的 issue 上可能泄露你的信息。{advice}",
                details={"file": item.source or item.name, "kind": kind},
            )


def build_report(root: Path, config: Config | None = None, now: datetime | None = None) -> Path:
    """Write the report zip under ``<root>/diagnostics/`` and return its path (never overwriting a file)."""
    root = Path(root)
    files = report_files(root, config or Config(), now)
    check_files(files, known_names(peek_store(root)), own_keys(root))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for item in files:
            archive.writestr(f"cnki-mcp-report/{item.name}", item.text.encode("utf-8"))
    folder = root / "diagnostics"
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%SZ")
    written = write_new_file(folder, f"{REPORT_PREFIX}{stamp}.zip", buffer.getvalue())
    return Path(written.path)
