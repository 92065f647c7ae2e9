"""upstream-tests.toml read: which tests the series is judged by, and which
cannot run here. The series core (sync's port report) and the test runner
both read it, so it lives apart from the runner."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Selection:
    runs: dict[str, tuple[str, ...]]
    """Name -> pytest arguments, upstream's own CPU job for the touched code."""
    regression: tuple[str, ...]
    """pytest arguments selecting the tests that pin the series' behaviour."""
    fork_tests: tuple[str, ...]
    """This repository's own tests of the fork (paths under it), run from
    each tree of the regression matrix like the regression selection."""
    fails_on_base: frozenset[str]
    """Regression tests that must fail on the pristine base's code."""
    gpu_only: tuple[str, ...]
    """pytest arguments selecting GPU-only tests that must skip here."""
    excluded: dict[str, str]
    """Test node id -> why it cannot run on this machine."""
    not_on_base: tuple[str, ...] = ()
    """Node ids (or prefixes) of upstream tests the series edits for what it
    renames: they cannot run on the base's code, which the matrix does not
    judge them on."""
    fork_tests_from: dict[str, str] = field(default_factory=dict)
    """Fork test node id (or its prefix) -> the subject of the patch it guards:
    the matrix does not judge it at the patches before that one."""

    @classmethod
    def load(cls, path: Path) -> Selection:
        with path.open("rb") as f:
            data = tomllib.load(f)
        return cls(
            runs={r["name"]: tuple(r["args"]) for r in data["run"]},
            regression=tuple(data["regression"]["args"]),
            fork_tests=tuple(data["regression"].get("fork_tests", ())),
            fails_on_base=frozenset(data["regression"]["fails_on_base"]),
            gpu_only=tuple(data["gpu_only"]["args"]),
            excluded={e["test"]: e["reason"] for e in data.get("exclude", [])},
            not_on_base=tuple(data["regression"].get("not_on_base", ())),
            fork_tests_from={
                e["test"]: e["patch"]
                for e in data["regression"].get("fork_tests_from", [])
            },
        )
