"""The package's shape, checked by the tools made for it: the layers contract (import-linter), no import
cycle among the modules (deferred and type-only imports included), ruff and mypy at zero, and every
subpackage saying its job."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import grimp
import pytest

import cnki_mcp

REPO = Path(__file__).resolve().parents[1]
PACKAGE = Path(cnki_mcp.__file__).parent
BIN = Path(sys.executable).parent


def tool(name: str) -> str:
    """A command installed beside this Python (the test extra installs them)."""
    path = shutil.which(name, path=str(BIN)) or shutil.which(name)
    if path is None:
        pytest.skip(f"{name} is not installed (pip install -e '.[test]')")
    return path


def run(*command: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=timeout)


def layers() -> list[str]:
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    (contract,) = [c for c in config["tool"]["importlinter"]["contracts"] if c["type"] == "layers"]
    return list(contract["layers"])


def subpackages() -> list[str]:
    return sorted(path.parent.name for path in PACKAGE.glob("*/__init__.py"))


def test_the_layers_contract_names_every_subpackage_and_the_top_modules() -> None:
    named = set(layers())

    assert named - {"cli"} == set(subpackages()) - {"references.citations"}
    assert "cli" in named


def test_no_module_is_over_900_lines_and_no_class_over_450() -> None:
    modules, classes = {}, {}
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        name = str(path.relative_to(PACKAGE))
        modules[name] = len(text.splitlines())
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef):
                classes[f"{name}:{node.name}"] = (node.end_lineno or node.lineno) - node.lineno + 1

    assert {name: lines for name, lines in modules.items() if lines > 900} == {}
    assert {name: lines for name, lines in classes.items() if lines > 450} == {}


def test_every_subpackage_says_its_job_and_what_it_may_import() -> None:
    for name in subpackages():
        doc = (PACKAGE / name / "__init__.py").read_text(encoding="utf-8")
        assert doc.startswith('"""'), name
        assert "may import:" in doc.lower(), name


def test_lint_imports_keeps_the_layers_contract() -> None:
    result = run(tool("lint-imports"))

    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


def test_no_import_cycle_among_the_modules() -> None:
    graph = grimp.build_graph("cnki_mcp", include_external_packages=False, exclude_type_checking_imports=False)
    imports = {module: graph.find_modules_directly_imported_by(module) for module in graph.modules}
    cycles = []
    for start in sorted(imports):
        # A path back to `start` from what it imports is a cycle through it.
        seen, stack = set(), [(target, (start, target)) for target in imports[start]]
        while stack:
            module, path = stack.pop()
            if module == start:
                cycles.append(" → ".join(path))
                break
            if module in seen:
                continue
            seen.add(module)
            stack.extend((target, (*path, target)) for target in imports[module])

    assert cycles == []


def test_ruff_finds_nothing() -> None:
    result = run(tool("ruff"), "check", "--no-cache", ".")

    assert result.returncode == 0, result.stdout[-6000:]


@pytest.mark.slow
def test_mypy_finds_nothing() -> None:
    result = run(tool("mypy"), "cnki_mcp")

    assert result.returncode == 0, result.stdout[-6000:]
