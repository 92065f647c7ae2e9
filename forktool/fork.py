"""The fork tree: materialise it from the base and the series, export it back.

The fork is a git repository whose first commit is the pristine sdist
(tagged `base`) and whose following commits are the series, one per patch.
Patches travel as `git format-patch` output and are applied with `git am`.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime
from email.utils import parseaddr
from pathlib import Path

from forktool.errors import ForkToolError
from forktool.series import read_series, write_series

BASE_TAG = "base"
# A fixed date for the base commit, and committer dates taken from the
# patches' author dates: the same base and series give the same commit ids.
BASE_DATE = "2000-01-01T00:00:00+00:00"

# Export must not depend on anybody's git configuration (format.signature,
# diff.noprefix, core.abbrev, ...), so it runs without global/system config.
_ISOLATED = {"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
FORMAT_PATCH = [
    "format-patch",
    "--no-signature",  # no trailing git version
    "--zero-commit",  # commit ids change whenever the fork is rebuilt
    "--no-numbered",  # "[PATCH]": adding a patch leaves the others unchanged
    "--full-index",  # abbreviated ids grow with the repository
    "--stat=80",
]


def git(
    repo: Path, *args: str, env: dict[str, str] | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        ["git", "-C", str(repo), *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
    )
    if check and result.returncode != 0:
        raise ForkToolError(
            f"git {' '.join(args)} failed in {repo}:\n{result.stderr.strip()}"
        )
    return result


def identity(author: str) -> dict[str, str]:
    name, email = parseaddr(author)
    return {
        "GIT_AUTHOR_NAME": name,
        "GIT_AUTHOR_EMAIL": email,
        "GIT_COMMITTER_NAME": name,
        "GIT_COMMITTER_EMAIL": email,
    }


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
        git(partial, "init", "-q", "--initial-branch=main")
        name, email = parseaddr(author)
        git(partial, "config", "user.name", name)
        git(partial, "config", "user.email", email)
        # Every source file, also those the sdist's .gitignore matches.
        git(partial, "add", "-A", "--force")
        git(partial, "rm", "-r", "-q", "--cached", "--ignore-unmatch", *generated)
        exclude = partial / ".git" / "info" / "exclude"
        exclude.write_text("".join(f"/{path}\n" for path in generated))
        dated = {"GIT_AUTHOR_DATE": BASE_DATE, "GIT_COMMITTER_DATE": BASE_DATE}
        git(partial, "commit", "-q", "-m", message, env={**identity(author), **dated})
        git(partial, "tag", BASE_TAG)
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


def apply(fork: Path, patches: list[Path], author: str) -> None:
    """`git am` each patch; on failure leave the tree at the last good commit."""
    for patch in patches:
        result = git(
            fork,
            "am",
            "--keep-non-patch",  # keep "[Core]"-style subject tags
            "--committer-date-is-author-date",
            str(patch),
            env=identity(author),
            check=False,
        )
        if result.returncode != 0:
            git(fork, "am", "--abort", check=False)
            output = result.stdout + result.stderr
            files = ", ".join(_failed_files(output)) or "(see git's output below)"
            raise ForkToolError(
                f"patch {patch.name} does not apply; conflicting files: {files}\n"
                f"The fork is left clean at the last good commit "
                f"({head_subject(fork)}).\n{output.strip()}"
            )


def head_subject(fork: Path) -> str:
    return git(fork, "log", "-1", "--format=%h %s").stdout.strip()


def format_patches(fork: Path, out: Path) -> list[Path]:
    """Write the fork's commits since `base` as normalised patch files."""
    result = git(
        fork, *FORMAT_PATCH, "-o", str(out), f"{BASE_TAG}..HEAD", env=_ISOLATED
    )
    return [Path(line) for line in result.stdout.splitlines()]


def ensure_safe(fork: Path) -> None:
    """Refuse to touch a fork holding uncommitted work or a stopped `git am`."""
    if (fork / ".git" / "rebase-apply").exists():
        raise ForkToolError(
            f"{fork} has a `git am` in progress: finish it (git -C {fork} am "
            "--continue) or drop it (git am --abort) first"
        )
    status = git(fork, "status", "--porcelain").stdout
    if status:
        raise ForkToolError(
            f"{fork} has uncommitted changes; commit them in the fork and run "
            "`python3 -m forktool export`, or stash them, before this command:\n"
            + status.rstrip()
        )


def sync(
    fork: Path,
    patches_dir: Path,
    author: str,
    base_message: str,
    sdist: Callable[[], Path],
    generated: tuple[str, ...] = (),
    force: bool = False,
) -> str:
    """Bring `fork` to base + series without ever dropping work; say what was done."""
    patches = read_series(patches_dir)
    if not (fork / ".git").exists():
        if fork.exists() and any(fork.iterdir()):
            raise ForkToolError(f"{fork} exists but is not a fork tree; move it away")
        create_base(sdist(), fork, author, base_message, generated)
        apply(fork, patches, author)
        return f"materialised {fork}: base + {len(patches)} patches"

    ensure_safe(fork)
    with tempfile.TemporaryDirectory() as tmp:
        have = [p.read_bytes() for p in format_patches(fork, Path(tmp))]
    want = [p.read_bytes() for p in patches]
    if have == want:
        return f"{fork} is up to date with the series ({len(patches)} patches)"
    if have == want[: len(have)]:
        apply(fork, patches[len(have) :], author)
        return f"applied {len(patches) - len(have)} new patches to {fork}"
    if not force:
        raise ForkToolError(
            f"{fork} has commits that are not in {patches_dir}/series.\n"
            "Run `python3 -m forktool export` to save them as patches, or "
            "`python3 -m forktool sync --force` to rebuild the fork from the "
            "series (its current commits are kept on a backup branch)."
        )
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    git(fork, "branch", f"backup/{stamp}")
    git(fork, "reset", "-q", "--hard", BASE_TAG)
    apply(fork, patches, author)
    return f"rebuilt {fork} from the series; old commits on branch backup/{stamp}"


def export(fork: Path, patches_dir: Path) -> str:
    """Write the fork's commits back to patches/ and rewrite the series."""
    if not (fork / ".git").exists():
        raise ForkToolError(f"{fork} is not a fork tree; run `sync` first")
    ensure_safe(fork)
    patches_dir.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        new = format_patches(fork, Path(tmp))
        names = [p.name for p in new]
        changed = 0
        for path in new:
            dest = patches_dir / path.name
            if not dest.exists() or dest.read_bytes() != path.read_bytes():
                shutil.copyfile(path, dest)
                changed += 1
    removed = [p for p in patches_dir.glob("*.patch") if p.name not in names]
    for path in removed:
        path.unlink()
    write_series(patches_dir, names)
    return (
        f"exported {len(names)} patches to {patches_dir} "
        f"({changed} written, {len(removed)} removed)"
    )


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
        fork,
        "diff",
        "--name-only",
        "--diff-filter=AM",
        f"{BASE_TAG}..HEAD",
        "--",
        "tests",
    ).stdout.split()
    if changed:
        head = git(fork, "rev-parse", "HEAD").stdout.strip()
        git(path, "checkout", "-q", head, "--", *changed)
        git(path, "commit", "-q", "-m", "The series' tests", env=identity(author))
    return path
