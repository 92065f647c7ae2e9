"""The programs outside the tool that `setup`, `test` and `pr` run, checked
before they start: one error line names every one this machine lacks,
rather than a traceback or a failed step minutes in. The README lists them
under "Two commands"."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from forktool.errors import ForkToolError
from forktool.layout import LAYOUT
from forktool.pins import Pins, uv_cached
from forktool.precommit import precommit_venv
from forktool.venv import python


@dataclass(frozen=True)
class Program:
    name: str
    """What to install, as the README names it."""
    present: Callable[[], bool]
    used_for: str


def _on_path(name: str) -> Callable[[], bool]:
    return lambda: shutil.which(name) is not None


def _module(name: str) -> Callable[[], bool]:
    return lambda: importlib.util.find_spec(name) is not None


GIT = Program("git", _on_path("git"), "the fork and every command")
BASH = Program("bash", _on_path("bash"), "vLLM's pre-commit hooks, the tool's tests")
NODE = Program("Node.js (node)", _on_path("node"), "the markdownlint-cli2 hook")
NPM = Program("npm", _on_path("npm"), "installing markdownlint-cli2 for pre-commit")
PIP = Program(
    f"pip for {sys.executable}", _module("pip"), "installing uv into the cache"
)
VENV = Program(
    f"the venv module with ensurepip for {sys.executable} (Debian: python3-venv)",
    _module("ensurepip"),
    "pre-commit's venv in the cache",
)


def _python(version: str) -> Program:
    """The Python the venv is made with: this one, or one uv finds on PATH."""
    running = ".".join(map(str, sys.version_info[:2]))

    def found() -> bool:
        return running == version or shutil.which(f"python{version}") is not None

    return Program(f"Python {version} (python{version})", found, "the venv")


def for_setup(pins: Pins, venv: Path = LAYOUT.venv) -> list[Program]:
    """git; pip while the cache lacks uv; the pinned Python while there is no venv."""
    needs = [GIT]
    if not uv_cached(pins):
        needs.append(PIP)
    if not Path(python(venv)).exists():
        needs.append(_python(pins.python))
    return needs


def _precommit() -> list[Program]:
    """What pre-commit's markdownlint-cli2 hook needs; the venv module while
    the cache lacks pre-commit's venv."""
    needs = [NODE, NPM]
    if not (precommit_venv() / "bin" / "pre-commit").exists():
        needs.append(VENV)
    return needs


def for_pr() -> list[Program]:
    """git, and pre-commit for markdownlint-cli2 on the description."""
    return [GIT, *_precommit()]


def for_test(pins: Pins, venv: Path = LAYOUT.venv) -> list[Program]:
    """What setup needs, and what vLLM's pre-commit and the tool's tests run."""
    return [*for_setup(pins, venv), BASH, *_precommit()]


def require(command: str, needs: list[Program]) -> None:
    """Refuse, naming every program in `needs` this machine lacks."""
    missing = [program for program in needs if not program.present()]
    if missing:
        names = "; ".join(f"{p.name}, for {p.used_for}" for p in missing)
        raise ForkToolError(
            f"`{command}` needs what this machine lacks: {names}. Install "
            "them (README, Two commands) and run it again."
        )
