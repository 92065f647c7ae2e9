"""The registry of checks: every check the tool measures, one entry each.

An entry says the check's name (also its results file), its title, the
command that refreshes its result, how it is measured, whether it gates
`test` (and `setup`), and whether the PR description reads it. `setup` and
`test` are loops over the registry; `pr` reads the results of the entries
it renders. The entries are the `CHECKS` of the modules in `REGISTERED`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from forktool.process import ForkToolError
from forktool.results import CheckResult, Measured

if TYPE_CHECKING:
    from forktool.pins import Pins
    from forktool.prerequisites import Program
    from forktool.pytest_runner import Runner
    from forktool.selection import Selection

SETUP = "python3 -m forktool setup"
TEST = "python3 -m forktool test"


@dataclass(frozen=True)
class Context:
    """What `setup` and `test` have made ready when the checks run."""

    pins: Pins
    venv: Path
    self_check: Measured
    """The venv's self-check, run while `prepare` started vLLM."""
    tests: Runner
    """The pytest runner for vLLM's tests in the fork's venv."""
    selection: Selection


@dataclass(frozen=True)
class Check:
    name: str
    """Also its results file: build/results/<name>.json."""
    title: str
    command: str
    """The command that refreshes its result."""
    measure: Callable[[Context], Measured] | None = None
    """How `setup` and `test` measure it; None for a check only its own
    command measures (`bench`)."""
    gates_test: bool = True
    """`test` runs it, and fails when it fails."""
    in_setup: bool = False
    """`setup` runs it too."""
    required: bool = False
    """It runs before the others, which do not run when it fails."""
    alongside: bool = False
    """It runs in a process of its own, beside the checks that run in turn;
    its output is shown when it ends. It must share no worktree with them."""
    in_pr: bool = False
    """The PR description reads its result; `pr` refuses without a current
    one if it gates `test`."""
    pr_row: Callable[[CheckResult | None], str] | None = None
    """Its row in the table of the PR's Validation section (None: not
    measured); a check with one is read by the PR description."""
    needs: tuple[Program, ...] = field(default=())
    """Programs outside the tool it runs, checked before `test` starts."""

    def __post_init__(self) -> None:
        if (self.gates_test or self.in_setup) and self.measure is None:
            raise ForkToolError(
                f"the check {self.name!r} gates `test` but says nothing of how "
                "to measure it: give it a measure, or gates_test=False"
            )
        if self.pr_row is not None and not self.in_pr:
            object.__setattr__(self, "in_pr", True)


REGISTERED = ("forktool.tool_checks", "evidence.checks")
"""The modules whose CHECKS are the registry, in the order `test` runs them:
the workflow's own checks, then the PR evidence's."""


def registry() -> tuple[Check, ...]:
    """Each registered module's CHECKS, in order; two of one name are refused."""
    found = [c for name in REGISTERED for c in importlib.import_module(name).CHECKS]
    names = [check.name for check in found]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise ForkToolError(f"two checks have the name {', '.join(twice)}")
    return tuple(found)
