"""What a pytest run did, from the JSON lines forktool/pytest_report.py
writes: each test's outcome, and each failure's exception, message and
traceback's end; how far a run under way has come."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

OUTCOMES = ("passed", "failed", "error", "skipped")


@dataclass
class Result:
    outcomes: dict[str, str] = field(default_factory=dict)
    """pytest node id -> one of OUTCOMES."""
    reasons: dict[str, str] = field(default_factory=dict)
    """pytest node id -> skip reason or failure (crash) message."""
    seconds: float = 0.0
    cached: bool = False
    exception_types: dict[str, str] = field(default_factory=dict)
    """Failed or errored node id -> its exception's type, as pytest caught it."""
    tails: dict[str, str] = field(default_factory=dict)
    """Failed or errored node id -> the last lines of its traceback."""

    def counts(self) -> Counter[str]:
        return Counter(self.outcomes.values())

    def counted(self) -> str:
        c = self.counts()
        return ", ".join(f"{c[o]} {o}" for o in OUTCOMES if c[o]) or "nothing ran"

    def summary(self) -> str:
        how = "cached" if self.cached else f"{self.seconds:.0f} s"
        return f"{self.counted()} ({how})"

    def with_outcome(self, *outcomes: str) -> list[str]:
        return sorted(t for t, o in self.outcomes.items() if o in outcomes)

    def exceptions(self) -> dict[str, str]:
        """Each failed or errored test's exception type ("" when unknown)."""
        return {
            t: self.exception_types.get(t, "")
            for t in self.with_outcome("failed", "error")
        }

    def update(self, other: Result) -> None:
        """Add `other`'s tests (another pytest run) to these."""
        for name in ("outcomes", "reasons", "exception_types", "tails"):
            getattr(self, name).update(getattr(other, name))

    def data(self) -> dict[str, Any]:
        """What the cache keeps (all but `cached`)."""
        return {k: v for k, v in asdict(self).items() if k != "cached"}

    def add(self, record: dict[str, Any]) -> None:
        """One of the plugin's reports: a phase (setup, call, teardown) of a
        test, or a collection error. A failure outside the call is an error;
        a failure is kept over what a later phase says."""
        test, when, outcome = record["nodeid"], record["when"], record["outcome"]
        if self.outcomes.get(test) in ("failed", "error"):
            return
        if outcome == "failed":
            self.outcomes[test] = "failed" if when == "call" else "error"
            self.reasons[test] = record.get("message", "")
            self.exception_types[test] = record.get("exception", "")
            self.tails[test] = record.get("tail", "")
        elif when == "call" or outcome == "skipped":
            self.outcomes[test] = outcome
            if record.get("message"):
                self.reasons[test] = record["message"]

    @classmethod
    def of(cls, records: list[dict[str, Any]], seconds: float = 0.0) -> Result:
        result = cls(seconds=seconds)
        for record in records:
            if record.get("event") == "report":
                result.add(record)
        return result


def read_report(path: Path) -> list[dict[str, Any]]:
    """The plugin's records so far; a line still being written is left out."""
    if not path.exists():
        return []
    records = []
    for line in path.read_text(errors="replace").splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return records


@dataclass(frozen=True)
class Progress:
    done: int
    failed: int
    total: int | None

    @classmethod
    def of(cls, records: list[dict[str, Any]]) -> Progress:
        """How far a run has come, from the plugin's records so far."""
        result = Result.of(records)
        total = next(
            (r["count"] for r in records if r.get("event") == "collected"), None
        )
        failed = len(result.with_outcome("failed", "error"))
        return cls(len(result.outcomes), failed, total)

    def line(self, seconds: float) -> str:
        of = f"/{self.total}" if self.total is not None else ""
        minutes, rest = divmod(int(seconds), 60)
        return (
            f"{self.done}{of} tests done, {self.failed} failed, "
            f"{minutes} min {rest:02d} s"
        )
