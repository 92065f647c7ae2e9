"""Every program the tool runs starts here, git among them, and fails the one
way the CLI reports: a `ForkToolError` naming the command, its exit status
(or the signal that killed it) and the end of what it said, never a
traceback. `report_error` prints any of them, and an OSError from the
tool's own reads and writes, as the one line both command lines end with.

The clone's lock (`hold`) is an `fcntl.flock` on build/forktool.lock: a
command that reads or writes patches/ or build/vllm holds it from start to
end, so two commands never interleave. The kernel releases it when the last
process holding it ends, however it ends; the git commands the tool runs
inherit it, so a `git am` that outlives a killed command keeps
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

import errno
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
from typing import Any


# The errors the CLI turns into a message and an exit status.
class ForkToolError(Exception):
    """Something the user can act on: exit status 1."""

    status = 1


class ConflictError(ForkToolError):
    """A patch that does not apply, or one changed on both sides: something to
    resolve by hand. Exit status 3, as StGit's, so scripts tell it apart."""

    status = 3


def report_error(e: ForkToolError | OSError) -> int:
    """Print `e` as one line, never a traceback, and return the exit status.
    A conflict is work to finish by hand, not a failure: "stopped"."""
    if isinstance(e, OSError):  # the tool's own writes: build/, the cache ...
        print(f"error: {_os_error(e)}", file=sys.stderr)
        return 1
    word = "stopped" if isinstance(e, ConflictError) else "error"
    print(f"{word}: {e}", file=sys.stderr)
    return e.status


AGAIN = "then run the command again"
TO_DO = {
    errno.EROFS: "the file system is read-only: make it writable, or move the "
    "clone (VLLM_FORK_CACHE moves the cache) to one that is",
    **dict.fromkeys((errno.EACCES, errno.EPERM), "no permission: give yourself "
                    "write permission there"),
    errno.ENOSPC: f"free some space on that disk, {AGAIN}",
    errno.EDQUOT: f"your disk quota is used up: free some space, {AGAIN}",
    errno.EFBIG: f"a file size limit (ulimit -f) stopped it: raise it, {AGAIN}",
    errno.EEXIST: "something that is not a folder, a file or a dangling symbolic "
    "link, is where a folder must be: remove it or point it at a folder",
    errno.ENOTDIR: "a file is where a folder must be: remove or move it",
}  # fmt: skip


def _os_error(e: OSError) -> str:
    """`<path>: <cause> (<what to do>)` for a failed read or write."""
    paths = " -> ".join(str(p) for p in (e.filename, e.filename2) if p is not None)
    to_do = TO_DO.get(e.errno or 0, f"fix that, {AGAIN}")
    return f"{paths}{': ' if paths else ''}{e.strerror or e} ({to_do})"


# The clone's lock.
WAIT_S = 5.0
_held: int | None = None


def _holder(fd: int) -> dict | None:
    """Who holds or last held the lock, as its file names them."""
    try:
        return json.loads(os.pread(fd, 4096, 0) or "null")
    except ValueError:
        return None


def _busy(path: Path, fd: int) -> ForkToolError:
    who, holder = "another command", _holder(fd)
    if holder:
        pid = holder["pid"]
        gone = not Path(f"/proc/{pid}").exists()
        ended = ", ended; a git command it started runs on" if gone else ""
        who = f"`python3 -m forktool {holder['command']}` (pid {pid}{ended})"
    return ForkToolError(
        f"{who} is working in this clone, so this command changed nothing (waited "
        f"{WAIT_S:.0f} s for {path}). Run it again once that one ends."
    )


@contextmanager
def hold(path: Path, command: str, wait: float = WAIT_S) -> Iterator[None]:
    """Hold the clone's lock at `path` while the block runs; wait up to
    `wait` seconds for another command to end, then refuse, naming it."""
    global _held
    if _held is not None:
        raise RuntimeError("the clone's lock is held already: nothing nests it")
    path.parent.mkdir(parents=True, exist_ok=True)
    with os.fdopen(os.open(path, os.O_RDWR | os.O_CREAT, 0o644), "r+b") as file:
        fd, deadline = file.fileno(), time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise _busy(path, fd) from None
                time.sleep(0.05)
        if left := _holder(fd):
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


# Running programs.
Cmd = Sequence[str | Path]
TAIL = 20  # the lines of a failed command's output an error shows
SIGNALS = {
    signal.SIGXFSZ: "a file size limit (ulimit -f) stopped it writing a file: "
    "raise it (`ulimit -f unlimited`), then run the command again",
    signal.SIGKILL: "by the system (out of memory?) or by someone",
    signal.SIGSEGV: "it crashed",
    signal.SIGBUS: "it crashed (a full disk under a mapped file?)",
}


def _missing(cmd: Cmd, e: OSError) -> ForkToolError:
    return ForkToolError(f"cannot run `{shlex.join(map(str, cmd))}`: {e.strerror or e}")


