"""Validation matrix: the same tests across trees of the fork.

Regression matrix: the series' targeted tests on the pristine base's code
(with the series' test files) and at every patch. The listed regression
tests must fail on the base, for the bug rather than for an API the base
lacks, and everything must pass at every patch, which is what makes the
series bisectable.

The GPU-only tests, collected and skipped here; the out-of-tree override
patterns on the base and on the fork. Upstream's CPU selection against the
base is evidence/cpu_selection.py.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

from evidence.worktrees import series_tests_on_base, worktree
from forktool.checks import Measured
from forktool.layout import Layout
from forktool.process import BASE_TAG, ForkToolError, series_commits, series_subjects
from forktool.pytest_runner import Result, Runner, excerpt
from forktool.selection import Selection

MARK = {"passed": "ok", "failed": "FAIL", "error": "ERR", "skipped": "skip"}


LEGEND = """\
base: the pristine base's code with the series' test files (base+tests)
0001, 0002, ...: the fork at that patch of the series
ok passed, FAIL failed, ERR error, skip skipped, - not present at that patch \
(the test does not exist there)"""

# A test failing on the base with one of these fails for an API the series
# adds, not for the bug; a TypeError only when it is about the arguments.
MISSING_API = ("AttributeError", "ImportError", "ModuleNotFoundError", "NameError")
ARGUMENTS = (
    "unexpected keyword argument",
    "required positional argument",
    "required keyword-only argument",
    " was given",
    " were given",
    "multiple values for",
    "takes no arguments",
    "takes no keyword arguments",
)


def _fit(text: str, width: int, left: bool = False) -> str:
    """`text`, shortened with an ellipsis (at its start if `left`) to `width`."""
    if len(text) <= width:
        return text
    return "…" + text[-(width - 1) :] if left else text[: width - 1] + "…"


def table(columns: dict[str, Result], width: int = 120) -> str:
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
    base = columns.get("base+tests", Result()).exceptions()
    if base:
        lines.append("base: the exception of each failure (?: none named)")
        kind = max(len(e) for e in base.values()) or 1
        for test, exception in base.items():
            shown = _fit(test, width - kind - 4, left=True)
            lines.append(f"  {(exception or '?').ljust(kind)}  {shown}")
    return "\n".join([*lines, LEGEND])


def missing_api(exception: str, reason: str) -> bool:
    """A failure for an API the base lacks, not for the bug."""
    return exception in MISSING_API or (
        exception == "TypeError" and any(words in reason for words in ARGUMENTS)
    )


def base_problems(base: Result, fails_on_base: frozenset[str]) -> list[str]:
    """What fails on the base must be the listed tests, each failing for the
    bug: one sentence per problem."""
    failing = base.exceptions()
    problems = [
        f"MATRIX: expected to fail on the base but did not: {test}"
        for test in sorted(fails_on_base - set(failing))
    ]
    problems += [
        f"MATRIX: fails on the base but is not listed: {test}"
        for test in sorted(set(failing) - fails_on_base)
    ]
    for test in sorted(fails_on_base & set(failing)):
        reason = base.reasons.get(test, "").partition("\n")[0]
        if missing_api(failing[test], reason):
            problems.append(
                f"MATRIX: {test} fails on the base with {failing[test]} ({reason}), "
                "for an API the series adds rather than for the bug: make it fail "
                "there on the bug's behaviour, through what the base has"
            )
    return problems


def regression_matrix(
    layout: Layout, runner: Runner, selection: Selection, author: str
) -> Measured:
    """Run the regression selection and fork_tests/ on base+tests and every patch."""
    fork, trees = layout.fork, layout.trees
    commits, subjects = series_commits(fork), series_subjects(fork)
    makers = {
        "base+tests": partial(series_tests_on_base, fork, trees / "base-tests", author)
    }
    for number, commit in enumerate(commits, 1):
        makers[f"{number:04d}"] = partial(
            worktree, fork, trees / f"{number:04d}", commit
        )
    may_fail = {name: may_fail_in(name, selection, subjects) for name in makers}
    # The fork tests of this repository run in a pytest of their own rooted in
    # it, so that neither its configuration nor the tree's applies to the
    # other's tests.
    paths = tuple(layout.root / path for path in selection.fork_tests)
    own_args = (f"--rootdir={layout.root}", *map(str, paths))
    # The pytest runs go two at a time, one a core; each is a task of its own,
    # the longer regression runs first, so that no core waits for the other to
    # finish a column. A tree's regression run starts as soon as the tree is
    # made (one after the other: git commands on one repository do not run in
    # parallel).
    named: dict[str, Path] = {}
    with ThreadPoolExecutor(max_workers=2) as pool:
        regression = {}
        for name, make in makers.items():
            named[name] = tree = make()
            regression[name] = pool.submit(
                runner.run,
                tree,
                selection.regression,
                f"regression-{name}",
                expected=may_fail[name],
            )
        own = {
            name: pool.submit(
                runner.run, tree, own_args, f"fork-tests-{name}", paths, may_fail[name]
            )
            for name, tree in named.items()
            if paths
        }
        done = {name: run.result() for name, run in regression.items()}
        columns = {}
        for name in named:
            mine = own[name].result() if name in own else Result()
            columns[name] = Result(seconds=done[name].seconds + mine.seconds)
            columns[name].update(done[name])
            columns[name].update(mine)
    drop_fork_tests_before_their_patch(columns, selection.fork_tests_from, subjects)
    for base in (columns["base+tests"], done["base+tests"]):
        drop_not_on_base(base, selection.not_on_base)
    print(table(columns))
    excerpts: dict[str, str] = {}
    if commits:  # the evidence: the same selection on the base and at the head
        for side, name in (("base", "base+tests"), ("series", f"{len(commits):04d}")):
            excerpts.update(
                failure_evidence(runner, done[name], selection.regression, side)
            )
    ok = _judged(columns, selection, len(commits))
    print(f"regression matrix: {'ok' if ok else 'FAILED'}")
    counts = {
        f"{column} {outcome}": n
        for column, result in columns.items()
        for outcome, n in result.counts().items()
    }
    data = {
        "args": list(selection.regression),
        "fails_on_base": sorted(selection.fails_on_base),
        "table": table(columns),
        "columns": {
            column: {
                "outcomes": result.outcomes,
                "exceptions": result.exceptions(),
                "seconds": round(result.seconds, 1),
            }
            for column, result in columns.items()
        },
    }
    return Measured(ok, counts, excerpts, data)


EVIDENCE_FAILURES = 10
"""The failing tests the visible evidence names; the tracebacks show all."""
EVIDENCE_LIMIT = 12000
"""The most characters of tracebacks kept as evidence of one tree."""


def failure_evidence(
    runner: Runner, result: Result, args: tuple[str, ...], side: str
) -> dict[str, str]:
    """The excerpts of a run of the regression selection on one side: each
    failure's message (`side`), and the end of each one's traceback."""
    tracebacks = excerpt(runner, result, args, tails=True)
    if len(tracebacks) > EVIDENCE_LIMIT:
        tracebacks = "…" + tracebacks[-EVIDENCE_LIMIT:]
    return {
        side: excerpt(runner, result, args, most=EVIDENCE_FAILURES),
        f"{side} tracebacks": tracebacks,
    }


def _judged(columns: dict[str, Result], selection: Selection, patches: int) -> bool:
    """Whether the matrix is as the series needs: the listed tests fail on
    the base for the bug, and everything passes at each patch."""
    base = columns["base+tests"]
    problems = base_problems(base, selection.fails_on_base)
    for name, result in columns.items():
        if name != "base+tests":
            failing = result.with_outcome("failed", "error")
            problems += [f"MATRIX: fails at patch {name}: {test}" for test in failing]
    if not patches or not columns[f"{patches:04d}"].outcomes:
        problems.append(
            "MATRIX: the regression selection ran nothing at the series' head"
        )
    for problem in problems:
        print(problem)
    return not problems


def drop_not_on_base(base: Result, not_on_base: tuple[str, ...]) -> None:
    """Forget the base's outcomes of tests that cannot run on its code."""
    for test in [t for t in base.outcomes if t.startswith(not_on_base)]:
        del base.outcomes[test]


