"""`mutate`: mutation testing of the lines the series adds under vllm/."""

from __future__ import annotations

import argparse
import time

from forktool import checks, mutate, results
from forktool.commands.command import Command
from forktool.errors import ForkToolError
from forktool.layout import LAYOUT
from forktool.pins import Pins
from forktool.prepare import vllm_runner
from forktool.results import Measured
from forktool.safety import ensure_safe
from forktool.selection import Selection
from forktool.venv import venv_id


def measure() -> Measured:
    """The check `mutants`, as `test` runs it after the regression matrix."""
    return mutate.mutation_testing(
        LAYOUT.fork,
        LAYOUT.trees,
        vllm_runner(LAYOUT.venv),
        Selection.load(LAYOUT.selection),
        LAYOUT.results,
    )


def run(pins: Pins, args: argparse.Namespace) -> int:
    fork = LAYOUT.fork
    if not (fork / ".git").exists():
        raise ForkToolError(f"no fork at {fork}; run `python3 -m forktool setup`")
    ensure_safe(fork, "mutate")  # the outcomes name the fork's HEAD tree
    if not venv_id(LAYOUT.venv):
        raise ForkToolError(
            f"no complete venv at {LAYOUT.venv}; run `python3 -m forktool install`"
        )
    start = time.monotonic()
    found = measure()
    result = results.CheckResult(
        checks.MUTANTS.name,
        found.ok,
        results.fork_tree(fork),
        pins.version,
        checks.MUTANTS.command,
        seconds=round(time.monotonic() - start, 1),
        counts=found.counts,
        excerpts=found.excerpts,
        data=found.data,
    )
    print(f"wrote {results.write(LAYOUT.results, result)}")
    return 0 if found.ok else 1


COMMAND = Command(
    "mutate",
    "mutation testing of the lines the series adds under vllm/",
    "Make mutants of each line the series adds under vllm/ (and/or, "
    "comparisons, a dropped not, any/all, constants, deleted assignments, "
    "raises and asserts, replaced return values), run the regression "
    "selection of upstream-tests.toml (then checks/) against each in two "
    "worktrees side by side with -x, and print each as killed (series) or "
    "killed (checks only) (by which test), survived or equivalent "
    "(mutants-equivalent.toml, with a reason). "
    "Exits 1 on a survivor, and on a mutant only checks/ kills unless its line "
    "is listed under [[mutate.gpu_only]] in upstream-tests.toml (no CPU test "
    "reaches it, with why). Refuses a fork with uncommitted changes or a "
    "stopped git operation, a missing venv, and a regression selection that "
    "does not pass on the unmutated fork. Outcomes are reused for the same "
    "tree, selection and venv. Writes: build/results/mutants.json, "
    "build/trees/mutate-*, build/logs/mutant-*.log.",
    run,
)
