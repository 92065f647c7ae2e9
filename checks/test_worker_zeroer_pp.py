"""Every pipeline stage can zero the blocks the scheduler asks it to.

The scheduler sends one new_block_ids_to_zero to all stages. A stage whose
own layers are uniform-precision must still build a kv_block_zeroer when
another stage holds the BF16 layer of an FP8 cache, or Model Runner V2
asserts on the first request.

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
from executed_decision import zeroing_enabled
from tests.v1.core.utils import get_kv_cache_configs, new_kv_cache_spec
from vllm.config import CacheConfig, ModelConfig, VllmConfig
from vllm.v1.core.kv_cache_utils import generate_scheduler_kv_cache_config
from vllm.v1.core.sched.output import SchedulerOutput
from vllm.v1.kv_cache_interface import KVCacheConfig, KVQuantMode
from vllm.v1.worker.gpu.model_runner import GPUModelRunner
from vllm.v1.worker.gpu_worker import Worker

FP8 = new_kv_cache_spec(dtype=torch.uint8, kv_quant_mode=KVQuantMode.FP8_PER_TENSOR)
BF16 = new_kv_cache_spec(dtype=torch.bfloat16)


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
        pytest.param([[FP8] * 2, [FP8] * 2], False, id="uniform"),
        pytest.param([[BF16, FP8], [FP8] * 2], True, id="mixed-first-stage"),
        pytest.param([[FP8] * 2, [FP8, BF16]], True, id="mixed-second-stage"),
    ],
)
def test_every_stage_builds_a_zeroer_the_scheduler_relies_on(
    monkeypatch, stage_specs, expected
):
    vllm_config = VllmConfig(model_config=ModelConfig(max_model_len=16))
    vllm_config.cache_config.kv_cache_layout = "LBNHC"
    kv_cache_specs = [
        {f"layer_{stage * 2 + i}": s for i, s in enumerate(specs)}
        for stage, specs in enumerate(stage_specs)
    ]
    available_memory = [
        sum(s.page_size_bytes for s in specs) * 32 for specs in stage_specs
    ]
    kv_cache_configs = get_kv_cache_configs(
        vllm_config, kv_cache_specs, available_memory
    )
    scheduler_config = generate_scheduler_kv_cache_config(kv_cache_configs)

    scheduler_output = SchedulerOutput.make_empty()
    scheduler_output.new_block_ids_to_zero = [1, 2, 3]
    for kv_cache_config in kv_cache_configs:
        runner = _initialize_worker(monkeypatch, vllm_config, kv_cache_config)
        if zeroing_enabled(scheduler_config):
            # What the scheduler sends this stage; without a zeroer, MRV2
            # asserts here.
            GPUModelRunner.update_requests(runner, scheduler_output)
        assert (runner.kv_block_zeroer is not None) is expected
    assert zeroing_enabled(scheduler_config) is expected
