"""Every git command the tool runs goes through `git` here.

FORKTOOL_TRACE_GIT=1 prints each of them to stderr before it runs. The
tool's own commits carry `identity(author)`; commands whose output must not
depend on anybody's git configuration run with `ISOLATED`. None of them signs
or runs hooks (`NEUTRAL`): the tool's commits are the same in every clone,
whatever its user's `commit.gpgsign` or `core.hooksPath`; people's own
commits, which the tool never makes, keep their settings. Nor does any start
a background process (`git gc --auto`, an fsmonitor daemon), which would
work on after the tool ends and hold the clone's lock (forktool.clone_lock)
that every git command inherits.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from email.utils import parseaddr
from pathlib import Path
from typing import Any

from forktool import clone_lock, process
from forktool.errors import ForkToolError

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
    result = process.run(
        cmd,
        env=process.environ(**(env or {})),
        check=False,
        binary=binary,
        input=input,
        pass_fds=clone_lock.inherited(),
    )
    if check and result.returncode != 0:
        where = f" in {repo}" if repo is not None else ""
        stderr = result.stderr.decode() if binary else result.stderr
        failed = f"git {' '.join(args)} failed{where}:"
        # Killed by a signal (a file size limit, ...), git says nothing: say why.
        if how := process.killed(result.returncode):
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
