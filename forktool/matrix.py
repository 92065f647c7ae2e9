"""Validation matrix: the same tests across trees of the fork.

Regression matrix: the series' targeted tests on the pristine base's code
(with the series' test files) and at every patch. The listed regression
tests must fail on the base and everything must pass at every patch, which
is what makes the series bisectable.

Suite comparison: upstream's CPU selection on the pristine base and on the
fork; the series may add passing tests but must not lose any.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from forktool.fork import BASE_TAG, git, series_tests_on_base, worktree
from forktool.pins import REPO
from forktool.results import Measured
from forktool.upstream import Result, Runner, Selection, excerpt

MARK = {"passed": "ok", "failed": "FAIL", "error": "ERR", "skipped": "skip"}


LEGEND = """\
base: the pristine base's code with the series' test files (base+tests)
0001, 0002, ...: the fork at that patch of the series
ok passed, FAIL failed, ERR error, skip skipped, - not present at that patch \
(the test does not exist there)"""


def _fit(text: str, width: int, left: bool = False) -> str:
    """`text`, shortened with an ellipsis (at its start if `left`) to `width`."""
    if len(text) <= width:
        return text
    return "…" + text[-(width - 1) :] if left else text[: width - 1] + "…"


def _table(columns: dict[str, Result], width: int = 120) -> str:
    """One row per test, grouped by file, at most `width` columns; a legend."""
    heads = ["base" if c == "base+tests" else c for c in columns]
    label = width - sum(len(h) + 1 for h in heads)
    files: dict[str, list[str]] = {}
    for test in sorted({t for r in columns.values() for t in r.outcomes}):
        file, _, name = test.partition("::")
        files.setdefault(file, []).append(test)
    lines = []
    for file, tests in files.items():
        lines.append(_fit(file, label, left=True).ljust(label) + " ".join(heads))
        for test in tests:
            name = "  " + _fit(test.partition("::")[2], label - 2)
            cells = [
                MARK.get(r.outcomes.get(test, ""), "-").rjust(len(head))
                for r, head in zip(columns.values(), heads, strict=True)
            ]
            lines.append(name.ljust(label) + " ".join(cells))
    return "\n".join([*lines, LEGEND])


def regression_matrix(
    fork: Path, trees: Path, runner: Runner, selection: Selection, author: str
) -> Measured:
    """Run the regression selection and checks/ on base+tests and every patch."""
    base_tree = series_tests_on_base(fork, trees / "base-tests", author)
    columns = {"base+tests": _regression(runner, base_tree, selection, "base+tests")}
    commits = git(fork, "rev-list", "--reverse", f"{BASE_TAG}..HEAD").stdout.split()
    for number, commit in enumerate(commits, 1):
        name = f"{number:04d}"
        tree = worktree(fork, trees / name, commit)
        columns[name] = _regression(runner, tree, selection, name)
    print(_table(columns))
    details = _matrix_details(columns, selection)
    if commits:  # the evidence: the same selection on the base and at the head
        details.excerpts = {
            "base": excerpt(runner, base_tree, selection.regression),
            "series": excerpt(runner, tree, selection.regression),
        }

    ok = True
    base = columns.pop("base+tests")
    failing = set(base.with_outcome("failed", "error"))
    if failing != selection.fails_on_base:
        ok = False
        for test in sorted(selection.fails_on_base - failing):
            print(f"MATRIX: expected to fail on the base but did not: {test}")
        for test in sorted(failing - selection.fails_on_base):
            print(f"MATRIX: fails on the base but is not listed: {test}")
    for name, result in columns.items():
        for test in result.with_outcome("failed", "error"):
            ok = False
            print(f"MATRIX: fails at patch {name}: {test}")
    if not commits or not columns[f"{len(commits):04d}"].outcomes:
        ok = False
        print("MATRIX: the regression selection ran nothing at the series' head")
    print(f"regression matrix: {'ok' if ok else 'FAILED'}")
    details.ok = ok
    return details


def _matrix_details(columns: dict[str, Result], selection: Selection) -> Measured:
    """Counts per column ("base+tests", "0001", ...) for the results file."""
    counts = {
        f"{column} {outcome}": n
        for column, result in columns.items()
        for outcome, n in result.counts().items()
    }
    data = {
        "args": list(selection.regression),
        "fails_on_base": sorted(selection.fails_on_base),
        "table": _table(columns),
        "columns": {
            column: {"outcomes": result.outcomes, "seconds": round(result.seconds, 1)}
            for column, result in columns.items()
        },
    }
    return Measured(False, counts, {}, data)


def _regression(runner: Runner, tree: Path, selection: Selection, name: str) -> Result:
    """The series' regression tests and this repository's checks, from `tree`.

    The checks run in a pytest of their own, rooted in this repository, so
    that neither configuration applies to the other's tests.
    """
    result = runner.run(tree, selection.regression, f"regression-{name}")
    if selection.checks:
        paths = tuple(REPO / path for path in selection.checks)
        args = (f"--rootdir={REPO}", *map(str, paths))
        checks = runner.run(tree, args, f"checks-{name}", inputs=paths)
        result.outcomes.update(checks.outcomes)
        result.reasons.update(checks.reasons)
        result.seconds += checks.seconds
    return result


def suite_vs_base(
    fork: Path, trees: Path, runner: Runner, selection: Selection
) -> Measured:
    """Upstream's CPU selection on the pristine base and on the fork, side by side."""
    base = worktree(fork, trees / "base", BASE_TAG)
    jobs = [
        (tree, name, args)
        for name, args in selection.runs.items()
        for tree in (base, fork)
    ]
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(
            pool.map(
                lambda job: runner.run(
                    job[0], job[2], f"{job[1]}-{'base' if job[0] == base else 'fork'}"
                ),
                jobs,
            )
        )
    ok, runs = True, {}
    for i, name in enumerate(selection.runs):
        on_base, on_fork = results[2 * i], results[2 * i + 1]
        print(f"{name}: base {on_base.summary()}; fork {on_fork.summary()}")
        runs[name] = {"args": list(selection.runs[name])}
        for side, result in (("base", on_base), ("fork", on_fork)):
            runs[name][side] = {
                "counts": dict(result.counts()),
                "summary": result.summary(),
            }
        lost = set(on_base.with_outcome("passed")) - set(on_fork.with_outcome("passed"))
        failing = on_fork.with_outcome("failed", "error")
        for test in sorted(lost):
            print(f"SUITE: passes on the base, not on the fork: {test}")
        for test in failing:
            print(f"SUITE: fails on the fork: {test}")
        if lost or failing or not on_fork.outcomes:
            ok = False
    print(f"upstream selection: {'ok' if ok else 'FAILED'}")
    return Measured(ok, data={"runs": runs})


