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


S, L, B, X = State.SAME, State.LOCAL, State.BEHIND, State.BOTH


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


Record = list[Entry] | None  # the last agreed series; None: a fork without one


@dataclass(frozen=True)
class Item:
    change: Change
    series: PatchInfo | None = None
    fork: PatchInfo | None = None
    # 1-based position in the series, or else in the fork.
    number: int = 0
    # 0-based position of the fork's commit, if the fork has the patch.
    fork_at: int | None = None

    def line(self, advice: bool = True) -> str:
        patch = self.series or self.fork
        why = f" ({self.change.advice})" if advice and self.change.advice else ""
        return f"  {patch.name if patch else '(order)'}: {self.change.what}{why}"


BEFORE_EXPORT = "forktool-before-export"


def write_whole(path: Path, text: str) -> None:
    """Write `path` whole (`os.replace`): a killed write leaves the old one."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def load_record(fork: Path) -> Record:
    """The last agreed series, or None for a fork without a record."""
    path = fork / ".git" / "forktool-synced"
    return [Entry(**e) for e in json.loads(path.read_text())] if path.exists() else None


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


def undone_export(fork: Path, series: list[PatchInfo], record: Record) -> bool:
    """Whether the series is back to what the last export replaced (patches/
    checked out, stashed or reset after it), not what the export wrote."""
    path = fork / ".git" / BEFORE_EXPORT
    if not path.exists() or record is None:
        return False
    now = [s.fingerprint for s in series]
    return now == json.loads(path.read_text()) and now != [e.series for e in record]


@dataclass
class Comparison:
    """The fork and the series compared patch by patch (`compare`): one item
    for each patch of the series, numbered by its place there."""

    items: list[Item]
    # (fork index, series index) of the patches present on both sides.
    pairs: list[tuple[int, int]]

    def of(self, *kinds: State) -> list[Item]:
        return [item for item in self.items if item.change.state in kinds]

    def report(self, *kinds: State, advice: bool = True) -> str:
        return "\n".join(item.line(advice) for item in self.of(*kinds))

    @property
    def diverged(self) -> bool:
        """Both sides changed: `sync` and `export` both refuse (exit status 3)."""
        return bool(self.of(B, X)) and bool(self.of(L, X))

    def applied_prefix(self) -> int | None:
        """m when the fork is the series' first m patches (some perhaps changed
        in the fork) and every later patch only waits to be applied."""
        m = len(self.pairs)
        tail = [item for item in self.items if item.number > m and item.series]
        ok = (
            self.pairs == [(i, i) for i in range(m)]
            and not self.of(X)
            and all(i.series and i.change.state in (S, L) for i in self.items if i.fork)
            and all(item.change.state is B and not item.fork for item in tail)
            and bool(tail or not self.of(L))
        )
        return m if ok else None


def compare(
    fork: list[PatchInfo], series: list[PatchInfo], record: Record
) -> Comparison:
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
    replaced = {
        (f.name, s.name)
        for i, e in enumerate(entries)
        if i in free_f and i in free_s and e.fork
        for f, s in [(fork[i], series[i])]
        if f.files == s.files
        and (f.fingerprint == e.fork or f.fingerprint not in rec_fork)
        and (s.fingerprint == e.series or s.fingerprint not in rec_series)
    }
    pair(lambda f, s: (f.name, s.name) in replaced, changed)
    # Left without a partner: dropped on one side (the record had it), dropped
    # on one side and changed on the other (the record had its subject applied,
    # neither side has the recorded version), or only on one side.
    rec_applied = {e.series for e in entries if e.fork}
    on_both = {p.fingerprint for p in (*fork, *series)}
    gone = {
        e.subject for e in entries if e.fork and {e.series, e.fork}.isdisjoint(on_both)
    }
    for fi in sorted(free_f):
        f = fork[fi]
        change = (
            Change.DROPPED_FROM_SERIES if f.fingerprint in rec_fork
            else Change.CHANGED_IN_FORK_DROPPED_FROM_SERIES if f.subject in gone
            else Change.ONLY_IN_FORK
        )  # fmt: skip
        items.append(Item(change, fork=f, number=fi + 1, fork_at=fi))
    for si in sorted(free_s):
        s = series[si]
        change = (
            Change.DROPPED_IN_FORK if s.fingerprint in rec_applied
            else Change.NOT_APPLIED if s.fingerprint in rec_series
            else Change.CHANGED_IN_SERIES_DROPPED_IN_FORK if s.subject in gone
            else Change.ONLY_IN_SERIES
        )  # fmt: skip
        items.append(Item(change, series=s, number=si + 1))
    items += _order(fork, series, entries, sorted(pairs))
    items.sort(key=lambda item: (item.number, item.fork is None))
    return Comparison(items, sorted(pairs))


def _order(
    fork: list[PatchInfo],
    series: list[PatchInfo],
    entries: list[Entry],
    pairs: list[tuple[int, int]],
) -> list[Item]:
    """One item when the patches both sides have are in another order."""
    if [si for _, si in pairs] == sorted(si for _, si in pairs):
        return []
    where = {e.series: i for i, e in enumerate(entries)}
    where |= {e.fork: i for i, e in enumerate(entries) if e.fork}

    def reordered(side: list[PatchInfo], at: list[int]) -> bool:
        """The record's places of `side`'s patches at indices `at` (those it
        knows), read in `side`'s order, are not ascending."""
        known = [where[f] for i in sorted(at) if (f := side[i].fingerprint) in where]
        return known != sorted(known)

    in_fork = reordered(fork, [fi for fi, _ in pairs])
    in_series = reordered(series, [si for _, si in pairs])
    if in_fork != in_series:  # never without a record: neither side is then reordered
        change = Change.REORDERED_IN_FORK if in_fork else Change.REORDERED_IN_SERIES
    else:
        change = Change.OTHER_ORDER
    return [Item(change, number=len(series) + 1)]
