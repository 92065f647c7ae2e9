"""Every program the tool runs starts here, git among them, and fails the one
way the CLI reports: a `ForkToolError` naming the command, its exit status
(or the signal that killed it) and the end of what it said, never a
traceback.

The clone's lock (`hold`) is an `fcntl.flock` on build/forktool.lock: a
command that reads or writes patches/ or build/vllm holds it from start to
end, so two commands never interleave. The kernel releases it when the last
process holding it ends, however it ends; the git commands the tool runs
inherit it (`inherited`), so a `git am` that outlives a killed command keeps
the clone locked until it ends. The file names the holder for the message a
second command prints.

FORKTOOL_TRACE_GIT=1 prints each git command to stderr before it runs. The
tool's own commits carry `identity(author)`; commands whose output must not
depend on anybody's git configuration run with `ISOLATED`. None of them
signs or runs hooks (`NEUTRAL`): the tool's commits are the same in every
clone, whatever its user's `commit.gpgsign` or `core.hooksPath`; people's
own commits, which the tool never makes, keep their settings. Nor does any
start a background process (`git gc --auto`, an fsmonitor daemon), which
would work on after the tool ends and hold the clone's lock.
"""

from __future__ import annotations

import fcntl
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from email.utils import parseaddr
from pathlib import Path
from typing import IO, Any


# The errors the CLI turns into a message and an exit status.
class ForkToolError(Exception):
    """Something the user can act on: exit status 1."""

    status = 1


class ConflictError(ForkToolError):
    """A patch that does not apply, or one changed on both sides: something to
    resolve by hand. Exit status 3, as StGit's, so scripts tell it apart."""

    status = 3


# The clone's lock.
WAIT_S = 5.0
_held: int | None = None


def inherited() -> tuple[int, ...]:
    """The descriptors a child process keeps: the lock, while it is held."""
    return () if _held is None else (_held,)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _holder(fd: int) -> dict | None:
    os.lseek(fd, 0, os.SEEK_SET)
    text = os.read(fd, 4096).decode(errors="replace")
    try:
        return json.loads(text) if text.strip() else None
    except ValueError:
        return None


def _busy(path: Path, holder: dict | None) -> ForkToolError:
    who = (
        f"`python3 -m forktool {holder['command']}` (pid {holder['pid']}"
        + ("" if _alive(holder["pid"]) else ", ended; a git command it started runs on")
        + ")"
        if holder
        else "another command"
    )
    return ForkToolError(
        f"{who} is working in this clone, so this command changed nothing "
        f"(waited {WAIT_S:.0f} s for {path}). Run it again once that one ends."
    )


@contextmanager
def hold(path: Path, command: str, wait: float = WAIT_S) -> Iterator[None]:
    """Hold the clone's lock at `path` while the block runs; wait up to
    `wait` seconds for another command to end, then refuse, naming it.
    Taking it again in the same process is a no-op."""
    global _held
    if _held is not None:
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise _busy(path, _holder(fd)) from None
                time.sleep(0.05)
        left = _holder(fd)
        if left:
            print(
                f"`python3 -m forktool {left['command']}` (pid {left['pid']}) ended "
                "without finishing; this command takes over its lock and finishes "
                "or undoes what it left.",
                file=sys.stderr,
            )
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"command": command, "pid": os.getpid()}).encode(), 0)
        _held = fd
        try:
            yield
        finally:
            os.ftruncate(fd, 0)
            _held = None
    finally:
        os.close(fd)


# Running programs.
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


# git.
BASE_TAG = "base"
"""The tag on the fork's first commit, the pristine base."""
SERIES = f"{BASE_TAG}..HEAD"
"""The fork's commits: one per patch of the series."""

# No global or system config (format.signature, diff.noprefix, core.abbrev,
# ...): what the tool writes is the same on every machine.
ISOLATED = {"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
# Also over the repository's own config: no signing, no hooks, no
# background process.
NEUTRAL = (
    *("-c", "commit.gpgSign=false", "-c", "tag.gpgSign=false"),
    *("-c", f"core.hooksPath={os.devnull}"),
    *("-c", "gc.auto=0", "-c", "maintenance.auto=false", "-c", "core.fsmonitor=false"),
)


def git(
    repo: Path | None,
    *args: str,
    env: dict[str, str] | None = None,
    check: bool = True,
    input: str | bytes | None = None,
    binary: bool = False,
) -> subprocess.CompletedProcess[Any]:
    """`git -C repo args` (just `git args` without a repository), captured.

    `env` is added to the environment; `binary` keeps input and output bytes.
    """
    at = ["-C", str(repo)] if repo is not None else []
    cmd = ["git", *at, *NEUTRAL, *args]
    if os.environ.get("FORKTOOL_TRACE_GIT"):
        shown = " ".join(f"{k}={shlex.quote(v)}" for k, v in (env or {}).items())
        print(f"+ {shown}{' ' if shown else ''}{shlex.join(cmd)}", file=sys.stderr)
    result = run(
        cmd,
        env=environ(**(env or {})),
        check=False,
        binary=binary,
        input=input,
        pass_fds=inherited(),
    )
    if check and result.returncode != 0:
        where = f" in {repo}" if repo is not None else ""
        stderr = result.stderr.decode() if binary else result.stderr
        failed = f"git {' '.join(args)} failed{where}:"
        # Killed by a signal (a file size limit, ...), git says nothing: say why.
        if how := killed(result.returncode):
            failed += f" {how}"
            lock = Path(repo or ".", ".git", "index.lock")
            if lock.exists():
                failed += f"; it left {lock}: delete it once no git runs there"
        raise ForkToolError(f"{failed}\n{stderr.strip()}".rstrip())
    return result


def identity(author: str) -> dict[str, str]:
    """The environment that makes `author` the author and committer."""
    name, email = parseaddr(author)
    return {
        "GIT_AUTHOR_NAME": name,
        "GIT_AUTHOR_EMAIL": email,
        "GIT_COMMITTER_NAME": name,
        "GIT_COMMITTER_EMAIL": email,
    }


def subject(repo: Path, commit: str) -> str:
    """The subject line of `commit`."""
    return git(repo, "log", "-1", "--format=%s", commit).stdout.strip()


def series_subjects(repo: Path) -> list[str]:
    """The subject lines of `base..HEAD`, oldest first."""
    return git(repo, "log", "--reverse", "--format=%s", SERIES).stdout.splitlines()


def series_commits(repo: Path, head: str = "HEAD") -> list[str]:
    """The commits of `base..head`, oldest first."""
    return git(repo, "rev-list", "--reverse", f"{BASE_TAG}..{head}").stdout.split()
