"""The workflow's own checks: the venv's self-check, the tool's tests, ruff
and mypy on the tool's code, and `export --check`."""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from forktool import process
from forktool.checks import SETUP, TEST, Check, Context, Measured
from forktool.export import export
from forktool.layout import LAYOUT
from forktool.process import ForkToolError
from forktool.pytest_runner import Session, failures, run_pytest, test_env
from forktool.venv import python

# The tool's own code, which ruff and mypy check (pyproject.toml configures both).
CODE = ("forktool", "evidence", "fork_tests", "fuzz", "tests", "bench")
TOOL = "python3 -m forktool"


def repo_pytest(
    venv: Path, *args: str, label: str = "tool-tests", **added: str
) -> Session:
    """This repository's own tests, in the fork's venv (pytest, vLLM for fuzz),
    through the runner (output in build/logs/`label`.log); `added` to the
    environment."""
    cmd = [str(python(venv)), "-m", "pytest", "-q", "-p", "no:cacheprovider", *args]
    env = {**test_env(LAYOUT.hf_home), **added}
    return run_pytest(cmd, LAYOUT.root, env, LAYOUT.logs / f"{label}.log", label)


def measured(session: Session, *args: str) -> Measured:
    """What a run of this repository's tests measured: the counts, and as
    the excerpt, the command with each failure's message and the counts."""
    result = session.result()
    said = failures(result, most=20)
    print(said)
    shown = shlex.join(["python", "-m", "pytest", "-q", *args])
    ok = session.status == 0 and bool(result.outcomes)
    return Measured(ok, dict(result.counts()), {"output": f"$ {shown}\n{said}"})


def code_check(venv: Path, *commands: list[str]) -> Measured:
    """Each command, a program of the venv run from this repository; passes
    when every one exits 0. The excerpt is each command and its output's tail."""
    ok, shown = True, []
    for program, *args in commands:
        binary = venv / "bin" / program
        if binary.exists():
            code, output = process.tee([str(binary), *args], LAYOUT.root)
        else:
            code, output = 1, f"{binary} is missing: the venv lacks {program}"
            print(output)
        ok = ok and code == 0
        tail = "\n".join(output.strip().splitlines()[-15:])
        where = os.path.relpath(binary, LAYOUT.root)
        shown.append(f"$ {shlex.join([where, *args])}\n{tail}")
    return Measured(ok, excerpts={"output": "\n".join(shown)})


def export_check(ctx: Context) -> Measured:
    """Run `export --check`; print and record what it says."""
    try:
        said, ok = export(LAYOUT.fork, LAYOUT.patches, check=True), True
    except ForkToolError as e:
        said, ok = str(e), False
    print(said)
    return Measured(ok, excerpts={"output": f"$ {TOOL} export --check\n{said}"})


VENV_SELF_CHECK = Check(
    "venv-self-check",
    "venv self-check",
    SETUP,
    lambda ctx: ctx.self_check,
    in_setup=True,
    required=True,
)
TOOL_TESTS = Check(
    "tool-tests",
    "tool tests",
    TEST,
    lambda ctx: measured(repo_pytest(ctx.venv, "tests"), "tests"),
)
RUFF = Check(
    "ruff",
    "ruff on the tool's code",
    TEST,
    lambda ctx: code_check(
        ctx.venv, ["ruff", "check", *CODE], ["ruff", "format", "--check", *CODE]
    ),
)
# Its files and settings are pyproject.toml's [tool.mypy].
MYPY = Check(
    "mypy", "mypy on the tool's code", TEST, lambda ctx: code_check(ctx.venv, ["mypy"])
)
EXPORT_CHECK = Check(
    "export-check", "patches/ as export writes them", TEST, export_check
)

CHECKS = (VENV_SELF_CHECK, TOOL_TESTS, RUFF, MYPY, EXPORT_CHECK)
