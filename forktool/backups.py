"""The `backup/<time>` branches `sync` leaves in the fork, and their pruning.

A backup is prunable when it holds no work found nowhere else: each of its
commits is in the fork by `git patch-id` (`git cherry`), or is a version of
a patch committed in this repository's patches/ (a teammate changed that
patch, so the series superseded it; git history keeps the old version).
"""

from datetime import datetime
from pathlib import Path
from typing import NamedTuple

from forktool.process import git
from forktool.series import fork_patches
from forktool.sync import committed_fingerprints


class Backup(NamedTuple):
    name: str
    # When `sync` made it ("made 2026-12-02 18:49:29 UTC", from its name), else its
    # commit's date ("committed 2026-12-01").
    date: str
    commits: int
    # Subjects of its commits that the fork's HEAD lacks and patches/' history does not
    # hold: local work nobody saved.
    lacking: list[str]
    # Subjects of its commits that the fork lacks but that are versions of patches
    # committed in patches/: the series replaced them.
    superseded: list[str]


def backups(fork: Path, patches: Path) -> list[Backup]:
    """The fork's backups; commits of theirs that are versions of patches
    committed in `patches` count as superseded, not lacking."""
    refs = git(fork, "for-each-ref", "refs/heads/backup/",
               "--format=%(refname:short)%00%(committerdate:short)").stdout  # fmt: skip
    committed: set[str] | None = None
    found = []
    for line in refs.splitlines():
        name, date = line.split("\0")
        root = git(fork, "rev-list", "--max-parents=0", name).stdout.split()[-1]
        cherry = git(fork, "cherry", "-v", "HEAD", name, root).stdout.splitlines()
        lacking: list[str] = []
        superseded: list[str] = []
        for _, commit, *subject in (c.split(" ", 2) for c in cherry if c[0] == "+"):
            if committed is None:  # read once, and only when needed
                committed = committed_fingerprints(patches)
            patch = fork_patches(fork, "-1", commit)  # none for a merge
            saved = bool(patch) and patch[0].fingerprint in committed
            (superseded if saved else lacking).append("".join(subject))
        # The UTC time `backup/<YYYYmmddTHHMMSS>` (sync's _backup_name) holds;
        # a branch named otherwise, its commit date.
        try:
            made = datetime.strptime(name.removeprefix("backup/")[:15], "%Y%m%dT%H%M%S")
            date = f"made {made:%Y-%m-%d %H:%M:%S} UTC"
        except ValueError:
            date = f"committed {date}"
        # Its commits on the base, also those the fork's HEAD has too.
        commits = int(git(fork, "rev-list", "--count", f"{root}..{name}").stdout)
        found.append(Backup(name, date, commits, lacking, superseded))
    return found


def report(fork: Path, prune: bool, patches: Path) -> str:
    """List the backups of `fork` (or prune them), judged against the fork
    and the git history of `patches`."""
    found = backups(fork, patches)
    if not found:
        return f"{fork} has no backup branches"
    lines = []
    for b in found:
        missing = len(b.lacking) + len(b.superseded)
        counted = f"{b.commits} commits, {missing} not in the fork"
        lines.append(f"  {b.name} ({b.date}): {counted}")
        lines += [f"      {s}  (local work, saved nowhere else)" for s in b.lacking]
        lines += [f"      {s}  (a version committed in patches/)" for s in b.superseded]
    done = [b for b in found if not b.lacking]
    whose = "patches are all in the fork or in the git history of patches/"
    if not prune:
        return (
            f"{len(found)} backup branches in {fork}:\n" + "\n".join(lines) + "\n"
            f"`python3 -m forktool backups --prune` deletes the {len(done)} whose "
            f"{whose}."
        )
    for b in done:
        git(fork, "branch", "-q", "-D", b.name)
    said = f"deleted {len(done)} backup branches whose {whose}"
    if kept := len(found) - len(done):
        said += f"; kept {kept} holding patches the fork lacks (listed above): once "
        said += f"you are sure, `git -C {fork} branch -D <name>` deletes one"
    return "\n".join(lines) + "\n" + said + "."
