"""The programs `setup`, `test` and `pr` need, checked before they start:
one error line names every one that is missing, and only what is missing."""

from __future__ import annotations

import importlib.util
import shutil

import pytest

from forktool import prerequisites, uv
from forktool.check_runs import all_checks
from forktool.errors import ForkToolError
from forktool.pins import Pins


def gating_needs() -> list[prerequisites.Program]:
    """What the registry's checks that gate `test` need, as `test` asks."""
    return [p for c in all_checks() if c.gates_test for p in c.needs]


def hide(monkeypatch, *names: str) -> None:
    """This machine without the programs and Python modules `names`."""
    which, find_spec = shutil.which, importlib.util.find_spec
    monkeypatch.setattr(
        shutil, "which", lambda name, *a, **k: None if name in names else which(name)
    )
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name in names else find_spec(name, *a),
    )


def test_test_names_every_missing_program_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("VLLM_FORK_CACHE", str(tmp_path / "cache"))  # empty
    hide(monkeypatch, "npm", "node", "pip", "ensurepip")
    pins = Pins.load()
    with pytest.raises(ForkToolError) as refused:
        prerequisites.require(
            "test", prerequisites.for_test(pins, gating_needs(), tmp_path / "venv")
        )
    said = str(refused.value)
    print(said)
    assert "\n" not in said and said.startswith("`test` needs what this machine")
    for name in ("Node.js (node)", "npm, for", "pip for"):
        assert name in said
    assert "git" not in said.replace("markdownlint", "")  # git is there
    # With uv in the cache, pip is not needed (uv makes pre-commit's venv).
    uv_path = uv.path(pins.uv, tmp_path / "cache" / "tools")
    uv_path.parent.mkdir(parents=True)
    uv_path.write_text("")
    with pytest.raises(ForkToolError) as refused:
        prerequisites.require(
            "test", prerequisites.for_test(pins, gating_needs(), tmp_path / "venv")
        )
    assert "npm" in str(refused.value) and "pip" not in str(refused.value)
    assert "ensurepip" not in str(refused.value)


def test_setup_needs_git_and_until_they_exist_pip_and_the_python(tmp_path, monkeypatch):
    monkeypatch.setenv("VLLM_FORK_CACHE", str(tmp_path / "cache"))  # empty
    pins, venv = Pins.load(), tmp_path / "venv"
    names = [p.name for p in prerequisites.for_setup(pins, venv)]
    assert names == [
        "git",
        prerequisites.PIP.name,
        f"Python {pins.python} (python{pins.python})",
    ]
    # uv in the cache and the venv made: only git is left.
    for path in (
        uv.path(pins.uv, tmp_path / "cache" / "tools"),
        venv / "bin" / "python",
    ):
        path.parent.mkdir(parents=True)
        path.write_text("")
    needs = prerequisites.for_setup(pins, venv)
    assert needs == [prerequisites.GIT]
    prerequisites.require("setup", needs)  # the tool's tests have git
    hide(monkeypatch, "git", "npm", "node")  # test and pr need node
    with pytest.raises(ForkToolError, match=r"^`setup` needs .*: git, for the fork"):
        prerequisites.require("setup", needs)
