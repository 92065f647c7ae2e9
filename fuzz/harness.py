"""The trees under test and the planner worker processes that import them."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from evidence.tree_process import TreeProcess
from evidence.worktrees import worktree
from forktool.layout import LAYOUT
from forktool.process import BASE_TAG, git
from forktool.pytest_runner import test_env

WORKER = Path(__file__).resolve().with_name("planner_worker.py")

READY_TIMEOUT_S = 300.0  # importing vllm without bytecode caches: ~20 s
PLAN_TIMEOUT_S = 120.0


def base_tree() -> Path:
    """The tool-owned checkout of the pristine base, made or fixed if needed."""
    base = LAYOUT.base_tree
    want = git(LAYOUT.fork, "rev-parse", f"{BASE_TAG}^{{commit}}").stdout.strip()
    have = (
        git(base, "rev-parse", "HEAD", check=False).stdout.strip()
        if (base / ".git").exists()
        else ""
    )
    if have != want:
        worktree(LAYOUT.fork, base, BASE_TAG)
    return base


def candidate_tree(name: str) -> Path:
    """FUZZ_AGAINST: `series` (the fork), `base`, a build/trees name, or a path."""
    if name == "series":
        return LAYOUT.fork
    if name == "base":
        return base_tree()
    named = LAYOUT.trees / name
    path = named if named.is_dir() else Path(name).resolve()
    if not (path / "vllm" / "__init__.py").exists():
        raise ValueError(f"FUZZ_AGAINST={name!r}: no vllm tree at {path}")
    return path


def worker_env() -> dict[str, str]:
    # The planner warns on every padded group.
    return {"VLLM_LOGGING_LEVEL": "ERROR", **test_env(LAYOUT.hf_home)}


class PlannerProcess(TreeProcess):
    """One planner_worker.py process importing one tree's vllm."""

    def __init__(self, label: str, tree: Path) -> None:
        super().__init__(
            f"planner-{label}", tree, [sys.executable, str(WORKER)], worker_env()
        )
        self.next_id = 0

    def send(self, case: dict[str, Any]) -> int:
        self.next_id += 1
        self.write({"id": self.next_id, "case": case})
        return self.next_id

    def receive(self, request_id: int) -> dict[str, Any]:
        result = self.read(PLAN_TIMEOUT_S)
        if result.get("id") != request_id:
            got = result.get("id")
            raise RuntimeError(f"{self.label}: answer to {got}, not {request_id}")
        if "harness_error" in result:
            raise RuntimeError(f"{self.label}: {result['harness_error']}")
        return result


class PlannerPair:
    """The reference (pristine base) and the candidate, asked the same case."""

    def __init__(self, candidate_name: str) -> None:
        self.reference = PlannerProcess("base", base_tree())
        self.candidate = PlannerProcess(candidate_name, candidate_tree(candidate_name))
        try:
            for process in (self.reference, self.candidate):
                process.wait_ready(READY_TIMEOUT_S)
        except Exception:
            self.close()
            raise

    def __repr__(self) -> str:
        return f"<PlannerPair base vs {self.candidate.label}>"

    def plan(self, case: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """Both answers; the two processes plan concurrently."""
        ids = self.reference.send(case), self.candidate.send(case)
        return self.reference.receive(ids[0]), self.candidate.receive(ids[1])

    def close(self) -> None:
        for process in (self.reference, self.candidate):
            process.close()
