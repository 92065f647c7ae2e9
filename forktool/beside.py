"""A check run in a process of its own, beside the checks that run in turn.

The process is a fork of the tool's: it measures the check with the same
context, its output (and that of every process it starts) goes to a log
that the tool prints when the check ends, and it answers with what it
measured as JSON through a pipe. The tool records the result, as for any
check. When the tool stops before the check ends (an error, Ctrl-C), it
ends the check's processes: they are a process group of their own.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import NoReturn

from forktool.checks import Check, Context
from forktool.results import Measured


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
