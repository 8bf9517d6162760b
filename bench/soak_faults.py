"""Soak: many SIGKILLs at random points of a search and of the store's commits, and a long run of generated input.

Run:  python bench/soak_faults.py [--kills 20] [--flush-kills 60] [--inputs 20000] [--seed 1]

The CI suite (tests/test_hardening_*.py) does a few of each; this repeats them with more seeds:

* ``--kills``: the real serve loop with the fake CNKI site (``python -m tests.test_hardening_faults``) is
  SIGKILLed, alternately after freezing the site at a random request and at a random moment (every change
  is committed when it is made, so nothing done before the kill should be redone); a new server continues the search. Counts
  requests repeated although their result was on disk (must be 0), work redone from the unflushed window,
  requests that had finished long before the last flush but were not in it (a retrieval round cut short;
  must be 0 once that bug is fixed), and records lost (must be 0).
* ``--flush-kills``: a process that only grows the store and waits for its commits is killed at random moments;
  every research.db left behind must pass SQLite's integrity check and keep every record it held before.
* ``--inputs``: schema-driven generated argument objects through one server (hypothesis), as in
  tests/test_hardening_input.py, with a larger budget.

Prints the totals; exits 1 if any invariant broke.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests import test_hardening_faults as faults  # noqa: E402
from tests import test_hardening_input as inputs  # noqa: E402
from tests.harness import ThreadedClient, offline_params  # noqa: E402


async def kills(count: int, seed: int) -> Counter[str]:
    totals: Counter[str] = Counter()
    for n in range(count):
        work = Path(tempfile.mkdtemp(prefix="cnki-soak-kill-"))
        try:
            figures = await faults._kill_then_continue(work, random.Random(seed * 10_000 + n), freeze=n % 2 == 0)
            totals.update(figures)
            totals["trials"] += 1
        except AssertionError as failure:
            totals["failures"] += 1
            print(f"kill trial {n} failed: {failure}", file=sys.stderr)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return totals


async def flush_kills(count: int, seed: int) -> Counter[str]:
    work = Path(tempfile.mkdtemp(prefix="cnki-soak-flush-"))
    try:
        return Counter(await faults.kill_flushes(work / "data", count, random.Random(seed)))
    finally:
        shutil.rmtree(work, ignore_errors=True)


def generated_inputs(count: int) -> Counter[str]:
    from hypothesis import given, settings
    from hypothesis import strategies as st

    work = Path(tempfile.mkdtemp(prefix="cnki-soak-input-"))
    server = ThreadedClient(offline_params(work / "data"), work / "stderr.txt").start()
    inputs.COUNTS.clear()
    try:
        cases = st.one_of(
            st.sampled_from(inputs.TOOL_NAMES).flatmap(lambda t: st.tuples(st.just(t), inputs.schema_object(inputs.SCHEMAS[t]))),
            inputs.structurally_invalid().map(lambda case: case[:2]),
        )

        @settings(inputs.SETTINGS, max_examples=count)
        @given(cases)
        def run(case: tuple[str, dict]) -> None:
            inputs.answer(server.call(*case))

        run()
        assert server.alive()
        problems = inputs.stderr_problems(work / "stderr.txt")
        assert not problems, problems[:5]
    finally:
        server.close()
        shutil.rmtree(work, ignore_errors=True)
    return Counter(inputs.COUNTS) + Counter(calls=server.calls)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--flush-kills", type=int, default=64)
    parser.add_argument("--inputs", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    started = time.monotonic()
    broken = False
    if args.kills:
        totals = asyncio.run(kills(args.kills, args.seed))
        print(f"search kills: {dict(totals)}")
        broken |= bool(totals["failures"] or totals["repeated_after_continue"] or totals["lost_records"])
        broken |= bool(totals["redone_settled_but_unsaved"])  # the retrieval-round bug (see the xfail test)
    if args.flush_kills:
        totals = asyncio.run(flush_kills(args.flush_kills, args.seed))
        print(f"flush kills: {dict(totals)}")
        broken |= bool(totals["lost_records"])
    if args.inputs:
        totals = generated_inputs(args.inputs)
        print(f"generated inputs: {dict(totals)}")
    print(f"done in {time.monotonic() - started:.0f} s; invariants {'BROKEN' if broken else 'held'}")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
