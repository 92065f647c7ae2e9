"""Making the fork: the base commit, the series applied with `git am`, and
the port report.

The fork is a git repository whose first commit is the pristine sdist
(tagged `base`, `create_base`) and whose following commits are the series,
one per patch (`apply`: `git am -3`, each commit checked against the
patch's `index` lines). The tool's identity (pins.toml's fork author) is
used only for the commits the tool makes; people's commits in the fork
carry their own git identity. A patch that stops on another base is a
refusal that says in words what git's `CONFLICT (<kind>)` lines mean and
how to port it by hand; once the series applies, `missing` lists the paths
the series, upstream-tests.toml and the series' Buildkite entries name that
the fork does not have.
"""

from __future__ import annotations

import os
import re
import shutil
import tarfile
import tempfile
from pathlib import Path

from forktool import process
from forktool.process import ISOLATED, ConflictError, ForkToolError, git, identity
from forktool.selection import Selection
from forktool.verify import applied, changes, mailinfo

# A fixed date for the base commit, and committer dates taken from the
# patches' author dates (`apply`): the same base and series give the same
# commit ids.
BASE_DATE = "2000-01-01T00:00:00+00:00"


def create_base(
    sdist: Path, fork: Path, author: str, message: str, generated: tuple[str, ...]
) -> None:
    """Make `fork`, which must not exist, a repository whose only commit is
    the sdist's single top-level directory.

    `generated` names sdist paths that builds rewrite; they stay untracked
    (and ignored) so that installing the fork leaves its tree clean.
    """
    fork.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(sdist) as tar:
        tops = {Path(m.name).parts[0] for m in tar.getmembers()}
        if len(tops) != 1:
            raise ForkToolError(f"{sdist} has {len(tops)} top-level entries, not one")
        # A fixed name, so that what a killed run left is found and removed.
        unpack = fork.with_name(f"{fork.name}.unpack")
        shutil.rmtree(unpack, ignore_errors=True)
        try:
            # The "data" filter refuses unsafe paths and drops the archive's
            # owners, so the tree belongs to us and git trusts it.
            tar.extractall(unpack, filter="data")
            os.replace(unpack / tops.pop(), fork)
        finally:
            shutil.rmtree(unpack, ignore_errors=True)
    # No user.name/user.email here: people commit in the fork as themselves.
    # No template and nobody's config (core.autocrlf, ...): the same blobs
    # and commit in every clone.
    git(fork, "init", "-q", "--template=", "--initial-branch=main", env=ISOLATED)
    # Every source file, also those the sdist's .gitignore matches.
    git(fork, "add", "-A", "--force", env=ISOLATED)
    untrack = ["rm", "-r", "-q", "--cached", "--ignore-unmatch", *generated]
    git(fork, *untrack, env=ISOLATED)
    (fork / ".git" / "info").mkdir(exist_ok=True)
    exclude = fork / ".git" / "info" / "exclude"
    exclude.write_text("".join(f"/{path}\n" for path in generated))
    dated = {"GIT_AUTHOR_DATE": BASE_DATE, "GIT_COMMITTER_DATE": BASE_DATE}
    env = {**ISOLATED, **identity(author), **dated}
    git(fork, "commit", "-q", "-m", message, env=env)
    git(fork, "tag", process.BASE_TAG, env=ISOLATED)


def apply(
    repo: Path,
    patches: list[Path],
    author: str,
    fork: Path,
    first: int = 1,
    env: dict[str, str] | None = None,
) -> None:
    """`git am -3` each patch in `repo` and check the files it made against
    the patch's `index` lines; on failure leave `repo` at the last good commit.

    `fork` is the fork that messages name, `first` the number of `patches[0]`
    in the series; `env` is added to the git commands that write the working
    tree. git's own output goes only to logs/sync-git-am.log beside `fork`.
    """
    # git am --abort writes a reflog entry: it needs an identity too.
    tree = {**ISOLATED, **identity(author), **(env or {})}
    total = first - 1 + len(patches)
    for number, patch in enumerate(patches, first):
        before = git(repo, "rev-parse", "HEAD").stdout.strip()
        result = git(
            repo, "am", "-3",
            "--keep-non-patch",  # keep "[Core]"-style subject tags
            "--committer-date-is-author-date", str(patch), env=tree, check=False,
        )  # fmt: skip
        where = f"patch {number} of {total} in the series"
        if result.returncode != 0:
            output = result.stdout + result.stderr
            log = fork.parent / "logs" / "sync-git-am.log"
            log.parent.mkdir(parents=True, exist_ok=True)
            log.write_text(f"$ git -C {fork} am -3 {patch}\n{output}")
            unmerged = git(repo, "diff", "--name-only", "--diff-filter=U").stdout
            git(repo, "am", "--abort", env=tree, check=False)
            left = (
                f"{fork} is left clean at the last good commit, {head_subject(repo)} "
                f"({number - 1} of {total} patches applied).\n"
            )
            raise _not_applied(repo, fork, patch, output, unmerged, where, left, log)
        if wrong := applied(repo, patch):
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


