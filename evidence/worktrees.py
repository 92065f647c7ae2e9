"""The tool's worktrees of the fork: detached checkouts that share its build
outputs; and the frame of the commands that measure the fork's HEAD alone."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from forktool import venv_lock
from forktool.checks import Check, Measured, fork_tree, inputs_id, record
from forktool.layout import LAYOUT
from forktool.pins import Pins
from forktool.process import BASE_TAG, SERIES, ForkToolError, git, identity
from forktool.safety import ensure_safe
from forktool.venv import venv_id


def worktree(fork: Path, path: Path, commit: str) -> Path:
    """A tool-owned detached checkout of `commit` sharing the fork's build outputs.

    Tests import vllm from the checkout, so it gets links to what installing
    the fork generated there (compiled extensions, vllm/_version.py).
    """
    fork, path = fork.resolve(), path.resolve()  # git -C would resolve from fork
    # Resolved in the fork: in the worktree, HEAD is the worktree's own.
    commit = git(fork, "rev-parse", "--verify", f"{commit}^{{commit}}").stdout.strip()
    if (path / ".git").exists():
        git(path, "reset", "-q", "--hard")
        git(path, "clean", "-fdq")
        git(path, "checkout", "-q", "--detach", commit)
    else:
        shutil.rmtree(path, ignore_errors=True)
        git(fork, "worktree", "prune")
        git(fork, "worktree", "add", "-q", "--detach", str(path), commit)
    built = git(fork, "ls-files", "--others", "--ignored", "--exclude-standard", "vllm")
    for name in built.stdout.splitlines():
        link = path / name
        if "__pycache__" not in name and not os.path.lexists(link):
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(fork / name)
    return path


def series_tests_on_base(fork: Path, path: Path, author: str) -> Path:
    """The pristine base's code with the series' test files, committed."""
    worktree(fork, path, BASE_TAG)
    tests = git(fork, "diff", "--name-only", "--diff-filter=AM", SERIES, "--", "tests")
    if changed := tests.stdout.split():
        head = git(fork, "rev-parse", "HEAD").stdout.strip()
        git(path, "checkout", "-q", head, "--", *changed)
        git(path, "commit", "-q", "-m", "The series' tests", env=identity(author))
    return path


def require_setup(what: str) -> None:
    """Refuse `what` while the clone has no fork, or no venv made from its
    venv.lock (which its result records among its inputs)."""
    missing = []
    if not (LAYOUT.fork / ".git").exists():
        missing.append(f"no fork at {LAYOUT.fork}")
    if not (made_from := venv_id(LAYOUT.venv)):
        missing.append(f"no complete venv at {LAYOUT.venv}")
    elif not LAYOUT.lock.exists() or made_from != venv_lock.digest(LAYOUT.lock):
        missing.append(f"the venv at {LAYOUT.venv} was not made from this venv.lock")
    if missing:
        raise ForkToolError(
            f"{what} needs the fork and its venv: {'; '.join(missing)}; run "
            "`python3 -m forktool setup` first"
        )


def measured_run(
    name: str,
    check: Check,
    pins: Pins,
    measure: Callable[[], Measured],
    command: str = "",
) -> bool:
    """Command `name`: refuse without setup or with an unsafe fork (the result
    names its HEAD tree), measure, and record the result as run by `command`."""
    require_setup(name)
    ensure_safe(LAYOUT.fork, name)
    start, inputs = time.monotonic(), inputs_id()
    found = measure()
    seconds, tree = time.monotonic() - start, fork_tree(LAYOUT.fork)
    record(check, found, seconds, pins.version, tree, inputs, command or None)
    print(f"wrote {LAYOUT.results / check.name}.json")
    return found.ok
