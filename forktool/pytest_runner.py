"""Run vLLM's own tests from a fork tree on a CPU-only machine, offline.

The selection lives in upstream-tests.toml. Outcomes are read from pytest's
JUnit XML and cached by the tested tree's git tree id: a clean tree with the
same content, arguments, fixtures and venv cannot give another result. While
pytest runs, its verbose log in build/logs/ is read for a progress line.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import subprocess
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from forktool.cache import cache_dir
from forktool.errors import ForkToolError
from forktool.git import git
from forktool.layout import LAYOUT
from forktool.venv import python, venv_id

OUTCOMES = ("passed", "failed", "error", "skipped")
PROGRESS_EVERY = 20.0
"""Seconds between progress lines while a selection runs."""


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

    def exceptions(self) -> dict[str, str]:
        """Each failed or errored test's exception type ("" when its message
        names none)."""
        failing = self.with_outcome("failed", "error")
        return {t: exception(self.reasons.get(t, "")) for t in failing}


_NAME = re.compile(r"[A-Za-z_][\w.]*")


def exception(message: str) -> str:
    """The exception type in a JUnit failure message as pytest writes it:
    the exception's last line as Python prints it ("mod.TypeError: ..."),
    but "assert ..." for an assert it rewrote, and wrapped in 'failed on
    setup with "..."' for a fixture's error. pytest writes no type attribute."""
    for when in ("setup", "teardown"):
        wrapped = f'failed on {when} with "'
        if message.startswith(wrapped):
            message = message.removeprefix(wrapped).removesuffix('"')
    first = message.partition("\n")[0]
    if first == "assert" or first.startswith("assert "):
        return "AssertionError"
    name = first.partition(":")[0]
    return name.rpartition(".")[2] if _NAME.fullmatch(name) else ""


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
    for root in (tree, LAYOUT.root):
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
    """The content of files and of the folders' files below `roots`."""
    digest = hashlib.sha256()
    for root in roots:
        for path in sorted([root, *root.rglob("*")]):
            if path.is_file() and "__pycache__" not in path.parts:
                digest.update(str(path.relative_to(root.parent)).encode())
                digest.update(path.read_bytes())
    return digest.hexdigest()


# pytest -v: "tests/a.py::test_b PASSED   [ 4%]"; with xdist:
# "[gw0] [  4%] PASSED tests/a.py::test_b".
_VERDICT = r"(?P<outcome>PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)"
_REPORTS = (
    re.compile(rf"^(?P<test>\S+::.+?) {_VERDICT}\b"),
    re.compile(rf"^\[gw\d+\] \[\s*\d+%\] {_VERDICT} (?P<test>\S+::.+?)\s*$"),
)
# The header: "collecting ... collected 40 items / 3 deselected / 37 selected",
# "collecting ... collected 40 items"; with xdist "2 workers [37 items]".
_TOTAL = re.compile(
    r"collected \d+ items? / .*?(\d+) selected$|collected (\d+) items?$"
    r"|^\d+ workers? \[(\d+) items?\]$",
    re.M,
)


