"""Every program the tool runs starts here (git through forktool.git): a
program that is missing, or fails where the caller needs it to succeed,
becomes the tool's one error line naming the command, its exit status and
the end of what it said, never a traceback."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from forktool.errors import ForkToolError

Cmd = Sequence[str | Path]
TAIL = 20
"""The lines of a failed command's output an error shows."""


def _shown(cmd: Cmd) -> str:
    return shlex.join(str(arg) for arg in cmd)


def _missing(cmd: Cmd, e: OSError) -> ForkToolError:
    return ForkToolError(f"cannot run `{_shown(cmd)}`: {e.strerror or e}")


SIGNALS = {
    signal.SIGXFSZ: "a file size limit (ulimit -f) stopped it writing a file: "
    "raise it (`ulimit -f unlimited`), then run the command again",
    signal.SIGKILL: "by the system (out of memory?) or by someone",
    signal.SIGSEGV: "it crashed",
    signal.SIGBUS: "it crashed (a full disk under a mapped file?)",
}


def killed(status: int) -> str:
    """For a negative `status` (killed by a signal), what killed it and what
    that means; "" for an exit status."""
    if status >= 0:
        return ""
    try:
        sig = signal.Signals(-status)
    except ValueError:
        return f"killed by signal {-status}"
    meaning = SIGNALS.get(sig)
    return f"killed by {sig.name}" + (f": {meaning}" if meaning else "")


def failure(
    cmd: Cmd, status: int, output: str = "", cwd: Path | None = None
) -> ForkToolError:
    """The error for `cmd` exiting with `status`, with the end of its output."""
    where = f" in {cwd}" if cwd is not None else ""
    tail = "\n".join(output.strip().splitlines()[-TAIL:])
    said = f":\n{tail}" if tail else ""
    how = killed(status) or f"exit status {status}"
    return ForkToolError(f"`{_shown(cmd)}` failed ({how}){where}{said}")


def run(
    cmd: Cmd,
    *,
    cwd: Path | str | None = None,
    env: dict[str, str] | None = None,
    check: bool = True,
    capture: bool = True,
    binary: bool = False,
    input: str | bytes | None = None,
    stdout: int | IO[Any] | None = None,
    stderr: int | IO[Any] | None = None,
    pass_fds: Sequence[int] = (),
    timeout: float | None = None,
) -> subprocess.CompletedProcess[Any]:
    """Run `cmd` to its end; with `check`, a non-zero exit status is an error.

    `env` replaces the environment (None: this one's); `capture` keeps its
    output (text unless `binary`), otherwise it goes where `stdout` and
    `stderr` say (None: this process's).
    """
    args = [str(arg) for arg in cmd]
    outputs = (
        {"capture_output": True} if capture else {"stdout": stdout, "stderr": stderr}
    )
    try:
        result = subprocess.run(
            args,
            cwd=cwd,
            env=env,
            input=input,
            text=not binary,
            pass_fds=pass_fds,
            timeout=timeout,
            **outputs,
        )
    except OSError as e:
        raise _missing(cmd, e) from e
    except subprocess.TimeoutExpired as e:
        raise ForkToolError(f"`{_shown(cmd)}` ran past {timeout} s") from e
    if check and result.returncode != 0:
        said = result.stderr or result.stdout if capture else ""
        if isinstance(said, bytes):
            said = said.decode(errors="replace")
        raise failure(cmd, result.returncode, said or "", Path(cwd) if cwd else None)
    return result


def start(cmd: Cmd, **popen: Any) -> subprocess.Popen[Any]:
    """Start `cmd` (subprocess.Popen's keywords); a missing program is an error."""
    try:
        return subprocess.Popen([str(arg) for arg in cmd], **popen)
    except OSError as e:
        raise _missing(cmd, e) from e


def tee(cmd: Cmd, cwd: Path, env: dict[str, str] | None = None) -> tuple[int, str]:
    """Run `cmd`, printing its output (stderr too) as it comes; return its
    exit status and that output."""
    proc = start(
        cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    assert proc.stdout is not None
    lines = []
    for raw in proc.stdout:
        line = raw.decode(errors="replace")
        print(line, end="", flush=True)
        lines.append(line)
    return proc.wait(), "".join(lines)


def environ(**added: str) -> dict[str, str]:
    """This process's environment with `added`."""
    return {**os.environ, **added}
