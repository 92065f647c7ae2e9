"""Running mutants: each written into a scratch worktree of the fork (one per
worker, two side by side), where the series' regression selection runs with
-x, then this repository's fork tests if it survived. The outcome: killed
(series) or killed (fork tests only) (by the first test that failed), or
survived.

Each worker is a warm server (evidence/pytest_server.py) that imported the
tree's vllm and the tests once and runs a mutant inside a function in a fork
of itself, the function's code swapped; a mutant that runs at import gets a
fresh pytest.
"""

from __future__ import annotations

import json
import queue
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from evidence.mutants import Mutant
from evidence.pytest_server import SWAP_FAILED
from evidence.tree_process import TreeProcess
from forktool.layout import LAYOUT
from forktool.process import ForkToolError
from forktool.pytest_outcomes import read_report
from forktool.pytest_runner import Result, Runner, report_args, report_env, test_env
from forktool.selection import Selection
from forktool.venv import python

WORKERS = 2
SERVER = Path(__file__).with_name("pytest_server.py")
READY_TIMEOUT_S = 600.0
RUN_TIMEOUT_S = 900.0


KILLED_SERIES = "killed (series)"
KILLED_FORK_TESTS = "killed (fork tests only)"


@dataclass(frozen=True)
class Outcome:
    kind: str
    """KILLED_SERIES (by the regression selection), KILLED_FORK_TESTS (only by
    fork_tests/), survived or equivalent."""
    detail: str = ""
    """The killing test, or why the mutant is equivalent."""

    @property
    def outcome(self) -> str:
        """killed, survived or equivalent."""
        return self.kind.split()[0]


def runs(selection: Selection) -> list[tuple[tuple[str, ...], tuple[Path, ...]]]:
    """(pytest arguments, files outside the tree they read): the regression
    selection, then the fork tests in a pytest of their own, as the matrix runs them."""
    runs: list[tuple[tuple[str, ...], tuple[Path, ...]]] = [(selection.regression, ())]
    if selection.fork_tests:
        paths = tuple(LAYOUT.root / path for path in selection.fork_tests)
        runs.append(((f"--rootdir={LAYOUT.root}", *map(str, paths)), paths))
    return runs


def first_failure(result: Result, log: Path) -> str:
    """The first test that failed or errored; a run without results counts
    as killed too (the baseline passed), its log named."""
    failed = [t for t, o in result.outcomes.items() if o in ("failed", "error")]
    if failed:
        return failed[0]
    return "" if result.outcomes else f"no test result (see {log})"


class WarmPytest(TreeProcess):
    """evidence/pytest_server.py in `tree`: the tree's vllm and the selection's
    tests imported once; each run a fork of it with one function's code swapped."""

    def __init__(self, tree: Path, runner: Runner, selection: Selection) -> None:
        warm = [runner.arguments(tree, args) for args, _ in runs(selection)]
        command = [python(runner.venv), str(SERVER), json.dumps(warm)]
        env = report_env(test_env(runner.hf_home))
        super().__init__(f"mutate-{tree.name}", tree, command, env)
        self.runner = runner

    def run(self, mutant: Mutant, args: tuple[str, ...], log: Path) -> Result | None:
        """The outcomes of a fork running `args` with `mutant`'s function
        swapped in; None when it could not be swapped in."""
        with tempfile.TemporaryDirectory() as tmp:
            report = Path(tmp, "report.jsonl")
            arguments = self.runner.arguments(self.tree, args)
            self.write(
                {
                    "module": mutant.path.removesuffix(".py").replace("/", "."),
                    "qualname": mutant.function,
                    "file": str(self.tree / mutant.path),
                    "args": [*arguments, "-q", "-rfE", *report_args(report)],
                    "log": str(log),
                }
            )
            if self.read(RUN_TIMEOUT_S)["status"] == SWAP_FAILED:
                return None
            return Result.of(read_report(report))


def classify(
    mutant: Mutant,
    tree: Path,
    runner: Runner,
    selection: Selection,
    label: str,
    server: WarmPytest | None = None,
) -> Outcome:
    """Run the selection against `mutant`, written into `tree`, then restore
    the file.

    A mutant inside a function runs in a fork of the warm `server` (the file
    is written too, for any process the tests start); one that runs at
    import, whose function could not be swapped, or without a server, in a
    fresh pytest.
    """
    target = tree / mutant.path
    log = runner.logs / f"{label}.log"
    original = target.read_text()
    target.write_text(mutant.source)
    try:
        for n, (args, inputs) in enumerate(runs(selection)):
            result = None
            if mutant.function and server is not None:
                result = server.run(mutant, ("-x", *args), log)
            if result is None:
                result = runner.run(tree, ("-x", *args), label, inputs)
            killer = first_failure(result, log)
            if killer:
                return Outcome(KILLED_FORK_TESTS if n else KILLED_SERIES, killer)
        return Outcome("survived")
    finally:
        target.write_text(original)


def run_all(
    todo: list[Mutant],
    trees: list[Path],
    runner: Runner,
    selection: Selection,
    warm: bool = True,
) -> dict[str, Outcome]:
    """Each mutant's outcome by id, the trees working side by side (each
    with a warm server, unless not `warm`: then each mutant in a fresh pytest)."""
    waiting: queue.SimpleQueue[tuple[int, Mutant]] = queue.SimpleQueue()
    for item in enumerate(todo, 1):
        waiting.put(item)
    found: dict[str, Outcome] = {}

    def work(tree: Path, server: WarmPytest | None) -> None:
        if server is not None:
            server.wait_ready(READY_TIMEOUT_S)
        while True:
            try:
                n, mutant = waiting.get_nowait()
            except queue.Empty:
                return
            label = f"mutant-{n:03d}"
            outcome = classify(mutant, tree, runner, selection, label, server)
            found[mutant.id] = outcome
            print(f"mutant {n}/{len(todo)}: {row(mutant, outcome)}", flush=True)

    servers = [WarmPytest(tree, runner, selection) if warm else None for tree in trees]
    try:
        with ThreadPoolExecutor(max_workers=len(trees)) as pool:
            list(pool.map(work, trees, servers))
    finally:
        for server in servers:
            if server is not None:
                server.close()
    return found


def baseline(tree: Path, runner: Runner, selection: Selection) -> None:
    """The selection must pass on the unmutated tree, or no kill means anything.

    The same runs as the regression matrix's at the series' head, so after
    the matrix (as `test` runs them) they come from its cache."""
    for args, inputs in runs(selection):
        result = runner.run(tree, args, "mutate-baseline", inputs)
        failing = result.with_outcome("failed", "error")
        if failing or not result.outcomes:
            raise ForkToolError(
                "the regression selection does not pass on the fork itself, so "
                f"mutants would tell nothing: {failing or 'no test ran'}"
            )


def row(mutant: Mutant, outcome: Outcome) -> str:
    return f"{mutant.path}:{mutant.line}  {mutant.mutation}  {outcome.kind}" + (
        f"  {outcome.detail}" if outcome.detail else ""
    )
