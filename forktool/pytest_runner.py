"""Run pytest for the tool: vLLM's tests from a fork tree on a CPU-only
machine, offline, and this repository's own tests; what a run did.

The selection lives in upstream-tests.toml. Every run loads the plugin
forktool/pytest_report.py, which writes each test's outcome as JSON lines
(pytest's own node ids, each failure's exception and crash message); the
runner prints a progress line from them while pytest runs (its output goes
to a log in build/logs/) and reads the outcomes (`Result`) from them at the
end; and forktool/pytest_affinity.py, which gives each test the CPUs the run
started with. Outcomes of vLLM's tests are cached by the tested tree's git
tree id: a clean tree with the same content, arguments, fixtures and venv
cannot give another result.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shlex
import subprocess
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from forktool import process
from forktool.layout import LAYOUT
from forktool.pins import cache_dir
from forktool.process import ForkToolError, git
from forktool.venv import compiling_once, python, venv_id

PROGRESS_EVERY = 20.0
"""Seconds between progress lines while a selection runs."""
ROOT = Path(__file__).resolve().parents[1]
"""This repository, which holds the plugins."""
CACHE_FORMAT = "report-3"
"""Part of each cached outcome's key: a new format of Result, or a new way
of running the tests (report-2: pytest_affinity; report-3: test_env's
bytecode prefix and humming's builds off), a new key."""
OUTCOMES = ("passed", "failed", "error", "skipped")
FAILING = ("failed", "error")


@dataclass
class Result:
    outcomes: dict[str, str] = field(default_factory=dict)  # node id -> OUTCOMES
    # Node id -> skip reason or failure (crash) message.
    reasons: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    cached: bool = False
    # Failed or errored node id -> its exception's type, as pytest caught it.
    exception_types: dict[str, str] = field(default_factory=dict)
    # Failed or errored node id -> the last lines of its traceback.
    tails: dict[str, str] = field(default_factory=dict)

    def counts(self) -> Counter[str]:
        return Counter(self.outcomes.values())

    def counted(self) -> str:
        c = self.counts()
        return ", ".join(f"{c[o]} {o}" for o in OUTCOMES if c[o]) or "nothing ran"

    def summary(self) -> str:
        how = "cached" if self.cached else f"{self.seconds:.0f} s"
        return f"{self.counted()} ({how})"

    def with_outcome(self, *outcomes: str) -> list[str]:
        return sorted(t for t, o in self.outcomes.items() if o in outcomes)

    def exceptions(self) -> dict[str, str]:
        """Each failed or errored test's exception type ("" when unknown)."""
        failing = self.with_outcome("failed", "error")
        return {t: self.exception_types.get(t, "") for t in failing}

    def update(self, other: Result) -> None:
        """Add `other`'s tests (another pytest run) to these."""
        for name in ("outcomes", "reasons", "exception_types", "tails"):
            getattr(self, name).update(getattr(other, name))

    @classmethod
    def of(cls, records: list[dict[str, Any]], seconds: float = 0.0) -> Result:
        """From the plugin's reports: each phase (setup, call, teardown) of a
        test, or a collection error. A failure outside the call is an error;
        a failure is kept over what a later phase says."""
        result = cls(seconds=seconds)
        for r in records:
            test = r.get("nodeid", "")
            if r.get("event") != "report" or result.outcomes.get(test) in FAILING:
                continue
            when, outcome = r["when"], r["outcome"]
            if outcome == "failed":
                result.outcomes[test] = "failed" if when == "call" else "error"
                result.reasons[test] = r.get("message", "")
                result.exception_types[test] = r.get("exception", "")
                result.tails[test] = r.get("tail", "")
            elif when == "call" or outcome == "skipped":
                result.outcomes[test] = outcome
                if r.get("message"):
                    result.reasons[test] = r["message"]
        return result


def read_report(path: Path) -> list[dict[str, Any]]:
    """The plugin's records so far; a line still being written is left out."""
    records = []
    for line in path.read_text(errors="replace").splitlines() if path.exists() else []:
        with contextlib.suppress(json.JSONDecodeError):
            records.append(json.loads(line))
    return records


def progress(records: list[dict[str, Any]], seconds: float) -> str:
    """How far a run has come, from the plugin's records so far."""
    result = Result.of(records)
    total = [f"/{r['count']}" for r in records if r.get("event") == "collected"]
    failed = len(result.with_outcome("failed", "error"))
    minutes, rest = divmod(int(seconds), 60)
    done = f"{len(result.outcomes)}{''.join(total[:1])} tests done"
    return f"{done}, {failed} failed, {minutes} min {rest:02d} s"


def test_env(hf_home: Path, pycache: Path = LAYOUT.pycache) -> dict[str, str]:
    env = {
        **os.environ,
        "VLLM_TARGET_DEVICE": "cpu",
        "CUDA_VISIBLE_DEVICES": "",
        "HF_HOME": str(hf_home),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        # humming, which vLLM's model runner imports, starts two Python
        # processes at import to build its CUDA launcher in the background;
        # without a GPU they fail, after the test process has exited.
        "HUMMING_DISABLE_PARALLEL_BUILD": "1",
        # Base and fork run side by side; one torch thread each is a third
        # faster on two cores than letting them contend.
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
    }
    return compiling_once(env, pycache)


def report_env(env: dict[str, str]) -> dict[str, str]:
    """`env` with this repository last on PYTHONPATH, for the plugins: after
    the tree pytest runs in (`python -m pytest` puts it first) and after
    what PYTHONPATH held already."""
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    return {**env, "PYTHONPATH": os.pathsep.join([*paths, str(ROOT)])}


def report_args(path: Path) -> list[str]:
    """pytest's arguments that load the plugins: the one writing its report
    to `path`, and the one giving each test the CPUs the run started with."""
    report = ["-p", "forktool.pytest_report", f"--forktool-report={path}"]
    return [*report, "-p", "forktool.pytest_affinity"]


@dataclass
class Session:
    """One pytest process's end: its exit status, the plugin's records, the
    log its output went to and how long it ran."""

    status: int
    records: list[dict[str, Any]]
    log: Path
    seconds: float

    def result(self) -> Result:
        return Result.of(self.records, self.seconds)

    def collection_errors(self) -> list[str]:
        failed = [
            r
            for r in self.records
            if r.get("when") == "collect" and r.get("outcome") == "failed"
        ]
        return [f"{r['nodeid']}: {r.get('message', '')}" for r in failed]


def run_pytest(
    cmd: list[str], cwd: Path, env: dict[str, str], log: Path, label: str
) -> Session:
    """Run `cmd` (python -m pytest ...) with the plugins, its output to `log`
    and its report next to it (`.jsonl`), a progress line every
    PROGRESS_EVERY seconds."""
    log.parent.mkdir(parents=True, exist_ok=True)
    report, line = log.with_suffix(".jsonl"), shlex.join(cmd[1:])
    log.write_text(f"{line}\n\n")
    shown = line if len(line) < 400 else f"{line[:400]} ..."
    print(f"[{label}] {shown}  (log: {log})", flush=True)
    with log.open("a") as out:
        start, full = time.monotonic(), [*cmd, *report_args(report)]
        proc = process.start(full, cwd=cwd, env=report_env(env), stdout=out, stderr=out)
        while True:
            with contextlib.suppress(subprocess.TimeoutExpired):
                status = proc.wait(timeout=PROGRESS_EVERY)
                break
            said = progress(read_report(report), time.monotonic() - start)
            print(f"[{label}] {said}", flush=True)
    return Session(status, read_report(report), log, time.monotonic() - start)


def _digest(*roots: Path) -> str:
    """The content of files and of the folders' files below `roots`."""
    digest = hashlib.sha256()
    for root in roots:
        for path in sorted([root, *root.rglob("*")]):
            if path.is_file() and "__pycache__" not in path.parts:
                digest.update(str(path.relative_to(root.parent)).encode())
                digest.update(path.read_bytes())
    return digest.hexdigest()


def _keep(path: Path | None, value: Any) -> None:
    if path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(value))


