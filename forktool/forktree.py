"""The fork tree: made from the pristine base and `git am -3` of each patch.

The fork is a git repository whose first commit is the pristine sdist
(tagged `base`) and whose following commits are the series, one per patch.
Patches travel as `git format-patch` output. The tool's identity (pins.toml's
fork author) is used only for the commits the tool makes; people's commits in
the fork carry their own git identity. The tool's worktrees of the fork share
its build outputs.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tarfile
import tempfile
from pathlib import Path

from forktool import port, verify
from forktool.errors import ConflictError, ForkToolError
from forktool.git import BASE_TAG, ISOLATED, SERIES, git, identity
from forktool.safety import Operation, am_marker
from forktool.series import PatchInfo, describe

# A fixed date for the base commit, and committer dates taken from the
# patches' author dates: the same base and series give the same commit ids.
BASE_DATE = "2000-01-01T00:00:00+00:00"

FORMAT_PATCH = [
    "format-patch",
    "--no-signature",  # no trailing git version
    "--zero-commit",  # commit ids change whenever the fork is rebuilt
    "--no-numbered",  # "[PATCH]": adding a patch leaves the others unchanged
    "--full-index",  # abbreviated ids grow with the repository
    "--stat=80",
]


def _extract(sdist: Path, dest: Path) -> None:
    """Unpack the sdist's single top-level directory into `dest`."""
    with tarfile.open(sdist) as tar:
        tops = {Path(m.name).parts[0] for m in tar.getmembers()}
        if len(tops) != 1:
            raise ForkToolError(f"{sdist} has {len(tops)} top-level entries, not one")
        with tempfile.TemporaryDirectory(dir=dest.parent) as tmp:
            # The "data" filter refuses unsafe paths and drops the archive's
            # owners, so the tree belongs to us and git trusts it.
            tar.extractall(tmp, filter="data")
            os.replace(Path(tmp, tops.pop()), dest)


