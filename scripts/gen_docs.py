"""Rewrite the generated sections of the maintainers' docs: the numbers and lists that would go stale by hand.

    .venv/bin/python scripts/gen_docs.py            rewrite the generated sections of the files in DOCS
    .venv/bin/python scripts/gen_docs.py --check    exit 1 naming every stale section (tests/test_docs_fresh.py)

A section is the text between ``<!-- generated:NAME -->`` and ``<!-- /generated:NAME -->``; everything else in
the files is written by hand and left alone. A section on one line is replaced inline (a number in a sentence
or a table cell), one spanning lines as a block. The tools come from ``tool_rows`` (the one place that knows
the registry), the tests from pytest's own collection (markers included, the ones tests/conftest.py sets by
rule too), the modules from the files under cnki_mcp/, the clients from ``cnki_mcp.setup.clients.CLIENTS``
and the release files from packaging/build.py and .github/workflows/release.yml.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import io
import re
import runpy
import sys
import tomllib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING

import pytest
import yaml

if TYPE_CHECKING:
    from cnki_mcp.setup.clients import Client

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "cnki_mcp"
DOCS = (
    "docs/architecture.md", "docs/validation.md", "docs/clients.md", "docs/clients.zh.md", "docs/packaging.md",
    "README.md", "README.en.md",
)
COMMAND = ".venv/bin/python scripts/gen_docs.py"
MARKED = re.compile(r"<!-- generated:(?P<name>[\w-]+) -->(?P<body>.*?)<!-- /generated:(?P=name) -->", re.S)


# --- the tools ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ToolRow:
    name: str
    title: str
    read_only: bool
    open_world: bool
    budget: tuple[int, int] | None  # requests, seconds of an operation the tool starts


def tool_rows() -> list[ToolRow]:
    """Every tool module of cnki_mcp/tools/, by name (the one function that reads the registry). A tool without
    ``BUDGET`` (the searches: their budget comes from their options; the tools answered locally) shows —."""
    from cnki_mcp.tools import REGISTRY

    rows = []
    for name in sorted(REGISTRY):
        spec = REGISTRY[name]
        budget = (spec.budget.requests, spec.budget.seconds) if spec.budget else None
        rows.append(ToolRow(spec.name, spec.title, spec.read_only, spec.open_world, budget))
    return rows


def tools_table() -> str:
    lines = ["| tool | title | read-only | open world (CNKI) | budget: requests / seconds |", "| --- | --- | --- | --- | --- |"]
    for row in tool_rows():
        budget = f"{row.budget[0]} / {row.budget[1]}" if row.budget else "—"
        lines.append(f"| `{row.name}` | {row.title or '—'} | {'yes' if row.read_only else 'no'} | {'yes' if row.open_world else 'no'} | {budget} |")
    return "\n".join(lines)


def tool_count() -> str:
    return str(len(tool_rows()))


# --- the modules --------------------------------------------------------------------------------------


def layers() -> list[str]:
    """The subpackages top to bottom, as the import-linter contract in pyproject.toml orders them."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))
    (contract,) = [c for c in config["tool"]["importlinter"]["contracts"] if c["type"] == "layers"]
    return list(contract["layers"])


def module_lines() -> dict[str, int]:
    """Lines of every module under cnki_mcp/, counted like tests/test_architecture.py counts them."""
    return {str(path.relative_to(PACKAGE)): len(path.read_text("utf-8").splitlines()) for path in sorted(PACKAGE.rglob("*.py"))}


def modules_table() -> str:
    groups: dict[str, dict[str, int]] = {}
    for module, count in module_lines().items():
        group, _, rest = module.partition("/")
        key = group if rest else "cli"  # the top-level modules: cli.py, the top layer, and the package's own
        groups.setdefault(key, {})[rest or module] = count
    order = [name for name in layers() if name in groups] + sorted(set(groups) - set(layers()))
    lines = ["| subpackage | modules | lines | lines of each module |", "| --- | ---: | ---: | --- |"]
    for name in order:
        modules = groups[name]
        each = ", ".join(f"`{module}` {count}" for module, count in sorted(modules.items()))
        label = "cli (top level)" if name == "cli" else name
        lines.append(f"| {label} | {len(modules)} | {sum(modules.values()):,} | {each} |")
    total = {module: count for modules in groups.values() for module, count in modules.items()}
    lines.append(f"| **all** | {sum(len(m) for m in groups.values())} | {sum(total.values()):,} | |")
    return "\n".join(lines)


