"""One lock per clone: a command that reads or writes patches/ or build/vllm
holds it from start to end, so two commands never interleave.

It is an `fcntl.flock` on build/forktool.lock. The kernel releases it when
the last process holding it ends, however it ends: a killed command leaves
no lock behind. The git commands the tool runs inherit it (`inherited`), so
a `git am` that outlives a killed command keeps the clone locked until it
ends. The file names the holder for the message a second command prints.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from forktool.errors import ForkToolError

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
