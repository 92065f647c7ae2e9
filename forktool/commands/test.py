"""Everything setup does (the venv's self-check first), then the tool's tests,
ruff and mypy on the tool's code, mutation testing of the series' added lines
(after the regression matrix), the GPU-only tests (collected, skipped here),
vLLM's CI checkers and pre-commit, the CI impact report, the out-of-tree
override checks and the planner fuzz, and in a background process all the
while, vLLM's CPU selection on the fork (the pristine base runs only what does
not pass there); prints a summary with each phase's time. Refuses what sync
refuses, and, naming them, when programs it runs are missing (README, Two
commands). Writes what setup writes, and one result per check in build/results/
(what `pr` renders), build/trees/mutate-* and build/trees/selection-base."""

import argparse
import time

from forktool import prerequisites
from forktool.checks import TEST, all_checks, run_checks
from forktool.commands.command import Command
from forktool.pins import Pins
from forktool.prepare import prepare


def run(pins: Pins, args: argparse.Namespace) -> int:
    checks = [check for check in all_checks() if check.gates_test]
    needs = [program for check in checks for program in check.needs]
    prerequisites.require("test", prerequisites.for_test(pins, needs))
    start = time.monotonic()
    return run_checks(prepare(pins), checks, TEST, time.monotonic() - start)


COMMAND = Command(__doc__, run)
