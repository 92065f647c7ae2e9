"""Run pytest for the tool, offline, and read what a run did.

Every run loads the plugin forktool/pytest_report.py, which writes each
test's outcome as JSON lines (pytest's own node ids, each failure's
exception and crash message); the runner prints a progress line from them
while pytest runs (its output goes to a log in build/logs/) and reads the
outcomes (`Result`) from them at the end. Runs of vLLM's tests go through
evidence/vllm_tests.py.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import subprocess
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from forktool import process
from forktool.venv import compiling_once

PROGRESS_EVERY = 20.0
"""Seconds between progress lines while a selection runs."""
ROOT = Path(__file__).resolve().parents[1]
"""This repository, which holds the plugins."""
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
        return {t: self.exception_types.get(t, "") for t in self.with_outcome(*FAILING)}

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
    failed = len(result.with_outcome(*FAILING))
    minutes, rest = divmod(int(seconds), 60)
    done = f"{len(result.outcomes)}{''.join(total[:1])} tests done"
    return f"{done}, {failed} failed, {minutes} min {rest:02d} s"


def test_env(hf_home: Path) -> dict[str, str]:
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
    return compiling_once(env)


def report_env(env: dict[str, str]) -> dict[str, str]:
    """`env` with this repository last on PYTHONPATH, for the plugins: after
    the tree pytest runs in (`python -m pytest` puts it first) and after
    what PYTHONPATH held already."""
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    return {**env, "PYTHONPATH": os.pathsep.join([*paths, str(ROOT)])}


def report_args(path: Path) -> list[str]:
    """pytest's arguments that load the plugin writing its report to `path`."""
    return ["-p", "forktool.pytest_report", f"--forktool-report={path}"]


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
        return [
            f"{r['nodeid']}: {r.get('message', '')}"
            for r in self.records
            if r.get("when") == "collect" and r.get("outcome") == "failed"
        ]


def run_pytest(
    cmd: list[str], cwd: Path, env: dict[str, str], log: Path, label: str
) -> Session:
    """Run `cmd` (python -m pytest ...) with the report plugin, its output to `log`
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


def failures(result: Result, most: int | None = None, tails: bool = False) -> str:
    """Each failed or errored test with its exception's message (the first
    `most`; with `tails`, the end of its traceback too), then the counts."""
    failing = result.with_outcome(*FAILING)
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
