"""`test`: everything `setup` does, plus every check CI runs."""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import tempfile
import time
from pathlib import Path

from forktool import (
    checks,
    ci_impact,
    export_check,
    matrix,
    mutate,
    precommit,
    prerequisites,
)
from forktool.check_runs import run_checks
from forktool.commands.command import Command
from forktool.errors import ForkToolError
from forktool.layout import LAYOUT
from forktool.pins import Pins
from forktool.prepare import prepare, vllm_runner
from forktool.results import Measured
from forktool.selection import Selection
from forktool.upstream import Runner, parse_junit, test_env
from forktool.venv import python


def run(pins: Pins, args: argparse.Namespace) -> int:
    prerequisites.require("test", prerequisites.for_test(pins))
    start = time.monotonic()
    venv, checked = prepare(pins)
    prepared = time.monotonic() - start
    tests = vllm_runner(venv)
    selection = Selection.load(LAYOUT.selection)
    measure = {
        checks.VENV_SELF_CHECK: lambda: checked,
        checks.TOOL_TESTS: lambda: _pytest(venv, "tests"),
        checks.RUFF: lambda: _code_check(
            venv, ["ruff", "check", *CODE], ["ruff", "format", "--check", *CODE]
        ),
        # Its files and settings are pyproject.toml's [tool.mypy].
        checks.MYPY: lambda: _code_check(venv, ["mypy"]),
        checks.EXPORT_CHECK: export_check.measure,
        checks.REGRESSION_MATRIX: lambda: matrix.regression_matrix(
            LAYOUT, tests, selection, pins.author
        ),
        # Its baseline, the unmutated fork, is the matrix's run at the head,
        # from the cache.
        checks.MUTANTS: lambda: _mutants(tests, selection),
        checks.GPU_ONLY: lambda: matrix.gpu_only_skipped(LAYOUT.fork, tests, selection),
        checks.CI_CHECKERS: lambda: ci_impact.run_checkers(LAYOUT.fork, python(venv)),
        checks.CI_IMPACT: lambda: _ci_impact(venv),
        checks.PRE_COMMIT: lambda: precommit.run_precommit(
            LAYOUT.fork, LAYOUT.trees / checks.PRE_COMMIT.name
        ),
        checks.OVERRIDES: lambda: matrix.override_patterns(LAYOUT, tests),
        checks.PLANNER_FUZZ: lambda: _pytest(venv, "fuzz", "-s"),
        checks.FUZZ_CATCHES_BASE: lambda: _fuzz_catches_base(venv),
        checks.UPSTREAM_SELECTION: lambda: matrix.suite_vs_base(
            LAYOUT, tests, selection
        ),
    }
    gating = [(check, measure[check]) for check in checks.REGISTRY if check.gates_test]
    return run_checks(pins, gating, checks.TEST, prepared)


