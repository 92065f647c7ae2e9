"""The `backup/<time>` branches `sync` leaves in the fork, and their pruning.

A backup is prunable when every one of its commits is in the fork by
`git patch-id` (`git cherry`): deleting it loses no patch.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from forktool.git import git


@dataclass(frozen=True)
class Backup:
    name: str
    date: str
    commits: int
    lacking: list[str]
    """Subjects of its commits whose change the fork's HEAD lacks."""


def backups(fork: Path) -> list[Backup]:
    refs = git(
        fork,
        "for-each-ref",
        "--format=%(refname:short)%00%(committerdate:short)",
        "refs/heads/backup/",
    ).stdout.splitlines()
    found = []
    for line in refs:
        name, date = line.split("\0")
        root = git(fork, "rev-list", "--max-parents=0", name).stdout.split()[-1]
        cherry = git(fork, "cherry", "-v", "HEAD", name, root).stdout.splitlines()
        lacking = [c.split(" ", 2)[2] for c in cherry if c.startswith("+")]
        found.append(Backup(name, date, len(cherry), lacking))
    return found


def report(fork: Path, prune: bool) -> str:
    found = backups(fork)
    if not found:
        return f"{fork} has no backup branches"
    lines = []
    for b in found:
        what = f"{b.commits} commits, {len(b.lacking)} not in the fork"
        lines.append(f"  {b.name} ({b.date}): {what}")
        lines += [f"      {subject}" for subject in b.lacking]
    done = [b for b in found if not b.lacking]
    if not prune:
        return (
            f"{len(found)} backup branches in {fork}:\n" + "\n".join(lines) + "\n"
            f"`python3 -m forktool backups --prune` deletes the {len(done)} whose "
            "patches are all in the fork."
        )
    for b in done:
        git(fork, "branch", "-q", "-D", b.name)
    kept = [b.name for b in found if b.lacking]
    said = f"deleted {len(done)} backup branches whose patches are all in the fork"
    if kept:
        said += (
            f"; kept {len(kept)} holding patches the fork lacks (listed above): "
            f"once you are sure, `git -C {fork} branch -D <name>` deletes one"
        )
    return "\n".join(lines) + "\n" + said + "."
