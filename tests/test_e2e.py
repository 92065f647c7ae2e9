"""evidence.e2e on a tiny fork with a fake nvidia-smi: patch 1's resolution."""

import argparse
import json
import re
import shutil
from pathlib import Path

import pytest
from evidence_fixture import commit, link_venv, new_repo, programs

from evidence import checks, e2e, worktrees
from evidence.commands import e2e as e2e_command
from forktool import checks as registry
from forktool import prepare, venv_lock
from forktool.commands import command
from forktool.layout import Layout
from forktool.pins import Pins
from forktool.process import ForkToolError, git
from forktool.venv import COMPLETE

PATCH_1 = "[Bugfix][Core] Keep KV cache zeroing in scheduler and workers"
PLANNING = "vllm/v1/core/kv_cache_planning.py"
UTILS = "vllm/v1/core/kv_cache_utils.py"
INTERFACE = "vllm/v1/kv_cache_interface.py"
TEST = """\
import os, subprocess as sp, sys
def test_pp_mixed_precision_kv_cache():
    # As `vllm serve` imports it: another process, started elsewhere.
    code = "import vllm.v1.core.kv_cache_planning as m; print(m.__file__, m.ANY)"
    run = sp.run([sys.executable, "-c", code], cwd="/", capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith(os.getcwd()), run.stdout
def test_unselected():
    assert False
"""
ARGS = ("tests/test_pp.py", "-k", "test_pp_mixed_precision_kv_cache")
NODE = "tests/test_pp.py::test_pp_mixed_precision_kv_cache"


@pytest.fixture
def clone(tmp_path, monkeypatch) -> Layout:
    """A set-up clone: the tiny fork, a venv of this interpreter, the selection."""
    layout = Layout(tmp_path)
    for module in (e2e, prepare, registry, worktrees):
        monkeypatch.setattr(module, "LAYOUT", layout)
    fork = layout.fork  # base; patch 1: the OR, a copy and a field; patch 2 by both
    base = {".gitignore": "*.so\n__pycache__/\n", "vllm/__init__.py": "",
            PLANNING: "def plan():\n    pass\n", INTERFACE: "class Spec:\n    pass\n",
            UTILS: "def configure():\n    pass\n\n\ndef other():\n    pass\n",
            "tests/test_pp.py": TEST}  # fmt: skip
    commit(new_repo(fork), base, "vllm 0.1", tag="base")
    commit(fork, {
        PLANNING: "ANY = True\n\n\ndef plan():\n    pass\n",
        UTILS: "def configure():\n    copy = True\n\n\ndef other():\n    pass\n",
        INTERFACE: "class Spec:\n    zeroing = True\n"}, PATCH_1)  # fmt: skip
    commit(fork, {
        UTILS: "def configure():\n    copy = True\n\n\ndef other():\n    return 2\n",
        INTERFACE: "class Spec:\n    zeroing = True\n    pages = 2\n",
    }, "[Core] Zero only where bytes change precision")  # fmt: skip
    (fork / "vllm" / "_C.abi3.so").write_bytes(b"\x7fELF")  # as install leaves it
    link_venv(layout.venv)
    layout.lock.write_text("pinned==1\n")
    (layout.venv / COMPLETE).write_text(venv_lock.digest(layout.lock))
    layout.selection.write_text(
        '[[run]]\nname = "cpu"\nargs = []\n\n'
        "[regression]\nargs = []\nfails_on_base = []\n\n"
        f"[gpu_only]\nargs = {json.dumps(ARGS)}\n"
    )
    return layout


def run(tmp_path: Path, monkeypatch, listed: str | None) -> int:
    """The command, PATH only git and nvidia-smi printing `listed` (None: none)."""
    smi = {} if listed is None else {"nvidia-smi": f"printf '{listed}'"}
    bin_dir = programs(tmp_path / "fake-bin", **smi)
    (bin_dir / "git").symlink_to(shutil.which("git") or "git")
    monkeypatch.setenv("PATH", str(bin_dir))
    return e2e_command.run(Pins.load(), argparse.Namespace())


ONE_GPU = "GPU 0: NVIDIA H200 (UUID: GPU-1)\\n  MIG 3g.71gb Device 0: (UUID: MIG-1)\\n"
TWO_GPUS = "GPU 0: NVIDIA H200 (UUID: GPU-1)\\nGPU 1: NVIDIA H200 (UUID: GPU-2)\\n"


