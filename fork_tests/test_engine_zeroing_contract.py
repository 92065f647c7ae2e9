"""The KV cache zeroing contract between the scheduler and pipeline stages.

The real EngineCore plans the KV cache, ships each stage its config and
schedules requests; an executor stands in for the pipeline stages. Each
stage reports the KV cache specs of its slice of layers, receives its config
through a pickle round trip (as the multiprocessing executor ships it), builds
a zeroer exactly when that config says so (the rule gpu_worker applies) and
fails if a SchedulerOutput hands it new_block_ids_to_zero without one, where
Model Runner V2 would assert.

The mixed cases put a BF16 layer of an FP8 cache where sliding-window
groups reuse its bytes as FP8 (kv_plans.MIXED). On vLLM 0.33.0 they fail
because no block id is ever sent: the scheduler's projection drops the
decision, so new blocks are never zeroed. With the decision kept by the
scheduler but not resolved across stages, they fail in execute_model on a
stage without a zeroer. The one-group case (a skip layer in the only group)
fails on 0.33.0 because every stage builds a zeroer nothing uses.
"""

import pickle
import time
from concurrent.futures import Future

import pytest
import torch
from kv_plans import BF16_FIRST, MIXED, ONE_GROUP, UNIFORM
from vllm import SamplingParams
from vllm.config import CacheConfig, ModelConfig, SchedulerConfig, VllmConfig
from vllm.v1.core.sched.output import GrammarOutput, SchedulerOutput
from vllm.v1.engine import EngineCoreRequest
from vllm.v1.engine.core import EngineCore
from vllm.v1.executor.abstract import Executor
from vllm.v1.kv_cache_interface import (
    FullAttentionSpec,
    KVCacheConfig,
    KVCacheSpec,
    KVQuantMode,
    MambaSpec,
)
from vllm.v1.outputs import ModelRunnerOutput
from vllm.v1.worker.worker_base import CompilationTimes

BLOCK_SIZE = 16
NUM_BLOCKS = 48
PROMPT_LEN = 3 * BLOCK_SIZE
MAX_TOKENS = BLOCK_SIZE + 1

FP8 = FullAttentionSpec(
    block_size=BLOCK_SIZE,
    num_kv_heads=1,
    head_size=64,
    dtype=torch.uint8,
    kv_quant_mode=KVQuantMode.FP8_PER_TENSOR,
)
BF16 = FullAttentionSpec(
    block_size=BLOCK_SIZE, num_kv_heads=1, head_size=64, dtype=torch.bfloat16
)
MAMBA = MambaSpec(
    block_size=BLOCK_SIZE,
    shapes=((8, 32),),
    dtypes=(torch.float32,),
    page_size_padded=BF16.page_size_bytes,
)


class _Stage:
    """One pipeline stage: its layers' specs, its config and its zeroer."""

    def __init__(self, rank: int, specs: dict[str, KVCacheSpec]):
        self.rank = rank
        self.specs = specs
        self.has_zeroer = False
        self.zeroed: list[int] = []

    def get_kv_cache_spec(self) -> dict[str, KVCacheSpec]:
        return self.specs

    def get_supported_kv_cache_layouts(self) -> list[str]:
        return ["BLNHC"]

    def set_kv_cache_layout(self, layout: str, interleave: int) -> None:
        pass

    def determine_available_memory(self) -> int:
        pages = sum(spec.page_size_bytes for spec in self.specs.values())
        return pages * (NUM_BLOCKS + 1)

    def initialize_from_config(self, kv_cache_configs: list[KVCacheConfig]) -> None:
        config = pickle.loads(pickle.dumps(kv_cache_configs[self.rank]))
        self.has_zeroer = config.needs_kv_cache_zeroing

    def compile_or_warm_up_model(self) -> CompilationTimes:
        return CompilationTimes(language_model=0.0, encoder=0.0)

    def get_supported_tasks(self) -> tuple[str, ...]:
        return ("generate",)

    def execute_model(self, scheduler_output: SchedulerOutput) -> None:
        if scheduler_output.new_block_ids_to_zero:
            assert self.has_zeroer, (
                f"stage {self.rank} got new_block_ids_to_zero without a zeroer"
            )
            self.zeroed += scheduler_output.new_block_ids_to_zero