@dataclass(frozen=True)
class Runner:
    """Everything a pytest run depends on besides the tree and its arguments."""

    venv: Path
    fixtures: Path
    hf_home: Path
    excluded: dict[str, str]
    logs: Path

    def _cached(
        self,
        kind: str,
        tree: Path,
        args: tuple[str, ...],
        inputs: tuple[Path, ...] = (),
    ) -> tuple[Any, Path | None]:
        """The outcome of `kind` kept for this clean tree (None if none) and where
        it is kept (None if dirty). `inputs` are files outside the tree that the
        run reads (fork_tests/)."""
        if git(tree, "status", "--porcelain").stdout:  # its content is unknown
            return None, None
        content = git(tree, "rev-parse", "HEAD^{tree}").stdout.strip()
        inputs_id = _digest(self.fixtures, *inputs)
        key = [CACHE_FORMAT, kind, content, args, self.excluded, inputs_id]
        text = json.dumps([*key, venv_id(self.venv)]).encode()
        path = cache_dir() / "results" / f"{hashlib.sha256(text).hexdigest()}.json"
        return (json.loads(path.read_text()) if path.exists() else None), path

    def arguments(self, tree: Path, args: tuple[str, ...]) -> list[str]:
        """pytest's arguments (after `python -m pytest`) for `args` in `tree`."""
        # Paths the tree lacks (a test file a later patch adds) are left out.
        tests = {a: tree / a.split("::")[0] for a in args if a.startswith("tests/")}
        kept = [a for a in args if a not in tests or tests[a].exists()]
        return ["-p", "no:cacheprovider", *self._deselect(), *kept]

    def _deselect(self) -> list[str]:
        return [f"--deselect={test}" for test in self.excluded]

    def _pytest(self, tree: Path, args: tuple[str, ...], label: str) -> Session:
        # `python -m pytest` puts the working directory first on sys.path,
        # so `import vllm` loads this tree's vllm/, whichever tree it is.
        cmd = [str(python(self.venv)), "-m", "pytest", *self.arguments(tree, args)]
        env = test_env(self.hf_home)
        return run_pytest(cmd, tree, env, self.logs / f"{label}.log", label)

    def collect(self, tree: Path, args: tuple[str, ...], label: str) -> list[str]:
        """The test ids `args` select in `tree` (pytest --collect-only)."""
        ids, path = self._cached("collect", tree, args)
        if ids is not None:
            return list(ids)
        session = self._pytest(tree, (*args, "--collect-only", "-q"), label)
        took = f"{session.seconds:.0f} s (log: {session.log})"
        print(f"[{label}] collected in {took}", flush=True)
        collected = [r for r in session.records if r.get("event") == "collected"]
        if session.status not in (0, 5) or not collected:  # 5: nothing collected
            errors = "".join(f"\n  {e}" for e in session.collection_errors()[:5])
            raise ForkToolError(
                f"pytest could not collect {label}; see {session.log}{errors}"
            )
        ids = collected[0]["ids"]
        _keep(path, ids)
        return list(ids)

    def run(
        self,
        tree: Path,
        args: tuple[str, ...],
        label: str,
        inputs: tuple[Path, ...] = (),
        expected: tuple[str, ...] = (),
    ) -> Result:
        """Run pytest with `args` in `tree`, which is what `import vllm` loads.

        `inputs` are files outside the tree that the run reads (fork_tests/).
        The outcome is kept for the next run unless a test failed that
        `expected` (node ids, or their prefixes, that must or may fail in
        `tree`) does not name: that failure may be flaky.
        """
        kept, path = self._cached("run", tree, args, inputs)
        if kept is not None:
            return Result(**{**kept, "cached": True})
        session = self._pytest(tree, (*args, "-v", "-rfE"), label)
        result = session.result()
        if not result.outcomes:
            said = f"no test ran (exit status {session.status}); see {session.log}"
            print(f"[{label}] {said}", flush=True)
        failed = result.with_outcome("failed", "error")
        if result.outcomes and all(test.startswith(expected) for test in failed):
            _keep(path, asdict(result))
        return result

    def command(self, args: tuple[str, ...]) -> str:
        """How to run `args` by hand from a tree's root, as this runner does."""
        pytest = ["python", "-m", "pytest", "-q", *self._deselect(), *args]
        env = "HF_HUB_OFFLINE=1 CUDA_VISIBLE_DEVICES='' VLLM_TARGET_DEVICE=cpu"
        return f"{env} {shlex.join(pytest)}"


def failures(result: Result, most: int | None = None, tails: bool = False) -> str:
    """Each failed or errored test with its exception's message (the first
    `most`; with `tails`, the end of its traceback too), then the counts."""
    failing = result.with_outcome("failed", "error")
    lines = []
    for test in failing[:most]:
        word = "FAILED" if result.outcomes[test] == "failed" else "ERROR"
        message = result.reasons.get(test, "").strip().partition("\n")[0]
        lines.append(f"{word} {test} - {message}" if message else f"{word} {test}")
        if tails and result.tails.get(test):
            lines += [f"    {line}" for line in result.tails[test].splitlines()]
    if most is not None and len(failing) > most:
        lines.append(f"({len(failing) - most} more failing tests)")
    # The run's own time, cached or not: the evidence is of that run.
    return "\n".join([*lines, f"{result.counted()} ({result.seconds:.0f} s)"])


def excerpt(runner: Runner, result: Result, args: tuple[str, ...], **how: Any) -> str:
    """Evidence for a reader of a run of `args`: the command to run it by
    hand, then `failures(result, **how)`."""
    return f"$ {runner.command(args)}\n{failures(result, **how)}"
