"""Every pipeline stage can zero the blocks the scheduler asks it to.

The scheduler sends one new_block_ids_to_zero to all stages. A stage whose
own layers are uniform-precision must still build a kv_block_zeroer when
another stage holds a BF16 layer whose bytes another group reuses as FP8
(kv_plans.MIXED), or Model Runner V2 asserts on the first request. A BF16
skip layer in the only group changes no byte's precision: no stage zeroes.

Stand-ins (SimpleNamespace, MagicMock) replace the device, the model and the
memory pool, which is why this check lives here and not upstream.
CPU only: the stages hold no attention segments here, so their zeroers are
built but have nothing to zero and launch no kernel.
"""

from contextlib import nullcontext
from types import MethodType, SimpleNamespace
from unittest.mock import MagicMock

import numpy as np
import pytest
import torch
import vllm.v1.worker.gpu_worker as gpu_worker
from kv_plans import BF16_FIRST, MIXED, ONE_GROUP, UNIFORM, plan
from vllm.config import CacheConfig, ModelConfig, VllmConfig
from vllm.v1.core.sched.output import SchedulerOutput
from vllm.v1.kv_cache_interface import KVCacheConfig
from vllm.v1.worker.gpu.model_runner import GPUModelRunner
from vllm.v1.worker.gpu_worker import Worker


def _mrv2_stage(kv_cache_config: KVCacheConfig) -> SimpleNamespace:
    """The parts of Model Runner V2 that build and use the zeroer."""
    runner = SimpleNamespace(
        device=torch.device("cpu"),
        attn_groups=[[]],
        kernel_block_sizes=[],
        compilation_config=SimpleNamespace(static_forward_context={}),
        kv_cache_config=kv_cache_config,
        kv_block_zeroer=None,
        initialize_kv_cache=MagicMock(),
        req_states=SimpleNamespace(
            num_computed_tokens_np=np.zeros(1, dtype=np.int32),
            prefill_len=SimpleNamespace(np=np.zeros(1, dtype=np.int32)),
            num_computed_prefill_tokens=np.zeros(1, dtype=np.int32),
        ),
    )
    runner._init_kv_zero_meta = MethodType(GPUModelRunner._init_kv_zero_meta, runner)
    return runner


def _initialize_worker(
    monkeypatch, vllm_config: VllmConfig, kv_cache_config: KVCacheConfig
) -> SimpleNamespace:
    """Run Worker.initialize_from_config with no device, connector or pool."""
    monkeypatch.setattr(gpu_worker, "ensure_kv_transfer_initialized", MagicMock())
    monkeypatch.setattr(gpu_worker, "has_kv_transfer_group", lambda: False)
    runner = _mrv2_stage(kv_cache_config)
    worker = object.__new__(Worker)
    worker.vllm_config = vllm_config
    worker.cache_config = CacheConfig()
    worker.model_runner = runner
    monkeypatch.setattr(
        worker, "_maybe_get_memory_pool_context", lambda tag: nullcontext()
    )
    worker.initialize_from_config(kv_cache_config)
    return runner


@pytest.mark.parametrize(
    "stage_specs,expected",
    [
        pytest.param([UNIFORM, UNIFORM], False, id="uniform"),
        pytest.param([MIXED, UNIFORM], True, id="mixed-first-stage"),
        pytest.param([BF16_FIRST, UNIFORM], True, id="bf16-first"),
        pytest.param([UNIFORM, MIXED], True, id="mixed-second-stage"),
        pytest.param([ONE_GROUP, ONE_GROUP], False, id="one-group"),
    ],
)
def test_every_stage_builds_a_zeroer_the_scheduler_relies_on(
    monkeypatch, stage_specs, expected
):
    vllm_config = VllmConfig(model_config=ModelConfig(max_model_len=64))
    kv_cache_configs, scheduler_config = plan(*stage_specs, vllm_config=vllm_config)

    scheduler_output = SchedulerOutput.make_empty()
    scheduler_output.new_block_ids_to_zero = [1, 2, 3]
    for kv_cache_config in kv_cache_configs:
        runner = _initialize_worker(monkeypatch, vllm_config, kv_cache_config)
        if scheduler_config.needs_kv_cache_zeroing:
            # What the scheduler sends this stage; without a zeroer, MRV2
            # asserts here.
            GPUModelRunner.update_requests(runner, scheduler_output)
        assert (runner.kv_block_zeroer is not None) is expected
    assert scheduler_config.needs_kv_cache_zeroing is expected
