"""vLLM's CPU selection (upstream's own `[[run]]`s) on the fork against the
pristine base: its collected test ids on both, and its outcomes on the fork;
the base runs only the tests that do not pass on the fork, to tell a failure
the series brings from one the base already has. The series may add passing
tests but must not lose any.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from evidence.vllm_tests import Runner
from evidence.worktrees import worktree
from forktool.checks import Measured
from forktool.layout import Layout
from forktool.process import BASE_TAG, ForkToolError
from forktool.pytest_runner import Result
from forktool.selection import Selection

SHARDS = 2
"""Processes the selection is dealt to, one a core of this machine; each
imports vLLM and collects the tests of its share, so one more costs a
minute of CPU."""
KINDS = {
    "added": "",  # collected on the fork only: tests the series adds
    "lost": "collected on the base, not on the fork",  # tests the series removes
    # Fail on the fork, not on the base (or the base lacks them).
    "new": "fails on the fork, not on the base",
    "pre_existing": "fails on the fork and on the base (pre-existing)",
    "skipped": "passes on the base, skipped on the fork",
    "flaky": "flaky: failed on the fork, passed there when run again",
}
"""What a comparison (`compare`) holds: kind -> its tests, sorted; and what
the report says of a test of each kind."""
Comparison = dict[str, list[str]]


def is_ok(comparison: Comparison) -> bool:
    """Nothing lost, nothing new, nothing skipped that passes on the base."""
    return not (comparison["lost"] or comparison["new"] or comparison["skipped"])


def report(comparison: Comparison) -> list[str]:
    """One line per test that needs a word."""
    return [
        f"SUITE: {KINDS[k]}: {t}"
        for k, tests in comparison.items()
        if k != "added"
        for t in tests
    ]


def needs_base(on_fork: Result, base_ids: set[str]) -> list[str]:
    """The fork's tests that did not pass and that the base has too."""
    return sorted(t for t in base_ids if on_fork.outcomes.get(t, "passed") != "passed")


def compare(
    fork_ids: set[str],
    base_ids: set[str],
    on_fork: Result,
    on_base: Result,
    again: Result | None = None,
) -> Comparison:
    """Classify the fork's outcomes; `on_base` ran `needs_base`'s tests and
    `again` the fork's failures once more."""
    flaky = set(again.with_outcome("passed")) if again else set()
    failing = set(on_fork.with_outcome("failed", "error")) - flaky
    on_base_too = failing & set(on_base.with_outcome("failed", "error"))
    skipped = set(on_fork.with_outcome("skipped")) & set(on_base.with_outcome("passed"))
    added, lost = fork_ids - base_ids, base_ids - fork_ids
    kinds = (added, lost, failing - on_base_too, on_base_too, skipped, flaky)
    return dict(zip(KINDS, map(sorted, kinds), strict=True))


def shards(ids: list[str], count: int) -> list[list[str]]:
    """`ids` dealt out in turn to `count` shards, keeping their order.

    The variants of one slow parametrized test sit next to each other, so
    each shard gets about as many of them; whole files would not balance.
    """
    return [part for i in range(count) if (part := ids[i::count])]


def options(args: tuple[str, ...]) -> tuple[str, ...]:
    """A run's pytest options: its arguments but the test paths."""
    return tuple(a for a in args if not a.startswith("tests/"))


def only(result: Result, ids: list[str]) -> Result:
    """`result`'s outcomes of the tests `ids`."""
    return Result({t: result.outcomes[t] for t in ids if t in result.outcomes})