def _tee(cmd: list[str], env: dict[str, str]) -> tuple[int, str]:
    """Run `cmd` in this repository, printing its output as it comes; return
    its exit status and output."""
    proc = subprocess.Popen(
        cmd, cwd=LAYOUT.root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    assert proc.stdout is not None
    lines = []
    for raw in proc.stdout:
        line = raw.decode(errors="replace")
        print(line, end="", flush=True)
        lines.append(line)
    return proc.wait(), "".join(lines)


def _pytest(venv: Path, *args: str) -> Measured:
    """This repository's own tests, in the fork's venv (pytest, vLLM for fuzz)."""
    with tempfile.TemporaryDirectory() as tmp:
        junit = Path(tmp, "junit.xml")
        cmd = [python(venv), "-m", "pytest", "-q", "-p", "no:cacheprovider", *args]
        code, output = _tee([*cmd, f"--junitxml={junit}"], test_env(LAYOUT.hf_home))
        counts = parse_junit(LAYOUT.root, junit).counts() if junit.exists() else {}
    shown = shlex.join(["python", *cmd[1:]])
    tail = "\n".join(output.strip().splitlines()[-15:])
    return Measured(code == 0, dict(counts), {"output": f"$ {shown}\n{tail}"})


# The tool's own code, which ruff and mypy check (pyproject.toml configures both).
CODE = ("forktool", "checks", "fuzz", "tests")


def _code_check(venv: Path, *commands: list[str]) -> Measured:
    """Each command, a program of the venv run from this repository; passes
    when every one exits 0. The excerpt is each command and its output's tail."""
    codes, shown = [], []
    for program, *args in commands:
        binary = venv / "bin" / program
        cmd = [str(binary), *args]
        if binary.exists():
            code, output = _tee(cmd, dict(os.environ))
        else:
            code, output = 1, f"{binary} is missing: the venv lacks {program}"
            print(output)
        codes.append(code)
        tail = "\n".join(output.strip().splitlines()[-15:])
        where = os.path.relpath(binary, LAYOUT.root)
        shown.append(f"$ {shlex.join([where, *args])}\n{tail}")
    return Measured(not any(codes), excerpts={"output": "\n".join(shown)})


def _mutants(tests: Runner, selection: Selection) -> Measured:
    """Mutation testing; a selection failing on the unmutated fork (which the
    matrix reports too) fails the check rather than stopping `test`."""
    try:
        return mutate.mutation_testing(
            LAYOUT.fork, LAYOUT.trees, tests, selection, LAYOUT.results
        )
    except ForkToolError as e:
        print(f"mutation testing: FAILED: {e}")
        return Measured(False, excerpts={"error": str(e)})


def _fuzz_catches_base(venv: Path) -> Measured:
    """The fuzz's invariants, with the pristine base as the candidate, must fail."""
    cmd = [python(venv), "-m", "pytest", "-q", "-p", "no:cacheprovider", "fuzz", "-s"]
    env = {**test_env(LAYOUT.hf_home), "FUZZ_AGAINST": "base"}
    run = subprocess.run(cmd, cwd=LAYOUT.root, env=env, capture_output=True, text=True)
    shrunk = [line for line in run.stdout.splitlines() if "_violated" in line]
    print("\n".join(shrunk) or run.stdout[-3000:])
    ok = run.returncode != 0 and any("agree" in line for line in shrunk)
    shown = shlex.join(["FUZZ_AGAINST=base", "python", *cmd[1:]])
    output = "\n".join(shrunk) or run.stdout[-3000:]
    return Measured(ok, {"violations": len(shrunk)}, {"base": f"$ {shown}\n{output}"})


def _ci_impact(venv: Path) -> Measured:
    """The report reads Buildkite YAML, so it runs in the venv (PyYAML)."""
    cmd = [python(venv), "-m", "forktool.ci_impact", "--fork", str(LAYOUT.fork)]
    run = subprocess.run(cmd, cwd=LAYOUT.root, capture_output=True, text=True)
    print(run.stdout + run.stderr, end="")
    shown = "python -m forktool.ci_impact --fork build/vllm"
    return Measured(run.returncode == 0, data={"report": run.stdout, "command": shown})


COMMAND = Command(
    "test",
    "everything setup does, plus every check CI runs",
    "Everything setup does (the venv's self-check first), then the tool's "
    "tests, ruff and mypy on the tool's code, mutation testing of the series' "
    "added lines (after the regression matrix), the GPU-only tests "
    "(collected, skipped here), vLLM's CI checkers and pre-commit, the CI "
    "impact report, the out-of-tree override checks, the planner fuzz, and "
    "vLLM's CPU selection on the fork (the pristine base runs only what does "
    "not pass there); prints a summary with each phase's time. Refuses what "
    "sync refuses, and, naming them, when programs it runs are missing (README, "
    "Two commands). Writes what setup writes, and one result per check in "
    "build/results/ (what `pr` renders), and build/trees/mutate-*.",
    run,
)
