"""A long-lived planner process for one vLLM tree: JSON lines in, JSON lines out.

Run as `python planner_worker.py TREE`. TREE goes first on sys.path so its
vllm wins over the venv's editable install (checked, and reported in the
greeting line). Each input line is `{"id": N, "case": CASE}` (CASE as built
by fuzz/strategies.py); each output line holds the planner's canonical
result: the global groups, every worker's KVCacheConfig and the scheduler's,
all without the zeroing decision (`needs_kv_cache_zeroing` and the fork's
resolved copy of it), which is reported on its own, with what the byte-level
oracle (fork_tests/zeroing_oracle.py) says of each config.

Self-contained on purpose: from the fuzz package's repository it loads only
fork_tests/zeroing_oracle.py (numpy and the tree's vllm), by its path; otherwise
the tree's vllm, torch and the standard library.
"""

from __future__ import annotations

import copy
import dataclasses
import enum
import importlib.util
import json
import os
import pickle
import sys
import traceback
from fractions import Fraction
from pathlib import Path
from typing import Any

# The decision, and where the fork stores it once resolved across workers.
DECISION = {"needs_kv_cache_zeroing", "resolved_kv_cache_zeroing"}


def _import_tree(tree: str) -> None:
    sys.path.insert(0, tree)
    import vllm

    if not os.path.realpath(vllm.__file__).startswith(os.path.realpath(tree) + os.sep):
        raise RuntimeError(f"imported {vllm.__file__}, not the vllm of {tree}")


_import_tree(sys.argv[1])

import torch  # noqa: E402
import vllm  # noqa: E402
from vllm.config import ModelConfig, VllmConfig  # noqa: E402
from vllm.v1.core import kv_cache_planning as planning  # noqa: E402
from vllm.v1.core.kv_cache_utils import (  # noqa: E402
    generate_scheduler_kv_cache_config,
)
from vllm.v1.kv_cache_interface import (  # noqa: E402
    FullAttentionSpec,
    KVCacheConfig,
    KVCacheSpec,
    KVQuantMode,
    MambaSpec,
    MLAAttentionSpec,
    SlidingWindowSpec,
)

ORACLE = Path(__file__).resolve().parents[1] / "fork_tests" / "zeroing_oracle.py"
_spec = importlib.util.spec_from_file_location("zeroing_oracle", ORACLE)
assert _spec is not None and _spec.loader is not None, ORACLE
zeroing_oracle = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(zeroing_oracle)

# Precision name -> (KV cache dtype, quant mode, MLA cache_dtype_str).
PRECISIONS: dict[str, tuple[torch.dtype, KVQuantMode, str | None]] = {
    "bf16": (torch.bfloat16, KVQuantMode.NONE, None),
    "fp8": (torch.uint8, KVQuantMode.FP8_PER_TENSOR, "fp8"),
    # Scales live in separate caches: same uint8 page as per-tensor FP8.
    "fp8_pth": (torch.uint8, KVQuantMode.FP8_PER_TOKEN_HEAD, "fp8_per_token_head"),
}
STATE_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


# --- inputs -----------------------------------------------------------------


def build_spec(layer: dict[str, Any]) -> KVCacheSpec:
    """One layer's spec from its JSON description."""
    kind, block_size = layer["kind"], layer["block_size"]
    if kind == "mamba":
        return MambaSpec(
            block_size=block_size,
            shapes=tuple(tuple(s) for s in layer["shapes"]),
            dtypes=tuple(STATE_DTYPES[d] for d in layer["state_dtypes"]),
            num_speculative_blocks=layer["spec_blocks"],
            mamba_cache_mode="none",
        )
    dtype, quant, cache_dtype_str = PRECISIONS[layer["precision"]]
    if kind == "mla":
        return MLAAttentionSpec(
            block_size=block_size,
            num_kv_heads=1,
            max_tp_shards=1,
            head_size=576,
            dtype=dtype,
            kv_quant_mode=quant,
            cache_dtype_str=cache_dtype_str,
        )
    common = dict(
        block_size=block_size,
        num_kv_heads=layer["heads"],
        head_size=layer["head_size"],
        dtype=dtype,
        kv_quant_mode=quant,
    )
    if kind == "sliding":
        return SlidingWindowSpec(sliding_window=layer["window"], **common)
    assert kind == "full", kind
    return FullAttentionSpec(**common)


def build_stage_specs(case: dict[str, Any]) -> list[dict[str, KVCacheSpec]]:
    return [
        {layer["name"]: build_spec(layer) for layer in stage["layers"]}
        for stage in case["stages"]
    ]


def available_memory(
    case: dict[str, Any], specs: list[dict[str, KVCacheSpec]]
) -> list[int]:
    """`blocks` times the stage's raw page bytes, plus `slack` bytes."""
    return [
        stage["blocks"] * sum(s.page_size_bytes for s in stage_specs.values())
        + stage["slack"]
        for stage, stage_specs in zip(case["stages"], specs, strict=True)
    ]


