"""The registry of checks, how they run, and the results they leave.

A check (`Check`) says its name (also its results file), title, the command
that refreshes its result, how it is measured, whether it gates `test` (and
`setup`) and whether the PR description reads it. The entries are the
`CHECKS` of the modules in `REGISTERED`. `setup` and `test` run them: the
required ones first, then the others in turn, those marked `background` each
in a background process (a process group, ended when the tool stops; its
output goes to a log printed when it ends, its result comes back as JSON
through a pipe).

Each run leaves one JSON file per check under build/results/, naming the
fork tree and the digest of each input (`inputs_id`) it was measured with, so
a reader (reports, the PR text) can refuse one measured on another tree than
the fork's current HEAD or with other content of an input its check reads.
"""

from __future__ import annotations

import contextlib
import hashlib
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
from typing import TYPE_CHECKING, Any

from forktool.layout import LAYOUT, Layout
from forktool.process import ForkToolError, git

if TYPE_CHECKING:
    from forktool.pins import Pins
    from forktool.prerequisites import Program
    from forktool.selection import Selection

SETUP = "python3 -m forktool setup"
TEST = "python3 -m forktool test"


@dataclass
class CheckResult:
    check: str  # the check's name in the registry, also the file name
    ok: bool
    tree: str  # `git rev-parse HEAD^{tree}` of the fork the check ran on
    base_version: str
    command: str  # the command that refreshes this result
    date: str = ""
    seconds: float = 0.0
    counts: dict[str, int] = field(default_factory=dict)
    # Name -> a few lines of real output (command and what it printed).
    excerpts: dict[str, str] = field(default_factory=dict)
    # Check-specific, machine-readable details (tables, per-test outcomes).
    data: dict[str, Any] = field(default_factory=dict)
    inputs: dict[str, str] = field(default_factory=dict)  # inputs_id() then


@dataclass
class Measured:
    """What a check found: its verdict and what its results file records.
    Truthy iff the check passed."""

    ok: bool
    counts: dict[str, int] = field(default_factory=dict)
    excerpts: dict[str, str] = field(default_factory=dict)
    data: dict[str, Any] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return self.ok


def fork_tree(fork: Path) -> str:
    return git(fork, "rev-parse", "HEAD^{tree}").stdout.strip()


def digest(*roots: Path) -> str:
    """The content of files and of the folders' files below `roots`, each
    file by its path and its content's own digest."""
    hashed = hashlib.sha256()
    for root in roots:
        for path in sorted([root, *root.rglob("*")]):
            if path.is_file() and "__pycache__" not in path.parts:
                name = path.relative_to(root.parent)
                content = hashlib.sha256(path.read_bytes()).hexdigest()
                hashed.update(f"{name}\0{content}\n".encode())
    return hashed.hexdigest()


def inputs_id(layout: Layout | None = None) -> dict[str, str]:
    """Each input the checks read in this clone besides the fork, the tool's
    code that measures and records them included, named by its path, with
    the digest of its content: a result measured with other content of one
    its check reads is stale too."""
    at = layout or LAYOUT
    code = (at.root / "forktool", at.root / "evidence")
    folders = (*code, at.fork_tests, at.root / "fuzz", at.root / "fixtures")
    files = (at.selection, at.equivalents, at.lock, at.root / "precommit.lock")
    paths = (*folders, *files, at.root / "pyproject.toml")
    return {str(path.relative_to(at.root)): digest(path) for path in paths}


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
        found = json.loads(path.read_text())
        if not isinstance(found.get("inputs"), dict):  # older files: not recorded
            found["inputs"] = {}
        return CheckResult(**found)
    except (ValueError, TypeError, AttributeError) as e:
        raise ForkToolError(f"{path} is not a results file: {e}") from e


@dataclass(frozen=True)
class Context:
    """What `setup` and `test` have made ready when the checks run."""

    pins: Pins
    venv: Path
    self_check: Measured  # the venv's self-check, run while `prepare` started vLLM
    selection: Selection


@dataclass(frozen=True)
class Check:
    name: str  # also its results file: build/results/<name>.json
    title: str
    command: str  # the command that refreshes its result
    # How `setup` and `test` measure it; None for a check only its own
    # command measures (`bench`).
    measure: Callable[[Context], Measured] | None = None
    gates_test: bool = True  # `test` runs it, and fails when it fails
    in_setup: bool = False  # `setup` runs it too
    required: bool = False  # it runs first; the others do not run when it fails
    # It runs in a background process while the others run in turn; its
    # output is shown when it ends. It must share no worktree with them.
    background: bool = False
    # The PR description reads its result; `pr` refuses without a current
    # one if it gates `test`.
    in_pr: bool = False
    # Its row in the table of the PR's Validation section (None: not
    # measured); a check with one is read by the PR description.
    pr_row: Callable[[CheckResult | None], str] | None = None
    needs: tuple[Program, ...] = ()  # programs it runs, checked before `test`
    # The inputs (inputs_id's names) its result depends on; None: all of them.
    reads: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if (self.gates_test or self.in_setup) and self.measure is None:
            raise ForkToolError(
                f"the check {self.name!r} gates `test` but says nothing of how "
                "to measure it: give it a measure, or gates_test=False"
            )
        if self.pr_row is not None:
            object.__setattr__(self, "in_pr", True)


REGISTERED = ("forktool.tool_checks", "evidence.checks")
"""The modules whose CHECKS are the registry, in the order `test` runs them:
the workflow's own checks, then the PR evidence's."""


