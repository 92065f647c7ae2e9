"""Writing the kit: the series re-signed, format-patch, apply-to-vllm.sh and
the blobs it merges from (preimages.pack)."""

from __future__ import annotations

import os
import shlex
import shutil
from pathlib import Path

from evidence.pr.description import plain_text
from forktool.process import (
    BASE_TAG,
    ISOLATED,
    SERIES,
    ForkToolError,
    git,
    identity,
    series_commits,
)


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


def preimage_blobs(fork: Path) -> list[str]:
    """The blob each patch changes or deletes, as the fork had it before that
    patch: what `git am -3` needs to merge a patch onto files that differ."""
    diff = git(fork, "log", "--format=", "--raw", "--no-abbrev", "--no-renames", SERIES)
    # ":100644 100644 <before> <after> M\t<path>"
    blobs = {line.split()[2] for line in diff.stdout.splitlines() if line}
    return sorted(b for b in blobs if set(b) != {"0"})


def pack_blobs(fork: Path, blobs: list[str], out: Path) -> None:
    """`blobs` as one self-contained pack file, `out`."""
    packed = git(
        fork,
        "pack-objects",
        "--stdout",
        input="".join(f"{b}\n" for b in blobs).encode(),
        binary=True,
    )
    out.write_bytes(packed.stdout)


APPLY = r"""#!/usr/bin/env bash
# Apply the KV cache zeroing series to a clone of vllm-project/vllm.
# Written by `python3 -m forktool pr`. Run it inside the clone:
#
#   bash /path/to/build/pr/apply-to-vllm.sh [REF] [BRANCH]
#
# It creates BRANCH (default: @@BRANCH@@) at REF (default: @@REF@@, the
# release the series was made on; main works too) and applies the patches
# there one by one with `git am -3`, saying for each whether it applied as
# is, with a 3-way merge (its files changed or moved at REF), or stopped on
# a conflict, with the commands that finish or abort. Only the new branch
# moves: it refuses a clone with uncommitted changes or a git operation in
# progress. preimages.pack holds the blobs the patches were made against;
# it is unpacked into the clone so that git can merge them.
set -euo pipefail

ref=${1:-@@REF@@}
branch=${2:-@@BRANCH@@}
kit=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
tests=@@TESTS@@

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
for op in rebase-apply rebase-merge MERGE_HEAD CHERRY_PICK_HEAD REVERT_HEAD; do
  if [ -e "$(git rev-parse --git-path "$op")" ]; then
    die "a git operation ($op) is in progress here; finish or abort it first"
  fi
done

start=$(git symbolic-ref -q --short HEAD || git rev-parse HEAD)
patches=("$kit"/series/[0-9][0-9][0-9][0-9]-*.patch)
patches=("${patches[@]:1}") # the first is the cover letter
log=$(mktemp)
trap 'rm -f "$log"' EXIT

git unpack-objects -q <"$kit/preimages.pack"
git checkout -q -b "$branch" "$ref"
echo "apply-to-vllm: on the new branch $branch at $ref (you were on $start)"
for i in "${!patches[@]}"; do
  patch=${patches[$i]}
  how="applied with a 3-way merge"
  if git apply --check "$patch" 2>/dev/null; then how="applied as is"; fi
  if git am -3 --keep-non-patch "$patch" >"$log" 2>&1; then
    echo "  $(basename "$patch"): $how"
    continue
  fi
  # Start over from this patch with the rest of the series queued, so that
  # `git am --continue` applies the rest once this one is resolved.
  git am --abort >/dev/null 2>&1 || true
  git am -3 --keep-non-patch "${patches[@]:$i}" >"$log" 2>&1 || true
  echo "  $(basename "$patch"): stopped; git am said:"
  sed 's/^/    /' "$log"
  conflicts=$(git diff --name-only --diff-filter=U)
  echo "  conflicting files: ${conflicts:-none (the patch did not apply; see above)}"
  echo "  not applied yet: $((${#patches[@]} - i)) of ${#patches[@]} patches"
  echo "To finish: resolve the conflicts, git add the files, then"
  echo "  git am --continue   # applies the rest, stopping again at a conflict"
  echo "and run the series' regression tests from this clone:"
  echo "  $tests"
  echo "To abort, back where you were:"
  echo "  git am --abort && git checkout -q $start && git branch -D $branch"
  exit 1
done
echo "applied ${#patches[@]} patches on the new branch $branch (from $ref)"
echo "The series' regression tests, from this clone (on a CPU-only machine"
echo "with VLLM_TARGET_DEVICE=cpu CUDA_VISIBLE_DEVICES=''):"
echo "  $tests"
"""


def apply_script(ref: str, branch: str, tests: tuple[str, ...]) -> str:
    """The script, `tests` the pytest arguments of the series' regression tests."""
    command = shlex.join(["python", "-m", "pytest", *tests])
    return (
        APPLY.replace("@@REF@@", ref)
        .replace("@@BRANCH@@", branch)
        .replace("@@TESTS@@", shlex.quote(command))
    )


# --- the kit ------------------------------------------------------------------------


def write_kit(
    fork: Path,
    out: Path,
    documents: dict[str, str],
    subject: str,
    head: str,
    sender: str,
    ref: str,
    branch: str,
    tests: tuple[str, ...],
) -> None:
    """Write the kit to a sibling directory, then move it over `out`.
    `documents`: description.md (also the cover letter) and the files beside it."""
    description = documents["description.md"]
    partial = out.with_name(f".{out.name}.partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    try:
        for name, text in documents.items():
            (partial / name).write_text(text)
        (partial / "title.txt").write_text(subject + "\n")
        series = partial / "series"
        format_series(fork, head, series, subject, plain_text(description), sender)
        pack_blobs(fork, preimage_blobs(fork), partial / "preimages.pack")
        script = partial / "apply-to-vllm.sh"
        script.write_text(apply_script(ref, branch, tests))
        script.chmod(0o755)
        old = out.with_name(f".{out.name}.old")
        shutil.rmtree(old, ignore_errors=True)
        if out.exists():
            os.replace(out, old)
        os.replace(partial, out)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
