"""status: where the fork and the series stand against the last sync or
export, patch by patch, as `git status` says where a tree stands.

Patches are compared by fingerprint (`series.describe`: header and
`git patch-id --stable`) and, for a patch changed on one side, by subject.
Which side changed a patch is told by the record that `sync` and `export`
leave in the fork (`.git/forktool-synced`): for each patch of the series
they agreed on, its fingerprint in the series and that of the fork commit
made from it (none while the patch is not applied yet).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from forktool.series import PatchInfo


class State(Enum):
    """Which side a patch differs on, and so which command keeps it."""

    SAME = "in both"
    LOCAL = "local work"  # export saves it
    BEHIND = "the fork is behind"  # sync brings it in
    BOTH = "changed on both sides"


L, B, X = State.LOCAL, State.BEHIND, State.BOTH


class Change(Enum):
    """How a patch differs: its state, what happened, and what to run."""

    SAME = State.SAME, "in both", ""
    CHANGED_IN_FORK = L, "changed in the fork", "local work: `export` saves it"
    ONLY_IN_FORK = L, "only in the fork", "local work: `export` saves it"
    DROPPED_IN_FORK = L, "dropped in the fork", "`export` removes it from the series"
    REORDERED_IN_FORK = L, "reordered in the fork", "`export` saves the order"
    CHANGED_IN_SERIES = B, "changed in the series", "`sync` brings it in"
    DROPPED_FROM_SERIES = (
        B, "dropped from the series", "`sync` removes it from the fork",
    )  # fmt: skip
    NOT_APPLIED = B, "not applied yet", "`sync` applies it"
    ONLY_IN_SERIES = B, "only in the series", "the fork is behind: `sync` brings it in"
    REORDERED_IN_SERIES = B, "reordered in the series", "`sync` brings the order in"
    CHANGED_ON_BOTH = X, "changed on both sides, in the fork and in the series", ""
    OTHER_ORDER = X, "in another order in the fork than in the series", ""
    CHANGED_IN_FORK_DROPPED_FROM_SERIES = (
        X, "changed in the fork, dropped from the series", "",
    )  # fmt: skip
    CHANGED_IN_SERIES_DROPPED_IN_FORK = (
        X, "changed in the series, dropped in the fork", "",
    )  # fmt: skip

    def __init__(self, state: State, what: str, advice: str) -> None:
        self.state, self.what, self.advice = state, what, advice


@dataclass(frozen=True)
class Entry:
    subject: str
    series: str
    fork: str | None


@dataclass(frozen=True)
class Item:
    change: Change
    series: PatchInfo | None = None
    fork: PatchInfo | None = None
    # 1-based position in the series, or else in the fork.
    number: int = 0
    # 0-based position of the fork's commit, if the fork has the patch.
    fork_at: int | None = None

    @property
    def kind(self) -> State:
        return self.change.state

    def line(self, advice: bool = True) -> str:
        patch = self.series or self.fork
        what, why = self.change.what, self.change.advice
        return f"  {patch.name if patch else '(order)'}: {what}" + (
            f" ({why})" if advice and why else ""
        )


BEFORE_EXPORT = "forktool-before-export"


def write_whole(path: Path, text: str) -> None:
    """Write `path` whole (`os.replace`): a killed write leaves the old one."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def load_record(fork: Path) -> list[Entry] | None:
    """The last agreed series, or None for a fork without a record."""
    path = fork / ".git" / "forktool-synced"
    if not path.exists():
        return None
    return [Entry(**entry) for entry in json.loads(path.read_text())]


def save_record(fork: Path, entries: list[Entry]) -> None:
    data = [vars(entry) for entry in entries]
    write_whole(fork / ".git" / "forktool-synced", json.dumps(data, indent=1) + "\n")


def save_before_export(fork: Path, fingerprints: list[str]) -> None:
    """The series an export replaced (none: it changed nothing)."""
    path = fork / ".git" / BEFORE_EXPORT
    if fingerprints:
        write_whole(path, json.dumps(fingerprints) + "\n")
    else:
        path.unlink(missing_ok=True)


def undone_export(
    fork: Path, series: list[PatchInfo], record: list[Entry] | None
) -> bool:
    """Whether the series is back to what the last export replaced (patches/
    checked out, stashed or reset after it), not what the export wrote."""
    path = fork / ".git" / BEFORE_EXPORT
    if not path.exists() or record is None:
        return False
    now = [s.fingerprint for s in series]
    return now == json.loads(path.read_text()) and now != [e.series for e in record]


@dataclass
class Standing:
    items: list[Item]
    # (fork index, series index) of the patches present on both sides.
    pairs: list[tuple[int, int]]

    def of(self, *kinds: State) -> list[Item]:
        return [item for item in self.items if item.kind in kinds]

    def report(self, *kinds: State, advice: bool = True) -> str:
        return "\n".join(item.line(advice) for item in self.of(*kinds))

    @property
    def changed(self) -> bool:
        return bool(self.of(State.LOCAL, State.BEHIND, State.BOTH))

    @property
    def diverged(self) -> bool:
        """Both sides changed: `sync` and `export` both refuse (exit status 3)."""
        return bool(self.of(State.BOTH)) or bool(
            self.of(State.LOCAL) and self.of(State.BEHIND)
        )

    def applied_prefix(self, series_len: int) -> int | None:
        """m when the fork is the series' first m patches (some perhaps changed
        in the fork) and every later patch only waits to be applied."""
        m = len(self.pairs)
        if self.pairs != [(i, i) for i in range(m)] or self.of(State.BOTH):
            return None
        for item in self.items:
            if item.fork and (
                item.kind not in (State.SAME, State.LOCAL) or not item.series
            ):
                return None
        tail = [item for item in self.items if item.number > m and item.series]
        if any(item.kind != State.BEHIND or item.fork for item in tail):
            return None
        if len(tail) != series_len - m or self.of(State.LOCAL) and not tail:
            return None
        return m


