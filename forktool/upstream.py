"""Run vLLM's own tests from a fork tree on a CPU-only machine, offline.

The selection lives in upstream-tests.toml. Outcomes are read from pytest's
JUnit XML and cached by the tested tree's git tree id: a clean tree with the
same content, arguments, fixtures and venv cannot give another result.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import subprocess
import tempfile
import time
import tomllib
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from forktool.fork import git
from forktool.pins import REPO, cache_dir
from forktool.venv import python

OUTCOMES = ("passed", "failed", "error", "skipped")


@dataclass(frozen=True)
class Selection:
    runs: dict[str, tuple[str, ...]]
    """Name -> pytest arguments, upstream's own CPU job for the touched code."""
    regression: tuple[str, ...]
    """pytest arguments selecting the tests that pin the series' behaviour."""
    checks: tuple[str, ...]
    """This repository's own checks of the fork (paths under it), run from
    each tree of the regression matrix like the regression selection."""
    fails_on_base: frozenset[str]
    """Regression tests that must fail on the pristine base's code."""
    gpu_only: tuple[str, ...]
    """pytest arguments selecting GPU-only tests that must skip here."""
    excluded: dict[str, str]
    """Test node id -> why it cannot run on this machine."""

    @classmethod
    def load(cls, path: Path) -> Selection:
        with path.open("rb") as f:
            data = tomllib.load(f)
        return cls(
            runs={r["name"]: tuple(r["args"]) for r in data["run"]},
            regression=tuple(data["regression"]["args"]),
            checks=tuple(data["regression"].get("checks", ())),
            fails_on_base=frozenset(data["regression"]["fails_on_base"]),
            gpu_only=tuple(data["gpu_only"]["args"]),
            excluded={e["test"]: e["reason"] for e in data.get("exclude", [])},
        )


@dataclass
class Result:
    outcomes: dict[str, str] = field(default_factory=dict)
    """pytest node id -> one of OUTCOMES."""
    reasons: dict[str, str] = field(default_factory=dict)
    """pytest node id -> skip reason or failure message."""
    seconds: float = 0.0
    cached: bool = False

    def counts(self) -> Counter[str]:
        return Counter(self.outcomes.values())

    def summary(self) -> str:
        c = self.counts()
        text = ", ".join(f"{c[o]} {o}" for o in OUTCOMES if c[o])
        how = "cached" if self.cached else f"{self.seconds:.0f} s"
        return f"{text or 'nothing ran'} ({how})"

    def with_outcome(self, *outcomes: str) -> list[str]:
        return sorted(t for t, o in self.outcomes.items() if o in outcomes)


def test_env(hf_home: Path) -> dict[str, str]:
    return {
        **os.environ,
        "VLLM_TARGET_DEVICE": "cpu",
        "CUDA_VISIBLE_DEVICES": "",
        "HF_HOME": str(hf_home),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "PYTHONDONTWRITEBYTECODE": "1",  # keep the tree clean
        # Base and fork run side by side; one torch thread each is a third
        # faster on two cores than letting them contend.
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
    }


def node_id(tree: Path, classname: str, name: str) -> str:
    """pytest's node id from JUnit's dotted classname (module, then classes).

    Modules are looked up in the tree, then in this repository (checks/).
    """
    parts = classname.split(".")
    for root in (tree, REPO):
        for i in range(len(parts), 0, -1):
            module = "/".join(parts[:i]) + ".py"
            if (root / module).exists():
                return "::".join([module, *parts[i:], name])
    return f"{classname}::{name}"


def parse_junit(tree: Path, junit: Path) -> Result:
    result = Result()
    for case in ET.parse(junit).iter("testcase"):
        test = node_id(tree, case.get("classname", ""), case.get("name", ""))
        status, reason = "passed", ""
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                status = {"failure": "failed"}.get(child.tag, child.tag)
                reason = child.get("message", "")
                break
        # A test that fails in teardown is reported twice; keep the failure.
        if result.outcomes.get(test) not in ("failed", "error"):
            result.outcomes[test] = status
            result.reasons[test] = reason
    return result