def create_base(
    sdist: Path, fork: Path, author: str, message: str, generated: tuple[str, ...]
) -> None:
    """Make `fork` a repository whose only commit is the unpacked sdist.

    `generated` names sdist paths that builds rewrite; they stay untracked
    (and ignored) so that installing the fork leaves its tree clean.
    """
    fork.parent.mkdir(parents=True, exist_ok=True)
    partial = fork.with_name(f".{fork.name}.partial")
    shutil.rmtree(partial, ignore_errors=True)
    try:
        _extract(sdist, partial)
        # No user.name/user.email here: people commit in the fork as themselves.
        # No template and nobody's config (core.autocrlf, ...): the same blobs
        # and commit in every clone.
        init = ["init", "-q", "--template=", "--initial-branch=main"]
        git(partial, *init, env=ISOLATED)
        # Every source file, also those the sdist's .gitignore matches.
        git(partial, "add", "-A", "--force", env=ISOLATED)
        untrack = ["rm", "-r", "-q", "--cached", "--ignore-unmatch", *generated]
        git(partial, *untrack, env=ISOLATED)
        exclude = partial / ".git" / "info" / "exclude"
        exclude.parent.mkdir(exist_ok=True)
        exclude.write_text("".join(f"/{path}\n" for path in generated))
        dated = {"GIT_AUTHOR_DATE": BASE_DATE, "GIT_COMMITTER_DATE": BASE_DATE}
        env = {**ISOLATED, **identity(author), **dated}
        git(partial, "commit", "-q", "-m", message, env=env)
        git(partial, "tag", BASE_TAG, env=ISOLATED)
        os.replace(partial, fork)
    finally:
        shutil.rmtree(partial, ignore_errors=True)


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
    fork: Path, patches: list[Path], author: str, log: Path, first: int = 1
) -> None:
    """`git am -3` each patch and check the files it made against the patch's
    `index` lines; on failure leave the tree at the last good commit.

    `first` is the number of `patches[0]` in the series, for the message;
    git's own output goes only to `log`.
    """
    total = first - 1 + len(patches)
    marker = am_marker(fork)
    for number, patch in enumerate(patches, first):
        before = git(fork, "rev-parse", "HEAD").stdout.strip()
        marker.write_text(json.dumps({"head": before, "patch": str(patch)}))
        result = git(
            fork,
            "am",
            "-3",
            "--keep-non-patch",  # keep "[Core]"-style subject tags
            "--committer-date-is-author-date",
            str(patch),
            env={**ISOLATED, **identity(author)},
            check=False,
        )
        where = f"patch {number} of {total} in the series"
        if result.returncode == 0:
            wrong = verify.applied(fork, patch)
            if wrong:
                git(fork, "reset", "-q", "--hard", before)
                marker.unlink()
                raise ForkToolError(
                    f"{where} applied other content than it names, refused: "
                    f"{patch.name}\n" + "\n".join(wrong) + "\n"
                    "git read the patch otherwise than it was written (a hunk "
                    "header that counts other lines than its hunk has?); fix the "
                    "patch file, or export it again from a fork that has it.\n"
                    f"{fork} is left at the last good commit, {head_subject(fork)}."
                )
            continue
        output = result.stdout + result.stderr
        unmerged = git(fork, "diff", "--name-only", "--diff-filter=U").stdout.split()
        git(fork, "am", "--abort", check=False)
        marker.unlink()
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(f"$ git -C {fork} am -3 {patch}\n{output}")
        left = (
            f"{fork} is left clean at the last good commit, {head_subject(fork)} "
            f"({number - 1} of {total} patches applied).\n"
        )
        unreadable = _unreadable(fork, patch, output)
        if unreadable:
            raise ForkToolError(
                f"{where} cannot be read by git: {patch.name}\n  {unreadable}\n"
                f"{left}Fix the patch file (conflict markers left in it, or a "
                "hand edit?), then run `python3 -m forktool sync` again.\n"
                f"git's output: {log}"
            )
        numstat = git(fork, "apply", "--numstat", str(patch), check=False).stdout
        files = [line.split("\t", 2)[2] for line in numstat.splitlines()]
        conflicting = sorted(set(unmerged) | set(_failed_files(output)))
        kinds = port.conflicts(output)
        raise ConflictError(
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
    marker.unlink(missing_ok=True)


UNREADABLE = r"^(?:error|fatal): ((?:corrupt|malformed).*)$"


def _unreadable(fork: Path, patch: Path, output: str) -> str | None:
    """What git says when it cannot parse `patch` at all, in its own words."""
    if "Patch format detection failed" in output or not patch.read_bytes().strip():
        return f"git cannot tell its format ({patch.stat().st_size} bytes)"
    check = git(fork, "apply", "--check", "--cached", str(patch), check=False)
    said = re.findall(UNREADABLE, check.stderr, re.M)
    return f"git says: {said[0]} of {patch}" if said else None


def recover(fork: Path) -> str | None:
    """Undo a `git am` that `apply` started and that was interrupted (Ctrl-C):
    back to the commit before it, without the files its patch was adding."""
    marker = am_marker(fork)
    if not marker.exists():
        return None
    started = json.loads(marker.read_text())
    patch = Path(started["patch"])
    if Operation.stopped_in(fork) is Operation.AM:
        git(fork, "am", "--abort", check=False)
    if git(fork, "rev-parse", "HEAD").stdout.strip() != started["head"]:
        marker.unlink()  # someone finished it by hand: nothing to undo
        return None
    git(fork, "reset", "-q", "--hard", started["head"])
    if patch.is_file():
        with tempfile.TemporaryDirectory() as tmp:
            diff = verify.diff_of(patch, Path(tmp)).read_text(errors="replace")
        added = [c.new for c in verify.changes(diff) if c.old is None and c.new]
        if added:
            untracked = git(fork, "ls-files", "-z", "--others", "--", *added).stdout
            for name in filter(None, untracked.split("\0")):
                (fork / name).unlink()
    marker.unlink()
    return (
        f"sync's own `git am` of {patch.name} was interrupted; undid it: {fork} "
        f"is back at {head_subject(fork)}."
    )


def head_subject(fork: Path) -> str:
    return git(fork, "log", "-1", "--format=%h %s").stdout.strip()


def format_patches(fork: Path, out: Path) -> list[Path]:
    """Write the fork's commits since `base` as normalised patch files."""
    result = git(fork, *FORMAT_PATCH, "-o", str(out), SERIES, env=ISOLATED)
    return [Path(line) for line in result.stdout.splitlines()]


def fork_patches(fork: Path) -> list[PatchInfo]:
    with tempfile.TemporaryDirectory() as tmp:
        return [describe(path) for path in format_patches(fork, Path(tmp))]


def worktree(fork: Path, path: Path, commit: str) -> Path:
    """A tool-owned detached checkout of `commit` sharing the fork's build outputs.

    Tests import vllm from the checkout, so it gets links to what installing
    the fork generated there (compiled extensions, vllm/_version.py).
    """
    fork, path = fork.resolve(), path.resolve()  # git -C would resolve from fork
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
    changed = git(
        fork, "diff", "--name-only", "--diff-filter=AM", SERIES, "--", "tests"
    ).stdout.split()
    if changed:
        head = git(fork, "rev-parse", "HEAD").stdout.strip()
        git(path, "checkout", "-q", head, "--", *changed)
        git(path, "commit", "-q", "-m", "The series' tests", env=identity(author))
    return path
