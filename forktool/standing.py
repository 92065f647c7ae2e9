"""Where the fork stands against the series, patch by patch.

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


class Change(Enum):
    """How a patch differs: its state, what happened, and what to run."""

    SAME = State.SAME, "in both", ""
    CHANGED_IN_FORK = (
        State.LOCAL,
        "changed in the fork",
        "local work: `export` saves it",
    )
    ONLY_IN_FORK = State.LOCAL, "only in the fork", "local work: `export` saves it"
    DROPPED_IN_FORK = (
        State.LOCAL,
        "dropped in the fork",
        "`export` removes it from the series",
    )
    REORDERED_IN_FORK = State.LOCAL, "reordered in the fork", "`export` saves the order"
    CHANGED_IN_SERIES = State.BEHIND, "changed in the series", "`sync` brings it in"
    DROPPED_FROM_SERIES = (
        State.BEHIND,
        "dropped from the series",
        "`sync` removes it from the fork",
    )
    NOT_APPLIED = State.BEHIND, "not applied yet", "`sync` applies it"
    ONLY_IN_SERIES = (
        State.BEHIND,
        "only in the series",
        "the fork is behind: `sync` brings it in",
    )
    REORDERED_IN_SERIES = (
        State.BEHIND,
        "reordered in the series",
        "`sync` brings the order in",
    )
    CHANGED_ON_BOTH = (
        State.BOTH,
        "changed on both sides, in the fork and in the series",
        "",
    )
    OTHER_ORDER = State.BOTH, "in another order in the fork than in the series", ""
    CHANGED_IN_FORK_DROPPED_FROM_SERIES = (
        State.BOTH,
        "changed in the fork, dropped from the series",
        "",
    )
    CHANGED_IN_SERIES_DROPPED_IN_FORK = (
        State.BOTH,
        "changed in the series, dropped in the fork",
        "",
    )

    def __init__(self, state: State, what: str, advice: str) -> None:
        self.state, self.what, self.advice = state, what, advice

    def text(self, advice: bool = True) -> str:
        return f"{self.what} ({self.advice})" if advice and self.advice else self.what


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
    number: int = 0
    """1-based position in the series, or else in the fork."""
    fork_at: int | None = None
    """0-based position of the fork's commit, if the fork has the patch."""

    @property
    def kind(self) -> State:
        return self.change.state

    def line(self, advice: bool = True) -> str:
        patch = self.series or self.fork
        name = patch.name if patch else "(order)"
        return f"  {name}: {self.change.text(advice)}"


def record_path(fork: Path) -> Path:
    return fork / ".git" / "forktool-synced"


def load_record(fork: Path) -> list[Entry] | None:
    """The last agreed series, or None for a fork without a record."""
    path = record_path(fork)
    if not path.exists():
        return None
    return [Entry(**entry) for entry in json.loads(path.read_text())]


def save_record(fork: Path, entries: list[Entry]) -> None:
    """Write the record whole (`os.replace`): a killed write leaves the old one."""
    data = [vars(entry) for entry in entries]
    path = record_path(fork)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    os.replace(tmp, path)


def before_export_path(fork: Path) -> Path:
    return fork / ".git" / "forktool-before-export"


def save_before_export(fork: Path, fingerprints: list[str]) -> None:
    """The series an export replaced (none: it changed nothing)."""
    path = before_export_path(fork)
    if not fingerprints:
        path.unlink(missing_ok=True)
        return
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(fingerprints) + "\n")
    os.replace(tmp, path)


def undone_export(
    fork: Path, series: list[PatchInfo], record: list[Entry] | None
) -> bool:
    """Whether the series is back to what the last export replaced (patches/
    checked out, stashed or reset after it), not what the export wrote."""
    path = before_export_path(fork)
    if not path.exists() or record is None:
        return False
    now = [s.fingerprint for s in series]
    return now == json.loads(path.read_text()) and now != [e.series for e in record]


@dataclass
class Standing:
    items: list[Item]
    pairs: list[tuple[int, int]]
    """(fork index, series index) of the patches present on both sides."""

    def of(self, *kinds: State) -> list[Item]:
        return [item for item in self.items if item.kind in kinds]

    def report(self, *kinds: State, advice: bool = True) -> str:
        return "\n".join(item.line(advice) for item in self.of(*kinds))

    @property
    def changed(self) -> bool:
        return bool(self.of(State.LOCAL, State.BEHIND, State.BOTH))

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

    def pair(match, change_of) -> None:
        for fi in sorted(free_f):
            for si in sorted(free_s):
                if match(fork[fi], series[si]):
                    change = change_of(fork[fi], series[si])
                    items.append(Item(change, series[si], fork[fi], si + 1, fi))
                    pairs.append((fi, si))
                    free_f.discard(fi)
                    free_s.discard(si)
                    break

    pair(lambda f, s: f.fingerprint == s.fingerprint, lambda f, s: Change.SAME)
    pair(
        lambda f, s: (s.fingerprint, f.fingerprint) in rec_pairs,
        lambda f, s: Change.SAME,
    )

    def changed(f: PatchInfo, s: PatchInfo) -> Change:
        in_fork = record is None or f.fingerprint not in rec_fork
        in_series = record is None or s.fingerprint not in rec_series
        if in_fork and not in_series:
            return Change.CHANGED_IN_FORK
        if in_series and not in_fork:
            return Change.CHANGED_IN_SERIES
        return Change.CHANGED_ON_BOTH

    pair(lambda f, s: f.subject == s.subject, changed)
    replaced = _replaced_at(fork, series, record, free_f & free_s)
    pair(lambda f, s: (f.name, s.name) in replaced, changed)
    items += _unpaired(fork, series, free_f, free_s, entries)
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
) -> list[Item]:
    """The patches left without a partner: dropped on one side (the record
    had them), dropped on one side and changed on the other (the record had
    its subject applied, neither side has the recorded version), or only on
    one side."""
    rec_series = {e.series for e in entries}
    rec_fork = {e.fork for e in entries if e.fork}
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


def _replaced_at(
    fork: list[PatchInfo],
    series: list[PatchInfo],
    record: list[Entry] | None,
    free: set[int],
) -> set[tuple[str, str]]:
    """(fork name, series name) of the patches at each position i where one
    side, or both, replaced the recorded patch i with one of another subject
    but the same files: one patch changed (its subject reworded on one side,
    say, and perhaps its code on the other), not one dropped and one added."""
    if record is None:
        return set()
    rec_series = {e.series for e in record}
    rec_fork = {e.fork for e in record if e.fork}
    found = set()
    for i, entry in enumerate(record):
        if i not in free or not entry.fork or fork[i].files != series[i].files:
            continue
        new_in_fork = fork[i].fingerprint not in rec_fork
        new_in_series = series[i].fingerprint not in rec_series
        kept_in_fork = fork[i].fingerprint == entry.fork
        kept_in_series = series[i].fingerprint == entry.series
        if (new_in_fork or kept_in_fork) and (new_in_series or kept_in_series):
            found.add((fork[i].name, series[i].name))
    return found


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


class Refusal(Enum):
    """Why `sync` or `export` changes nothing, given where the fork stands."""

    DIVERGED = "both the fork and the series changed"
    LOCAL_WORK = "the fork has work the series lacks"
    BEHIND = "the series has changes the fork lacks"

    @classmethod
    def of(cls, standing: Standing) -> Refusal:
        if standing.of(State.BOTH) or (
            standing.of(State.LOCAL) and standing.of(State.BEHIND)
        ):
            return cls.DIVERGED
        return cls.LOCAL_WORK if standing.of(State.LOCAL) else cls.BEHIND
