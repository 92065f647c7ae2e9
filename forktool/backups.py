"""The `backup/<time>` branches `sync` leaves in the fork, and their pruning.

A backup is prunable when it holds no work found nowhere else: each of its
commits is in the fork by `git patch-id` (`git cherry`), or is a version of
a patch committed in this repository's patches/ (a teammate changed that
patch, so the series superseded it; git history keeps the old version).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from forktool.patch_files import FORMAT_PATCH
from forktool.process import ISOLATED, git
from forktool.series import describe
from forktool.sync import committed_fingerprints


@dataclass(frozen=True)
class Backup:
    name: str
    date: str
    """When `sync` made it ("made 2026-12-02 18:49:29 UTC", from its name),
    else its commit's date ("committed 2026-12-01")."""
    commits: int
    lacking: list[str]
    """Subjects of its commits that the fork's HEAD lacks and patches/'
    history does not hold: local work nobody saved."""
    superseded: list[str]
    """Subjects of its commits that the fork lacks but that are versions of
    patches committed in patches/: the series replaced them."""


def _made(name: str, committed: str) -> str:
    """When the backup `name` was made: the UTC time `backup/<YYYYmmddTHHMMSS>`
    (sync's _backup_name) holds; a branch named otherwise, its commit date."""
    stamp = name.removeprefix("backup/")[:15]
    try:
        made = datetime.strptime(stamp, "%Y%m%dT%H%M%S")
    except ValueError:
        return f"committed {committed}"
    return f"made {made:%Y-%m-%d %H:%M:%S} UTC"


def _fingerprint(fork: Path, commit: str) -> str:
    """The fingerprint of `commit` as `export` writes it ("" for a merge,
    which has no patch)."""
    with tempfile.TemporaryDirectory() as tmp:
        args = [*FORMAT_PATCH, "-o", tmp, "-1", commit]
        paths = git(fork, *args, env=ISOLATED).stdout.splitlines()
        return describe(Path(paths[0])).fingerprint if paths else ""


def backups(fork: Path, patches: Path | None = None) -> list[Backup]:
    """The fork's backups; commits of theirs that are versions of patches
    committed in `patches` (when given) count as superseded, not lacking."""
    refs = git(
        fork,
        "for-each-ref",
        "--format=%(refname:short)%00%(committerdate:short)",
        "refs/heads/backup/",
    ).stdout.splitlines()
    committed: set[str] | None = None
    found = []
    for line in refs:
        name, date = line.split("\0")
        root = git(fork, "rev-list", "--max-parents=0", name).stdout.split()[-1]
        cherry = git(fork, "cherry", "-v", "HEAD", name, root).stdout.splitlines()
        lacking: list[str] = []
        superseded: list[str] = []
        for sign, commit, *subject in (c.split(" ", 2) for c in cherry):
            if sign != "+":
                continue
            if committed is None:  # read once, and only when needed
                committed = committed_fingerprints(patches) if patches else set()
            saved = _fingerprint(fork, commit) in committed
            (superseded if saved else lacking).append("".join(subject))
        made = _made(name, date)
        found.append(Backup(name, made, len(cherry), lacking, superseded))
    return found


def _listing(found: list[Backup]) -> list[str]:
    lines = []
    for b in found:
        missing = len(b.lacking) + len(b.superseded)
        lines.append(
            f"  {b.name} ({b.date}): {b.commits} commits, {missing} not in the fork"
        )
        lines += [f"      {s}  (local work, saved nowhere else)" for s in b.lacking]
        lines += [f"      {s}  (a version committed in patches/)" for s in b.superseded]
    return lines


def report(fork: Path, prune: bool, patches: Path | None = None) -> str:
    """List the backups of `fork` (or prune them), judged against the fork
    and the git history of `patches`."""
    found = backups(fork, patches)
    if not found:
        return f"{fork} has no backup branches"
    lines = _listing(found)
    done = [b for b in found if not b.lacking]
    if not prune:
        return (
            f"{len(found)} backup branches in {fork}:\n" + "\n".join(lines) + "\n"
            f"`python3 -m forktool backups --prune` deletes the {len(done)} whose "
            "patches are all in the fork or in the git history of patches/."
        )
    for b in done:
        git(fork, "branch", "-q", "-D", b.name)
    kept = [b.name for b in found if b.lacking]
    said = (
        f"deleted {len(done)} backup branches whose patches are all in the fork "
        "or in the git history of patches/"
    )
    if kept:
        said += (
            f"; kept {len(kept)} holding patches the fork lacks (listed above): "
            f"once you are sure, `git -C {fork} branch -D <name>` deletes one"
        )
    return "\n".join(lines) + "\n" + said + "."
