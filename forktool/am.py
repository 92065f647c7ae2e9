"""`git am -3` of each patch onto the fork, checked against the patches'
`index` lines; a patch that does not apply is a refusal that says how to port
it by hand."""

from __future__ import annotations

import re
from pathlib import Path

from forktool import port, verify
from forktool.process import ISOLATED, ConflictError, ForkToolError, git, identity


def _failed_files(output: str) -> list[str]:
    files = re.findall(r"^error: patch failed: (.+):\d+$", output, re.M)
    files += re.findall(
        r"^error: (.+): (?:does not exist in index|already exists in "
        r"(?:index|working directory)|No such file or directory)$",
        output,
        re.M,
    )
    return sorted(set(files))


def apply(
    repo: Path,
    patches: list[Path],
    author: str,
    log: Path,
    first: int = 1,
    shown: Path | None = None,
    env: dict[str, str] | None = None,
) -> None:
    """`git am -3` each patch in `repo` and check the files it made against
    the patch's `index` lines; on failure leave `repo` at the last good commit.

    `first` is the number of `patches[0]` in the series and `shown` the fork
    that messages name (`repo` by default); `env` is added to the git
    commands that write the working tree. git's own output goes only to `log`.
    """
    fork = shown or repo
    # git am --abort writes a reflog entry: it needs an identity too.
    tree = {**ISOLATED, **identity(author), **(env or {})}
    total = first - 1 + len(patches)
    for number, patch in enumerate(patches, first):
        before = git(repo, "rev-parse", "HEAD").stdout.strip()
        result = git(
            repo,
            "am",
            "-3",
            "--keep-non-patch",  # keep "[Core]"-style subject tags
            "--committer-date-is-author-date",
            str(patch),
            env=tree,
            check=False,
        )
        where = f"patch {number} of {total} in the series"
        if result.returncode != 0:
            output = result.stdout + result.stderr
            unmerged = git(repo, "diff", "--name-only", "--diff-filter=U").stdout
            git(repo, "am", "--abort", env=tree, check=False)
            log.parent.mkdir(parents=True, exist_ok=True)
            log.write_text(f"$ git -C {fork} am -3 {patch}\n{output}")
            left = (
                f"{fork} is left clean at the last good commit, {head_subject(repo)} "
                f"({number - 1} of {total} patches applied).\n"
            )
            raise _not_applied(
                repo, fork, patch, output, unmerged.split(), where, left, log
            )
        wrong = verify.applied(repo, patch)
        if wrong:
            git(repo, "reset", "-q", "--hard", before, env=tree)
            raise _misread(repo, fork, patch, wrong, where)


def _misread(
    repo: Path, fork: Path, patch: Path, wrong: list[str], where: str
) -> ForkToolError:
    """The refusal of a patch that applied other content than it names."""
    return ForkToolError(
        f"{where} applied other content than it names, refused: "
        f"{patch.name}\n" + "\n".join(wrong) + "\n"
        "git read the patch otherwise than it was written: was the "
        "patch file edited by hand (a `+` or `-` line changed, or a "
        "hunk header that counts other lines than its hunk has)? Fix "
        "the patch file (`git diff patches/` shows a hand edit), or "
        "export it again from a fork that has it.\n"
        f"{fork} is left at the last good commit, {head_subject(repo)}."
    )


def _not_applied(
    repo: Path,
    fork: Path,
    patch: Path,
    output: str,
    unmerged: list[str],
    where: str,
    left: str,
    log: Path,
) -> ForkToolError:
    """The refusal of a patch that git cannot read, or that conflicts."""
    unreadable = _unreadable(repo, patch, output)
    if unreadable:
        return ForkToolError(
            f"{where} cannot be read by git: {patch.name}\n  {unreadable}\n"
            f"{left}Fix the patch file (conflict markers left in it, or a "
            "hand edit?), then run `python3 -m forktool sync` again.\n"
            f"git's output: {log}"
        )
    numstat = git(repo, "apply", "--numstat", str(patch), check=False).stdout
    files = [line.split("\t", 2)[2] for line in numstat.splitlines()]
    conflicting = sorted(set(unmerged) | set(_failed_files(output)))
    kinds = port.conflicts(output)
    return ConflictError(
        f"{where} does not apply: {patch.name}\n"
        f"  its files: {', '.join(files) or '(none)'}\n"
        f"  conflicting: {', '.join(conflicting) or '(see the log)'}\n"
        + "".join(f"{line}\n" for line in kinds)
        + left
        + "To port the patch by hand:\n"
        f"  git -C {fork} am -3 --keep-non-patch {patch}\n"
        f"  # resolve the conflicts, `git -C {fork} add` the files, then\n"
        f"  git -C {fork} am --continue    # or `am --abort` to give up\n"
        "  python3 -m forktool sync      # applies the rest of the series\n"
        "  python3 -m forktool export    # saves the ported patch in patches/\n"
        f"git's output: {log}"
    )


UNREADABLE = r"^(?:error|fatal): ((?:corrupt|malformed).*)$"


def _unreadable(fork: Path, patch: Path, output: str) -> str | None:
    """What git says when it cannot parse `patch` at all, in its own words."""
    if "Patch format detection failed" in output or not patch.read_bytes().strip():
        return f"git cannot tell its format ({patch.stat().st_size} bytes)"
    check = git(fork, "apply", "--check", "--cached", str(patch), check=False)
    said = re.findall(UNREADABLE, check.stderr, re.M)
    return f"git says: {said[0]} of {patch}" if said else None


def head_subject(fork: Path) -> str:
    return git(fork, "log", "-1", "--format=%h %s").stdout.strip()
