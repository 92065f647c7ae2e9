"""Mutation testing of the lines the series adds (`python3 -m forktool mutate`,
and the check `mutants` of `test`).

Mutants are plausible one-line mistakes in each line the series adds under
vllm/ (evidence/mutants.py makes them). Each is run against the series'
regression selection, then this repository's fork tests if it survived
(evidence/mutate_runs.py): the mutant is killed (series) or killed (checks
only) (by the first test that failed), survived, or equivalent (listed with
a reason in mutants-equivalent.toml, and not run). The series'
own tests must guard every line it adds: a mutant only fork_tests/ kills fails
the check unless its line is listed as GPU-only (`[[mutate.gpu_only]]` in
upstream-tests.toml, with why no CPU test reaches it). Outcomes are kept in
the results store with the fork's tree and the selection, so a rerun runs
only new mutants.
"""

from __future__ import annotations

import hashlib
import json
import time
import tomllib
from collections import Counter
from pathlib import Path

from evidence.mutants import Mutant, series_mutants
from evidence.mutate_runs import (
    KILLED_FORK_TESTS,
    KILLED_SERIES,
    WORKERS,
    Outcome,
    baseline,
    run_all,
)
from evidence.worktrees import worktree
from forktool import checks
from forktool.checks import Measured
from forktool.layout import LAYOUT
from forktool.process import ForkToolError, git
from forktool.pytest_runner import Runner
from forktool.selection import Selection
from forktool.venv import venv_id

NAME = "mutants"
"""The check's name in the registry, and so its results file."""
COMMAND_LINE = "python3 -m forktool mutate"


def _reasons(
    path: Path, section: tuple[str, ...], keys: tuple[str, ...]
) -> dict[tuple[str, ...], str]:
    """The entries of the array of tables `section` in `path`: their `keys`
    -> their reason."""
    if not path.exists():
        return {}
    try:
        with path.open("rb") as f:
            data = tomllib.load(f)
        for name in section[:-1]:
            data = data.get(name, {})
        entries = data.get(section[-1], [])
        return {tuple(e[k] for k in keys): e["reason"] for e in entries}
    except (OSError, tomllib.TOMLDecodeError, KeyError) as e:
        raise ForkToolError(f"cannot read {path}: {e}") from e


def load_equivalents(path: Path) -> dict[tuple[str, ...], str]:
    """(file, line text, mutation) -> why no test can tell the mutant apart."""
    return _reasons(path, ("equivalent",), ("file", "line", "mutation"))


def load_gpu_only(path: Path) -> dict[tuple[str, ...], str]:
    """(file, line text) -> why no CPU test can reach that line."""
    return _reasons(path, ("mutate", "gpu_only"), ("file", "line"))


def selection_key(selection: Selection, runner: Runner) -> str:
    """What outcomes depend on besides the tree: the selection, fork_tests/, the venv
    (by the digest of the lock it was made from)."""
    digest = hashlib.sha256(
        json.dumps(
            [
                selection.regression,
                selection.fork_tests,
                runner.excluded,
                venv_id(runner.venv),
            ]
        ).encode()
    )
    for tests in selection.fork_tests:
        for path in sorted((LAYOUT.root / tests).rglob("*.py")):
            digest.update(path.read_bytes())
    return digest.hexdigest()


def cached(store: Path, tree: str, key: str) -> dict[str, Outcome]:
    """The outcomes measured on this tree with this selection, by mutant id
    (a row without a kind, from an older forktool, runs again)."""
    old = checks.read(store, NAME)
    if old is None or old.tree != tree or old.data.get("key") != key:
        return {}
    return {
        m["id"]: Outcome(m["kind"], m["detail"])
        for m in old.data["mutants"]
        if m.get("kind", "equivalent") != "equivalent"
    }


def table(found: list[tuple[Mutant, Outcome]]) -> str:
    heads = ("file:line", "mutation", "outcome", "killed by / why equivalent")
    rows = [(f"{m.path}:{m.line}", m.mutation, o.kind, o.detail) for m, o in found]
    widths = [*(max(len(r[i]) for r in [heads, *rows]) for i in range(3)), 0]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in [heads, *rows]
    )


def counts(found: list[tuple[Mutant, Outcome]]) -> dict[str, int]:
    kinds = Counter(o.kind for _, o in found)
    return {
        "mutants": len(found),
        "killed": kinds[KILLED_SERIES] + kinds[KILLED_FORK_TESTS],
        "killed by the series": kinds[KILLED_SERIES],
        "killed only by fork tests": kinds[KILLED_FORK_TESTS],
        **{k: kinds[k] for k in ("survived", "equivalent")},
    }