def compare(
    fork: list[PatchInfo], series: list[PatchInfo], record: list[Entry] | None
) -> Standing:
    """Classify every patch of the fork and the series; see the module doc."""
    entries = record or []
    rec_pairs = {(e.series, e.fork) for e in entries}
    rec_series = {e.series for e in entries}
    rec_fork = {e.fork for e in entries if e.fork}
    free_f, free_s = set(range(len(fork))), set(range(len(series)))
    items: list[Item] = []
    pairs: list[tuple[int, int]] = []

    def pair(match, change_of=lambda f, s: Change.SAME) -> None:
        for fi in sorted(free_f):
            for si in sorted(free_s):
                if match(fork[fi], series[si]):
                    change = change_of(fork[fi], series[si])
                    items.append(Item(change, series[si], fork[fi], si + 1, fi))
                    pairs.append((fi, si))
                    free_f.discard(fi)
                    free_s.discard(si)
                    break

    def changed(f: PatchInfo, s: PatchInfo) -> Change:
        in_fork = record is None or f.fingerprint not in rec_fork
        in_series = record is None or s.fingerprint not in rec_series
        if in_fork != in_series:
            return Change.CHANGED_IN_FORK if in_fork else Change.CHANGED_IN_SERIES
        return Change.CHANGED_ON_BOTH

    pair(lambda f, s: f.fingerprint == s.fingerprint)
    pair(lambda f, s: (s.fingerprint, f.fingerprint) in rec_pairs)
    pair(lambda f, s: f.subject == s.subject, changed)
    # At a position i where one side, or both, replaced the recorded patch i
    # with one of another subject but the same files: one patch changed (its
    # subject reworded on one side, say, and perhaps its code on the other),
    # not one dropped and one added.
    free = free_f & free_s
    replaced = {
        (f.name, s.name)
        for i, e in enumerate(entries)
        if i in free and e.fork
        for f, s in [(fork[i], series[i])]
        if f.files == s.files
        and (f.fingerprint == e.fork or f.fingerprint not in rec_fork)
        and (s.fingerprint == e.series or s.fingerprint not in rec_series)
    }
    pair(lambda f, s: (f.name, s.name) in replaced, changed)
    items += _unpaired(fork, series, free_f, free_s, entries, rec_series, rec_fork)
    items += _order(fork, series, entries if record is not None else None, pairs)
    items.sort(key=lambda item: (item.number, item.fork is None))
    pairs.sort()
    return Standing(items, pairs)


def _unpaired(
    fork: list[PatchInfo],
    series: list[PatchInfo],
    free_f: set[int],
    free_s: set[int],
    entries: list[Entry],
    rec_series: set[str],
    rec_fork: set[str],
) -> list[Item]:
    """The patches left without a partner: dropped on one side (the record
    had them), dropped on one side and changed on the other (the record had
    its subject applied, neither side has the recorded version), or only on
    one side."""
    rec_applied = {e.series for e in entries if e.fork}
    on_both = {p.fingerprint for p in (*fork, *series)}
    gone = {
        e.subject for e in entries if e.fork and {e.series, e.fork}.isdisjoint(on_both)
    }
    items = []
    for fi in sorted(free_f):
        if fork[fi].fingerprint in rec_fork:
            change = Change.DROPPED_FROM_SERIES
        elif fork[fi].subject in gone:
            change = Change.CHANGED_IN_FORK_DROPPED_FROM_SERIES
        else:
            change = Change.ONLY_IN_FORK
        items.append(Item(change, fork=fork[fi], number=fi + 1, fork_at=fi))
    for si in sorted(free_s):
        if series[si].fingerprint in rec_applied:
            change = Change.DROPPED_IN_FORK
        elif series[si].fingerprint in rec_series:
            change = Change.NOT_APPLIED
        elif series[si].subject in gone:
            change = Change.CHANGED_IN_SERIES_DROPPED_IN_FORK
        else:
            change = Change.ONLY_IN_SERIES
        items.append(Item(change, series=series[si], number=si + 1))
    return items


def _order(
    fork: list[PatchInfo],
    series: list[PatchInfo],
    record: list[Entry] | None,
    pairs: list[tuple[int, int]],
) -> list[Item]:
    """One item when the patches both sides have are in another order."""
    by_fork = [si for _, si in sorted(pairs)]
    if by_fork == sorted(by_fork):
        return []
    where = {e.series: i for i, e in enumerate(record or [])}
    where |= {e.fork: i for i, e in enumerate(record or []) if e.fork}

    def reordered(seq: list[int | None]) -> bool:
        known = [i for i in seq if i is not None]
        return known != sorted(known)

    fork_seq = [where.get(fork[fi].fingerprint) for fi, _ in sorted(pairs)]
    series_seq = [
        where.get(series[si].fingerprint) for _, si in sorted(pairs, key=lambda p: p[1])
    ]
    in_fork, in_series = reordered(fork_seq), reordered(series_seq)
    if record is not None and in_fork and not in_series:
        change = Change.REORDERED_IN_FORK
    elif record is not None and in_series and not in_fork:
        change = Change.REORDERED_IN_SERIES
    else:
        change = Change.OTHER_ORDER
    return [Item(change, number=len(series) + 1)]
