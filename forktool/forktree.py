"""The fork tree: made from the pristine base and `git am -3` of each patch.

The fork is a git repository whose first commit is the pristine sdist
(tagged `base`) and whose following commits are the series, one per patch.
Patches travel as `git format-patch` output. The tool's identity (pins.toml's
fork author) is used only for the commits the tool makes; people's commits in
the fork carry their own git identity. The tool's worktrees of the fork share
its build outputs.
"""

from __future__ import annotations

import os
import re
import shutil
import tarfile
import tempfile
from pathlib import Path

from forktool import port, verify
from forktool.errors import ConflictError, ForkToolError
from forktool.git import BASE_TAG, ISOLATED, SERIES, git, identity
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
        # A fixed name, so that what a killed run left is found and removed.
        unpack = dest.with_name(f"{dest.name}.unpack")
        shutil.rmtree(unpack, ignore_errors=True)
        try:
            # The "data" filter refuses unsafe paths and drops the archive's
            # owners, so the tree belongs to us and git trusts it.
            tar.extractall(unpack, filter="data")
            os.replace(unpack / tops.pop(), dest)
        finally:
            shutil.rmtree(unpack, ignore_errors=True)


def create_base(
    sdist: Path, fork: Path, author: str, message: str, generated: tuple[str, ...]
) -> None:
    """Make `fork`, which must not exist, a repository whose only commit is
    the unpacked sdist.

    `generated` names sdist paths that builds rewrite; they stay untracked
    (and ignored) so that installing the fork leaves its tree clean.
    """
    fork.parent.mkdir(parents=True, exist_ok=True)
    _extract(sdist, fork)
    # No user.name/user.email here: people commit in the fork as themselves.
    # No template and nobody's config (core.autocrlf, ...): the same blobs
    # and commit in every clone.
    init = ["init", "-q", "--template=", "--initial-branch=main"]
    git(fork, *init, env=ISOLATED)
    # Every source file, also those the sdist's .gitignore matches.
    git(fork, "add", "-A", "--force", env=ISOLATED)
    untrack = ["rm", "-r", "-q", "--cached", "--ignore-unmatch", *generated]
    git(fork, *untrack, env=ISOLATED)
    exclude = fork / ".git" / "info" / "exclude"
    exclude.parent.mkdir(exist_ok=True)
    exclude.write_text("".join(f"/{path}\n" for path in generated))
    dated = {"GIT_AUTHOR_DATE": BASE_DATE, "GIT_COMMITTER_DATE": BASE_DATE}
    env = {**ISOLATED, **identity(author), **dated}
    git(fork, "commit", "-q", "-m", message, env=env)
    git(fork, "tag", BASE_TAG, env=ISOLATED)


def _failed_files(output: str) -> list[str]:
    files = re.findall(r"^error: patch failed: (.+):\d+$", output, re.M)
    files += re.findall(
        r"^error: (.+): (?:does not exist in index|already exists in "
        r"(?:index|working directory)|No such file or directory)$",
        output,
        re.M,
    )
    return sorted(set(files))


_PATHS = re.compile(
    r"^(?:diff --git a/(.*) b/|(?:rename|copy) (?:from|to) )(.*)$", re.M
)


def touched(patches: list[Path]) -> set[str] | None:
    """Every path the patches read or write, from their diff headers (pure
    renames, which have no `index` line, included); None when a header quotes
    its paths (git does for unusual names), which are then not parsed."""
    found: set[str] = set()
    for patch in patches:
        text = patch.read_text(errors="replace")
        if re.search(r'^diff --git "', text, re.M):
            return None
        found |= {path for pair in _PATHS.findall(text) for path in pair if path}
    return found


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
        if result.returncode == 0:
            wrong = verify.applied(repo, patch)
            if wrong:
                git(repo, "reset", "-q", "--hard", before, env=tree)
                raise ForkToolError(
                    f"{where} applied other content than it names, refused: "
                    f"{patch.name}\n" + "\n".join(wrong) + "\n"
                    "git read the patch otherwise than it was written: was the "
                    "patch file edited by hand (a `+` or `-` line changed, or a "
                    "hunk header that counts other lines than its hunk has)? Fix "
                    "the patch file (`git diff patches/` shows a hand edit), or "
                    "export it again from a fork that has it.\n"
                    f"{fork} is left at the last good commit, {head_subject(repo)}."
                )
            continue
        output = result.stdout + result.stderr
        unmerged = git(repo, "diff", "--name-only", "--diff-filter=U").stdout.split()
        git(repo, "am", "--abort", env=tree, check=False)
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(f"$ git -C {fork} am -3 {patch}\n{output}")
        left = (
            f"{fork} is left clean at the last good commit, {head_subject(repo)} "
            f"({number - 1} of {total} patches applied).\n"
        )
        unreadable = _unreadable(repo, patch, output)
        if unreadable:
            raise ForkToolError(
                f"{where} cannot be read by git: {patch.name}\n  {unreadable}\n"
                f"{left}Fix the patch file (conflict markers left in it, or a "
                "hand edit?), then run `python3 -m forktool sync` again.\n"
                f"git's output: {log}"
            )
        numstat = git(repo, "apply", "--numstat", str(patch), check=False).stdout
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


def format_patches(fork: Path, out: Path, since: str = BASE_TAG) -> list[Path]:
    """Write the fork's commits since `since` as normalised patch files."""
    result = git(fork, *FORMAT_PATCH, "-o", str(out), f"{since}..HEAD", env=ISOLATED)
    return [Path(line) for line in result.stdout.splitlines()]


def fork_patches(fork: Path, since: str = BASE_TAG) -> list[PatchInfo]:
    with tempfile.TemporaryDirectory() as tmp:
        return [describe(path) for path in format_patches(fork, Path(tmp), since)]


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
