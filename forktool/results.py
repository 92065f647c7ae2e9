"""The results store: one JSON file per check under build/results/.

`test`, `setup` and `bench` write here, one file per check of the registry
(forktool.checks); reports and the PR text only read.
Each result names the fork tree it was measured on, so a reader can refuse
one measured on another tree than the fork's current HEAD.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from forktool.process import ForkToolError, git


@dataclass
class CheckResult:
    check: str
    """The check's name in the registry, also the file name."""
    ok: bool
    tree: str
    """`git rev-parse HEAD^{tree}` of the fork the check ran on."""
    base_version: str
    command: str
    """The command that refreshes this result."""
    date: str = ""
    seconds: float = 0.0
    counts: dict[str, int] = field(default_factory=dict)
    excerpts: dict[str, str] = field(default_factory=dict)
    """Name -> a few lines of real output (command and what it printed)."""
    data: dict[str, Any] = field(default_factory=dict)
    """Check-specific, machine-readable details (tables, per-test outcomes)."""


@dataclass
class Measured:
    """What a check found: its verdict and what its results file records.

    Truthy iff the check passed, so callers that only want the verdict keep
    using it as a bool.
    """

    ok: bool
    counts: dict[str, int] = field(default_factory=dict)
    excerpts: dict[str, str] = field(default_factory=dict)
    data: dict[str, Any] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return self.ok


def fork_tree(fork: Path) -> str:
    return git(fork, "rev-parse", "HEAD^{tree}").stdout.strip()


def write(store: Path, result: CheckResult) -> Path:
    result.date = result.date or datetime.now(UTC).isoformat(timespec="seconds")
    store.mkdir(parents=True, exist_ok=True)
    path = store / f"{result.check}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(asdict(result), indent=1, sort_keys=True) + "\n")
    tmp.replace(path)
    return path


def read(store: Path, check: str) -> CheckResult | None:
    path = store / f"{check}.json"
    if not path.exists():
        return None
    try:
        return CheckResult(**json.loads(path.read_text()))
    except (ValueError, TypeError) as e:
        raise ForkToolError(f"{path} is not a results file: {e}") from e
