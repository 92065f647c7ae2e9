"""Layer specs and planned pipeline stages for the zeroing checks.

FP8 caches with one BF16 layer: in ONE_GROUP the BF16 layer shares its
UniformTypeKVCacheSpecs group with FP8 layers only, so no byte changes
precision; in MIXED the sliding-window groups reuse the bytes of the BF16
layer (not first in its group) as FP8, so new blocks must be zeroed;
BF16_FIRST is the same with the BF16 layer first in its group.
"""

from dataclasses import replace

import torch
from tests.v1.core.utils import (
    get_kv_cache_configs,
    new_kv_cache_spec,
    new_sliding_window_spec,
)
from vllm.config import ModelConfig, VllmConfig
from vllm.v1.core.kv_cache_utils import generate_scheduler_kv_cache_config
from vllm.v1.kv_cache_interface import KVCacheConfig, KVCacheSpec, KVQuantMode

FP8 = new_kv_cache_spec(dtype=torch.uint8, kv_quant_mode=KVQuantMode.FP8_PER_TENSOR)
FP8_SWA = replace(
    new_sliding_window_spec(dtype=torch.uint8),
    kv_quant_mode=KVQuantMode.FP8_PER_TENSOR,
)
BF16 = new_kv_cache_spec(dtype=torch.bfloat16)
BF16_SWA = new_sliding_window_spec(dtype=torch.bfloat16)

UNIFORM = [FP8, FP8, *[FP8_SWA] * 4]
MIXED = [FP8, BF16, *[FP8_SWA] * 4]
BF16_FIRST = [BF16, FP8, *[FP8_SWA] * 4]
ONE_GROUP = [FP8, BF16, FP8, FP8]


def stages(*specs: list[KVCacheSpec], prefix: str = "") -> list[dict[str, KVCacheSpec]]:
    """One dict of layer specs per PP stage, layers named by stage and index."""
    return [
        {f"{prefix}layer_{stage}_{i}": spec for i, spec in enumerate(layers)}
        for stage, layers in enumerate(specs)
    ]


def plan(
    *specs: list[KVCacheSpec],
    layout: str = "BLNHC",
    prefix: str = "",
    blocks: int = 20,
    vllm_config: VllmConfig | None = None,
) -> tuple[list[KVCacheConfig], KVCacheConfig]:
    """vLLM's plan for these stages, each given memory for about `blocks`
    blocks: every worker's config, and the scheduler's."""
    if vllm_config is None:
        vllm_config = VllmConfig(model_config=ModelConfig(max_model_len=64))
    vllm_config.cache_config.kv_cache_layout = layout
    memory = [sum(s.page_size_bytes for s in layers) * blocks for layers in specs]
    workers = get_kv_cache_configs(vllm_config, stages(*specs, prefix=prefix), memory)
    return workers, generate_scheduler_kv_cache_config(workers)
