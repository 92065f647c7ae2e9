"""The registry of checks: every check the tool measures, one entry each.

An entry says the check's name (also its results file), its title, the
command that refreshes its result, how it is measured, whether it gates
`test` (and `setup`), and whether the PR description reads it. `setup` and
`test` are loops over the registry; `pr` reads the results of the entries
it renders. The workflow's own checks are here; each plug-in package named
under `[tool.forktool] plugins` in pyproject.toml adds its own through the
`CHECKS` of its `plugin` module (and its commands through `COMMANDS`).
"""

from __future__ import annotations

import importlib
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from forktool.errors import ForkToolError
from forktool.layout import LAYOUT
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


def plugin_names(pyproject: Path) -> list[str]:
    """The plug-in packages pyproject.toml names under [tool.forktool]; none
    without the file (the workflow alone)."""
    if not pyproject.exists():
        return []
    try:
        with pyproject.open("rb") as f:
            config = tomllib.load(f)
    except tomllib.TOMLDecodeError as e:
        raise ForkToolError(f"{pyproject} is not TOML: {e}") from e
    return config.get("tool", {}).get("forktool", {}).get("plugins", [])


def load_plugins(names: list[str]) -> list[ModuleType]:
    """Each package's `plugin` module, imported by name: the workflow imports
    no plug-in package itself."""
    loaded = []
    for name in names:
        try:
            loaded.append(importlib.import_module(f"{name}.plugin"))
        except ImportError as e:
            raise ForkToolError(
                f"pyproject.toml names the plug-in {name!r}, which does not import: {e}"
            ) from e
    return loaded


@cache
def plugins() -> tuple[ModuleType, ...]:
    return tuple(load_plugins(plugin_names(LAYOUT.root / "pyproject.toml")))


def registry(
    own: tuple[Check, ...], added: tuple[ModuleType, ...]
) -> tuple[Check, ...]:
    """`own` then each plug-in's CHECKS, in the order `test` runs them."""
    found = [*own, *(c for module in added for c in module.CHECKS)]
    names = [check.name for check in found]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise ForkToolError(f"two checks have the name {', '.join(twice)}")
    return tuple(found)
