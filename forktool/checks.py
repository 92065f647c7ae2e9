"""The registry of checks, how they run, and the results they leave.

A check (`Check`) says its name (also its results file), title, the command
that refreshes its result, how it is measured, whether it gates `test` (and
`setup`) and whether the PR description reads it. The entries are the
`CHECKS` of the modules in `REGISTERED`. `setup` and `test` run them: the
required ones first, then the others in turn, those marked `alongside` each
in a process of its own beside them (a process group, ended when the tool
stops; its output goes to a log printed when it ends, its result comes back
as JSON through a pipe).

Each run leaves one JSON file per check under build/results/, naming the
fork tree it was measured on, so a reader (reports, the PR text) can refuse
one measured on another tree than the fork's current HEAD.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from forktool.layout import LAYOUT
from forktool.process import ForkToolError, git


@dataclass
class CheckResult:
    check: str
    """The check's name in the registry, also the file name."""
    ok: bool
    tree: str
    """`git rev-parse HEAD^{tree}` of the fork the check ran on."""
    base_version: str
    command: str
    """The command that refreshes this result."""
    date: str = ""
    seconds: float = 0.0
    counts: dict[str, int] = field(default_factory=dict)
    excerpts: dict[str, str] = field(default_factory=dict)
    """Name -> a few lines of real output (command and what it printed)."""
    data: dict[str, Any] = field(default_factory=dict)
    """Check-specific, machine-readable details (tables, per-test outcomes)."""


@dataclass
class Measured:
    """What a check found: its verdict and what its results file records.

    Truthy iff the check passed, so callers that only want the verdict keep
    using it as a bool.
    """

    ok: bool
    counts: dict[str, int] = field(default_factory=dict)
    excerpts: dict[str, str] = field(default_factory=dict)
    data: dict[str, Any] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return self.ok


def fork_tree(fork: Path) -> str:
    return git(fork, "rev-parse", "HEAD^{tree}").stdout.strip()


def write(store: Path, result: CheckResult) -> Path:
    result.date = result.date or datetime.now(UTC).isoformat(timespec="seconds")
    store.mkdir(parents=True, exist_ok=True)
    path = store / f"{result.check}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(asdict(result), indent=1, sort_keys=True) + "\n")
    tmp.replace(path)
    return path


def read(store: Path, check: str) -> CheckResult | None:
    path = store / f"{check}.json"
    if not path.exists():
        return None
    try:
        return CheckResult(**json.loads(path.read_text()))
    except (ValueError, TypeError) as e:
        raise ForkToolError(f"{path} is not a results file: {e}") from e


if TYPE_CHECKING:
    from forktool.pins import Pins
    from forktool.prerequisites import Program
    from forktool.pytest_runner import Runner
    from forktool.selection import Selection

SETUP = "python3 -m forktool setup"
TEST = "python3 -m forktool test"


@dataclass(frozen=True)
class Context:
    """What `setup` and `test` have made ready when the checks run."""

    pins: Pins
    venv: Path
    self_check: Measured
    """The venv's self-check, run while `prepare` started vLLM."""
    tests: Runner
    """The pytest runner for vLLM's tests in the fork's venv."""
    selection: Selection


@dataclass(frozen=True)
class Check:
    name: str
    """Also its results file: build/results/<name>.json."""
    title: str
    command: str
    """The command that refreshes its result."""
    measure: Callable[[Context], Measured] | None = None
    """How `setup` and `test` measure it; None for a check only its own
    command measures (`bench`)."""
    gates_test: bool = True
    """`test` runs it, and fails when it fails."""
    in_setup: bool = False
    """`setup` runs it too."""
    required: bool = False
    """It runs before the others, which do not run when it fails."""
    alongside: bool = False
    """It runs in a process of its own, beside the checks that run in turn;
    its output is shown when it ends. It must share no worktree with them."""
    in_pr: bool = False
    """The PR description reads its result; `pr` refuses without a current
    one if it gates `test`."""
    pr_row: Callable[[CheckResult | None], str] | None = None
    """Its row in the table of the PR's Validation section (None: not
    measured); a check with one is read by the PR description."""
    needs: tuple[Program, ...] = field(default=())
    """Programs outside the tool it runs, checked before `test` starts."""

    def __post_init__(self) -> None:
        if (self.gates_test or self.in_setup) and self.measure is None:
            raise ForkToolError(
                f"the check {self.name!r} gates `test` but says nothing of how "
                "to measure it: give it a measure, or gates_test=False"
            )
        if self.pr_row is not None and not self.in_pr:
            object.__setattr__(self, "in_pr", True)


REGISTERED = ("forktool.tool_checks", "evidence.checks")
"""The modules whose CHECKS are the registry, in the order `test` runs them:
the workflow's own checks, then the PR evidence's."""


def registry() -> tuple[Check, ...]:
    """Each registered module's CHECKS, in order; two of one name are refused."""
    found = [c for name in REGISTERED for c in importlib.import_module(name).CHECKS]
    names = [check.name for check in found]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise ForkToolError(f"two checks have the name {', '.join(twice)}")
    return tuple(found)


