"""The PR evidence's entries in the registry of checks (forktool.checks):
how `setup` and `test` measure each, and which rows the PR renders."""

from __future__ import annotations

import json

from evidence import ci_impact, cpu_selection, matrix, mutation, precommit
from evidence.pr.sections import checkers_row, precommit_row
from evidence.vllm_tests import Runner, vllm_runner
from forktool import process
from forktool.checks import SETUP, TEST, Check, Context, Measured
from forktool.layout import LAYOUT
from forktool.process import ForkToolError
from forktool.tool_checks import measured, repo_pytest
from forktool.venv import python

BENCH_RUN = "python3 -m forktool bench"
AGREEMENT = {"workers_agree", "scheduler_agrees"}
"""The fuzz's invariants the base violates: its workers and scheduler disagree."""


def tests_runner(ctx: Context) -> Runner:
    """The runner for vLLM's tests in the fork's venv."""
    return vllm_runner(ctx.venv, ctx.selection)


def mutants(ctx: Context) -> Measured:
    """Mutation testing, whose baseline (the unmutated fork) is the regression
    matrix's run at the head, from the cache; a selection failing on the
    unmutated fork (which the matrix reports too) fails the check rather
    than stopping `test`."""
    try:
        return mutation.mutation_testing(
            LAYOUT.fork, LAYOUT.trees, tests_runner(ctx), ctx.selection, LAYOUT.results
        )
    except ForkToolError as e:
        print(f"mutation testing: FAILED: {e}")
        return Measured(False, excerpts={"error": str(e)})


def fuzz_catches_base(ctx: Context) -> Measured:
    """The fuzz's invariants, with the pristine base as the candidate, must
    fail: the fuzz reports a shrunk counterexample per violated invariant, and
    the workers' or the scheduler's agreement must be among them."""
    report = LAYOUT.logs / "fuzz-catches-base.json"
    report.unlink(missing_ok=True)
    against = {"FUZZ_AGAINST": "base", "FUZZ_REPORT": str(report)}
    session = repo_pytest(ctx.venv, "fuzz", "-s", label="fuzz-catches-base", **against)
    violated = json.loads(report.read_text()) if report.exists() else {}
    output = "\n".join(f"{k}_violated: {v}" for k, v in violated.items())
    print(output or f"no invariant violated (see {session.log})")
    failed = session.result().with_outcome("failed", "error")
    ok = bool(failed) and bool(AGREEMENT & set(violated))
    shown = "FUZZ_AGAINST=base python -m pytest fuzz -s"
    base = f"$ {shown}\n{output or 'no invariant violated'}"
    return Measured(ok, {"violations": len(violated)}, {"base": base})


def impact(ctx: Context) -> Measured:
    """The report reads Buildkite YAML, so it runs in the venv (PyYAML)."""
    cmd = [python(ctx.venv), "-m", "evidence.ci_impact", str(LAYOUT.fork)]
    run = process.run(cmd, cwd=LAYOUT.root, check=False)
    print(run.stdout + run.stderr, end="")
    shown = "python -m evidence.ci_impact build/vllm"
    return Measured(run.returncode == 0, data={"report": run.stdout, "command": shown})


def planner_fuzz(ctx: Context) -> Measured:
    session = repo_pytest(ctx.venv, "fuzz", "-s", label="planner-fuzz")
    return measured(session, "fuzz", "-s")


REGRESSION_MATRIX = Check(
    "regression-matrix",
    "regression matrix",
    SETUP,
    lambda ctx: matrix.regression_matrix(
        LAYOUT, tests_runner(ctx), ctx.selection, ctx.pins.author
    ),
    in_setup=True,
    in_pr=True,
)
MUTANTS = Check(
    mutation.NAME,
    "mutation testing of the series' added lines",
    mutation.COMMAND_LINE,
    mutants,
    in_pr=True,
)
GPU_ONLY = Check(
    "gpu-only",
    "GPU-only tests collected, skipped here",
    TEST,
    lambda ctx: matrix.gpu_only_skipped(LAYOUT.fork, tests_runner(ctx), ctx.selection),
    in_pr=True,
)
CI_CHECKERS = Check(
    "ci-checkers",
    "vLLM CI checkers",
    TEST,
    lambda ctx: ci_impact.run_checkers(LAYOUT.fork, python(ctx.venv)),
    pr_row=checkers_row,
)
CI_IMPACT = Check("ci-impact", "CI impact report", TEST, impact, in_pr=True)
PRE_COMMIT = Check(
    "pre-commit",
    "vLLM pre-commit",
    TEST,
    lambda ctx: precommit.run_precommit(LAYOUT.fork, LAYOUT.trees / "pre-commit"),
    pr_row=precommit_row,
    needs=precommit.NEEDS,
)
OVERRIDES = Check(
    "overrides",
    "out-of-tree override patterns",
    TEST,
    lambda ctx: matrix.override_patterns(LAYOUT, tests_runner(ctx)),
    in_pr=True,
)
PLANNER_FUZZ = Check("planner-fuzz", "planner fuzz", TEST, planner_fuzz, in_pr=True)
FUZZ_CATCHES_BASE = Check(
    "fuzz-catches-base",
    "planner fuzz catches the base",
    TEST,
    fuzz_catches_base,
    in_pr=True,
)
UPSTREAM_SELECTION = Check(
    "upstream-selection",
    "upstream selection, fork vs base",
    TEST,
    lambda ctx: cpu_selection.cpu_selection(LAYOUT, tests_runner(ctx), ctx.selection),
    in_pr=True,
    background=True,
)
# Their workers, fixtures and venv; `test` does not refresh them, so they do
# not read the tool's code: an edit to it leaves them current.
BENCH_READS = ("fork_tests", "fixtures", "venv.lock")
BENCH = Check(
    "bench",
    "scheduler cost per step",
    BENCH_RUN,
    gates_test=False,
    in_pr=True,
    reads=BENCH_READS,
)
BENCH_QUICK = Check(
    "bench-quick",
    "scheduler cost per step, one size",
    f"{BENCH_RUN} --quick",
    gates_test=False,
    reads=BENCH_READS,
)
GPU_E2E = Check(
    "gpu-e2e",
    "GPU end-to-end test, on the series and without its resolution",
    "python3 -m forktool e2e",
    gates_test=False,
    in_pr=True,
    reads=("upstream-tests.toml", "venv.lock"),  # the first for its [gpu_only] tests
)

# In the order `test` runs them, after the workflow's own.
CHECKS = (
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
    GPU_E2E,
)
