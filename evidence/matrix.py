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
from itertools import groupby
from pathlib import Path

from evidence.vllm_tests import Runner, excerpt
from evidence.worktrees import series_tests_on_base, worktree
from forktool.checks import Measured
from forktool.layout import Layout
from forktool.process import BASE_TAG, ForkToolError, series_commits, series_subjects
from forktool.pytest_runner import Result
from forktool.selection import Selection

MARK = {"passed": "ok", "failed": "FAIL", "error": "ERR", "skipped": "skip"}
BASE = "base+tests"
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
EVIDENCE_FAILURES = 10
"""The failing tests the visible evidence names; the tracebacks show all."""
EVIDENCE_LIMIT = 12000
"""The most characters of tracebacks kept as evidence of one tree."""


def _fit(text: str, width: int, left: bool = False) -> str:
    """`text`, shortened with an ellipsis (at its start if `left`) to `width`."""
    if len(text) <= width:
        return text
    return "…" + text[-(width - 1) :] if left else text[: width - 1] + "…"


def table(columns: dict[str, Result], width: int = 120) -> str:
    """One row per test, grouped by file, at most `width` columns; a legend."""
    heads = ["base" if c == BASE else c for c in columns]
    label = width - sum(len(h) + 1 for h in heads)
    tests = sorted({t for r in columns.values() for t in r.outcomes})
    lines = []
    for file, in_file in groupby(tests, key=lambda test: test.partition("::")[0]):
        lines.append(_fit(file, label, left=True).ljust(label) + " ".join(heads))
        for test in in_file:
            name = "  " + _fit(test.partition("::")[2], label - 2)
            marks = [MARK.get(r.outcomes.get(test, ""), "-") for r in columns.values()]
            cells = [m.rjust(len(h)) for m, h in zip(marks, heads, strict=True)]
            lines.append(name.ljust(label) + " ".join(cells))
    if base := columns.get(BASE, Result()).exceptions():
        lines.append("base, where the series' tests must fail: exceptions (?: none)")
        kind = max(len(e) for e in base.values()) or 1
        for test, exception in base.items():
            shown = _fit(test, width - kind - 4, left=True)
            lines.append(f"  {(exception or '?').ljust(kind)}  {shown}")
    return "\n".join([*lines, LEGEND])


def missing_api(exception: str, reason: str) -> bool:
    """A failure for an API the base lacks, not for the bug."""
    about_arguments = any(words in reason for words in ARGUMENTS)
    return exception in MISSING_API or exception == "TypeError" and about_arguments


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
    """Run the regression selection and fork_tests/ on base+tests and every patch.

    The listed tests must fail on the base for the bug, and everything pass
    at each patch."""
    fork, trees = layout.fork, layout.trees
    commits, subjects = series_commits(fork), series_subjects(fork)
    makers = {BASE: partial(series_tests_on_base, fork, trees / "base-tests", author)}
    for number, commit in enumerate(commits, 1):
        name = f"{number:04d}"
        makers[name] = partial(worktree, fork, trees / name, commit)
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
    made: dict[str, tuple[Path, tuple[str, ...]]] = {}
    with ThreadPoolExecutor(max_workers=2) as pool:
        regression = {}
        for name, make in makers.items():
            tree, may_fail = made[name] = make(), may_fail_in(name, selection, subjects)
            label = f"regression-{name}"
            regression[name] = pool.submit(
                runner.run, tree, selection.regression, label, expected=may_fail
            )
        own = {
            n: pool.submit(runner.run, t, own_args, f"fork-tests-{n}", paths, f)
            for n, (t, f) in made.items()
            if paths
        }
        done = {name: run.result() for name, run in regression.items()}
        columns = {}
        for name, run in done.items():
            mine = own[name].result() if name in own else Result()
            columns[name] = Result(seconds=run.seconds + mine.seconds)
            columns[name].update(run)
            columns[name].update(mine)
    drop(done[BASE], selection.not_on_base)
    for name, column in columns.items():  # shown as not present there
        drop(column, unjudged(name, selection, subjects))
    shown = table(columns)
    print(shown)
    head = f"{len(commits):04d}"
    excerpts: dict[str, str] = {}
    # The evidence: the same selection on the base and at the head.
    for side, name in {"base": BASE, "series": head}.items() if commits else ():
        excerpts |= failure_evidence(runner, done[name], selection.regression, side)
    problems = base_problems(columns[BASE], selection.fails_on_base)
    for name, result in columns.items():
        failing = [] if name == BASE else result.with_outcome("failed", "error")
        problems += [f"MATRIX: fails at patch {name}: {test}" for test in failing]
    if not commits or not columns[head].outcomes:
        problems.append(
            "MATRIX: the regression selection ran nothing at the series' head"
        )
    verdict = "FAILED" if problems else "ok"
    print("\n".join([*problems, f"regression matrix: {verdict}"]))
    counts = {
        f"{column} {outcome}": n
        for column, result in columns.items()
        for outcome, n in result.counts().items()
    }
    outcomes = {column: {"outcomes": r.outcomes} for column, r in columns.items()}
    data = {"table": shown, "columns": outcomes}
    return Measured(not problems, counts, excerpts, data)


