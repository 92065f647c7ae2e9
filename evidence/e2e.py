"""`e2e`: the series' GPU end-to-end test ([gpu_only] in upstream-tests.toml)
on two GPUs, once on the series and once without patch 1's resolution: it
must pass on the first and fail on the second.

"Without the resolution" is a worktree of the fork's HEAD where only patch
1's hunks in RESOLUTION are reversed (`git apply -R`): the planner's OR of
the zeroing decision across workers, and the scheduler config's copy of it.
A full `git revert` of patch 1 conflicts with patch 2, which builds on the
decision, so the rest of patch 1 stays.

Both runs take the user's own environment, not the runner's CPU one: the GPUs
stay visible, and the test reads the gated google/gemma-2-2b-it config and
tokenizer with the user's Hugging Face token and cache. The venv comes first
on PATH, the tree under test first on PYTHONPATH.
"""

from __future__ import annotations

import os
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

from evidence.worktrees import worktree
from forktool import process
from forktool.checks import Measured
from forktool.layout import LAYOUT
from forktool.process import BASE_TAG, ISOLATED, git
from forktool.pytest_runner import Result, run_pytest
from forktool.selection import Selection
from forktool.venv import compiling_once, python

RESOLUTION = ("vllm/v1/core/kv_cache_planning.py", "vllm/v1/core/kv_cache_utils.py")
TREE = "e2e-without-resolution"
"""The worktree under build/trees/, and its run's name."""
PYTEST = ("-v", "-s", "--tb=short", "-p", "no:cacheprovider")


def gpus() -> int:
    """The GPUs `nvidia-smi -L` lists; none without nvidia-smi. Its MIG
    instances, listed under their GPU, are not counted."""
    if (smi := shutil.which("nvidia-smi")) is None:
        return 0
    listed = process.run([smi, "-L"], check=False).stdout.splitlines()
    return sum(line.startswith("GPU ") for line in listed)


def without_resolution(fork: Path, path: Path) -> str:
    """Make `path` a worktree of the fork's HEAD (linked to the fork's
    precompiled extensions, which git does not track) and reverse patch 1's
    hunks in RESOLUTION there; return the sentence saying what was reversed."""
    first = process.series_commits(fork)[0]
    diff = git(fork, "diff", BASE_TAG, first, "--", *RESOLUTION, env=ISOLATED)
    worktree(fork, path, "HEAD")
    git(path, "apply", "-R", env=ISOLATED, input=diff.stdout)
    return (
        f"Patch 1's hunks ({process.subject(fork, first)}) in {RESOLUTION[0]} "
        f"(the OR of the zeroing decision across workers) and {RESOLUTION[1]} (the "
        "scheduler config's copy of the decision), reversed with `git apply -R` "
        "at the series' head; the rest of patch 1 stays, as a full `git revert` "
        "of it conflicts with patch 2."
    )


def run_test(
    tree: Path, args: tuple[str, ...], log: Path
) -> tuple[dict[str, Any], str]:
    """The test in `tree`: its outcomes and exit status; the last 40 lines of
    its output."""
    # The test serves the model with `vllm serve`, whose imports start from
    # the venv's bin/, where the editable install's finder loads build/vllm:
    # the tree first on PYTHONPATH makes the server and its workers its own.
    venv = LAYOUT.venv
    paths = os.pathsep.join([str(tree), *filter(None, [os.environ.get("PYTHONPATH")])])
    path = f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"
    env = process.environ(VIRTUAL_ENV=str(venv), PATH=path, PYTHONPATH=paths)
    cmd = [python(venv), "-m", "pytest", *PYTEST, *args]
    session = run_pytest(cmd, tree, compiling_once(env), log, log.stem)
    outcomes = session.result().outcomes
    print(f"[{log.stem}] {Result(outcomes).counted()}, exit status {session.status}")
    tail = log.read_text(errors="replace").splitlines()[-40:]
    return {"outcomes": outcomes, "exit_status": session.status}, "\n".join(tail)


def measure() -> Measured:
    """Both runs; it passes when every test passes on the series and one
    fails without the resolution. Its counts are the series run's."""
    args = Selection.load(LAYOUT.selection).gpu_only
    tree = LAYOUT.trees / TREE
    reverted = without_resolution(LAYOUT.fork, tree)
    series, series_tail = run_test(LAYOUT.fork, args, LAYOUT.logs / "e2e-series.log")
    without, without_tail = run_test(tree, args, LAYOUT.logs / f"{TREE}.log")
    passed = set(series["outcomes"].values()) == {"passed"}
    failed = bool({"failed", "error"} & set(without["outcomes"].values()))
    tails = {"series": series_tail, "without-resolution": without_tail}
    runs = {"series": series, "without-resolution": without}
    data = {"args": list(args), "reverted": reverted, "runs": runs}
    counts = dict(Counter(series["outcomes"].values()))
    verdict = "PASS" if passed and failed else "FAIL"
    print(f"{verdict} (it must pass on the series and fail without the resolution)")
    return Measured(passed and failed, counts, tails, data)
