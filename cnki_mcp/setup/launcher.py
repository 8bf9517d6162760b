"""The command line a client runs to start this server over stdio.

The frozen program names itself; an installed one names the console script beside its interpreter. A
program that `uvx` started is the exception: it runs from a throwaway environment in uv's cache (pruned by
`uv cache clean`), so a client given that path would stop working one day. There the client is given uv
itself, `uv tool run --from <where this came from> cnki-mcp serve`, with the source read from the install's
own record (PEP 610 ``direct_url.json``: the git URL and revision, a local path, or the registry's name).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

DISTRIBUTION = "cnki-browser-mcp"
UV_SECONDS = 10.0  # `uv cache dir` answers at once; a hung uv must not hold setup


def server_command() -> list[str]:
    """The argv a client should run to start this server over stdio."""
    if getattr(sys, "frozen", False):
        return [os.path.abspath(sys.executable), "serve"]
    through_uv = _uv_tool_run()
    if through_uv:
        return through_uv
    # Not resolved: a virtualenv's python is a symlink that only works under its own path.
    scripts = Path(os.path.abspath(sys.executable)).parent
    for name in ("cnki-mcp.exe", "cnki-mcp") if sys.platform == "win32" else ("cnki-mcp",):
        script = scripts / name
        if script.is_file():
            return [str(script), "serve"]
    return [os.path.abspath(sys.executable), "-m", "cnki_mcp", "serve"]


def _uv_tool_run() -> list[str] | None:
    """``uv tool run --from <source> cnki-mcp serve`` when this process runs from an environment in uv's
    cache (uv names itself in ``UV`` for every program it starts); None otherwise."""
    uv = os.environ.get("UV", "")
    if not uv or not os.path.isfile(uv):
        return None
    cache = uv_cache_dir(uv)
    if cache is None or not Path(sys.prefix).resolve().is_relative_to(cache.resolve()):
        return None
    return [uv, "tool", "run", "--from", install_source(_direct_url()), "cnki-mcp", "serve"]


def uv_cache_dir(uv: str) -> Path | None:
    """Where uv keeps its cache, as ``uv cache dir`` says; None when uv does not answer."""
    try:
        done = subprocess.run([uv, "cache", "dir"], capture_output=True, text=True, timeout=UV_SECONDS, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    path = done.stdout.strip()
    return Path(path) if done.returncode == 0 and path else None


def _direct_url() -> str | None:
    """The install's PEP 610 record (JSON text), or None for an install from the registry."""
    try:
        return metadata.distribution(DISTRIBUTION).read_text("direct_url.json")
    except metadata.PackageNotFoundError:
        return None


def install_source(direct_url: str | None) -> str:
    """What ``uv tool run --from`` needs to install the same thing again: ``git+URL@revision`` for a git
    install, the path or URL of a local or archive install, else the distribution's name on the registry."""
    try:
        record = json.loads(direct_url) if direct_url else {}
    except ValueError:
        record = {}
    url = record.get("url") if isinstance(record, dict) else None
    if not isinstance(url, str) or not url:
        return DISTRIBUTION
    vcs = record.get("vcs_info")
    if isinstance(vcs, dict) and vcs.get("vcs") == "git":
        revision = vcs.get("requested_revision")
        return f"git+{url}" + (f"@{revision}" if isinstance(revision, str) and revision else "")
    return url