def _stage_executor(stage_specs: list[dict[str, KVCacheSpec]]) -> type[Executor]:
    class StageExecutor(Executor):
        """Runs every call on each stand-in stage; the last one samples."""

        def _init_executor(self) -> None:
            self.stages = [_Stage(i, s) for i, s in enumerate(stage_specs)]
            self.scheduled: list[SchedulerOutput] = []

        def collective_rpc(
            self, method, timeout=None, args=(), kwargs=None, non_block=False
        ):
            results = [
                getattr(stage, method)(*args, **(kwargs or {})) for stage in self.stages
            ]
            return _done(results) if non_block else results

        def execute_model(self, scheduler_output, non_block=False):
            self.collective_rpc("execute_model", args=(scheduler_output,))
            self.scheduled.append(scheduler_output)
            return _done(None) if non_block else None

        def sample_tokens(self, grammar_output: GrammarOutput | None, non_block=False):
            last = self.scheduled[-1]
            req_ids = list(last.num_scheduled_tokens)
            output = ModelRunnerOutput(
                req_ids=req_ids,
                req_id_to_index={r: i for i, r in enumerate(req_ids)},
                sampled_token_ids=[[7] for _ in req_ids],
            )
            return _done(output) if non_block else output

        def check_health(self) -> None:
            pass

        def shutdown(self) -> None:
            pass

    return StageExecutor


def _done(value) -> Future:
    future: Future = Future()
    future.set_result(value)
    return future


def _request(i: int) -> EngineCoreRequest:
    return EngineCoreRequest(
        request_id=f"req-{i}",
        external_req_id=f"req-{i}",
        prompt_token_ids=[i + 1] * PROMPT_LEN,
        mm_features=None,
        sampling_params=SamplingParams(max_tokens=MAX_TOKENS, ignore_eos=True),
        pooling_params=None,
        arrival_time=time.time(),
        lora_request=None,
        cache_salt=None,
        data_parallel_rank=None,
    )


def _layers(*stages: list[KVCacheSpec]) -> list[dict[str, KVCacheSpec]]:
    specs: list[dict[str, KVCacheSpec]] = []
    layer = 0
    for stage in stages:
        specs.append({})
        for spec in stage:
            specs[-1][f"model.layers.{layer}.attn"] = spec
            layer += 1
    return specs


@pytest.mark.parametrize(
    "stage_specs,needs_zeroing",
    [
        pytest.param(_layers([FP8] * 3, [FP8] * 3), False, id="uniform"),
        pytest.param(_layers(MIXED, UNIFORM), True, id="mixed-first-stage"),
        pytest.param(_layers(BF16_FIRST, UNIFORM), True, id="bf16-first"),
        pytest.param(_layers(UNIFORM, MIXED), True, id="mixed-second-stage"),
        pytest.param(
            _layers(UNIFORM, MIXED, UNIFORM), True, id="mixed-middle-of-three"
        ),
        pytest.param(_layers(ONE_GROUP, ONE_GROUP), False, id="one-group"),
        pytest.param(_layers([BF16] * 3, [MAMBA] * 3), True, id="mamba-only-stage"),
    ],
)
def test_every_stage_can_zero_what_the_scheduler_sends(stage_specs, needs_zeroing):
    vllm_config = VllmConfig(
        model_config=ModelConfig(
            max_model_len=4 * PROMPT_LEN, skip_tokenizer_init=True
        ),
        cache_config=CacheConfig(block_size=BLOCK_SIZE, enable_prefix_caching=False),
        scheduler_config=SchedulerConfig(
            max_num_seqs=4,
            max_num_batched_tokens=4 * PROMPT_LEN,
            max_model_len=4 * PROMPT_LEN,
            is_encoder_decoder=False,
            async_scheduling=False,
        ),
    )
    engine = EngineCore(
        vllm_config,
        executor_class=_stage_executor(stage_specs),
        log_stats=False,
    )
    executor = engine.model_executor

    # More requests than the blocks hold at once, so freed blocks are reused.
    # A stage sent block ids without a zeroer fails here, in execute_model.
    for i in range(12):
        engine.add_request(*engine.preprocess_add_request(_request(i)))
    while engine.scheduler.has_requests():
        engine.step()

    sent = [
        block_id
        for out in executor.scheduled
        for block_id in out.new_block_ids_to_zero or ()
    ]
    if needs_zeroing:
        assert len(sent) > len(set(sent)), "no freed block was reused"
    else:
        assert not sent
    assert all(stage.zeroed == sent for stage in executor.stages)
    assert [s.has_zeroer for s in executor.stages] == [needs_zeroing] * len(stage_specs)
