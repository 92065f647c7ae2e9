"""The registry's checks run for `setup` and `test`: the required ones
first, then the others in turn, those marked `alongside` beside them (in a
process of their own each); each result recorded in build/results/, then a
summary with each one's time."""

from __future__ import annotations

import time
from pathlib import Path

from forktool import checks, results
from forktool.beside import Beside
from forktool.checks import Check, Context
from forktool.layout import LAYOUT


def all_checks() -> tuple[Check, ...]:
    """The workflow's checks, then the PR evidence's."""
    return checks.registry()


def run_checks(ctx: Context, checks: list[Check], command: str, prepared: float) -> int:
    """Run the required checks, then the others in turn, those `alongside`
    in processes of their own beside them; record each result, print a
    summary. A failed required check stops the run."""
    tree = results.fork_tree(LAYOUT.fork)
    written: list[tuple[str, results.CheckResult]] = []
    for check in [c for c in checks if c.required]:
        written.append((check.title, _run(check, ctx, tree, command)))
        if not written[-1][1].ok:
            print(f"\n{check.title} failed: the other checks did not run.")
            return _summary(written, prepared)
    later = [c for c in checks if not c.required]
    beside = [
        Beside.start(c, ctx, LAYOUT.logs / f"{c.name}.out")
        for c in later
        if c.alongside
    ]
    try:
        for check in [c for c in later if not c.alongside]:
            written.append((check.title, _run(check, ctx, tree, command)))
        for started in beside:
            found, seconds = started.finish()
            check = started.check
            result = record(check, found, seconds, ctx.pins.version, tree, command)
            written.append((check.title, result))
    finally:  # a check raised, or Ctrl-C: nothing runs on after the tool
        for started in beside:
            started.stop()
    return _summary(written, prepared)


def _run(check: Check, ctx: Context, tree: str, command: str) -> results.CheckResult:
    assert check.measure is not None  # Check refuses a gating one without
    print(f"\n=== {check.title} ===", flush=True)
    start = time.monotonic()
    found = check.measure(ctx)
    seconds = time.monotonic() - start
    return record(check, found, seconds, ctx.pins.version, tree, command)


def _summary(written: list[tuple[str, results.CheckResult]], prepared: float) -> int:
    print(f"\n=== summary (results in {LAYOUT.results}) ===")
    print(f"{'':4}  {prepared:6.0f} s  prepare (sync, install, self-check)")
    for title, result in written:
        print(f"{'PASS' if result.ok else 'FAIL'}  {result.seconds:6.0f} s  {title}")
    return 0 if all(result.ok for _, result in written) else 1


def record(
    check: Check,
    found: results.Measured,
    seconds: float,
    base_version: str,
    tree: str,
    command: str | None = None,
    store: Path | None = None,
) -> results.CheckResult:
    """Write what a run of `check` found to the store, as run by `command`
    (the check's own by default), in `store` (the clone's by default); the
    one place results are recorded."""
    result = results.CheckResult(
        check.name,
        found.ok,
        tree,
        base_version,
        command or check.command,
        seconds=round(seconds, 1),
        counts=found.counts,
        excerpts=found.excerpts,
        data=found.data,
    )
    results.write(store or LAYOUT.results, result)
    return result


def problem(result: results.CheckResult | None, check: Check, tree: str) -> str:
    """Why `result` cannot stand for the fork at `tree`, or "" when it can."""
    if result is None:
        return f"{check.name}: no result; run `{check.command}`"
    if result.tree != tree:
        return (
            f"{check.name}: stale, measured on tree {result.tree[:12]} on "
            f"{result.date}, "
            f"the fork is now at tree {tree[:12]}; run `{result.command}`"
        )
    return ""