def tree_id(tree: Path) -> str | None:
    """The tree's content id, or None when uncommitted changes make it unknown."""
    if git(tree, "status", "--porcelain").stdout:
        return None
    return git(tree, "rev-parse", "HEAD^{tree}").stdout.strip()


def _digest(*roots: Path) -> str:
    digest = hashlib.sha256()
    for root in roots:
        for path in sorted(root.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                digest.update(str(path.relative_to(root.parent)).encode())
                digest.update(path.read_bytes())
    return digest.hexdigest()


@dataclass(frozen=True)
class Runner:
    """Everything a pytest run depends on besides the tree and its arguments."""

    venv: Path
    fixtures: Path
    hf_home: Path
    excluded: dict[str, str]
    logs: Path

    def run(
        self,
        tree: Path,
        args: tuple[str, ...],
        label: str,
        inputs: tuple[Path, ...] = (),
    ) -> Result:
        """Run pytest with `args` in `tree`, which is what `import vllm` loads.

        `inputs` are files outside the tree that the run reads (checks/).
        """
        content = tree_id(tree)
        key = json.dumps(
            [
                content,
                args,
                self.excluded,
                _digest(self.fixtures, *inputs),
                self.venv.name,
            ]
        )
        cached = (
            cache_dir() / "results" / f"{hashlib.sha256(key.encode()).hexdigest()}.json"
        )
        if content and cached.exists():
            return Result(**json.loads(cached.read_text()), cached=True)

        # Paths the tree lacks (a test file a later patch adds) are left out.
        args = tuple(
            a
            for a in args
            if not a.startswith("tests/") or (tree / a.split("::")[0]).exists()
        )
        deselect = [f"--deselect={test}" for test in self.excluded]
        self.logs.mkdir(parents=True, exist_ok=True)
        log = self.logs / f"{label}.log"
        with tempfile.TemporaryDirectory() as tmp, log.open("w") as out:
            junit = Path(tmp, "junit.xml")
            # `python -m pytest` puts the working directory first on sys.path,
            # so `import vllm` loads this tree's vllm/, whichever tree it is.
            cmd = [python(self.venv), "-m", "pytest", "-p", "no:cacheprovider"]
            cmd += ["-q", "-rfE", f"--junitxml={junit}", *deselect, *args]
            print(f"[{label}] {' '.join(cmd[1:])}  (log: {log})", flush=True)
            start = time.monotonic()
            subprocess.run(
                cmd, cwd=tree, env=test_env(self.hf_home), stdout=out, stderr=out
            )
            result = parse_junit(tree, junit) if junit.exists() else Result()
        result.seconds = time.monotonic() - start
        if content and result.outcomes:
            cached.parent.mkdir(parents=True, exist_ok=True)
            data = {k: getattr(result, k) for k in ("outcomes", "reasons", "seconds")}
            cached.write_text(json.dumps(data))
        return result


def excerpt(
    runner: Runner, tree: Path, args: tuple[str, ...], limit: int = 12000
) -> str:
    """A fresh pytest run of `args` in `tree` with short tracebacks, as evidence
    for a reader: the command (as run from the tree's root) and its output,
    cut to its last `limit` characters."""
    deselect = [f"--deselect={test}" for test in runner.excluded]
    pytest = ["python", "-m", "pytest", "-q", "-rfE", "--tb=short", *deselect, *args]
    cmd = [python(runner.venv), *pytest[1:], "-p", "no:cacheprovider"]
    run = subprocess.run(
        cmd, cwd=tree, env=test_env(runner.hf_home), capture_output=True, text=True
    )
    shown = "HF_HUB_OFFLINE=1 CUDA_VISIBLE_DEVICES='' VLLM_TARGET_DEVICE=cpu "
    output = (run.stdout + run.stderr).strip()
    return f"$ {shown}{shlex.join(pytest)}\n{output[-limit:]}"