def drop_fork_tests_before_their_patch(
    columns: dict[str, Result], fork_tests_from: dict[str, str], subjects: list[str]
) -> None:
    """Forget the outcomes of fork tests at the patches before the one they guard
    (shown as not present there); the base column keeps them. `subjects` are
    the series' patch subjects, in order."""
    unknown = set(fork_tests_from.values()) - set(subjects)
    if unknown:
        raise ForkToolError(
            "upstream-tests.toml: fork_tests_from names no patch of the series: "
            f"{sorted(unknown)}"
        )
    for number in range(1, len(subjects) + 1):
        later = fork_tests_after(number, fork_tests_from, subjects)
        result = columns[f"{number:04d}"]
        for test in [t for t in result.outcomes if t.startswith(later)]:
            del result.outcomes[test]


def fork_tests_after(
    number: int, fork_tests_from: dict[str, str], subjects: list[str]
) -> tuple[str, ...]:
    """The fork tests (node ids or prefixes) guarding the patches after patch
    `number` (1 is the first of `subjects`)."""
    applied = subjects[:number]
    return tuple(sorted(t for t, p in fork_tests_from.items() if p not in applied))


def may_fail_in(
    name: str, selection: Selection, subjects: list[str]
) -> tuple[str, ...]:
    """The tests whose failure in the column `name` the matrix expects (and
    the runner may keep): on the base, the bug's and those that cannot run on
    its code; at a patch, the fork tests of the patches after it."""
    if name == "base+tests":
        return (*sorted(selection.fails_on_base), *selection.not_on_base)
    return fork_tests_after(int(name), selection.fork_tests_from, subjects)


