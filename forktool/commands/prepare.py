"""What `setup` and `test` share: the fork prepared, then checks run and recorded."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from subprocess import DEVNULL, PIPE, Popen

from forktool import hfcache, results
from forktool.checks import Check
from forktool.commands.install import install, self_checked
from forktool.commands.sync import sync
from forktool.errors import ForkToolError
from forktool.layout import LAYOUT
from forktool.pins import Pins
from forktool.results import Measured
from forktool.upstream import Runner, Selection, test_env


def prepare(pins: Pins) -> tuple[Path, Measured]:
    """sync + install, both idempotent; the venv's self-check while vLLM
    shows that it starts from the fork; return the venv and the self-check."""
    sync(pins)
    venv = install(pins)
    vllm, env = str(venv / "bin" / "vllm"), test_env(LAYOUT.hf_home)
    version = Popen([vllm, "--version"], env=env, stdout=PIPE, stderr=PIPE, text=True)
    serve = Popen([vllm, "serve", "--help"], env=env, stdout=DEVNULL, stderr=DEVNULL)
    checked = self_checked(venv)
    out, err = version.communicate()
    print(f"vllm --version (from {LAYOUT.fork}): {out.strip() or err}")
    print(f"vllm serve --help: exit status {serve.wait()}")
    if checked and (version.returncode or serve.returncode):
        raise ForkToolError("vllm --version or vllm serve --help failed")
    return venv, checked


def runner(venv: Path) -> Runner:
    """The pytest runner for vLLM's tests, the HF cache laid out afresh."""
    selection = Selection.load(LAYOUT.selection)
    ids = hfcache.lay_out(LAYOUT.fixtures, LAYOUT.hf_home)
    print(f"HF cache {LAYOUT.hf_home}: {', '.join(ids)}")
    return Runner(
        venv, LAYOUT.fixtures, LAYOUT.hf_home, selection.excluded, LAYOUT.logs
    )


def run_checks(
    pins: Pins,
    checks: list[tuple[Check, Callable[[], Measured]]],
    command: str,
    prepared: float,
) -> int:
    """Run each check, write its result to build/results/, print a summary.
    A failed check that the others require stops the run."""
    tree = results.fork_tree(LAYOUT.fork)
    written = []
    for check, measure in checks:
        print(f"\n=== {check.title} ===", flush=True)
        start = time.monotonic()
        found = measure()
        result = results.CheckResult(
            check.name,
            found.ok,
            tree,
            pins.version,
            command,
            seconds=round(time.monotonic() - start, 1),
            counts=found.counts,
            excerpts=found.excerpts,
            data=found.data,
        )
        results.write(LAYOUT.results, result)
        written.append((check.title, result))
        if check.required and not found.ok:
            print(f"\n{check.title} failed: the other checks did not run.")
            break
    print(f"\n=== summary (results in {LAYOUT.results}) ===")
    print(f"{'':4}  {prepared:6.0f} s  prepare (sync, install, vllm --version)")
    for title, result in written:
        print(f"{'PASS' if result.ok else 'FAIL'}  {result.seconds:6.0f} s  {title}")
    return 0 if all(result.ok for _, result in written) else 1
