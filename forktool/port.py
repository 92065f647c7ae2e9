"""The port report: what git's conflicts mean, and what the new base lacks.

When a patch stops on another base, `conflicts` says in words what git's
`CONFLICT (<kind>)` lines mean. Once the series applies, `missing` lists the
paths the series, upstream-tests.toml and the series' Buildkite entries name
that the fork does not have.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

from forktool.process import git
from forktool.selection import Selection
from forktool.verify import changes, diff_of

KINDS = {
    "modify/delete": "missing in the new base: the patch changes a file it lacks",
    "content": "content conflict: the base changed the lines the patch changes",
    "add/add": "added by both the base and the patch",
}


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


ENTRY = r"^\+\s*- (!?[\w.][\w./-]*/[\w./-]*)\s*$"


def _buildkite_entries(diff: str) -> list[str]:
    """Path entries (`- vllm/...`) a patch adds to .buildkite/ files."""
    entries = []
    for section in re.split(r"^(?=diff --git )", diff, flags=re.M):
        if section.startswith("diff --git a/.buildkite/"):
            entries += re.findall(ENTRY, section, re.M)
    return [entry.lstrip("!") for entry in entries]


def _selection_paths(selection: Selection) -> list[str]:
    args = [a for run in selection.runs.values() for a in run]
    args += [*selection.regression, *selection.gpu_only]
    args += [*selection.fails_on_base, *selection.excluded]
    own = tuple(f"{c.rstrip('/')}/" for c in selection.fork_tests)
    paths = {a.split("::", 1)[0] for a in args if "/" in a and not a.startswith("-")}
    return sorted(p for p in paths if not p.startswith(own))


def missing(fork: Path, patches: list[Path], selection: Path | None) -> list[str]:
    """`  <path> (named by <what>)` for each named path HEAD lacks."""
    named: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for patch in patches:
            diff = diff_of(patch, Path(tmp)).read_text(errors="replace")
            for path in [c.new for c in changes(diff) if c.new]:
                named.setdefault(path, patch.name)
            for entry in _buildkite_entries(diff):
                named.setdefault(entry, f"a Buildkite entry of {patch.name}")
    if selection is not None and selection.exists():
        for path in _selection_paths(Selection.load(selection)):
            named.setdefault(path, selection.name)
    files = git(fork, "ls-tree", "-r", "--name-only", "-z", "HEAD").stdout.split("\0")
    present = set(files)
    for file in files:
        parts = file.split("/")
        present.update("/".join(parts[:i]) for i in range(1, len(parts)))
    return [
        f"  {path} (named by {what})"
        for path, what in named.items()
        if path.rstrip("/") not in present
    ]