def gpu_only_skipped(fork: Path, runner: Runner, selection: Selection) -> Measured:
    """The GPU-only tests are collected and skip with a reason on this machine."""
    result = runner.run(fork, selection.gpu_only, "gpu-only")
    print(f"GPU-only tests: {result.summary()}")
    for test, outcome in sorted(result.outcomes.items()):
        print(f"  {outcome:8} {test}: {result.reasons.get(test, '')}")
    ok = bool(result.outcomes) and set(result.outcomes.values()) == {"skipped"}
    print(f"GPU-only tests collected and skipped: {'ok' if ok else 'FAILED'}")
    data = {"args": list(selection.gpu_only), "outcomes": result.outcomes}
    return Measured(ok, dict(result.counts()), {}, {**data, "reasons": result.reasons})


OVERRIDES = "test_override_patterns.py"


def override_patterns(layout: Layout, runner: Runner) -> Measured:
    """The out-of-tree override checks on the pristine base and on the fork.

    Every check must pass on the fork; on the base, every check but the
    ones of the resolved decision (named ``*_resolved_*``), which vLLM as
    released lacks (what the fork keeps compatible with).
    """
    fork, path = layout.fork, layout.fork_tests / OVERRIDES
    args = (f"--rootdir={layout.root}", str(path))
    base = worktree(fork, layout.base_tree, BASE_TAG)
    with ThreadPoolExecutor(max_workers=2) as pool:
        running = {
            name: pool.submit(runner.run, tree, args, f"overrides-{name}", (path,))
            for name, tree in (("base", base), ("fork", fork))
        }
        results = {name: run.result() for name, run in running.items()}
    tests = sorted({t for r in results.values() for t in r.outcomes})
    width = max(map(len, (t.partition("::")[2] for t in tests)), default=4)
    lines = [f"{'out-of-tree override check'.ljust(width)}  base  fork"]
    for test in tests:
        cells = [MARK.get(r.outcomes.get(test, ""), "-") for r in results.values()]
        name = test.partition("::")[2]
        lines.append(f"{name.ljust(width)}  {cells[0]:>4}  {cells[1]:>4}")
    lines.append("(base: vLLM as released; it has no resolved decision to keep)")
    print("\n".join(lines))
    on_base = [t for t in tests if "_resolved_" not in t]
    ok = (
        bool(on_base)
        and all(results["base"].outcomes.get(t) == "passed" for t in on_base)
        and set(results["fork"].outcomes.values()) == {"passed"}
    )
    print(f"override patterns: {'ok' if ok else 'FAILED'}")
    data = {name: r.outcomes for name, r in results.items()}
    return Measured(
        ok, dict(results["fork"].counts()), {}, {"table": "\n".join(lines), **data}
    )