def only_fork_tests(
    found: list[tuple[Mutant, Outcome]],
    gpu_only: dict[tuple[str, ...], str],
    listed_in: str,
) -> tuple[list[str], list[str]]:
    """The lines only fork_tests/ guards, one sentence each: notes for the lines
    listed as GPU-only, failures for the others."""
    lines: dict[tuple[str, int, str], list[str]] = {}
    for m, o in found:
        if o.kind == KILLED_FORK_TESTS:
            lines.setdefault((m.path, m.line, m.text), []).append(m.mutation)
    notes, failures = [], []
    for (file, line, text), mutations in sorted(lines.items()):
        what = f"{file}:{line} is guarded only by fork_tests/ ({', '.join(mutations)})"
        if reason := gpu_only.get((file, text)):
            notes.append(f"{what}: GPU-only, {reason}")
        else:
            failures.append(
                f"MUTANTS: {what}, not by the series' regression selection: make "
                "an upstream test reach it, or list the line under "
                f"[[mutate.gpu_only]] in {listed_in} with why no CPU test can"
            )
    return notes, failures


def known_outcomes(
    every: list[Mutant], known: dict[tuple[str, ...], str], done: dict[str, Outcome]
) -> dict[str, Outcome]:
    """The outcomes not to measure, by mutant id: the equivalent mutants (with
    their reason), and those measured before."""
    outcomes: dict[str, Outcome] = {}
    for m in every:
        reason = known.get((m.path, m.text, m.mutation))
        if reason or m.id in done:
            outcomes[m.id] = Outcome("equivalent", reason) if reason else done[m.id]
    return outcomes


def measure(
    todo: list[Mutant], fork: Path, trees: Path, runner: Runner, selection: Selection
) -> dict[str, Outcome]:
    """The outcomes of `todo`, in worktrees of the fork's HEAD under `trees`,
    once the unmutated selection passed."""
    if not todo:
        return {}
    baseline(fork, runner, selection)
    head = git(fork, "rev-parse", "HEAD").stdout.strip()
    scratch = [
        worktree(fork, trees / f"mutate-{i}", head) for i in range(1, WORKERS + 1)
    ]
    return run_all(todo, scratch, runner, selection)


def summary(tally: dict[str, int], seconds: float, ran: int) -> str:
    return (
        f"{tally['mutants']} mutants: {tally['killed']} killed "
        f"({tally['killed by the series']} by the series' regression selection, "
        f"{tally['killed only by fork tests']} only by fork_tests/), "
        f"{tally['survived']} survived, {tally['equivalent']} equivalent; "
        f"{seconds:.0f} s, {ran} run"
    )


def stale_entries(
    every: list[Mutant],
    known: dict[tuple[str, ...], str],
    gpu_only: dict[tuple[str, ...], str],
    equivalents: Path,
    gpu_lines: Path,
) -> list[str]:
    """The entries of the two lists that name no mutant (any more)."""
    lines = [
        f"{equivalents.name}: no mutant is {file}: {line!r}: {mutation}"
        for file, line, mutation in sorted(
            set(known) - {(m.path, m.text, m.mutation) for m in every}
        )
    ]
    return lines + [
        f"{gpu_lines.name}: gpu_only: no mutant's line is {file}: {line!r}"
        for file, line in sorted(set(gpu_only) - {(m.path, m.text) for m in every})
    ]


def rows(
    found: list[tuple[Mutant, Outcome]], gpu_only: dict[tuple[str, ...], str]
) -> list[dict[str, object]]:
    """Each mutant and its outcome, as the results store keeps them."""
    return [
        {
            "id": m.id,
            "file": m.path,
            "line": m.line,
            "text": m.text,
            "mutation": m.mutation,
            "outcome": o.outcome,
            "kind": o.kind,
            "detail": o.detail,
            "gpu_only": gpu_only.get((m.path, m.text), ""),
        }
        for m, o in found
    ]


def mutation_testing(
    fork: Path,
    trees: Path,
    runner: Runner,
    selection: Selection,
    store: Path,
    equivalents: Path = LAYOUT.equivalents,
    gpu_lines: Path = LAYOUT.selection,
) -> Measured:
    """The check: every mutant of the series' added lines killed or equivalent,
    and killed by the series' regression selection unless its line is GPU-only.

    Reuses the outcomes in `store` measured on the fork's tree with this
    selection; runs the other mutants in worktrees under `trees`.
    """
    start = time.monotonic()
    every = series_mutants(fork)
    known = load_equivalents(equivalents)
    gpu_only = load_gpu_only(gpu_lines)
    key = selection_key(selection, runner)
    done = cached(store, checks.fork_tree(fork), key)
    outcomes = known_outcomes(every, known, done)
    todo = [m for m in every if m.id not in outcomes]
    print(
        f"{len(every)} mutants of the series' added lines under vllm/: "
        f"{len(todo)} to run, {len(every) - len(todo)} known",
        flush=True,
    )
    outcomes.update(measure(todo, fork, trees, runner, selection))
    found = [(m, outcomes[m.id]) for m in every]
    tally = counts(found)
    notes, failures = only_fork_tests(found, gpu_only, gpu_lines.name)
    said = summary(tally, time.monotonic() - start, len(todo))
    text = "\n".join([table(found), said, *notes, *failures])
    print(text)
    for line in stale_entries(every, known, gpu_only, equivalents, gpu_lines):
        print(line)
    ok = not tally["survived"] and not failures
    print(f"mutation testing: {'ok' if ok else 'FAILED'}")
    data = {"key": key, "mutants": rows(found, gpu_only)}
    return Measured(ok, tally, {"table": f"$ {COMMAND_LINE}\n{text}"}, data)
