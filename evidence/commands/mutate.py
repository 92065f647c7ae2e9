"""Make mutants of each line the series adds under vllm/ (and/or, comparisons, a dropped
not, any/all, constants, deleted assignments, raises and asserts, replaced return
values), run the regression selection of upstream-tests.toml (then fork_tests/)
against each in two worktrees side by side with -x, and print each as killed (series)
or killed (fork tests only) (by which test), survived or equivalent
(mutants-equivalent.toml, with a reason). Exits 1 on a survivor, and on a mutant only
fork_tests/ kills unless its line is listed under [[mutate.gpu_only]] in
upstream-tests.toml (no CPU test reaches it, with why). Refuses a fork with
uncommitted changes or a stopped git operation, a missing venv or one made from
another venv.lock, and a regression selection that does not pass on the unmutated
fork. Outcomes are reused for the same tree, regression tests, fork tests,
exclusions, venv and content of fork_tests/, fixtures/ and pyproject.toml. Writes:
build/results/mutants.json, build/trees/mutate-*, build/logs/mutant-*.log."""

from __future__ import annotations

import argparse

from evidence.checks import MUTANTS
from evidence.mutation import mutation_testing
from evidence.vllm_tests import vllm_runner
from evidence.worktrees import measured_run
from forktool import hfcache
from forktool.commands.command import Command
from forktool.layout import LAYOUT
from forktool.pins import Pins
from forktool.selection import Selection


def run(pins: Pins, args: argparse.Namespace) -> int:
    def measure():
        hfcache.lay_out(LAYOUT.fixtures, LAYOUT.hf_home)
        selection = Selection.load(LAYOUT.selection)
        runner = vllm_runner(LAYOUT.venv, selection)
        return mutation_testing(
            LAYOUT.fork, LAYOUT.trees, runner, selection, LAYOUT.results
        )

    return 0 if measured_run("mutate", MUTANTS, pins, measure) else 1


COMMAND = Command(__doc__, run)
