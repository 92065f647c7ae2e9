"""The programs outside the tool that `setup`, `test` and `pr` run, checked
before they start: one error line names every one this machine lacks,
rather than a traceback or a failed step minutes in. The README lists them
under "Two commands"."""

import importlib.util
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from forktool.layout import LAYOUT
from forktool.pins import Pins, uv_path
from forktool.process import ForkToolError


class Program(NamedTuple):
    name: str  # what to install, as the README names it
    present: Callable[[], bool]
    used_for: str


def on_path(name: str) -> Callable[[], bool]:
    return lambda: shutil.which(name) is not None


GIT = Program("git", on_path("git"), "the fork and every command")
BASH = Program("bash", on_path("bash"), "vLLM's pre-commit hooks, the tool's tests")
PIP = Program(
    f"pip for {sys.executable}",
    lambda: importlib.util.find_spec("pip") is not None,
    "installing uv into the cache",
)


def for_setup(pins: Pins, venv: Path = LAYOUT.venv) -> list[Program]:
    """git; pip while the cache lacks uv; the pinned Python while there is no
    venv (this one, or one uv finds on PATH)."""
    running, version = ".".join(map(str, sys.version_info[:2])), pins.python
    found = on_path(f"python{version}")
    python = Program(
        f"Python {version} (python{version})",
        lambda: running == version or found(),
        "the venv",
    )
    needs = [GIT] if uv_path(pins).exists() else [GIT, PIP]
    return needs if (venv / "bin" / "python").exists() else [*needs, python]


def for_test(
    pins: Pins,
    checks_need: list[Program],
    venv: Path = LAYOUT.venv,
) -> list[Program]:
    """What setup needs, what the tool's tests run, and what the checks need."""
    needs = [*for_setup(pins, venv), BASH]
    return needs + [p for p in checks_need if p not in needs]


def require(command: str, needs: list[Program]) -> None:
    """Refuse, naming every program in `needs` this machine lacks."""
    if missing := [program for program in needs if not program.present()]:
        names = "; ".join(f"{p.name}, for {p.used_for}" for p in missing)
        raise ForkToolError(
            f"`{command}` needs what this machine lacks: {names}. Install them "
            "(README, Two commands) and run it again."
        )
