"""Whether the fork may be read or rewritten now: no stopped git operation,
no uncommitted work."""

from __future__ import annotations

from enum import Enum
from pathlib import Path

from forktool.errors import ForkToolError
from forktool.git import git


def am_marker(fork: Path) -> Path:
    """Present while `apply` runs `git am`: the HEAD before it, and the patch."""
    return fork / ".git" / "forktool-am"


class Operation(Enum):
    """A git operation stopped in the fork: what, how to finish, how to abort."""

    INTERACTIVE_REBASE = (
        "an interactive rebase (`git rebase -i`)",
        "rebase --continue",
        "rebase --abort",
    )
    REBASE = "a rebase", "rebase --continue", "rebase --abort"
    AM = "a `git am`", "am --continue", "am --abort"
    REVERT = "a `git revert`", "revert --continue", "revert --abort"
    CHERRY_PICK = "a `git cherry-pick`", "cherry-pick --continue", "cherry-pick --abort"
    MERGE = "a merge", "commit", "merge --abort"
    BISECT = "a `git bisect`", "bisect reset", "bisect reset"

    def __init__(self, what: str, finish: str, abort: str) -> None:
        self.what, self.finish, self.abort = what, finish, abort

    @classmethod
    def stopped_in(cls, fork: Path) -> Operation | None:
        gitdir = fork / ".git"
        if (gitdir / "rebase-merge").exists():
            interactive = (gitdir / "rebase-merge" / "interactive").exists()
            return cls.INTERACTIVE_REBASE if interactive else cls.REBASE
        if (gitdir / "rebase-apply" / "applying").exists():
            return cls.AM
        if (gitdir / "rebase-apply").exists():
            return cls.REBASE
        sequence = gitdir / "sequencer" / "todo"
        todo = sequence.read_text().split(maxsplit=1) if sequence.exists() else []
        if (gitdir / "REVERT_HEAD").exists() or todo[:1] == ["revert"]:
            return cls.REVERT
        if (gitdir / "CHERRY_PICK_HEAD").exists() or (gitdir / "sequencer").exists():
            return cls.CHERRY_PICK
        if (gitdir / "MERGE_HEAD").exists():
            return cls.MERGE
        if (gitdir / "BISECT_LOG").exists():
            return cls.BISECT
        return None


def ensure_safe(fork: Path, command: str) -> None:
    """Refuse to touch a fork holding uncommitted work or a stopped git operation."""
    if am_marker(fork).exists() and command != "sync":
        raise ForkToolError(
            f"sync's own `git am` in {fork} was interrupted, so `{command}` changed "
            "nothing. Run `python3 -m forktool sync`: it undoes the interrupted "
            "`git am` and applies the rest of the series."
        )
    operation = Operation.stopped_in(fork)
    if operation:
        raise ForkToolError(
            f"{fork} is in the middle of {operation.what}; `{command}` would see "
            "only part of the fork's patches, so it changed nothing.\n"
            f"Finish it: resolve any conflicts, `git -C {fork} add` the files, "
            f"then `git -C {fork} {operation.finish}`;\nor give it up, back to "
            f"where it started: `git -C {fork} {operation.abort}`.\n"
            f"Then run `python3 -m forktool {command}` again."
        )
    status = git(fork, "status", "--porcelain").stdout
    if status:
        raise ForkToolError(
            f"{fork} has uncommitted changes; commit them in the fork and run "
            "`python3 -m forktool export`, or stash them, before this command:\n"
            + status.rstrip()
        )
