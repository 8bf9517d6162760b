"""The generated sections of docs/architecture.md and docs/validation.md (tools, modules, test counts) match
the code: a stale one fails here with the command that rewrites it."""

from __future__ import annotations

import subprocess
import sys

from scripts.gen_docs import COMMAND, DOCS, MARKED, ROOT, SECTIONS, rewritten


def test_every_generated_section_is_fresh() -> None:
    # A process of its own: the sections count the tests by pytest's collection, which cannot run inside this one.
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_docs.py"), "--check"], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert done.returncode == 0, f"{done.stderr}\nRun: {COMMAND}"


def test_every_section_is_named_in_a_doc_and_every_marker_is_known() -> None:
    named = [match["name"] for doc in DOCS for match in MARKED.finditer((ROOT / doc).read_text("utf-8"))]
    assert set(named) == set(SECTIONS)


def test_a_section_is_rewritten_between_its_markers_and_nothing_else_changes() -> None:
    text = "hand\n<!-- generated:tool-count -->0<!-- /generated:tool-count --> tools\nhand\n"
    fresh, changed = rewritten(text)
    assert changed == ["tool-count"]
    assert fresh.startswith("hand\n<!-- generated:tool-count -->") and fresh.endswith("<!-- /generated:tool-count --> tools\nhand\n")
    assert rewritten(fresh) == (fresh, [])