def test_refusals_both_runs_and_only_patch_1s_revert(clone, tmp_path, monkeypatch):
    for n, (listed, marker, said) in enumerate([  # nothing written
        (None, None, "needs two GPUs and found 0 "),
        (ONE_GPU, None, "needs two GPUs and found 1 "),
        (TWO_GPUS, "", "no complete venv"),  # the venv unfinished, or an old one
        (TWO_GPUS, "another lock", "not made from this venv.lock"),
    ]):  # fmt: skip
        made = (clone.venv / COMPLETE).read_text()
        if marker is not None:
            (clone.venv / COMPLETE).write_text(marker)
        with pytest.raises(ForkToolError, match=re.escape(said)):
            run(tmp_path / f"refused-{n}", monkeypatch, listed)
        assert not clone.results.exists() and not clone.trees.exists()
        (clone.venv / COMPLETE).write_text(made)
    locked = clone.lock.read_text()
    clone.lock.unlink()  # no venv.lock: refused, not a traceback
    with pytest.raises(ForkToolError, match="not made from this venv.lock"):
        run(tmp_path / "no-lock", monkeypatch, TWO_GPUS)
    clone.lock.write_text(locked)
    assert run(tmp_path, monkeypatch, TWO_GPUS) == 0
    result = registry.read(clone.results, "gpu-e2e")
    assert result is not None and result.ok
    assert result.tree == registry.fork_tree(clone.fork)
    assert result.counts == {"passed": 1}
    assert result.data["args"] == list(ARGS)
    assert result.data["runs"] == {
        "series": {"outcomes": {NODE: "passed"}, "exit_status": 0},
        "without-resolution": {"outcomes": {NODE: "failed"}, "exit_status": 1},
    }
    assert "1 passed, 1 deselected" in result.excerpts["series"]
    assert "has no attribute 'ANY'" in result.excerpts["without-resolution"]
    for log in ("e2e-series.log", "e2e-without-resolution.log"):
        assert NODE in (clone.logs / log).read_text()
    reverted = result.data["reverted"]
    assert PATCH_1 in reverted and PLANNING in reverted and UTILS in reverted
    fork, tree = clone.fork, clone.trees / e2e.TREE
    changed = git(tree, "status", "--porcelain").stdout.splitlines()
    assert sorted(changed) == [f" M {PLANNING}", f" M {UTILS}"]
    assert (tree / PLANNING).read_text() == "def plan():\n    pass\n"
    # patch 2's line of the same file stays, and so does patch 1's field.
    utils = "def configure():\n    pass\n\n\ndef other():\n    return 2\n"
    assert (tree / UTILS).read_text() == utils
    assert (tree / INTERFACE).read_text() == (fork / INTERFACE).read_text()
    so = tree / "vllm" / "_C.abi3.so"
    assert so.is_symlink() and so.resolve() == (fork / "vllm" / "_C.abi3.so")
    assert e2e.without_resolution(fork, tree) == reverted  # again, from scratch
    commit(fork, {"vllm/later.py": "X = 1\n"}, "[Misc] Later")  # the fork moves on
    e2e.without_resolution(fork, tree)
    assert (tree / "vllm" / "later.py").read_text() == "X = 1\n"
    assert command("e2e").run is e2e_command.run
    check = next(c for c in registry.all_checks() if c.name == "gpu-e2e")
    assert check is checks.GPU_E2E and check.command == "python3 -m forktool e2e"
    assert check.in_pr and not check.gates_test and check.measure is None


@pytest.mark.parametrize("series, without, ok", [
    ("passed", "failed", True), ("passed", "error", True),
    ("passed", "passed", False),  # the test does not see the resolution
    ("skipped", "failed", False),  # no access to the model: no pass
    ("failed", "failed", False), (None, "failed", False),  # None: nothing collected
])  # fmt: skip
def test_ok_only_if_series_passes_revert_fails(clone, monkeypatch, series, without, ok):
    def run_test(tree, args, log):
        outcome = series if tree == clone.fork else without
        outcomes = {NODE: outcome} if outcome else {}
        return {"outcomes": outcomes, "exit_status": 0}, "output"

    monkeypatch.setattr(e2e, "run_test", run_test)
    assert e2e.measure().ok is ok
