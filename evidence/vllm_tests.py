"""Run vLLM's tests from a fork tree on a CPU-only machine, offline: the
selection of upstream-tests.toml through forktool's pytest runner, each run
with evidence/pytest_affinity.py loaded. Outcomes are cached by the tested
tree's git tree id: a clean tree with the same content, arguments, fixtures
and venv cannot give another result.
"""

from __future__ import annotations

import hashlib
import json
import shlex
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from forktool.checks import digest
from forktool.layout import LAYOUT
from forktool.pins import cache_dir
from forktool.process import ForkToolError, git
from forktool.pytest_runner import Result, Session, failures, run_pytest, test_env
from forktool.selection import Selection
from forktool.venv import python, venv_id

PLUGINS = ("-p", "evidence.pytest_affinity")
"""Loaded into every run of vLLM's tests, besides forktool's report plugin."""
REPORT, AFFINITY = "forktool/pytest_report.py", "evidence/pytest_affinity.py"
PLUGIN_SOURCES = (LAYOUT.root / REPORT, LAYOUT.root / AFFINITY)
"""The plugins' code, part of each cached outcome's key: they record it."""
CACHE_FORMAT = "report-3"
"""Part of each cached outcome's key: a new format of Result, or a new way
of running the tests (report-2: pytest_affinity; report-3: test_env's
bytecode prefix and humming's builds off), a new key."""


def _keep(path: Path | None, value: Any) -> None:
    if path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(value))


@dataclass(frozen=True)
class Runner:
    """Everything a pytest run depends on besides the tree and its arguments."""

    venv: Path
    fixtures: Path
    hf_home: Path
    excluded: dict[str, str]
    logs: Path

    def _cached(
        self,
        kind: str,
        tree: Path,
        args: tuple[str, ...],
        inputs: tuple[Path, ...] = (),
    ) -> tuple[Any, Path | None]:
        """The outcome of `kind` kept for this clean tree (None if none) and where
        it is kept (None if dirty). `inputs` are files outside the tree that the
        run reads (fork_tests/)."""
        if git(tree, "status", "--porcelain").stdout:  # its content is unknown
            return None, None
        content = git(tree, "rev-parse", "HEAD^{tree}").stdout.strip()
        inputs_id = digest(self.fixtures, *inputs, *PLUGIN_SOURCES)
        key = [CACHE_FORMAT, kind, content, args, self.excluded, inputs_id]
        text = json.dumps([*key, venv_id(self.venv)]).encode()
        path = cache_dir() / "results" / f"{hashlib.sha256(text).hexdigest()}.json"
        return (json.loads(path.read_text()) if path.exists() else None), path

    def arguments(self, tree: Path, args: tuple[str, ...]) -> list[str]:
        """pytest's arguments (after `python -m pytest`) for `args` in `tree`."""
        # Paths the tree lacks (a test file a later patch adds) are left out.
        tests = {a: tree / a.split("::")[0] for a in args if a.startswith("tests/")}
        kept = [a for a in args if a not in tests or tests[a].exists()]
        return ["-p", "no:cacheprovider", *PLUGINS, *self._deselect(), *kept]

    def _deselect(self) -> list[str]:
        return [f"--deselect={test}" for test in self.excluded]

    def _pytest(self, tree: Path, args: tuple[str, ...], label: str) -> Session:
        # `python -m pytest` puts the working directory first on sys.path,
        # so `import vllm` loads this tree's vllm/, whichever tree it is.
        cmd = [str(python(self.venv)), "-m", "pytest", *self.arguments(tree, args)]
        env = test_env(self.hf_home)
        return run_pytest(cmd, tree, env, self.logs / f"{label}.log", label)

    def collect(self, tree: Path, args: tuple[str, ...], label: str) -> list[str]:
        """The test ids `args` select in `tree` (pytest --collect-only)."""
        ids, path = self._cached("collect", tree, args)
        if ids is not None:
            return list(ids)
        session = self._pytest(tree, (*args, "--collect-only", "-q"), label)
        took = f"{session.seconds:.0f} s (log: {session.log})"
        print(f"[{label}] collected in {took}", flush=True)
        collected = [r for r in session.records if r.get("event") == "collected"]
        if session.status not in (0, 5) or not collected:  # 5: nothing collected
            errors = "".join(f"\n  {e}" for e in session.collection_errors()[:5])
            raise ForkToolError(
                f"pytest could not collect {label}; see {session.log}{errors}"
            )
        ids = collected[0]["ids"]
        _keep(path, ids)
        return list(ids)

    def run(
        self,
        tree: Path,
        args: tuple[str, ...],
        label: str,
        inputs: tuple[Path, ...] = (),
        expected: tuple[str, ...] = (),
    ) -> Result:
        """Run pytest with `args` in `tree`, which is what `import vllm` loads.

        `inputs` are files outside the tree that the run reads (fork_tests/).
        The outcome is kept for the next run unless a test failed that
        `expected` (node ids, or their prefixes, that must or may fail in
        `tree`) does not name: that failure may be flaky.
        """
        kept, path = self._cached("run", tree, args, inputs)
        if kept is not None:
            return Result(**{**kept, "cached": True})
        session = self._pytest(tree, (*args, "-v", "-rfE"), label)
        result = session.result()
        if not result.outcomes:
            said = f"no test ran (exit status {session.status}); see {session.log}"
            print(f"[{label}] {said}", flush=True)
        failed = result.with_outcome("failed", "error")
        if result.outcomes and all(test.startswith(expected) for test in failed):
            _keep(path, asdict(result))
        return result

    def command(self, args: tuple[str, ...]) -> str:
        """How to run `args` by hand from a tree's root, as this runner does."""
        pytest = ["python", "-m", "pytest", "-q", *self._deselect(), *args]
        env = "HF_HUB_OFFLINE=1 CUDA_VISIBLE_DEVICES='' VLLM_TARGET_DEVICE=cpu"
        return f"{env} {shlex.join(pytest)}"


def excerpt(runner: Runner, result: Result, args: tuple[str, ...], **how: Any) -> str:
    """Evidence for a reader of a run of `args`: the command to run it by
    hand, then `failures(result, **how)`."""
    return f"$ {runner.command(args)}\n{failures(result, **how)}"


def vllm_runner(venv: Path, selection: Selection) -> Runner:
    """The runner for vLLM's tests in `venv`, reading the HF cache the caller
    laid out (`prepare` does)."""
    return Runner(
        venv, LAYOUT.fixtures, LAYOUT.hf_home, selection.excluded, LAYOUT.logs
    )
