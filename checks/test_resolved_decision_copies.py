"""A zeroing decision resolved across workers survives every way a config travels.

The scheduler projection deep-copies the config, runners copy it, connectors
use dataclasses.replace, and executors pickle it to the workers (MessageQueue,
which RayExecutorV2 uses too). Fails on vLLM 0.33.0, which has no resolved
decision to keep.
"""

import copy
import pickle
from dataclasses import replace

import torch
from tests.v1.core.utils import new_kv_cache_spec
from vllm.v1.kv_cache_interface import KVCacheConfig, KVCacheGroupSpec, KVQuantMode


def test_resolved_decision_survives_copies():
    fp8 = new_kv_cache_spec(dtype=torch.uint8, kv_quant_mode=KVQuantMode.FP8_PER_TENSOR)
    config = KVCacheConfig(
        num_blocks=10,
        kv_cache_tensors=[],
        kv_cache_groups=[KVCacheGroupSpec(["layer_0"], fp8)],
        resolved_kv_cache_zeroing=True,
    )
    assert not config.has_mixed_precision_kv_cache
    for copied in (
        copy.copy(config),
        copy.deepcopy(config),
        replace(config, num_blocks=1),
        pickle.loads(pickle.dumps(config)),
    ):
        assert copied.kv_cache_zeroing_enabled