class Configs:
    """A VllmConfig template built once (ModelConfig takes seconds)."""

    def __init__(self) -> None:
        self.template = VllmConfig(model_config=ModelConfig(max_model_len=16))

    def for_case(self, case: dict[str, Any]) -> VllmConfig:
        config = copy.deepcopy(self.template)
        config.model_config.max_model_len = case["max_model_len"]
        config.cache_config.kv_cache_layout = case["layout"]
        config.cache_config.num_gpu_blocks_override = case["override"]
        return config


# --- canonical outputs ------------------------------------------------------


def canon(value: Any) -> Any:
    """A JSON value that is equal exactly when the planner outputs are.

    Dataclasses keep their class name and every field but the zeroing
    decision; dicts keep their order (as [key, value] pairs).
    """
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            "__type__": type(value).__name__,
            **{
                f.name: canon(getattr(value, f.name))
                for f in dataclasses.fields(value)
                if f.name not in DECISION
            },
        }
    if isinstance(value, dict):
        return [[canon(k), canon(v)] for k, v in value.items()]
    if isinstance(value, (list, tuple)):
        return [canon(v) for v in value]
    if isinstance(value, enum.Enum):
        return f"{type(value).__name__}.{value.name}"
    if isinstance(value, (torch.dtype, Fraction)):
        return str(value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"cannot canonicalise {type(value).__name__}: {value!r}")


def own_decision(config: KVCacheConfig) -> bool:
    """needs_kv_cache_zeroing from this config's layers alone: on the fork the
    property returns the decision resolved across workers once it is set."""
    if "resolved_kv_cache_zeroing" in {f.name for f in dataclasses.fields(config)}:
        config = dataclasses.replace(config, resolved_kv_cache_zeroing=None)
    return config.needs_kv_cache_zeroing


def config_facts(config: KVCacheConfig) -> dict[str, Any]:
    """A config's canonical form, its derived facts and its zeroing decision."""
    clone = pickle.loads(pickle.dumps(config))
    return {
        "config": canon(config),
        "has_mamba_layers": config.has_mamba_layers,
        "has_mixed_precision_kv_cache": config.has_mixed_precision_kv_cache,
        "needs": own_decision(config),
        "decision": config.needs_kv_cache_zeroing,
        "pickled_decision": clone.needs_kv_cache_zeroing,
        "pickled_config_equal": canon(clone) == canon(config),
    }


# --- planning ---------------------------------------------------------------


class PlanCalls:
    """Records the block counts get_kv_cache_configs plans each worker with.

    Probes pass num_blocks by keyword; the per-worker plans and the re-plans
    to the smallest count pass it positionally.
    """

    def __init__(self) -> None:
        self.num_blocks: list[int] = []
        builder = planning.DefaultKVCacheConfigBuilder
        original = builder.get_kv_cache_config_from_groups

        def record(self_, vllm_config, groups, *args, **kwargs):
            if args:
                self.num_blocks.append(args[0])
            return original(self_, vllm_config, groups, *args, **kwargs)

        builder.get_kv_cache_config_from_groups = record


def plan(configs: Configs, calls: PlanCalls, case: dict[str, Any]) -> dict[str, Any]:
    """Run the planner on one case; report where and how it raised, if it did."""
    specs = build_stage_specs(case)
    memory = available_memory(case, specs)
    vllm_config = configs.for_case(case)
    out: dict[str, Any] = {"available_memory": memory}
    step = "get_global_kv_cache_groups"
    try:
        groups = planning.get_global_kv_cache_groups(vllm_config, specs)
        out["global_groups"] = canon(groups)
        step = "get_kv_cache_configs"
        calls.num_blocks.clear()
        workers = planning.get_kv_cache_configs(vllm_config, specs, memory, groups)
        out["first_pass_num_blocks"] = calls.num_blocks[: len(specs)]
        out["workers"] = [
            {**config_facts(c), "oracle": zeroing_oracle.needs_zeroing(c)}
            for c in workers
        ]
        step = "generate_scheduler_kv_cache_config"
        out["scheduler"] = config_facts(generate_scheduler_kv_cache_config(workers))
    except Exception as e:  # noqa: BLE001 - every rejection is data here
        out["error"] = {
            "step": step,
            "type": type(e).__name__,
            "message": str(e).splitlines()[0][:300] if str(e) else "",
        }
    return out


def main() -> None:
    # vllm logs to stdout: keep the real stdout for the protocol only.
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    configs, calls = Configs(), PlanCalls()
    hello = {"ready": True, "vllm_file": vllm.__file__, "pid": os.getpid()}
    protocol.write(json.dumps(hello) + "\n")
    for line in sys.stdin:
        request = json.loads(line)
        try:
            result = plan(configs, calls, request["case"])
        except Exception:  # noqa: BLE001 - a harness bug, not a planner one
            result = {"harness_error": traceback.format_exc()}
        protocol.write(json.dumps({"id": request["id"], **result}) + "\n")


if __name__ == "__main__":
    main()