def failure(
    cmd: Cmd,
    status: int,
    output: str | bytes = "",
    cwd: Path | None = None,
    hint: str = "",
) -> ForkToolError:
    """The error for `cmd` exiting with `status` (negative: killed by that
    signal), with the end of its output; `hint` says what it left behind."""
    if isinstance(output, bytes):
        output = output.decode(errors="replace")
    how = f"exit status {status}"
    if status < 0:
        try:
            sig = signal.Signals(-status)
            meaning = SIGNALS.get(sig)
            how = f"killed by {sig.name}" + (f": {meaning}" if meaning else "")
        except ValueError:
            how = f"killed by signal {-status}"
    where = f" in {cwd}" if cwd is not None else ""
    tail = "\n".join(output.strip().splitlines()[-TAIL:])
    said = f":\n{tail}" if tail else ""
    shown = shlex.join(map(str, cmd))
    return ForkToolError(f"`{shown}` failed ({how}{hint}){where}{said}")


def run(
    cmd: Cmd,
    *,
    cwd: Path | str | None = None,
    env: dict[str, str] | None = None,
    check: bool = True,
    capture: bool = True,
    binary: bool = False,
    input: str | bytes | None = None,
    **outputs: Any,
) -> subprocess.CompletedProcess[Any]:
    """Run `cmd` to its end; with `check`, a non-zero exit status is an error.

    `env` replaces the environment (None: this one's); `capture` keeps its
    output (text unless `binary`), otherwise it goes where the `stdout` and
    `stderr` keywords say (None: this process's); `pass_fds` too is Popen's.
    """
    try:
        result = subprocess.run(
            [str(arg) for arg in cmd],
            cwd=cwd,
            env=env,
            input=input,
            text=not binary,
            capture_output=capture,
            **outputs,
        )
    except OSError as e:
        raise _missing(cmd, e) from e
    if check and result.returncode != 0:
        said = (result.stderr or result.stdout) if capture else ""
        raise failure(cmd, result.returncode, said, Path(cwd) if cwd else None)
    return result


def start(cmd: Cmd, **popen: Any) -> subprocess.Popen[Any]:
    """Start `cmd` (subprocess.Popen's keywords); a missing program is an error."""
    try:
        return subprocess.Popen([str(arg) for arg in cmd], **popen)
    except OSError as e:
        raise _missing(cmd, e) from e


def tee(cmd: Cmd, cwd: Path) -> tuple[int, str]:
    """Run `cmd`, printing its output (stderr too) as it comes; return its
    exit status and that output."""
    proc = start(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    lines = []
    for raw in proc.stdout or ():
        lines.append(raw.decode(errors="replace"))
        print(lines[-1], end="", flush=True)
    return proc.wait(), "".join(lines)


def environ(**added: str) -> dict[str, str]:
    """This process's environment with `added`."""
    return {**os.environ, **added}


# git.
BASE_TAG = "base"  # the tag on the fork's first commit, the pristine base
SERIES = f"{BASE_TAG}..HEAD"  # the fork's commits: one per patch of the series

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
    A failure is `failure`'s error for `git args`.
    """
    cmd = ["git", *(["-C", str(repo)] if repo is not None else []), *NEUTRAL, *args]
    if os.environ.get("FORKTOOL_TRACE_GIT"):
        shown = "".join(f"{k}={shlex.quote(v)} " for k, v in (env or {}).items())
        print(f"+ {shown}{shlex.join(cmd)}", file=sys.stderr)
    # The git commands inherit the clone's lock, while it is held.
    result = run(
        cmd,
        env=environ(**(env or {})),
        check=False,
        binary=binary,
        input=input,
        pass_fds=() if _held is None else (_held,),
    )
    if check and result.returncode != 0:
        # Killed by a signal (a file size limit, ...), git may leave its lock.
        lock = Path(repo or ".", ".git", "index.lock")
        left = result.returncode < 0 and lock.exists()
        hint = f"; it left {lock}: delete it once no git runs there" if left else ""
        said = result.stderr or result.stdout
        raise failure(["git", *args], result.returncode, said, repo, hint)
    return result


def has_ref(repo: Path, ref: str) -> bool:
    """Whether `ref` names an object in `repo` (`git rev-parse --verify`)."""
    return not git(repo, "rev-parse", "-q", "--verify", ref, check=False).returncode


def identity(author: str) -> dict[str, str]:
    """The environment that makes `author` the author and committer."""
    name, email = parseaddr(author)
    return {f"GIT_{who}_{what}": value for who in ("AUTHOR", "COMMITTER")
            for what, value in (("NAME", name), ("EMAIL", email))}  # fmt: skip


def subject(repo: Path, commit: str) -> str:
    """The subject line of `commit`."""
    return git(repo, "log", "-1", "--format=%s", commit).stdout.strip()


def series_subjects(repo: Path) -> list[str]:
    """The subject lines of `base..HEAD`, oldest first."""
    return git(repo, "log", "--reverse", "--format=%s", SERIES).stdout.splitlines()


def series_commits(repo: Path, head: str = "HEAD") -> list[str]:
    """The commits of `base..head`, oldest first."""
    return git(repo, "rev-list", "--reverse", f"{BASE_TAG}..{head}").stdout.split()
