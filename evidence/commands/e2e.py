"""Run the series' GPU-only test ([gpu_only] in upstream-tests.toml) with pytest -v -s,
in the user's own environment (the GPUs, the Hugging Face token and cache: it reads
the gated google/gemma-2-2b-it config and tokenizer), the venv first on PATH and the
tree first on PYTHONPATH: once in build/vllm, once in a worktree of its HEAD where
patch 1's hunks in kv_cache_planning.py and kv_cache_utils.py (the planner's OR of
the zeroing decision across workers, the scheduler config's copy of it) are reversed;
the rest of patch 1 stays, as a full revert conflicts with patch 2. Exits 0 when the
test passes on the series and fails without the resolution. Refuses fewer than two
GPUs (`nvidia-smi -L`), a missing fork or venv, or one not made from this venv.lock
(setup), and a fork with uncommitted changes or a stopped git operation. Writes:
build/results/gpu-e2e.json, build/trees/e2e-without-resolution,
build/logs/e2e-series.log, build/logs/e2e-without-resolution.log."""

from __future__ import annotations

import argparse

from evidence import checks, e2e
from evidence.worktrees import measured_run
from forktool.commands.command import Command
from forktool.pins import Pins
from forktool.process import ForkToolError


def run(pins: Pins, args: argparse.Namespace) -> int:
    if (count := e2e.gpus()) < 2:
        raise ForkToolError(
            f"e2e needs two GPUs and found {count} (`nvidia-smi -L`; none "
            "without nvidia-smi on PATH); nothing was run"
        )
    return 0 if measured_run("e2e", checks.GPU_E2E, pins, e2e.measure) else 1


COMMAND = Command(__doc__, run)
