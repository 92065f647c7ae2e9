"""`setup`: sync, install, show the fork, run the regression matrix."""

from __future__ import annotations

import argparse
import time

from forktool import checks, matrix, prerequisites
from forktool.check_runs import run_checks
from forktool.commands.command import Command
from forktool.layout import LAYOUT
from forktool.pins import Pins
from forktool.prepare import prepare, vllm_runner
from forktool.results import Measured
from forktool.selection import Selection


def run(pins: Pins, args: argparse.Namespace) -> int:
    prerequisites.require("setup", prerequisites.for_setup(pins))
    start = time.monotonic()
    venv, checked = prepare(pins)
    prepared = time.monotonic() - start

    def regression_matrix() -> Measured:
        selection = Selection.load(LAYOUT.selection)
        return matrix.regression_matrix(
            LAYOUT, vllm_runner(venv), selection, pins.author
        )

    run = [(checks.VENV_SELF_CHECK, lambda: checked)]
    run.append((checks.REGRESSION_MATRIX, regression_matrix))
    return run_checks(pins, run, checks.SETUP, prepared)


COMMAND = Command(
    "setup",
    "sync, install, show the fork, run the regression matrix",
    "sync, then install (with the venv's self-check), then show `vllm "
    "--version` from the fork and run the series' regression matrix. Refuses "
    "what sync and install refuse, and, naming them, when programs it runs are "
    "missing (README, Two commands). Writes what sync and install write, and "
    "build/trees, build/logs, build/hf-home, build/results.",
    run,
)
