"""Proof that a patch or a series applies as written, checked by blob ids.

A `git format-patch --full-index` file names, on each file's `index` line,
the blob the file has before and after the patch. `applied` checks a commit
that `git am` just made against them; `prove` applies a whole series onto
the base in a scratch index and compares the tree with the fork's. Both read
a patch as `git am` does (`git mailinfo` splits the message from the diff).
"""

from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from forktool.git import BASE_TAG, ISOLATED, SERIES, git


@dataclass(frozen=True)
class FileChange:
    old: str | None
    """The path before the patch; None for a file it creates."""
    new: str | None
    """The path after the patch; None for a file it deletes."""
    pre: str | None
    """The blob id (perhaps abbreviated) before, from the `index` line."""
    post: str | None


def _blob(text: str) -> str | None:
    return None if set(text) == {"0"} else text


def diff_of(patch: Path, tmp: Path) -> Path:
    """The diff part of a patch file, split off as `git am` splits it."""
    msg, diff = tmp / "msg", tmp / "diff"
    with patch.open("rb") as mail:
        git(None, "mailinfo", str(msg), str(diff), input=mail.read(), binary=True)
    return diff


def changes(diff: str) -> list[FileChange]:
    """Each file's paths and `index` blob ids, from a diff's headers."""
    found = []
    for section in re.split(r"^(?=diff --git )", diff, flags=re.M)[1:]:
        header = section.split("\n@@", 1)[0].split("\nGIT binary patch", 1)[0]
        fields = dict(re.findall(r"^(--- |\+\+\+ |index |rename from |rename to "
                                 r"|copy from |copy to |new file|deleted file)(.*)$",
                                 header, re.M))  # fmt: skip
        a, b = re.match(r"diff --git a/(.*) b/(.*)", section).groups()
        old = fields.get("rename from ", fields.get("copy from ", a))
        new = fields.get("rename to ", fields.get("copy to ", b))
        if fields.get("--- ") == "/dev/null" or "new file" in fields:
            old = None
        if fields.get("+++ ") == "/dev/null" or "deleted file" in fields:
            new = None
        pre = post = ""
        if "index " in fields:
            pre, post = fields["index "].split()[0].split("..")
        found.append(FileChange(old, new, _blob(pre), _blob(post)) if pre else None)
    return [change for change in found if change]


def _blobs(fork: Path, rev: str, paths: set[str]) -> dict[str, str]:
    if not paths:
        return {}
    out = git(fork, "ls-tree", "-z", rev, "--", *sorted(paths)).stdout
    return {
        entry.split("\t", 1)[1]: entry.split()[2] for entry in out.split("\0") if entry
    }


def _same(actual: str | None, named: str | None) -> bool:
    if actual is None or named is None:
        return actual is named
    return actual.startswith(named)


def applied(fork: Path, patch: Path) -> list[str]:
    """The files that the commit `git am` made of `patch` (HEAD) has not as
    its `index` lines name: one line each. A file whose blob before the patch
    was another than the index names (a patch applied by three-way merge on
    another base) is not checked."""
    with tempfile.TemporaryDirectory() as tmp:
        found = changes(diff_of(patch, Path(tmp)).read_text(errors="replace"))
    paths = {p for c in found for p in (c.old, c.new) if p}
    before, after = _blobs(fork, "HEAD~1", paths), _blobs(fork, "HEAD", paths)
    wrong = []
    for change in found:
        if not _same(before.get(change.old) if change.old else None, change.pre):
            continue
        path = change.new or change.old
        got = after.get(change.new) if change.new else None
        if not _same(got, change.post):
            wrong.append(
                f"  {path}: became {got or 'absent'}, its index line says "
                f"{change.post or 'deleted'}"
            )
    return wrong


def prove(fork: Path, patches: list[Path]) -> str | None:
    """Why `patches` applied in order on `base` do not give HEAD's tree, or
    None when they do. Applied in a scratch index: no checkout, nothing else
    touched."""
    with tempfile.TemporaryDirectory() as tmp:
        env = {**ISOLATED, "GIT_INDEX_FILE": str(Path(tmp, "index"))}
        git(fork, "read-tree", BASE_TAG, env=env)
        for number, patch in enumerate(patches, 1):
            diff = diff_of(patch, Path(tmp))
            result = git(fork, "apply", "--cached", str(diff), env=env, check=False)
            if result.returncode:
                return (
                    f"patch {number}, {patch.name}, does not apply on the base and "
                    f"the patches before it:\n{result.stderr.strip()}"
                )
        tree = git(fork, "write-tree", env=env).stdout.strip()
    head = git(fork, "rev-parse", "HEAD^{tree}").stdout.strip()
    if tree == head:
        return None
    differ = git(fork, "diff-tree", "-r", "--name-only", tree, head).stdout.split()
    return (
        "the patches applied on the base give another tree than the fork's HEAD; "
        f"these files differ: {', '.join(differ)}"
    )


def unexportable(fork: Path) -> tuple[list[str], list[str]]:
    """The fork's merge commits and empty commits, as `<id> <subject>` lines:
    a series holds neither (a merge's resolution would be in no patch, an
    empty commit makes an empty patch file)."""
    line = "--format=%h %s"
    merges = git(fork, "log", "--merges", line, SERIES).stdout.splitlines()
    log = git(fork, "log", "--no-merges", "--name-only", f"{line}%x00", SERIES)
    empty = []
    for entry in re.split(r"\n(?=[0-9a-f]+ .*\0)", log.stdout.strip()):
        subject, _, files = entry.partition("\0")
        if entry and not files.strip():
            empty.append(subject)
    return merges, empty
