"""The venv's self-check, run after every install and before any test.

A venv that works only by install order (two distributions writing the same
file) or that drifted from venv.lock fails here, naming the file and both
distributions, instead of as a collection error deep in a test run.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from forktool import process, venv_lock
from forktool.checks import Measured
from forktool.process import ForkToolError

PROBE = Path(__file__).with_name("venv_probe.py")
# What the checks and the regression matrix import: the model registry and
# the GPU model runners of Model Runner V1 and V2.
MODULES = (
    "vllm.model_executor.models.registry",
    "vllm.v1.worker.gpu_model_runner",
    "vllm.v1.worker.gpu.model_runner",
)
EDITABLE = "vllm"
"""Installed from the fork tree, not from the lock."""


def probe(python: str, modules: tuple[str, ...], env: dict[str, str]) -> dict:
    """Run forktool/venv_probe.py with `python` (outside any tree, so that
    `vllm` is the installed one). A venv whose python cannot run it is the
    tool's error, saying how to remake the venv."""
    venv = Path(python).parent.parent
    remake = f"remove {venv} and run `python3 -m forktool install` to remake it"
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp, "probe.json")
        cmd = [python, str(PROBE), str(out), *modules]
        try:
            run = process.run(cmd, cwd="/", env=env, check=False)
        except ForkToolError as e:
            raise ForkToolError(
                f"the venv's python does not run ({e}): {remake}"
            ) from e
        if not out.exists():
            raise ForkToolError(
                f"the venv's python {python} could not run its self-check "
                f"({PROBE.name}, exit status {run.returncode}): {remake}. "
                f"Its stderr:\n{run.stderr[-2000:].rstrip()}"
            )
        return json.loads(out.read_text())


def against_lock(installed: dict[str, str], locked: dict[str, str]) -> list[str]:
    """How the installed distributions differ from the lock's pins."""
    have = {venv_lock.normal(name): version for name, version in installed.items()}
    have.pop(EDITABLE, None)
    problems = [
        f"{name}: locked {version}, installed {have.get(name, 'nothing')}"
        for name, version in sorted(locked.items())
        if have.get(name) != version
    ]
    extra = sorted(set(have) - set(locked))
    return problems + [
        f"{name} {have[name]}: installed, not in the lock" for name in extra
    ]


def self_check(
    python: str, lock_file: Path, env: dict[str, str], modules=MODULES
) -> Measured:
    report = probe(python, modules, env)
    problems = against_lock(
        report["installed"], venv_lock.packages(lock_file.read_text())
    )
    for clash in report["clashes"]:
        owners = " and ".join(clash["distributions"])
        problems.append(f"{clash['file']}: installed by {owners}, different contents")
    failed = [i for i in report["imports"] if i["error"]]
    for item in failed:
        where = ", ".join(item["distributions"]) or "unknown package"
        problems.append(f"import {item['module']} failed in {where}: {item['error']}")
    lines = [
        f"{len(report['installed'])} distributions; {lock_file.name}: "
        f"{len(venv_lock.packages(lock_file.read_text()))} pinned",
        f"files claimed by two distributions with different contents: "
        f"{len(report['clashes'])}",
        f"imports: {len(modules) - len(failed)} of {len(modules)} succeed "
        f"({', '.join(modules)})",
        *problems,
    ]
    print("\n".join(lines), flush=True)
    counts = {
        "distributions": len(report["installed"]),
        "clashing files": len(report["clashes"]),
        "failed imports": len(failed),
        "problems": len(problems),
    }
    output = {"output": "\n".join(lines[:40])}
    return Measured(not problems, counts, output, {"installed": report["installed"]})