def gpu_only_skipped(fork: Path, runner: Runner, selection: Selection) -> Measured:
    """The GPU-only tests are collected and skip with a reason on this machine."""
    result = runner.run(fork, selection.gpu_only, "gpu-only")
    print(f"GPU-only tests: {result.summary()}")
    for test, outcome in sorted(result.outcomes.items()):
        print(f"  {outcome:8} {test}: {result.reasons.get(test, '')}")
    ok = bool(result.outcomes) and set(result.outcomes.values()) == {"skipped"}
    print(f"GPU-only tests collected and skipped: {'ok' if ok else 'FAILED'}")


OVERRIDES = "checks/test_override_patterns.py"


def override_patterns(fork: Path, trees: Path, runner: Runner) -> Measured:
    """The out-of-tree override checks on the pristine base and on the fork.

    Every check must pass on the fork; on the base, the patterns must
    install and win (what the fork keeps compatible with).
    """
    path = REPO / OVERRIDES
    args = (f"--rootdir={REPO}", str(path))
    base = worktree(fork, trees / "base", BASE_TAG)
    results = {
        "base": runner.run(base, args, "overrides-base", inputs=(path,)),
        "fork": runner.run(fork, args, "overrides-fork", inputs=(path,)),
    }
    tests = sorted({t for r in results.values() for t in r.outcomes})
    width = max(map(len, (t.partition("::")[2] for t in tests)), default=4)
    lines = [f"{'out-of-tree override check'.ljust(width)}  base  fork"]
    for test in tests:
        cells = [MARK.get(r.outcomes.get(test, ""), "-") for r in results.values()]
        name = test.partition("::")[2]
        lines.append(f"{name.ljust(width)}  {cells[0]:>4}  {cells[1]:>4}")
    lines.append("(base: vLLM as released; it has no resolved decision to keep)")
    print("\n".join(lines))
    installs = [t for t in tests if "installs_and_wins" in t]
    ok = (
        bool(installs)
        and all(results["base"].outcomes.get(t) == "passed" for t in installs)
        and set(results["fork"].outcomes.values()) == {"passed"}
    )
    print(f"override patterns: {'ok' if ok else 'FAILED'}")
    data = {name: r.outcomes for name, r in results.items()}
    return Measured(
        ok, dict(results["fork"].counts()), {}, {"table": "\n".join(lines), **data}
    )
