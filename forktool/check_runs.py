"""Checks run one after another for `setup` and `test`: each result written
to build/results/, a summary with each one's time."""

from __future__ import annotations

import time
from collections.abc import Callable

from forktool import results
from forktool.checks import Check
from forktool.layout import LAYOUT
from forktool.pins import Pins
from forktool.results import Measured


def run_checks(
    pins: Pins,
    checks: list[tuple[Check, Callable[[], Measured]]],
    command: str,
    prepared: float,
) -> int:
    """Run each check, write its result to build/results/, print a summary.
    A failed check that the others require stops the run."""
    tree = results.fork_tree(LAYOUT.fork)
    written = []
    for check, measure in checks:
        print(f"\n=== {check.title} ===", flush=True)
        start = time.monotonic()
        found = measure()
        result = results.CheckResult(
            check.name,
            found.ok,
            tree,
            pins.version,
            command,
            seconds=round(time.monotonic() - start, 1),
            counts=found.counts,
            excerpts=found.excerpts,
            data=found.data,
        )
        results.write(LAYOUT.results, result)
        written.append((check.title, result))
        if check.required and not found.ok:
            print(f"\n{check.title} failed: the other checks did not run.")
            break
    print(f"\n=== summary (results in {LAYOUT.results}) ===")
    print(f"{'':4}  {prepared:6.0f} s  prepare (sync, install, vllm --version)")
    for title, result in written:
        print(f"{'PASS' if result.ok else 'FAIL'}  {result.seconds:6.0f} s  {title}")
    return 0 if all(result.ok for _, result in written) else 1