def failure_evidence(
    runner: Runner, result: Result, args: tuple[str, ...], side: str
) -> dict[str, str]:
    """The excerpts of a run of the regression selection on one side: each
    failure's message (`side`), and the end of each one's traceback."""
    tracebacks = excerpt(runner, result, args, tails=True)
    if len(tracebacks) > EVIDENCE_LIMIT:
        tracebacks = "…" + tracebacks[-EVIDENCE_LIMIT:]
    shown = excerpt(runner, result, args, most=EVIDENCE_FAILURES)
    return {side: shown, f"{side} tracebacks": tracebacks}


def drop(result: Result, tests: tuple[str, ...]) -> None:
    """Forget `result`'s outcomes of the tests `tests` (node ids or prefixes)."""
    for test in [t for t in result.outcomes if t.startswith(tests)]:
        del result.outcomes[test]


def unjudged(name: str, selection: Selection, subjects: list[str]) -> tuple[str, ...]:
    """The tests (node ids or prefixes) the column `name` does not judge: on
    the base those that cannot run on its code, at a patch the fork tests of
    the patches after it (`subjects`: the series' patch subjects, in order).
    Refuses a fork test said to guard no patch of the series."""
    if unknown := set(selection.fork_tests_from.values()) - set(subjects):
        raise ForkToolError(
            "upstream-tests.toml: fork_tests_from names no patch "
            f"of the series: {sorted(unknown)}"
        )
    if name == BASE:
        return selection.not_on_base
    applied = subjects[: int(name)]
    tests = selection.fork_tests_from.items()
    return tuple(sorted(test for test, patch in tests if patch not in applied))


def may_fail_in(name: str, sel: Selection, subjects: list[str]) -> tuple[str, ...]:
    """The tests whose failure in the column `name` the matrix expects (and
    the runner may keep): those it does not judge, and on the base the bug's."""
    bug = sorted(sel.fails_on_base) if name == BASE else []
    return (*bug, *unjudged(name, sel, subjects))


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


def override_patterns(layout: Layout, runner: Runner) -> Measured:
    """The out-of-tree override checks on the pristine base and on the fork.

    Every check must pass on the fork; on the base, every check but the
    ones of the resolved decision (named ``*_resolved_*``), which vLLM as
    released lacks (what the fork keeps compatible with).
    """
    fork, path = layout.fork, layout.fork_tests / "test_override_patterns.py"
    args, inputs = (f"--rootdir={layout.root}", str(path)), (layout.fork_tests,)
    base = worktree(fork, layout.base_tree, BASE_TAG)
    with ThreadPoolExecutor(max_workers=1) as pool:  # the base's run beside the fork's
        # The test imports fork_tests/kv_plans.py: the folder is its input.
        later = pool.submit(runner.run, base, args, "overrides-base", inputs)
        fork_run = runner.run(fork, args, "overrides-fork", inputs)
    on_base, on_fork = later.result().outcomes, fork_run.outcomes
    tests = sorted({*on_base, *on_fork})
    width = max(map(len, (t.partition("::")[2] for t in tests)), default=4)
    lines = [f"{'out-of-tree override check'.ljust(width)}  base  fork"]
    for test in tests:
        cells = [MARK.get(r.get(test, ""), "-").rjust(4) for r in (on_base, on_fork)]
        lines.append(f"{test.partition('::')[2].ljust(width)}  {'  '.join(cells)}")
    lines.append("(base: vLLM as released; it has no resolved decision to keep)")
    print("\n".join(lines))
    judged = [t for t in tests if "_resolved_" not in t]
    ok = bool(judged) and all(on_base.get(t) == "passed" for t in judged)
    ok = ok and set(on_fork.values()) == {"passed"}
    print(f"override patterns: {'ok' if ok else 'FAILED'}")
    data = {"table": "\n".join(lines), "base": on_base, "fork": on_fork}
    return Measured(ok, dict(fork_run.counts()), {}, data)
