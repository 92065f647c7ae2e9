"""fork_tests/gpu_zeroing_bench.py where no GPU is: source extraction and skip path."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from evidence_fixture import REPO, new_repo, write

from forktool.process import git

SCRIPT = REPO / "fork_tests" / "gpu_zeroing_bench.py"
FORK_UTILS = REPO / "build" / "vllm" / "vllm" / "v1" / "worker" / "utils.py"
UTILS = """\
import torch
from vllm.triton_utils import tl, triton
def unrelated():
    return 1
@triton.jit
def _zero_kv_blocks_kernel(
    seg_addrs_ptr,
    BLOCK_SIZE: tl.constexpr,
):
    pass
class KVBlockZeroer:
    def zero_block_ids(self, block_ids):
        return block_ids
"""
NO_CUDA = "class cuda:\n    is_available = staticmethod(lambda: False)\n"
NO_TORCH = {"torch": "raise ImportError('no torch here')"}
INTERPRETED = """
import sys, tempfile
from pathlib import Path
import torch
sys.path.insert(0, sys.argv[1])
import gpu_zeroing_bench as g
module = g.load_kernel(g.extract(Path(sys.argv[2]).read_text()), Path(sys.argv[3]))
caches, zeroer = g.make_stage(module, torch, torch.device("cpu"), 3, 64)
assert g.check_zeroing(torch, caches, zeroer, [3, 10, 11, 40])
zero = sum(int((c.view(64, -1) == 0).all(1).sum()) for c in caches)
print(f"zeroed blocks: {zero}")
"""


def load_script():
    spec = importlib.util.spec_from_file_location("gpu_zeroing_bench", SCRIPT)
    assert spec is not None and spec.loader is not None, SCRIPT
    spec.loader.exec_module(module := importlib.util.module_from_spec(spec))
    return module


def run_script(cwd: Path, fakes: Path, *args: str):
    env = {"PYTHONPATH": str(fakes), "PATH": "/usr/bin:/bin"}
    command = [sys.executable, str(SCRIPT), *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, cwd=cwd)


@pytest.mark.parametrize("fakes, utils, status, said", [
    (NO_TORCH, UTILS, 0, "SKIP gpu-zeroing: torch not installed"),
    ({"torch": NO_CUDA, "triton": "raise ImportError('no triton here')"}, UTILS, 0,
     "SKIP gpu-zeroing: triton not installed"),
    ({"torch": NO_CUDA, "triton": ""}, UTILS, 0, "SKIP gpu-zeroing: no CUDA device"),
    # A source without the kernel is an error, not a skip.
    (NO_TORCH, "def something_else():\n    pass\n", 2,
     "no top-level _zero_kv_blocks_kernel, KVBlockZeroer"),
])  # fmt: skip
def test_skips_with_the_reason_and_writes_nothing(tmp_path, fakes, utils, status, said):
    results, source = tmp_path / "results", tmp_path / "carry"
    packages = {f"{name}/__init__.py": body for name, body in fakes.items()}
    write(tmp_path / "fakes", packages)  # fake packages
    meta = json.dumps({"tree": "0" * 40, "base_version": "0.33.0"})
    write(source, {"utils.py": utils, "source.json": meta})
    args = ("run", str(source), "--results", str(results))
    run = run_script(tmp_path, tmp_path / "fakes", *args)
    assert run.returncode == status, run.stderr
    assert said in (run.stderr if status else run.stdout)
    assert not results.exists()


def test_extract_takes_the_kernel_and_zeroer_carry_copies_them_with_the_tree(tmp_path):
    script = load_script()
    code = script.extract(UTILS)
    assert code.startswith("@triton.jit\ndef _zero_kv_blocks_kernel(")
    assert "class KVBlockZeroer:" in code
    assert "unrelated" not in code
    compile(code, "extracted", "exec")
    with pytest.raises(script.SourceError, match="KVBlockZeroer"):  # named
        script.extract(UTILS.split("class KVBlockZeroer")[0])
    # carry copies the fork's file and names its tree; it refuses others.
    run = run_script(tmp_path, tmp_path, "carry", str(tmp_path), str(tmp_path / "c"))
    assert run.returncode == 2
    assert "is not a fork tree" in run.stderr
    fork = new_repo(tmp_path / "fork", {"vllm/v1/worker/utils.py": UTILS})
    tree = git(fork, "rev-parse", "HEAD^{tree}").stdout.strip()
    dest = tmp_path / "carry"
    run = run_script(tmp_path, tmp_path, "carry", str(fork), str(dest))
    assert run.returncode == 0, run.stderr
    assert (dest / "utils.py").read_text() == UTILS
    meta = json.loads((dest / "source.json").read_text())
    assert meta["tree"] == tree
    assert meta["base_version"]


@pytest.mark.skipif(not FORK_UTILS.exists(), reason="no fork at build/vllm")
def test_the_forks_kernel_clears_exactly_its_blocks_in_the_interpreter(tmp_path):
    """The fork's kernel, as the script drives it, run by Triton on the CPU."""
    extracted = load_script().extract(FORK_UTILS.read_text())
    assert "_zero_kv_blocks_kernel[grid](" in extracted
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    args = [INTERPRETED, str(SCRIPT.parent), str(FORK_UTILS), str(tmp_path)]
    env = {**os.environ, "TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": ""}
    command = [sys.executable, "-c", *args]
    run = subprocess.run(command, capture_output=True, text=True, env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "zeroed blocks: 12" in run.stdout  # 4 blocks in each of 3 layers