# --- the tests ----------------------------------------------------------------------------------------


def fast_left_out() -> set[str]:
    """The markers ``bash scripts/test.sh --fast`` leaves out, read from the script's ``FAST`` line."""
    text = (ROOT / "scripts" / "test.sh").read_text("utf-8")
    expression = text.split('FAST=(-m "', 1)[1].split('"', 1)[0]
    return set(expression.split()) - {"not", "and"}


class _Collector:
    """A pytest plugin that keeps every collected test's file and markers."""

    def __init__(self) -> None:
        self.items: list[tuple[str, frozenset[str]]] = []

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        for item in session.items:
            self.items.append((item.path.name, frozenset(mark.name for mark in item.iter_markers())))


@functools.cache
def tests() -> list[tuple[str, frozenset[str]]]:
    """(file, markers) of every test pytest collects, without running any; collected once per run."""
    collector = _Collector()
    with contextlib.redirect_stdout(io.StringIO()) as out:
        code = pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", "--rootdir", str(ROOT), "-c", str(ROOT / "pyproject.toml"),
                            str(ROOT / "tests")], plugins=[collector])
    if code != 0:
        raise SystemExit(f"pytest could not collect the tests (exit {code}):\n{out.getvalue()[-3000:]}")
    return collector.items


def in_fast_loop(markers: frozenset[str]) -> bool:
    return not markers & fast_left_out()


def tests_table() -> str:
    shown = sorted(fast_left_out(), key=["e2e", "browser", "slow", "packaging"].index)
    per_file: dict[str, Counter[str]] = {}
    for name, markers in tests():
        counts = per_file.setdefault(name, Counter())
        counts["all"] += 1
        counts["fast"] += in_fast_loop(markers)
        counts.update(markers & set(shown))
    lines = [
        f"| file | tests | {' | '.join(shown)} | in `--fast` |",
        f"| --- | ---: | {' | '.join('---:' for _ in shown)} | ---: |",
    ]
    total: Counter[str] = Counter()
    for name, counts in sorted(per_file.items()):
        total.update(counts)
        cells = " | ".join(str(counts[marker] or "") for marker in shown)
        lines.append(f"| `{name}` | {counts['all']} | {cells} | {counts['fast'] or ''} |")
    lines.append(f"| **{len(per_file)} files** | {total['all']} | {' | '.join(str(total[m]) for m in shown)} | {total['fast']} |")
    return "\n".join(lines)


def test_count() -> str:
    files = {name for name, _ in tests()}
    fast = sum(in_fast_loop(markers) for _, markers in tests())
    return f"{len(tests())} collected test cases in {len(files)} files, {fast} of them in the fast loop"


def packaging_fast_count() -> str:
    """Tests of test_packaging.py that build nothing (no ``packaging`` marker)."""
    return str(sum(1 for name, markers in tests() if name == "test_packaging.py" and "packaging" not in markers))


# --- the clients --------------------------------------------------------------------------------------


def client_count() -> str:
    from cnki_mcp.setup.clients import CLIENTS

    return str(len(CLIENTS))


def _zh(words: str | tuple[str, str]) -> str:
    """The Chinese of a name or (Chinese, English) pair, whatever language this process speaks."""
    return words if isinstance(words, str) else words[0]


def _file_zh(client: Client, system: str) -> str:
    """Where setup writes a client's config file on one system, in Chinese; — where it writes none."""
    location = client.location
    if location is None or system not in location.systems:
        return "—"
    home = "%USERPROFILE%" if system == "windows" else "~"
    appdata = {"linux": "~/.config", "windows": "%APPDATA%", "darwin": "~/Library/Application Support"}[system]
    joiner = "\\" if system == "windows" else "/"
    path = joiner.join([home if location.base == "home" else appdata, *location.parts])
    text = f"`{path}`"
    if system == "windows" and location.msix:
        package = "\\".join(["%LOCALAPPDATA%", "Packages", f"{location.msix}_<编号>", "LocalCache", "Roaming", *location.parts])
        text = f"MSIX 安装包（2026 年 2 月起的官方安装包）为 `{package}`，有多个安装时 setup 会询问；其他安装为 {text}"
    if location.env:
        variable = f"%{location.env}%" if system == "windows" else f"${location.env}"
        text += f"；设置了 `{location.env}` 时为 `{joiner.join([variable, *location.env_parts])}`"
    return text


