"""The registry of checks: every check the tool measures, declared once.

`setup`, `test` and `bench` run them and write each one's result to the
results store under its name; `pr` renders those it needs from there.
"""

from __future__ import annotations

from dataclasses import dataclass

SETUP = "python3 -m forktool setup"
TEST = "python3 -m forktool test"
BENCH_RUN = "python3 -m forktool bench"
MUTATE = "python3 -m forktool mutate"


@dataclass(frozen=True)
class Check:
    name: str
    """Also its results file: build/results/<name>.json."""
    title: str
    command: str
    """The command that refreshes its result."""
    gates_test: bool = True
    """`test` runs it, and fails when it fails."""
    in_pr: bool = True
    """The PR description renders it; `pr` refuses without it if it gates `test`."""
    required: bool = False
    """The checks after it do not run when it fails."""


VENV_SELF_CHECK = Check(
    "venv-self-check", "venv self-check", SETUP, in_pr=False, required=True
)
TOOL_TESTS = Check("tool-tests", "tool tests", TEST, in_pr=False)
RUFF = Check("ruff", "ruff on the tool's code", TEST, in_pr=False)
MYPY = Check("mypy", "mypy on the tool's code", TEST, in_pr=False)
EXPORT_CHECK = Check(
    "export-check", "patches/ as export writes them", TEST, in_pr=False
)
REGRESSION_MATRIX = Check("regression-matrix", "regression matrix", SETUP)
MUTANTS = Check("mutants", "mutation testing of the series' added lines", MUTATE)
GPU_ONLY = Check("gpu-only", "GPU-only tests collected, skipped here", TEST)
CI_CHECKERS = Check("ci-checkers", "vLLM CI checkers", TEST)
CI_IMPACT = Check("ci-impact", "CI impact report", TEST)
PRE_COMMIT = Check("pre-commit", "vLLM pre-commit", TEST)
OVERRIDES = Check("overrides", "out-of-tree override patterns", TEST)
PLANNER_FUZZ = Check("planner-fuzz", "planner fuzz", TEST)
FUZZ_CATCHES_BASE = Check("fuzz-catches-base", "planner fuzz catches the base", TEST)
UPSTREAM_SELECTION = Check(
    "upstream-selection", "upstream selection, fork vs base", TEST
)
BENCH = Check("bench", "scheduler cost per step", BENCH_RUN, gates_test=False)
BENCH_QUICK = Check(
    "bench-quick",
    "scheduler cost per step, one size",
    f"{BENCH_RUN} --quick",
    gates_test=False,
    in_pr=False,
)

REGISTRY = (
    VENV_SELF_CHECK,
    TOOL_TESTS,
    RUFF,
    MYPY,
    EXPORT_CHECK,
    REGRESSION_MATRIX,
    MUTANTS,
    GPU_ONLY,
    CI_CHECKERS,
    CI_IMPACT,
    PRE_COMMIT,
    OVERRIDES,
    PLANNER_FUZZ,
    FUZZ_CATCHES_BASE,
    UPSTREAM_SELECTION,
    BENCH,
    BENCH_QUICK,
)
"""In the order `test` runs them."""
