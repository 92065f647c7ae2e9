"""Whether the fork may be read or rewritten now: no stopped git operation,
no uncommitted work."""

from __future__ import annotations

from enum import Enum
from pathlib import Path

from forktool.process import ForkToolError, git


class Operation(Enum):
    """A git operation stopped in the fork: what, how to finish, how to abort."""

    INTERACTIVE_REBASE = (
        "an interactive rebase (`git rebase -i`)", "rebase --continue", "rebase --abort"
    )  # fmt: skip
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
    _ensure_on_branch(fork, command)
    status = git(fork, "status", "--porcelain").stdout
    if status:
        raise ForkToolError(
            f"{fork} has uncommitted changes; commit them in the fork and run "
            "`python3 -m forktool export`, or set them aside with "
            f"`git -C {fork} stash -u` (`-u`: untracked files too; `git -C {fork} "
            "stash pop` brings them back), before this command:\n" + status.rstrip()
        )


# The fork's branch, as `apply.create_base` makes it: the series.
BRANCH = "main"


def _ensure_on_branch(fork: Path, command: str) -> None:
    """Refuse a fork whose HEAD is detached or on another branch than `main`:
    its commits are not the series, and reading them as such would call the
    missing ones dropped."""
    on = git(fork, "symbolic-ref", "-q", "--short", "HEAD", check=False).stdout.strip()
    if on == BRANCH:
        return
    main = git(fork, "rev-parse", "-q", "--verify", f"refs/heads/{BRANCH}", check=False)
    if main.returncode:
        return  # a fork made before the branch had this name: whatever it is on
    head = git(fork, "rev-parse", "--short=12", "HEAD").stdout.strip()
    where = f"on branch {on}" if on else f"on a detached HEAD ({head})"
    lines = [
        f"{fork} is {where}, not on its branch `{BRANCH}`, which holds the series; "
        f"`{command}` changed nothing.\nGo back to it:"
    ]
    inside = git(fork, "merge-base", "--is-ancestor", "HEAD", BRANCH, check=False)
    if not on and inside.returncode:
        lines.append(
            f"    git -C {fork} branch kept-{head} {head}   # commits made on the "
            "detached HEAD, kept on a branch"
        )
    lines.append(f"    git -C {fork} checkout {BRANCH}")
    if inside.returncode:
        kept = on or f"kept-{head}"
        lines.append(
            f"    # {kept} keeps its commits; to add them to the series, "
            f"`git -C {fork} cherry-pick` them onto {BRANCH}"
        )
    lines.append(f"    python3 -m forktool {command}")
    raise ForkToolError("\n".join(lines))