def client_files_zh() -> str:
    """The table of docs/clients.zh.md: where each client's config lives, or where its snippet goes."""
    from cnki_mcp.setup.clients import CLIENTS, SYSTEMS

    names = {"linux": "Linux", "windows": "Windows", "darwin": "macOS"}
    order = ("linux", "windows", "darwin")
    assert set(order) == set(SYSTEMS)
    lines = [
        f"| 名称 | 客户端 | {' | '.join(names[system] for system in order)} | 说明 |",
        f"| --- | --- | {' | '.join('---' for _ in order)} | --- |",
    ]
    for client in CLIENTS:
        if client.location is None:
            cells = ["在客户端界面里" for _ in order]
            note = f"粘贴到：{_zh(client.where)}" if client.where else ""
            if client.link is not None:
                note = f"一键导入链接；或{note}"
        else:
            cells = [_file_zh(client, system) if system in client.systems else "没有这个系统的版本" for system in order]
            if client.location.must_exist:  # its folder comes from the client's first start; ``where`` says so
                note = f"配置文件夹由客户端自己建立：{_zh(client.where) or '先打开一次客户端'}"
            else:
                note = f"也可在 {_zh(client.where)} 打开这个文件" if client.where else ""
        lines.append(f"| `{client.id}` | {_zh(client.label)} | {' | '.join(cells)} | {note} |")
    return "\n".join(lines)


# --- the release files ------------------------------------------------------------------------------


@functools.cache
def _build() -> SimpleNamespace:
    """packaging/build.py's names (packaging/ is not a package: the file is run, not imported)."""
    return SimpleNamespace(**runpy.run_path(str(ROOT / "packaging" / "build.py")))


def _runners() -> dict[str, str]:
    """Release label → the GitHub runner that builds it, from the release workflow's matrix."""
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "release.yml").read_text("utf-8"))
    return {row["label"]: row["runner"] for row in workflow["jobs"]["build"]["strategy"]["matrix"]["include"]}


def release_table() -> str:
    build = _build()
    runners = _runners()
    lines = ["| platform | archive | Claude Desktop bundle | runner that builds it | setup script |", "| --- | --- | --- | --- | --- |"]
    for label in build.PLATFORMS.values():
        bundle = f"`{build.bundle_name('<version>', label)}`" if build.has_bundle(label) else "— (no Claude Desktop for Linux)"
        lines.append(f"| {label} | `{build.archive_name('<version>', label)}` | {bundle} | `{runners[label]}` | `{build.installer_name(label)}` |")
    return "\n".join(lines)


def archive_count() -> str:
    return str(len(_build().PLATFORMS))


def bundle_count() -> str:
    build = _build()
    return str(sum(1 for label in build.PLATFORMS.values() if build.has_bundle(label)))


SECTIONS: dict[str, Callable[[], str]] = {
    "tools": tools_table,
    "tool-count": tool_count,
    "modules": modules_table,
    "tests": tests_table,
    "test-count": test_count,
    "packaging-fast-count": packaging_fast_count,
    "client-count": client_count,
    "client-files-zh": client_files_zh,
    "release-table": release_table,
    "archive-count": archive_count,
    "bundle-count": bundle_count,
}


# --- rewriting ----------------------------------------------------------------------------------------


def rewritten(text: str) -> tuple[str, list[str]]:
    """``text`` with every generated section brought up to date, and the names of those that changed."""
    changed: list[str] = []

    def fill(match: re.Match[str]) -> str:
        name, body = match["name"], match["body"]
        if name not in SECTIONS:
            raise SystemExit(f"unknown generated section {name!r} (known: {', '.join(SECTIONS)})")
        content = SECTIONS[name]()
        fresh = f"\n{content}\n" if "\n" in body else content
        if fresh != body:
            changed.append(name)
        return f"<!-- generated:{name} -->{fresh}<!-- /generated:{name} -->"

    return MARKED.sub(fill, text), changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a section is stale")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    stale = []
    for doc in DOCS:
        path = ROOT / doc
        text = path.read_text("utf-8")
        fresh, changed = rewritten(text)
        if not changed:
            continue
        if args.check:
            stale.extend(f"{doc}: {name}" for name in changed)
        else:
            path.write_text(fresh, "utf-8")
            print(f"{doc}: rewrote {', '.join(changed)}")
    if stale:
        print("Stale generated sections (run: " + COMMAND + "):\n  " + "\n  ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