@dataclass
class Beside:
    check: Check
    pid: int
    answer: int
    """The pipe's end the measurement comes through."""
    log: Path
    ended: bool = False

    @classmethod
    def start(cls, check: Check, ctx: Context, log: Path) -> Beside:
        """Start measuring `check` in a process of its own, output to `log`."""
        log.parent.mkdir(parents=True, exist_ok=True)
        print(f"\n=== {check.title}: runs beside the others (log: {log}) ===")
        sys.stdout.flush()
        sys.stderr.flush()
        answer, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(answer)
            _measure(check, ctx, log, write)
        # A group of its own, which `stop` ends with the processes it started
        # (set here too: `stop` may come before the child sets it).
        with contextlib.suppress(OSError):
            os.setpgid(pid, pid)
        os.close(write)
        return cls(check, pid, answer, log)

    def stop(self) -> None:
        """End the check's processes, unless it ended (`finish`)."""
        if self.ended:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, signal.SIGTERM)
        os.waitpid(self.pid, 0)
        os.close(self.answer)
        self.ended = True

    def finish(self) -> tuple[Measured, float]:
        """Wait for the check; print its output; what it measured, in how
        many seconds (a process that ended without an answer failed it)."""
        with os.fdopen(self.answer) as answer:
            said = answer.read()
        _, status = os.waitpid(self.pid, 0)
        self.ended = True
        print(f"\n=== {self.check.title} ===")
        print(self.log.read_text(errors="replace"), end="", flush=True)
        if not said:
            code = os.waitstatus_to_exitcode(status)
            error = f"{self.check.name} ended with status {code}: see {self.log}"
            print(error)
            return Measured(False, excerpts={"error": error}), 0.0
        measured = json.loads(said)
        seconds = measured.pop("seconds")
        return Measured(**measured), seconds


def _measure(check: Check, ctx: Context, log: Path, answer: int) -> NoReturn:
    """In the forked process: measure, answer, and end without running the
    tool's exit handlers (the tool's process runs those)."""
    code = 1
    try:
        os.setpgid(0, 0)
        out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
        os.dup2(out, 1)
        os.dup2(out, 2)
        sys.stdout = sys.stderr = open(1, "w", buffering=1, closefd=False)
        assert check.measure is not None  # Check refuses a gating one without
        start = time.monotonic()
        found = check.measure(ctx)
        with os.fdopen(answer, "w") as said:
            json.dump({"seconds": time.monotonic() - start, **asdict(found)}, said)
        code = 0
    except BaseException:  # the log shows it; the tool fails the check
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def all_checks() -> tuple[Check, ...]:
    """The workflow's checks, then the PR evidence's."""
    return registry()


def run_checks(ctx: Context, checks: list[Check], command: str, prepared: float) -> int:
    """Run the required checks, then the others in turn, those `alongside`
    in processes of their own beside them; record each result, print a
    summary. A failed required check stops the run."""
    tree = fork_tree(LAYOUT.fork)
    written: list[tuple[str, CheckResult]] = []
    for check in [c for c in checks if c.required]:
        written.append((check.title, _run(check, ctx, tree, command)))
        if not written[-1][1].ok:
            print(f"\n{check.title} failed: the other checks did not run.")
            return _summary(written, prepared)
    later = [c for c in checks if not c.required]
    beside = [
        Beside.start(c, ctx, LAYOUT.logs / f"{c.name}.out")
        for c in later
        if c.alongside
    ]
    try:
        for check in [c for c in later if not c.alongside]:
            written.append((check.title, _run(check, ctx, tree, command)))
        for started in beside:
            found, seconds = started.finish()
            check = started.check
            result = record(check, found, seconds, ctx.pins.version, tree, command)
            written.append((check.title, result))
    finally:  # a check raised, or Ctrl-C: nothing runs on after the tool
        for started in beside:
            started.stop()
    return _summary(written, prepared)


def _run(check: Check, ctx: Context, tree: str, command: str) -> CheckResult:
    assert check.measure is not None  # Check refuses a gating one without
    print(f"\n=== {check.title} ===", flush=True)
    start = time.monotonic()
    found = check.measure(ctx)
    seconds = time.monotonic() - start
    return record(check, found, seconds, ctx.pins.version, tree, command)


def _summary(written: list[tuple[str, CheckResult]], prepared: float) -> int:
    print(f"\n=== summary (results in {LAYOUT.results}) ===")
    print(f"{'':4}  {prepared:6.0f} s  prepare (sync, install, self-check)")
    for title, result in written:
        print(f"{'PASS' if result.ok else 'FAIL'}  {result.seconds:6.0f} s  {title}")
    return 0 if all(result.ok for _, result in written) else 1


def record(
    check: Check,
    found: Measured,
    seconds: float,
    base_version: str,
    tree: str,
    command: str | None = None,
    store: Path | None = None,
) -> CheckResult:
    """Write what a run of `check` found to the store, as run by `command`
    (the check's own by default), in `store` (the clone's by default); the
    one place results are recorded."""
    result = CheckResult(
        check.name,
        found.ok,
        tree,
        base_version,
        command or check.command,
        seconds=round(seconds, 1),
        counts=found.counts,
        excerpts=found.excerpts,
        data=found.data,
    )
    write(store or LAYOUT.results, result)
    return result


def problem(result: CheckResult | None, check: Check, tree: str) -> str:
    """Why `result` cannot stand for the fork at `tree`, or "" when it can."""
    if result is None:
        return f"{check.name}: no result; run `{check.command}`"
    if result.tree != tree:
        return (
            f"{check.name}: stale, measured on tree {result.tree[:12]} on "
            f"{result.date}, "
            f"the fork is now at tree {tree[:12]}; run `{result.command}`"
        )
    return ""
