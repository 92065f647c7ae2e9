"""Does the warm mutant server pay for itself? The same mutants run (a) as
`mutate` runs them, each worker a warm server that forks per mutant, and
(b) each mutant in a fresh pytest (`Runner.run`), two workers side by side
either way; the arms interleaved (a b a b ...) so that the load other work
puts on the machine falls on both alike.

    python3 -m evidence.mutate_bench [--mutants N] [--repeats R]

Needs the fork and its venv (`setup`). The mutants are N of the series'
non-equivalent mutants, spread over its list; their outcomes are measured
afresh in worktrees build/trees/mutate-bench-*, never read from or written
to the results store, and must agree between the arms. Prints each run's
seconds and the machine's load, and the ratio fresh/warm of each pair with
its min/median/max. The clone's lock is held only while the worktrees are
made. A measurement, not a test: nothing asserts a time.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from evidence.mutants import Mutant, series_mutants
from evidence.mutate import load_equivalents
from evidence.mutate_runs import baseline, run_all
from evidence.worktrees import worktree
from forktool import process
from forktool.layout import LAYOUT
from forktool.prepare import require_setup, vllm_runner
from forktool.process import git
from forktool.pytest_runner import Runner
from forktool.selection import Selection

ARMS = ("warm", "fresh")


def spread(found: list[Mutant], n: int) -> list[Mutant]:
    """`n` of `found`, evenly spaced over it."""
    if n >= len(found):
        return found
    return [found[i * len(found) // n] for i in range(n)]


def prepare(n: int) -> tuple[list[Mutant], list[Path], Runner, Selection]:
    """The mutants, two worktrees at the fork's HEAD, the runner and selection;
    the unmutated selection must pass."""
    require_setup("mutate_bench")
    selection = Selection.load(LAYOUT.selection)
    with process.hold(LAYOUT.clone_lock, "mutate_bench"):
        runner = vllm_runner(LAYOUT.venv)
        known = load_equivalents(LAYOUT.equivalents)
        every = series_mutants(LAYOUT.fork)
        todo = [m for m in every if (m.path, m.text, m.mutation) not in known]
        baseline(LAYOUT.fork, runner, selection)
        head = git(LAYOUT.fork, "rev-parse", "HEAD").stdout.strip()
        trees = [
            worktree(LAYOUT.fork, LAYOUT.trees / f"mutate-bench-{i}", head)
            for i in (1, 2)
        ]
    return spread(todo, n), trees, runner, selection


def uptime() -> str:
    return process.run(["uptime"]).stdout.strip()


def measure(
    todo: list[Mutant],
    trees: list[Path],
    runner: Runner,
    selection: Selection,
    repeats: int,
) -> dict[str, list[float]]:
    """Each arm's seconds, `repeats` times, interleaved; the outcomes must agree."""
    seconds: dict[str, list[float]] = {arm: [] for arm in ARMS}
    outcomes: dict[str, dict[str, str]] = {}
    with tempfile.TemporaryDirectory() as logs:
        quiet = replace(runner, logs=Path(logs))  # the real logs untouched
        for r in range(1, repeats + 1):
            for arm in ARMS:
                start = time.monotonic()
                with contextlib.redirect_stdout(io.StringIO()):
                    found = run_all(todo, trees, quiet, selection, arm == "warm")
                took = time.monotonic() - start
                seconds[arm].append(took)
                load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
                print(f"repeat {r} {arm:5}: {took:6.1f} s  (load {load})", flush=True)
                kinds = {id: o.kind for id, o in found.items()}
                if outcomes.setdefault(arm, kinds) != kinds or kinds != outcomes.get(
                    ARMS[0], kinds
                ):
                    print(f"  outcomes differ: {kinds} vs {outcomes}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n\n")[0])
    parser.add_argument("--mutants", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    todo, trees, runner, selection = prepare(args.mutants)
    at_import = sum(not m.function for m in todo)
    print(
        f"{len(todo)} mutants ({at_import} run at import, fresh in both arms), "
        f"{len(trees)} workers, {os.cpu_count()} CPUs, {args.repeats} repeats"
    )
    print(f"before: {uptime()}", flush=True)
    seconds = measure(todo, trees, runner, selection, args.repeats)
    print(f"after:  {uptime()}")
    ratios = [b / a for a, b in zip(seconds["warm"], seconds["fresh"], strict=True)]
    for arm in ARMS:
        s = seconds[arm]
        middle = statistics.median(s)
        print(f"{arm:5} s: min {min(s):.1f}  median {middle:.1f}  max {max(s):.1f}")
    print(
        f"ratio fresh/warm: median {statistics.median(ratios):.2f} "
        f"(min {min(ratios):.2f}, max {max(ratios):.2f}; {len(ratios)} pairs)"
    )


if __name__ == "__main__":
    main()
