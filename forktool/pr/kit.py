"""Writing the kit: the series re-signed, format-patch, apply-to-vllm.sh."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from forktool.errors import ForkToolError
from forktool.git import BASE_TAG, ISOLATED, SERIES, git, identity, series_commits
from forktool.pr.description import plain_text


def resign(fork: Path, signer: str, neutral: str, trailer: str) -> str:
    """A copy of base..HEAD authored and signed off by `signer`, with the AI
    attribution `trailer`; the neutral identity's sign-off is dropped. Built
    with commit-tree: no branch, worktree or ref of the fork changes."""
    parent = git(fork, "rev-parse", f"{BASE_TAG}^{{commit}}").stdout.strip()
    for commit in series_commits(fork):
        message = git(fork, "log", "-1", "--format=%B", commit).stdout
        kept = [
            line
            for line in message.splitlines()
            if line.strip() != f"Signed-off-by: {neutral}"
        ]
        message = git(
            None,
            "interpret-trailers",
            "--if-exists",
            "addIfDifferent",
            "--trailer",
            trailer,
            "--trailer",
            f"Signed-off-by: {signer}",
            input="\n".join(kept).rstrip() + "\n",
        ).stdout
        date = git(fork, "log", "-1", "--format=%aI", commit).stdout.strip()
        env = {**identity(signer), "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
        tree = f"{commit}^{{tree}}"
        parent = git(
            fork, "commit-tree", tree, "-p", parent, "-F", "-", input=message, env=env
        ).stdout.strip()
    return parent


def format_series(
    fork: Path, head: str, out: Path, subject: str, body: str, sender: str
) -> None:
    """`git format-patch --cover-letter base..head` into `out`, the cover
    letter from `sender`, its subject and blurb filled in."""
    git(
        fork,
        "format-patch",
        "--cover-letter",
        "--no-signature",
        "--full-index",
        "-o",
        str(out),
        f"{BASE_TAG}..{head}",
        env={**ISOLATED, **identity(sender)},
    )
    cover = out / "0000-cover-letter.patch"
    text = cover.read_text()
    if "*** SUBJECT HERE ***" not in text or "*** BLURB HERE ***" not in text:
        raise ForkToolError(f"git format-patch wrote an unexpected {cover.name}")
    text = text.replace("*** SUBJECT HERE ***", subject, 1)
    cover.write_text(text.replace("*** BLURB HERE ***", body.rstrip(), 1))


def touched_blobs(fork: Path) -> list[tuple[str, str]]:
    """(blob id at base or "absent", path) for every file the series touches."""
    paths = git(fork, "diff", "--name-only", "--no-renames", SERIES).stdout.splitlines()
    blobs = []
    for path in paths:
        entry = git(fork, "ls-tree", BASE_TAG, "--", path).stdout.split()
        blobs.append((entry[2] if entry else "absent", path))
    return blobs


APPLY = r"""#!/usr/bin/env bash
# Apply the KV cache zeroing series to a clone of vllm-project/vllm.
# Written by `python3 -m forktool pr`. Run it inside the clone:
#
#   bash /path/to/build/pr/apply-to-vllm.sh [REF] [BRANCH]
#
# REF (default: @@REF@@) must hold every file the series touches exactly as
# the fork's base (vLLM @@VERSION@@ from PyPI) has it, by blob id; otherwise
# the script names the files that differ and stops, the clone untouched.
# Then it creates BRANCH (default: @@BRANCH@@) at REF and runs `git am -3`.
set -euo pipefail

ref=${1:-@@REF@@}
branch=${2:-@@BRANCH@@}
kit=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

die() { echo "apply-to-vllm: $*" >&2; exit 1; }

git rev-parse --is-inside-work-tree >/dev/null 2>&1 ||
  die "run this inside a clone of vllm-project/vllm"
git rev-parse -q --verify "$ref^{commit}" >/dev/null ||
  die "no commit $ref in this clone (git fetch --tags?)"
if git rev-parse -q --verify "refs/heads/$branch" >/dev/null; then
  die "branch $branch exists; pass another name as the second argument"
fi
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
  die "the clone has uncommitted changes; commit or stash them first"
fi
if [ -d "$(git rev-parse --git-path rebase-apply)" ]; then
  die "a git am or rebase is in progress here; finish or abort it first"
fi

# blob id at the fork's base ("absent": the series adds the file) <TAB> path
differ=()
while IFS=$'\t' read -r want path; do
  have=$(git rev-parse -q --verify "$ref:$path" 2>/dev/null || echo absent)
  if [ "$have" != "$want" ]; then
    differ+=("$path (base: $want, $ref: $have)")
  fi
done <<'BLOBS'
@@BLOBS@@
BLOBS
if [ "${#differ[@]}" -gt 0 ]; then
  echo "apply-to-vllm: $ref differs from vLLM @@VERSION@@ in files the series" \
    "touches; nothing was changed:" >&2
  printf '  %s\n' "${differ[@]}" >&2
  exit 1
fi

git checkout -q -b "$branch" "$ref"
patches=("$kit"/series/[0-9][0-9][0-9][0-9]-*.patch)
git am -3 --keep-non-patch "${patches[@]:1}" || {
  echo "apply-to-vllm: git am stopped; see above. To undo:" \
    "git am --abort && git checkout - && git branch -D $branch" >&2
  exit 1
}
echo "applied $((${#patches[@]} - 1)) patches on branch $branch (from $ref)"
"""


def apply_script(
    blobs: list[tuple[str, str]], version: str, ref: str, branch: str
) -> str:
    for _, path in blobs:
        if "\t" in path or "\n" in path:
            raise ForkToolError(
                f"the series touches a path the script cannot list: {path!r}"
            )
    table = "\n".join(f"{blob}\t{path}" for blob, path in blobs)
    return (
        APPLY.replace("@@BLOBS@@", table)
        .replace("@@VERSION@@", version)
        .replace("@@REF@@", ref)
        .replace("@@BRANCH@@", branch)
    )


def write_kit(
    fork: Path,
    out: Path,
    description: str,
    subject: str,
    version: str,
    head: str,
    sender: str,
    ref: str,
    branch: str,
) -> None:
    """Write the kit to a sibling directory, then move it over `out`."""
    partial = out.with_name(f".{out.name}.partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    try:
        (partial / "description.md").write_text(description)
        (partial / "title.txt").write_text(subject + "\n")
        series = partial / "series"
        format_series(fork, head, series, subject, plain_text(description), sender)
        script = partial / "apply-to-vllm.sh"
        script.write_text(apply_script(touched_blobs(fork), version, ref, branch))
        script.chmod(0o755)
        old = out.with_name(f".{out.name}.old")
        shutil.rmtree(old, ignore_errors=True)
        if out.exists():
            os.replace(out, old)
        os.replace(partial, out)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
