#!/usr/bin/env bash
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
