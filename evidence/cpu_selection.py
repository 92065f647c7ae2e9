"""vLLM's CPU selection (upstream's own `[[run]]`s) on the fork against the
pristine base: its collected test ids on both, and its outcomes on the fork;
the base runs only the tests that do not pass on the fork, to tell a failure
the series brings from one the base already has. The series may add passing
tests but must not lose any.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from evidence.worktrees import worktree
from forktool.checks import Measured
from forktool.layout import Layout
from forktool.process import BASE_TAG, ForkToolError
from forktool.pytest_runner import Result, Runner
from forktool.selection import Selection

SHARDS = 2
"""Processes the selection is dealt to, one a core of this machine; each
imports vLLM and collects the tests of its share, so one more costs a
minute of CPU."""


@dataclass(frozen=True)
class Comparison:
    added: list[str]  # collected on the fork only: tests the series adds
    lost: list[str]  # collected on the base only: tests the series removes
    new: list[str]  # fail on the fork, not on the base (or the base lacks them)
    pre_existing: list[str]  # fail on the fork and on the base alike
    skipped: list[str]  # pass on the base, skipped on the fork
    flaky: list[str] = field(default_factory=list)  # failed, then passed again

    @property
    def ok(self) -> bool:
        return not (self.lost or self.new or self.skipped)

    def report(self) -> list[str]:
        kinds = [
            ("collected on the base, not on the fork", self.lost),
            ("fails on the fork, not on the base", self.new),
            ("fails on the fork and on the base (pre-existing)", self.pre_existing),
            ("passes on the base, skipped on the fork", self.skipped),
            ("flaky: failed on the fork, passed there when run again", self.flaky),
        ]
        return [f"SUITE: {what}: {test}" for what, tests in kinds for test in tests]


def needs_base(on_fork: Result, base_ids: set[str]) -> list[str]:
    """The fork's tests that did not pass and that the base has too."""
    return sorted(
        t for t, o in on_fork.outcomes.items() if o != "passed" and t in base_ids
    )


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
    failing_on_base = failing & set(on_base.with_outcome("failed", "error"))
    skipped = set(on_fork.with_outcome("skipped")) & set(on_base.with_outcome("passed"))
    return Comparison(
        added=sorted(fork_ids - base_ids),
        lost=sorted(base_ids - fork_ids),
        new=sorted(failing - failing_on_base),
        pre_existing=sorted(failing_on_base),
        skipped=sorted(skipped),
        flaky=sorted(flaky),
    )


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
    kept = Result(cached=result.cached)
    for f in fields(Result):
        whole = getattr(result, f.name)
        if isinstance(whole, dict):  # test id -> what the run said of it
            getattr(kept, f.name).update({t: whole[t] for t in ids if t in whole})
    return kept


def _on_fork(
    fork: Path,
    runner: Runner,
    collected: dict[str, tuple[list[str], set[str]]],
    selection: Selection,
) -> dict[str, Result]:
    """Each run's outcomes on the fork, by name, in SHARDS processes side by
    side. Runs with the same options share their processes: each process
    imports vLLM once, and one run's slow tail does not leave a core idle
    while the other finishes."""
    groups: dict[tuple[str, ...], list[str]] = {}
    for name, (ids, _) in collected.items():
        groups.setdefault(options(selection.runs[name]), []).extend(ids)
    found = {}
    for n, (opts, ids) in enumerate(groups.items(), 1):
        with ThreadPoolExecutor(max_workers=SHARDS) as pool:
            running = [
                pool.submit(runner.run, fork, (*opts, *part), f"selection-{n}-fork-{i}")
                for i, part in enumerate(shards(list(dict.fromkeys(ids)), SHARDS), 1)
            ]
            results = [run.result() for run in running]
        merged = found[opts] = Result(
            seconds=max((r.seconds for r in results), default=0)
        )
        merged.cached = bool(results) and all(r.cached for r in results)
        for result in results:
            merged.update(result)
        print(f"fork, {' '.join(opts) or 'no options'}: {merged.summary()}")
    return {
        name: only(found[options(selection.runs[name])], ids)
        for name, (ids, _) in collected.items()
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
    runs = (("fork-again", fork, failed), ("base", base, rerun))
    with ThreadPoolExecutor(max_workers=2) as pool:
        running = {
            label: pool.submit(
                runner.run, tree, (*options(args), *ids), f"{name}-{label}"
            )
            for label, tree, ids in runs
            if ids
        }
    again = running["fork-again"].result() if failed else None
    on_base = running["base"].result() if rerun else Result()
    if again is not None:
        print(f"{name}: fork, the {len(failed)} failed run again: {again.summary()}")
    comparison = compare(fork_ids, base_ids, on_fork, on_base, again)
    print(
        f"{name}: collected {len(fork_ids)} on the fork, {len(base_ids)} on the "
        f"base: {len(comparison.added)} only on the fork (added by the series), "
        f"{len(comparison.lost)} only on the base"
    )
    if rerun:
        print(f"{name}: base, the {len(rerun)} not passing on the fork: "
              f"{on_base.summary()}")  # fmt: skip
    print("\n".join(comparison.report()) or f"{name}: nothing lost, nothing new")
    data = {
        "args": list(args),
        "fork": {"collected": len(fork_ids), "counts": dict(on_fork.counts())},
        "base": {
            "collected": len(base_ids),
            "rerun": len(rerun),
            "counts": dict(on_base.counts()),
        },
        **asdict(comparison),
    }
    return comparison.ok and bool(on_fork.outcomes), data


def cpu_selection(layout: Layout, runner: Runner, selection: Selection) -> Measured:
    """Upstream's CPU selection on the fork, compared with the pristine base."""
    fork = layout.fork
    # A base of its own: this check runs in the background of those using
    # layout.base_tree.
    base = worktree(fork, layout.trees / "selection-base", BASE_TAG)
    ok, collected = True, {}
    for name, args in selection.runs.items():
        try:
            with ThreadPoolExecutor(max_workers=1) as pool:
                on_base = pool.submit(
                    runner.collect, base, args, f"{name}-base-collect"
                )
                on_fork = runner.collect(fork, args, f"{name}-fork-collect")
                collected[name] = (on_fork, set(on_base.result()))
        except ForkToolError as e:
            print(f"SUITE: {e}")
            ok = False
    on_fork_by_run = _on_fork(fork, runner, collected, selection)
    runs = {}
    for name, both in collected.items():
        fine, runs[name] = _compared(
            fork, base, runner, name, selection.runs[name], both, on_fork_by_run[name]
        )
        ok = ok and fine
    print(f"upstream selection: {'ok' if ok else 'FAILED'}")
    return Measured(ok, data={"runs": runs})