def all_checks() -> tuple[Check, ...]:
    """Each registered module's CHECKS, in order; two of one name are refused."""
    found = [c for name in REGISTERED for c in importlib.import_module(name).CHECKS]
    names = [check.name for check in found]
    if twice := sorted({name for name in names if names.count(name) > 1}):
        raise ForkToolError(f"two checks have the name {', '.join(twice)}")
    return tuple(found)


class Background:
    """A check measured in a forked process of its own, output to
    build/logs/<name>.out, its measurement back as JSON through a pipe."""

    def __init__(self, check: Check, ctx: Context) -> None:
        log = LAYOUT.logs / f"{check.name}.out"
        self.check, self.log, self.ended = check, log, False
        log.parent.mkdir(parents=True, exist_ok=True)
        print(f"\n=== {check.title}: runs in the background (log: {log}) ===")
        sys.stdout.flush()
        sys.stderr.flush()
        self.answer, write = os.pipe()
        self.pid = os.fork()
        # The child measures, answers and ends without the tool's exit handlers.
        if self.pid == 0:
            os.close(self.answer)  # else a reader stays while the tool is gone
            code = 1
            try:
                os.setpgid(0, 0)
                sys.stdout = sys.stderr = open(log, "w", buffering=1)
                os.dup2(sys.stdout.fileno(), 1)
                os.dup2(sys.stdout.fileno(), 2)
                found, seconds = _timed(check, ctx)
                with os.fdopen(write, "w") as said:
                    json.dump([seconds, asdict(found)], said)
                code = 0
            except BaseException:  # the log shows it; the tool fails the check
                traceback.print_exc()
            finally:
                sys.stdout.flush()
                os._exit(code)
        # A group of its own, which `stop` ends with the processes it started
        # (set here too: `stop` may come before the child sets it).
        with contextlib.suppress(OSError):
            os.setpgid(self.pid, self.pid)
        os.close(write)

    def stop(self) -> None:
        """End the check's processes, unless it ended (`finish`)."""
        if not self.ended:
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
        status = os.waitstatus_to_exitcode(os.waitpid(self.pid, 0)[1])
        self.ended = True
        print(f"\n=== {self.check.title} ===")
        print(self.log.read_text(errors="replace"), end="", flush=True)
        if said:
            seconds, found = json.loads(said)
            return Measured(**found), seconds
        error = f"{self.check.name} ended with status {status}: see {self.log}"
        print(error)
        return Measured(False, excerpts={"error": error}), 0.0


def _timed(check: Check, ctx: Context) -> tuple[Measured, float]:
    assert check.measure is not None  # Check refuses a gating one without
    start = time.monotonic()
    return check.measure(ctx), time.monotonic() - start


def run_checks(ctx: Context, checks: list[Check], command: str, prepared: float) -> int:
    """Run the required checks, then the others in turn, those marked
    `background` in background processes; record each result, print a
    summary. A failed required check stops the run."""
    tree, inputs = fork_tree(LAYOUT.fork), inputs_id()
    written: list[tuple[str, CheckResult]] = []

    def done(check: Check, found: Measured, seconds: float) -> bool:
        result = record(check, found, seconds, ctx.pins.version, tree, inputs, command)
        written.append((check.title, result))
        return result.ok

    def in_turn(check: Check) -> bool:
        print(f"\n=== {check.title} ===", flush=True)
        return done(check, *_timed(check, ctx))

    if failed := next((c for c in checks if c.required and not in_turn(c)), None):
        print(f"\n{failed.title} failed: the other checks did not run.")
    else:
        later = [c for c in checks if not c.required]
        background = [Background(c, ctx) for c in later if c.background]
        try:
            for check in [c for c in later if not c.background]:
                in_turn(check)
            for started in background:
                done(started.check, *started.finish())
        finally:  # a check raised, or Ctrl-C: nothing runs on after the tool
            for started in background:
                started.stop()
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
    inputs: dict[str, str],
    command: str | None = None,
) -> CheckResult:
    """Write what a run of `check` on `tree` with `inputs` (inputs_id(), taken
    before it ran) found to the clone's results, as run by `command` (the
    check's own by default); the one place results are recorded."""
    result = CheckResult(
        check.name,
        tree=tree,
        base_version=base_version,
        seconds=round(seconds, 1),
        command=command or check.command,
        inputs=inputs,
        **asdict(found),
    )
    write(LAYOUT.results, result)
    return result


def problem(
    result: CheckResult | None, check: Check, tree: str, inputs: dict[str, str]
) -> str:
    """Why `result` cannot stand for the fork at `tree` with this clone's
    `inputs` (inputs_id()), or "" when it can."""
    if result is None:
        return f"{check.name}: no result; run `{check.command}`"
    if result.tree != tree:
        was = f"measured on tree {result.tree[:12]} on {result.date}"
        now = f"the fork is now at tree {tree[:12]}; run `{result.command}`"
        return f"{check.name}: stale, {was}, {now}"
    reads = inputs if check.reads is None else check.reads
    if changed := [n for n in reads if result.inputs.get(n) != inputs.get(n)]:
        said = f"another {', '.join(changed)}"
        if not result.inputs:  # a file from before inputs were recorded
            said = "no record of its inputs"
        said = f"measured on {result.date} with {said}"
        return f"{check.name}: stale, {said}; run `{result.command}`"
    return ""
