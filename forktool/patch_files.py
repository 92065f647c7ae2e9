"""Patch files: the fork's commits written as `git format-patch` output, and
the paths a series of patch files reads or writes."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

from forktool.process import BASE_TAG, ISOLATED, git
from forktool.series import PatchInfo, describe

FORMAT_PATCH = [
    "format-patch",
    "--no-signature",  # no trailing git version
    "--zero-commit",  # commit ids change whenever the fork is rebuilt
    "--no-numbered",  # "[PATCH]": adding a patch leaves the others unchanged
    "--full-index",  # abbreviated ids grow with the repository
    "--stat=80",
]


def format_patches(fork: Path, out: Path, since: str = BASE_TAG) -> list[Path]:
    """Write the fork's commits since `since` as normalised patch files."""
    result = git(fork, *FORMAT_PATCH, "-o", str(out), f"{since}..HEAD", env=ISOLATED)
    return [Path(line) for line in result.stdout.splitlines()]


def fork_patches(fork: Path, since: str = BASE_TAG) -> list[PatchInfo]:
    with tempfile.TemporaryDirectory() as tmp:
        return [describe(path) for path in format_patches(fork, Path(tmp), since)]


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
