"""Whether the fork may be read or rewritten now: no stopped git operation,
no uncommitted work."""

from pathlib import Path

from forktool.process import ForkToolError, git, has_ref

# A git operation stopped in the fork, and what it is.
OPERATIONS = {
    "rebase": "a rebase",
    "am": "a `git am`",
    "revert": "a `git revert`",
    "cherry-pick": "a `git cherry-pick`",
    "merge": "a merge",
    "bisect": "a `git bisect`",
}
# How to finish and how to abort those that lack `--continue` and `--abort`.
ENDS = {"merge": ("commit", "merge --abort"), "bisect": ("bisect reset",) * 2}


def _stopped(gitdir: Path) -> str | None:
    """The key in OPERATIONS of the git operation stopped in the fork."""
    if (gitdir / "rebase-merge").exists():  # `git rebase`, -i or not
        return "rebase"
    if (gitdir / "rebase-apply").exists():
        return "am" if (gitdir / "rebase-apply" / "applying").exists() else "rebase"
    sequence = gitdir / "sequencer" / "todo"
    todo = sequence.read_text().split(maxsplit=1) if sequence.exists() else []
    if (gitdir / "REVERT_HEAD").exists() or todo[:1] == ["revert"]:
        return "revert"
    if (gitdir / "CHERRY_PICK_HEAD").exists() or (gitdir / "sequencer").exists():
        return "cherry-pick"
    names = {"MERGE_HEAD": "merge", "BISECT_LOG": "bisect"}
    return next((op for name, op in names.items() if (gitdir / name).exists()), None)


def ensure_safe(fork: Path, command: str) -> None:
    """Refuse to touch a fork holding uncommitted work or a stopped git operation."""
    if operation := _stopped(fork / ".git"):
        ends = (f"{operation} --continue", f"{operation} --abort")
        (finish, abort), what = ENDS.get(operation, ends), OPERATIONS[operation]
        raise ForkToolError(
            f"{fork} is in the middle of {what}; `{command}` would see "
            "only part of the fork's patches, so it changed "
            "nothing.\nFinish it: resolve any conflicts, `git -C "
            f"{fork} add` the files, then `git -C {fork} "
            f"{finish}`;\nor give it up, back to where it started: "
            f"`git -C {fork} {abort}`.\nThen run `python3 -m forktool "
            f"{command}` again."
        )
    _ensure_on_branch(fork, command)
    if status := git(fork, "status", "--porcelain").stdout:
        raise ForkToolError(
            f"{fork} has uncommitted changes; commit them in the fork "
            "and run `python3 -m forktool export`, or set them aside "
            f"with `git -C {fork} stash -u` (`-u`: untracked files "
            f"too; `git -C {fork} stash pop` brings them back), before "
            f"this command:\n{status.rstrip()}"
        )


# The fork's branch, as `apply.create_base` makes it: the series.
BRANCH = "main"


def _ensure_on_branch(fork: Path, command: str) -> None:
    """Refuse a fork whose HEAD is detached or on another branch than `main`:
    its commits are not the series, and reading them as such would call the
    missing ones dropped."""
    on = git(fork, "symbolic-ref", "-q", "--short", "HEAD", check=False).stdout.strip()
    if on == BRANCH or not has_ref(fork, f"refs/heads/{BRANCH}"):
        return  # or a fork made before the branch had this name: whatever it is on
    head = git(fork, "rev-parse", "--short=12", "HEAD").stdout.strip()
    where = f"on branch {on}" if on else f"on a detached HEAD ({head})"
    lines = [
        f"{fork} is {where}, not on its branch `{BRANCH}`, which holds the "
        f"series; `{command}` changed nothing.\nGo back to it:"
    ]
    inside = git(fork, "merge-base", "--is-ancestor", "HEAD", BRANCH, check=False)
    if not on and inside.returncode:
        lines.append(
            f"    git -C {fork} branch kept-{head} {head}   # commits made "
            "on the detached HEAD, kept on a branch"
        )
    lines.append(f"    git -C {fork} checkout {BRANCH}")
    if inside.returncode:
        kept, to = on or f"kept-{head}", f"`git -C {fork} cherry-pick` them onto"
        lines.append(
            f"    # {kept} keeps its commits; to add them to the series, {to} {BRANCH}"
        )
    lines.append(f"    python3 -m forktool {command}")
    raise ForkToolError("\n".join(lines))
