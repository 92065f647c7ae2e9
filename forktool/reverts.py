"""`git revert` of a patch of the series, the way vLLM contributors undo a
commit: exported, it keeps both the patch and its revert in the series. The
hint says how to drop the patch instead."""

from __future__ import annotations

import re
from pathlib import Path

from forktool.process import BASE_TAG, SERIES, git

REVERTS = re.compile(r"^This reverts commit ([0-9a-f]{7,40})\b", re.MULTILINE)


def _reverted(subject: str, body: str, earlier: list[tuple[str, str]]) -> int | None:
    """The index in `earlier` ((commit, subject) pairs) of the commit that the
    commit with `subject` and `body` reverts; None when it reverts none."""
    if not subject.startswith('Revert "'):
        return None
    if said := REVERTS.search(body):
        for i, (commit, _) in enumerate(earlier):
            if commit.startswith(said[1]):
                return i
    # Its "This reverts commit" gone or stale (a rebase changed the ids):
    # the quoted subject.
    quoted = subject.removeprefix('Revert "').removesuffix('"')
    matches = [i for i, (_, s) in enumerate(earlier) if s == quoted]
    return matches[-1] if matches else None


def hints(fork: Path, names: list[str]) -> list[str]:
    """A warning for each commit of the series (patch files `names`) that
    reverts an earlier one: how to drop that patch instead."""
    log = git(fork, "log", "--reverse", "--format=%H%x00%s%x00%B%x1e", SERIES)
    records = [r.lstrip("\n") for r in log.stdout.split("\x1e") if r.strip()]
    earlier: list[tuple[str, str]] = []
    found = []
    for i, record in enumerate(records):
        commit, subject, body = record.split("\0", 2)
        at = _reverted(subject, body, earlier)
        if at is not None and i < len(names) and at < len(names):
            n = at + 1
            found.append(
                f"warning: {names[i]}: reverts patch {n} ({names[at]}): to drop "
                f"patch {n}, `git -C {fork} rebase -i {BASE_TAG}` and delete its "
                "line and this revert's (a revert keeps both in the series)"
            )
        earlier.append((commit, subject))
    return found