KINDS = {
    "modify/delete": "missing in the new base: the patch changes a file it lacks",
    "content": "content conflict: the base changed the lines the patch changes",
    "add/add": "added by both the base and the patch",
}
UNREADABLE = r"^(?:error|fatal): ((?:corrupt|malformed).*)$"


def _not_applied(
    repo: Path, fork: Path, patch: Path, output: str, unmerged: str,
    where: str, left: str, log: Path,
) -> ForkToolError:  # fmt: skip
    """The refusal of a patch that git cannot read, or that conflicts;
    `unmerged` is git's list of unmerged paths (`diff --name-only`)."""
    if "Patch format detection failed" in output or not patch.read_bytes().strip():
        unreadable = f"git cannot tell its format ({patch.stat().st_size} bytes)"
    else:
        check = git(repo, "apply", "--check", "--cached", str(patch), check=False)
        said = re.findall(UNREADABLE, check.stderr, re.M)
        unreadable = f"git says: {said[0]} of {patch}" if said else ""
    if unreadable:
        return ForkToolError(
            f"{where} cannot be read by git: {patch.name}\n  {unreadable}\n"
            f"{left}Fix the patch file (conflict markers left in it, or a "
            "hand edit?), then run `python3 -m forktool sync` again.\n"
            f"git's output: {log}"
        )
    numstat = git(repo, "apply", "--numstat", str(patch), check=False).stdout
    files = [line.split("\t", 2)[2] for line in numstat.splitlines()]
    failed = re.findall(
        r"^error: (?:patch failed: (.+):\d+|(.+): (?:does not exist in index|"
        r"already exists in (?:index|working directory)|No such file or directory))$",
        output, re.M,
    )  # fmt: skip
    conflicting = sorted(set(unmerged.split()) | {a or b for a, b in failed})
    return ConflictError(
        f"{where} does not apply: {patch.name}\n"
        f"  its files: {', '.join(files) or '(none)'}\n"
        f"  conflicting: {', '.join(conflicting) or '(see the log)'}\n"
        + "".join(f"{line}\n" for line in conflicts(output))
        + left
        + "To port the patch by hand:\n"
        f"  git -C {fork} am -3 --keep-non-patch {patch}\n"
        f"  # resolve the conflicts, `git -C {fork} add` the files, then\n"
        f"  git -C {fork} am --continue    # or `am --abort` to give up\n"
        "  python3 -m forktool sync      # applies the rest of the series\n"
        "  python3 -m forktool export    # saves the ported patch in patches/\n"
        f"git's output: {log}"
    )


def head_subject(fork: Path) -> str:
    return git(fork, "log", "-1", "--format=%h %s").stdout.strip()


def conflicts(output: str) -> list[str]:
    """One line per `CONFLICT (<kind>): <git's words>` in `git am -3`'s output."""
    lines = []
    for kind, text in re.findall(r"^CONFLICT \(([^)]+)\): (.*)$", output, re.M):
        named = re.search(r"(?:Merge conflict in |^)(\S+)", text)
        path = named.group(1) if named else text
        if kind in KINDS:
            lines.append(f"  {path}: {KINDS[kind]} ({kind})")
        elif "rename" in kind or kind == "file location":
            lines.append(f"  renamed in the new base or the patch ({kind}): {text}")
        else:
            lines.append(f"  {kind}: {text}")
    return lines


# A path entry (`- vllm/...`) a patch adds to a .buildkite/ file.
ENTRY = r"^\+\s*- (!?[\w.][\w./-]*/[\w./-]*)\s*$"


def missing(fork: Path, patches: list[Path], selection: Path | None) -> list[str]:
    """`  <path> (named by <what>)` for each path the series, its Buildkite
    entries or `selection` name that HEAD lacks."""
    named: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for patch in patches:
            diff = mailinfo(patch, Path(tmp))[0].read_text(errors="replace")
            for path in [c.new for c in changes(diff) if c.new]:
                named.setdefault(path, patch.name)
            for section in re.split(r"^(?=diff --git )", diff, flags=re.M):
                if section.startswith("diff --git a/.buildkite/"):
                    for entry in re.findall(ENTRY, section, re.M):
                        named.setdefault(
                            entry.lstrip("!"), f"a Buildkite entry of {patch.name}"
                        )
    if selection is not None and selection.exists():
        chosen = Selection.load(selection)
        args = [a for run in chosen.runs.values() for a in run]
        args += [*chosen.regression, *chosen.gpu_only]
        args += [*chosen.fails_on_base, *chosen.excluded]
        own = tuple(f"{c.rstrip('/')}/" for c in chosen.fork_tests)
        paths = {a.split("::", 1)[0] for a in args if "/" in a and a[0] != "-"}
        for path in sorted(p for p in paths if not p.startswith(own)):
            named.setdefault(path, selection.name)
    # Every file and folder (-t) of HEAD.
    present = set(
        git(fork, "ls-tree", "-r", "-t", "--name-only", "-z", "HEAD").stdout.split("\0")
    )
    return [
        f"  {path} (named by {what})"
        for path, what in named.items()
        if path.rstrip("/") not in present
    ]