def _on_fork(
    fork: Path, runner: Runner, collected: dict[str, list[str]], selection: Selection
) -> dict[str, Result]:
    """Each run's outcomes on the fork, by name, in SHARDS processes side by
    side. Runs with the same options share their processes: each process
    imports vLLM once, and one run's slow tail does not leave a core idle
    while the other finishes."""
    groups: dict[tuple[str, ...], list[str]] = {}
    for name, ids in collected.items():
        groups.setdefault(options(selection.runs[name]), []).extend(ids)
    found = {}
    for n, (opts, ids) in enumerate(groups.items(), 1):
        with ThreadPoolExecutor(max_workers=SHARDS) as pool:
            running = [
                pool.submit(runner.run, fork, (*opts, *part), f"selection-{n}-fork-{i}")
                for i, part in enumerate(shards(list(dict.fromkeys(ids)), SHARDS), 1)
            ]
            results = [run.result() for run in running]
        seconds = max((r.seconds for r in results), default=0)
        cached = bool(results) and all(r.cached for r in results)
        merged = found[opts] = Result(seconds=seconds, cached=cached)
        for result in results:
            merged.update(result)
        print(f"fork, {' '.join(opts) or 'no options'}: {merged.summary()}")
    return {
        name: only(found[options(selection.runs[name])], ids)
        for name, ids in collected.items()
    }


def _compared(
    fork: Path,
    base: Path,
    runner: Runner,
    name: str,
    args: tuple[str, ...],
    collected: tuple[list[str], set[str]],
    on_fork: Result,
) -> tuple[bool, dict[str, Any]]:
    """One run of the selection, its ids `collected` on the fork and on the
    base and its outcomes `on_fork`: its failures again, the base where
    needed; whether it is ok, and its data for the results file."""
    fork_ids, base_ids = set(collected[0]), collected[1]
    print(f"{name}: fork {on_fork.counted()}")
    # A failure under load (a subprocess timeout) is judged only if it
    # fails again on the fork; that and the base run side by side.
    failed = on_fork.with_outcome("failed", "error")
    rerun = needs_base(on_fork, base_ids)
    jobs = {"fork-again": (fork, failed), "base": (base, rerun)}
    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = {
            k: pool.submit(runner.run, tree, (*options(args), *ids), f"{name}-{k}")
            for k, (tree, ids) in jobs.items()
            if ids
        }
    again = runs["fork-again"].result() if failed else None
    on_base = runs["base"].result() if rerun else Result()
    if again is not None:
        print(f"{name}: fork, the {len(failed)} failed run again: {again.summary()}")
    found = compare(fork_ids, base_ids, on_fork, on_base, again)
    print(
        f"{name}: collected {len(fork_ids)} on the fork, {len(base_ids)} on the "
        f"base: {len(found['added'])} only on the fork (added by the series), "
        f"{len(found['lost'])} only on the base"
    )
    if rerun:
        print(f"{name}: base, the {len(rerun)} not passing on the fork: "
              f"{on_base.summary()}")  # fmt: skip
    print("\n".join(report(found)) or f"{name}: nothing lost, nothing new")
    data = {
        "args": list(args),
        "fork": {"collected": len(fork_ids), "counts": dict(on_fork.counts())},
        "base": {
            "collected": len(base_ids),
            "rerun": len(rerun),
            "counts": dict(on_base.counts()),
        },
        **found,
    }
    return is_ok(found) and bool(on_fork.outcomes), data


def cpu_selection(layout: Layout, runner: Runner, selection: Selection) -> Measured:
    """Upstream's CPU selection on the fork, compared with the pristine base."""
    fork = layout.fork
    # A base of its own: this check runs in the background of those using
    # layout.base_tree.
    base = worktree(fork, layout.trees / "selection-base", BASE_TAG)
    ok, on_fork, on_base = True, {}, {}
    for name, args in selection.runs.items():
        try:
            with ThreadPoolExecutor(max_workers=1) as pool:
                later = pool.submit(runner.collect, base, args, f"{name}-base-collect")
                on_fork[name] = runner.collect(fork, args, f"{name}-fork-collect")
                on_base[name] = set(later.result())
        except ForkToolError as e:
            print(f"SUITE: {e}")
            ok = False
            on_fork.pop(name, None)
    ran = _on_fork(fork, runner, on_fork, selection)
    runs = {}
    for name, ids in on_fork.items():
        args, both = selection.runs[name], (ids, on_base[name])
        fine, runs[name] = _compared(fork, base, runner, name, args, both, ran[name])
        ok = ok and fine
    print(f"upstream selection: {'ok' if ok else 'FAILED'}")
    return Measured(ok, data={"runs": runs})
