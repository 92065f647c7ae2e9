"""upstream-tests.toml read: which tests the series is judged by, and which
cannot run here. The series core (sync's port report) and the test runner
both read it, so it lives apart from the runner."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Selection:
    # Name -> pytest arguments, upstream's own CPU job for the touched code.
    runs: dict[str, tuple[str, ...]]
    regression: tuple[str, ...]  # selects the tests that pin the series' behaviour
    # This repository's own tests of the fork (paths under it), run from each
    # tree of the regression matrix like the regression selection.
    fork_tests: tuple[str, ...]
    fails_on_base: frozenset[str]  # regression tests that must fail on the base
    # The series' GPU-only E2E test, which must skip here (its node id: the CI
    # impact report names the Buildkite steps that run it).
    gpu_only: tuple[str, ...]
    excluded: dict[str, str]  # test node id -> why it cannot run on this machine
    # Node ids (or prefixes) of upstream tests the series edits for what it
    # renames: they cannot run on the base's code, which the matrix does not
    # judge them on.
    not_on_base: tuple[str, ...] = ()
    # Fork test node id (or its prefix) -> the subject of the patch it guards:
    # the matrix does not judge it at the patches before that one.
    fork_tests_from: dict[str, str] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path) -> Selection:
        data = tomllib.loads(path.read_text())
        reg = data["regression"]
        return cls(
            {r["name"]: tuple(r["args"]) for r in data["run"]},
            tuple(reg["args"]),
            tuple(reg.get("fork_tests", ())),
            frozenset(reg["fails_on_base"]),
            tuple(data["gpu_only"]["args"]),
            {e["test"]: e["reason"] for e in data.get("exclude", [])},
            tuple(reg.get("not_on_base", ())),
            {e["test"]: e["patch"] for e in reg.get("fork_tests_from", [])},
        )
