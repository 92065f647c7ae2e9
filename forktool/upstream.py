"""Run vLLM's own tests from a fork tree on a CPU-only machine, offline.

The selection lives in upstream-tests.toml. Results are read from pytest's
JUnit XML and cached by the tested tree's git tree id: a clean tree with the
same content, selection, fixtures and venv cannot give another result.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import tempfile
import time
import tomllib
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from forktool.fork import git
from forktool.pins import cache_dir
from forktool.venv import python

OUTCOMES = ("passed", "failed", "error", "skipped")


@dataclass(frozen=True)
class Run:
    name: str
    args: tuple[str, ...]


@dataclass(frozen=True)
class Selection:
    runs: tuple[Run, ...]
    excluded: dict[str, str]
    """Test node id -> why it cannot run here."""

    @classmethod
    def load(cls, path: Path) -> Selection:
        with path.open("rb") as f:
            data = tomllib.load(f)
        return cls(
            runs=tuple(Run(r["name"], tuple(r["args"])) for r in data["run"]),
            excluded={e["test"]: e["reason"] for e in data.get("exclude", [])},
        )

    def run(self, name: str) -> Run:
        return next(r for r in self.runs if r.name == name)


@dataclass
class Result:
    outcomes: dict[str, str] = field(default_factory=dict)
    """Test id -> one of OUTCOMES."""
    seconds: float = 0.0
    cached: bool = False

    def counts(self) -> Counter[str]:
        return Counter(self.outcomes.values())

    def summary(self) -> str:
        c = self.counts()
        text = ", ".join(f"{c[o]} {o}" for o in OUTCOMES if c[o])
        return f"{text or 'nothing ran'} in {self.seconds:.0f} s" + (
            " (cached)" if self.cached else ""
        )


def test_env(hf_home: Path) -> dict[str, str]:
    return {
        **os.environ,
        "VLLM_TARGET_DEVICE": "cpu",
        "CUDA_VISIBLE_DEVICES": "",
        "HF_HOME": str(hf_home),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "PYTHONDONTWRITEBYTECODE": "1",  # keep the fork tree clean
    }


def parse_junit(path: Path) -> dict[str, str]:
    outcomes = {}
    for case in ET.parse(path).iter("testcase"):
        test_id = f"{case.get('classname')}::{case.get('name')}"
        status = "passed"
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                status = {"failure": "failed"}.get(child.tag, child.tag)
                break
        # A test that fails in teardown is reported twice; the worst one wins.
        if outcomes.get(test_id) not in ("failed", "error"):
            outcomes[test_id] = status
    return outcomes


def _tree_id(tree: Path) -> str | None:
    """The tree's content id, or None when uncommitted changes make it unknowable."""
    if git(tree, "status", "--porcelain").stdout:
        return None
    return git(tree, "rev-parse", "HEAD^{tree}").stdout.strip()


def _fixtures_digest(fixtures: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(fixtures.rglob("*")):
        if path.is_file():
            digest.update(str(path.relative_to(fixtures)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def run_tests(
    venv: Path,
    tree: Path,
    args: tuple[str, ...],
    selection: Selection,
    fixtures: Path,
    hf_home: Path,
    label: str,
) -> Result:
    """Run pytest with `args` from `tree`, which is what `import vllm` loads."""
    tree_id = _tree_id(tree)
    key = hashlib.sha256(
        json.dumps(
            [tree_id, args, selection.excluded, _fixtures_digest(fixtures), venv.name]
        ).encode()
    ).hexdigest()
    cached = cache_dir() / "results" / f"{key}.json"
    if tree_id and cached.exists():
        data = json.loads(cached.read_text())
        return Result(data["outcomes"], data["seconds"], cached=True)

    deselect = [f"--deselect={test}" for test in selection.excluded]
    with tempfile.TemporaryDirectory() as tmp:
        junit = Path(tmp, "junit.xml")
        # `python -m pytest` puts the working directory first on sys.path, so
        # `import vllm` loads this tree's vllm/ whichever tree it is.
        cmd = [python(venv), "-m", "pytest", "-p", "no:cacheprovider", "-q"]
        cmd += ["-rfE", f"--junitxml={junit}", *deselect, *args]
        print(f"[{label}] {' '.join(cmd[1:])}", flush=True)
        start = time.monotonic()
        subprocess.run(cmd, cwd=tree, env=test_env(hf_home))
        seconds = time.monotonic() - start
        outcomes = parse_junit(junit) if junit.exists() else {}
    result = Result(outcomes, seconds)
    if tree_id and outcomes:
        cached.parent.mkdir(parents=True, exist_ok=True)
        cached.write_text(json.dumps({"outcomes": outcomes, "seconds": seconds}))
    return result
