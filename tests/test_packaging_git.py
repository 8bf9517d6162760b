"""The one-line install from the repository (``pipx install git+…``, ``uvx --from git+… cnki-mcp``) works
before any release: pip builds the package from a clone of the committed tree, and the wheel it builds holds
every file of ``cnki_mcp`` (the guide, the MCP App page, every module), so the installed ``cnki-mcp`` runs.

The clone is of this checkout's HEAD (what a push would publish), installed with ``--no-deps`` into a fresh
venv; the dependencies are borrowed from the running interpreter's site-packages through a ``.pth`` line placed
after the venv's own, so ``cnki_mcp`` itself can only come from the fresh install (checked)."""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_packaging import assert_installed_cnki_mcp_runs

REPO = Path(__file__).resolve().parents[1]
pytestmark = [
    pytest.mark.packaging,
    pytest.mark.skipif(shutil.which("git") is None or not (REPO / ".git").exists(), reason="needs git and a git checkout"),
]


def _git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True, timeout=120).stdout


def test_pip_install_from_a_git_url_ships_every_package_file_and_runs(tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    _git("clone", "-q", "--no-local", str(REPO), str(clone), cwd=tmp_path)
    shipped = {line.removeprefix("cnki_mcp/") for line in _git("ls-files", "cnki_mcp", cwd=clone).splitlines()}
    assert {"guide.md", "surface/search_app.html"} <= shipped

    venv = tmp_path / "fresh"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    bin_dir = venv / ("Scripts" if sys.platform == "win32" else "bin")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV") and not k.startswith("CNKI_")}
    env.update(CNKI_DATA_DIR=str(tmp_path / "data"), PIP_DISABLE_PIP_VERSION_CHECK="1")
    installed = subprocess.run(
        [str(bin_dir / "python"), "-m", "pip", "install", "-q", "--no-deps", f"git+{clone.as_uri()}"],
        capture_output=True, text=True, timeout=900, env=env, cwd=tmp_path,
    )
    assert installed.returncode == 0, installed.stderr[-2000:]

    where = subprocess.run([str(bin_dir / "python"), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                           capture_output=True, text=True, check=True, timeout=60, env=env).stdout.strip()
    package = Path(where) / "cnki_mcp"
    on_disk = {str(path.relative_to(package).as_posix()) for path in package.rglob("*")
               if path.is_file() and "__pycache__" not in path.parts}
    assert shipped - on_disk == set()
    # The dependencies, after the venv's own site-packages: only they come from the running interpreter.
    (Path(where) / "zz_borrowed_dependencies.pth").write_text("\n".join(site.getsitepackages()) + "\n", "utf-8")

    found = subprocess.run([str(bin_dir / "python"), "-c", "import cnki_mcp; print(cnki_mcp.__file__)"],
                           capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path)
    assert Path(found.stdout.strip()).parent == package, found.stderr
    assert_installed_cnki_mcp_runs(bin_dir, env, tmp_path)