@dataclass(frozen=True)
class Progress:
    done: int
    failed: int
    total: int | None

    @classmethod
    def of(cls, log: str) -> Progress:
        """How far a `pytest -v` run has come, from its output so far."""
        outcomes: dict[str, str] = {}
        for line in log.splitlines():
            match = _REPORTS[0].match(line) or _REPORTS[1].match(line)
            # A test that errors in teardown after passing is reported twice.
            if match and outcomes.get(match["test"]) not in ("FAILED", "ERROR"):
                outcomes[match["test"]] = match["outcome"]
        failed = sum(o in ("FAILED", "ERROR") for o in outcomes.values())
        header = _TOTAL.search(log)
        total = int(next(n for n in header.groups() if n)) if header else None
        return cls(len(outcomes), failed, total)

    def line(self, seconds: float) -> str:
        of = f"/{self.total}" if self.total is not None else ""
        minutes, rest = divmod(int(seconds), 60)
        return (
            f"{self.done}{of} tests done, {self.failed} failed, "
            f"{minutes} min {rest:02d} s"
        )


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
    ) -> Path | None:
        """Where the outcome of `kind` on this clean tree is kept; None if dirty.

        `inputs` are files outside the tree that the run reads (checks/).
        """
        content = tree_id(tree)
        if content is None:
            return None
        key = json.dumps(
            [
                kind,
                content,
                args,
                self.excluded,
                _digest(self.fixtures, *inputs),
                venv_id(self.venv),
            ]
        )
        digest = hashlib.sha256(key.encode()).hexdigest()
        return cache_dir() / "results" / f"{digest}.json"

    def arguments(self, tree: Path, args: tuple[str, ...]) -> list[str]:
        """pytest's arguments (after `python -m pytest`) for `args` in `tree`."""
        # Paths the tree lacks (a test file a later patch adds) are left out.
        args = tuple(
            a
            for a in args
            if not a.startswith("tests/") or (tree / a.split("::")[0]).exists()
        )
        deselect = [f"--deselect={test}" for test in self.excluded]
        return ["-p", "no:cacheprovider", *deselect, *args]

    def _pytest(self, tree: Path, args: tuple[str, ...]) -> list[str]:
        # `python -m pytest` puts the working directory first on sys.path,
        # so `import vllm` loads this tree's vllm/, whichever tree it is.
        return [python(self.venv), "-m", "pytest", *self.arguments(tree, args)]

    def collect(self, tree: Path, args: tuple[str, ...], label: str) -> list[str]:
        """The test ids `args` select in `tree` (pytest --collect-only)."""
        cached = self._cached("collect", tree, args)
        if cached and cached.exists():
            return json.loads(cached.read_text())
        self.logs.mkdir(parents=True, exist_ok=True)
        log = self.logs / f"{label}.log"
        cmd = [*self._pytest(tree, args), "--collect-only", "-q"]
        start = time.monotonic()
        with log.open("w") as out:
            code = subprocess.run(
                cmd, cwd=tree, env=test_env(self.hf_home), stdout=out, stderr=out
            ).returncode
        seconds = time.monotonic() - start
        print(f"[{label}] collected in {seconds:.0f} s (log: {log})", flush=True)
        if code not in (0, 5):  # 5: nothing collected
            raise ForkToolError(f"pytest could not collect {label}; see {log}")
        # One id a line; warnings that follow may name ids too, indented.
        lines = log.read_text().splitlines()
        ids = [t for t in lines if "::" in t and (tree / t.split("::")[0]).is_file()]
        if cached:
            cached.parent.mkdir(parents=True, exist_ok=True)
            cached.write_text(json.dumps(ids))
        return ids

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
        cached = self._cached("run", tree, args, inputs)
        if cached and cached.exists():
            return Result(**json.loads(cached.read_text()), cached=True)

        self.logs.mkdir(parents=True, exist_ok=True)
        log = self.logs / f"{label}.log"
        with tempfile.TemporaryDirectory() as tmp, log.open("w") as out:
            junit = Path(tmp, "junit.xml")
            cmd = [*self._pytest(tree, args), "-v", "-rfE", f"--junitxml={junit}"]
            line = " ".join(cmd[1:])
            out.write(f"{line}\n\n")
            out.flush()
            shown = line if len(line) < 400 else f"{line[:400]} ..."
            print(f"[{label}] {shown}  (log: {log})", flush=True)
            start = time.monotonic()
            proc = subprocess.Popen(
                cmd, cwd=tree, env=test_env(self.hf_home), stdout=out, stderr=out
            )
            while True:
                try:
                    proc.wait(timeout=PROGRESS_EVERY)
                    break
                except subprocess.TimeoutExpired:
                    progress = Progress.of(log.read_text(errors="replace"))
                    seconds = time.monotonic() - start
                    print(f"[{label}] {progress.line(seconds)}", flush=True)
            result = parse_junit(tree, junit) if junit.exists() else Result()
        result.seconds = time.monotonic() - start
        if cached and result.outcomes:
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
