"""A scheduler benchmark process for one vLLM tree: JSON lines in and out.

Run as `python bench_scheduler.py TREE` with TREE as the working directory;
TREE goes first on sys.path so its vllm wins over the venv's (checked, and
reported in the greeting). Requests, one a line:

    {"op": "setup", "config": "mixed" | "uniform" | "hybrid" | "cross-group",
     "requests": N, "workload": "decode" | "prefill"}
    {"op": "steps", "n": S}

`setup` plans the KV cache of a two-stage (PP=2) Qwen3-0.6B-shaped model
with vLLM's planner (get_global_kv_cache_groups, get_kv_cache_configs),
projects the scheduler's config (generate_scheduler_kv_cache_config),
builds a real Scheduler as EngineCore does, adds the requests and runs
untimed steps until the workload is steady. `steps` runs S steps of
schedule() + update_from_output(), with one sampled token per scheduled
request as vLLM's scheduler tests do, and answers each step's CPU and wall
time and the number of block ids it sent for zeroing.

Self-contained on purpose: it imports only the tree's vllm, torch and the
standard library, never the repository that runs it.
"""

from __future__ import annotations

import copy
import gc
import json
import os
import sys
import time
import traceback
from typing import Any


def _import_tree(tree: str) -> None:
    sys.path.insert(0, tree)
    import vllm

    if not os.path.realpath(vllm.__file__).startswith(os.path.realpath(tree) + os.sep):
        raise RuntimeError(f"imported {vllm.__file__}, not the vllm of {tree}")


_import_tree(sys.argv[1])

import torch  # noqa: E402
import vllm  # noqa: E402
from vllm import SamplingParams  # noqa: E402
from vllm.config import (  # noqa: E402
    CacheConfig,
    ModelConfig,
    ParallelConfig,
    SchedulerConfig,
    VllmConfig,
)
from vllm.utils.hashing import get_hash_fn_by_name  # noqa: E402
from vllm.v1.core.kv_cache_planning import (  # noqa: E402
    get_global_kv_cache_groups,
    get_kv_cache_configs,
)
from vllm.v1.core.kv_cache_utils import (  # noqa: E402
    generate_scheduler_kv_cache_config,
    get_request_block_hasher,
    init_none_hash,
    resolve_kv_cache_block_sizes,
)
from vllm.v1.core.sched.scheduler import Scheduler  # noqa: E402
from vllm.v1.core.single_type_kv_cache_manager import (  # noqa: E402
    register_all_kvcache_specs,
)
from vllm.v1.kv_cache_interface import (  # noqa: E402
    FullAttentionSpec,
    KVCacheSpec,
    KVQuantMode,
    MambaSpec,
    SlidingWindowSpec,
)
from vllm.v1.outputs import ModelRunnerOutput  # noqa: E402
from vllm.v1.request import Request  # noqa: E402
from vllm.v1.structured_output import StructuredOutputManager  # noqa: E402

MODEL = "Qwen/Qwen3-0.6B"
LAYERS, STAGES, BLOCK, HEADS, HEAD_SIZE = 28, 2, 16, 8, 128
TOKEN_BUDGET = 8192  # max_num_batched_tokens, vLLM's default for serving
MAX_REQUESTS = 1024
MAX_MODEL_LEN = 8192
# The KV cache holds every prompt and this many more tokens per request.
DECODE_ROOM = 1024
# (prompt tokens, output tokens): decodes that never finish while measured;
# long prompts with short answers, replaced as they finish.
WORKLOADS = {"decode": (128, 1 << 20), "prefill": (1024, 8)}
WARMUP_STEPS = 2 * BLOCK  # past the first block boundary of every decode

FP8 = FullAttentionSpec(
    block_size=BLOCK,
    num_kv_heads=HEADS,
    head_size=HEAD_SIZE,
    dtype=torch.uint8,  # vLLM's storage for --kv-cache-dtype fp8
    kv_quant_mode=KVQuantMode.FP8_PER_TENSOR,
)
BF16 = FullAttentionSpec(
    block_size=BLOCK, num_kv_heads=HEADS, head_size=HEAD_SIZE, dtype=torch.bfloat16
)
# Sliding-window layers kept in BF16 under an FP8 cache (gpt-oss style): their
# groups reuse blocks the full-attention group writes as FP8.
BF16_SWA = SlidingWindowSpec(
    block_size=BLOCK,
    num_kv_heads=HEADS,
    head_size=HEAD_SIZE,
    dtype=torch.bfloat16,
    sliding_window=128,
)
# A Mamba2 mixer's conv and SSM states, padded to the attention page as
# hybrid models' configs arrange.
MAMBA = MambaSpec(
    block_size=BLOCK,
    shapes=((3, 2048), (8, 64, 16)),
    dtypes=(torch.bfloat16, torch.float32),
    page_size_padded=BF16.page_size_bytes,
    mamba_cache_mode="none",
)


def layer_spec(config: str, index: int) -> KVCacheSpec:
    if config == "mixed":  # --kv-cache-dtype fp8 --kv-cache-dtype-skip-layers 0
        return BF16 if index == 0 else FP8
    if config == "uniform":
        return FP8
    if config == "hybrid":  # one attention layer in four
        return BF16 if index % 4 == 3 else MAMBA
    if config == "cross-group":  # every other layer sliding-window, in BF16
        return BF16_SWA if index % 2 else FP8
    raise ValueError(f"unknown config {config!r}")


def stage_specs(config: str) -> list[dict[str, KVCacheSpec]]:
    per_stage = LAYERS // STAGES
    return [
        {
            f"model.layers.{i}.self_attn.attn": layer_spec(config, i)
            for i in range(stage * per_stage, (stage + 1) * per_stage)
        }
        for stage in range(STAGES)
    ]


_TEMPLATES: dict[bool, VllmConfig] = {}


def vllm_config(requests: int, prefix_caching: bool, num_blocks: int) -> VllmConfig:
    """A copy of a config built once per caching mode: building one reads the
    model's config and probes for weights, which takes seconds."""
    if prefix_caching not in _TEMPLATES:
        _TEMPLATES[prefix_caching] = VllmConfig(
            model_config=ModelConfig(
                model=MODEL, max_model_len=MAX_MODEL_LEN, skip_tokenizer_init=True
            ),
            cache_config=CacheConfig(
                block_size=BLOCK, enable_prefix_caching=prefix_caching
            ),
            scheduler_config=SchedulerConfig(
                max_num_seqs=MAX_REQUESTS,
                max_num_batched_tokens=TOKEN_BUDGET,
                max_model_len=MAX_MODEL_LEN,
                is_encoder_decoder=False,
                async_scheduling=False,
            ),
            parallel_config=ParallelConfig(pipeline_parallel_size=STAGES),
        )
    config = copy.deepcopy(_TEMPLATES[prefix_caching])
    config.scheduler_config.max_num_seqs = requests
    config.cache_config.num_gpu_blocks_override = num_blocks
    return config


class Bench:
    """One scheduler under one workload, kept between `steps` requests."""

    def __init__(self, config: str, requests: int, workload: str) -> None:
        if requests > MAX_REQUESTS:
            raise ValueError(f"at most {MAX_REQUESTS} requests")
        self.requests = requests
        self.prompt_len, self.max_tokens = WORKLOADS[workload]
        caching = config != "hybrid"  # Mamba without "align" mode: no caching
        num_blocks = (requests + 8) * (self.prompt_len + DECODE_ROOM) // BLOCK
        self.vllm_config = vllm_config(requests, caching, num_blocks)
        self.vllm_config.cache_config.kv_cache_layout = "LBNHC"
        register_all_kvcache_specs(self.vllm_config)
        specs = stage_specs(config)
        groups = get_global_kv_cache_groups(self.vllm_config, specs)
        memory = [1 << 40] * len(specs)  # the override decides the block count
        workers = get_kv_cache_configs(self.vllm_config, specs, memory, groups)
        kv_cache_config = generate_scheduler_kv_cache_config(workers)
        self.vllm_config.cache_config.num_gpu_blocks = kv_cache_config.num_blocks
        block_size, hash_block_size = resolve_kv_cache_block_sizes(
            kv_cache_config, self.vllm_config
        )
        self.facts = {
            "zeroing": kv_cache_config.needs_kv_cache_zeroing,
            "workers_zeroing": [w.needs_kv_cache_zeroing for w in workers],
            "num_blocks": kv_cache_config.num_blocks,
            "groups": len(kv_cache_config.kv_cache_groups),
            "prefix_caching": caching,
        }
        self.scheduler = Scheduler(
            vllm_config=self.vllm_config,
            kv_cache_config=kv_cache_config,
            structured_output_manager=StructuredOutputManager(self.vllm_config),
            block_size=block_size,
            hash_block_size=hash_block_size,
            log_stats=False,
        )
        self.hasher = None
        if caching:
            init_none_hash(get_hash_fn_by_name("sha256"))
            self.hasher = get_request_block_hasher(
                hash_block_size, get_hash_fn_by_name("sha256")
            )
        self.params = SamplingParams(max_tokens=self.max_tokens, ignore_eos=True)
        self.added = 0
        self.top_up()

    def top_up(self) -> None:
        """Keep `requests` requests in the scheduler, each with its own prompt."""
        while self.scheduler.get_num_unfinished_requests() < self.requests:
            self.added += 1
            first = self.added % 100_000 + 1  # no prefix is shared
            # Lengths spread over a block, so requests do not all cross a
            # block boundary in the same decode step.
            length = self.prompt_len + self.added % BLOCK
            self.scheduler.add_request(
                Request(
                    request_id=f"req-{self.added}",
                    prompt_token_ids=[first] + [7] * (length - 1),
                    sampling_params=self.params,
                    pooling_params=None,
                    block_hasher=self.hasher,
                )
            )

    def step(self) -> tuple[int, int, int, int]:
        """One timed step: (CPU ns, wall ns, block ids sent to zero, tokens).

        CPU time is this thread's: on a shared machine it leaves out the time
        other processes hold the core, which wall time does not.
        """
        wall, cpu = time.perf_counter_ns(), time.thread_time_ns()
        output = self.scheduler.schedule()
        req_ids = list(output.num_scheduled_tokens)
        self.scheduler.update_from_output(
            output,
            ModelRunnerOutput(
                req_ids=req_ids,
                req_id_to_index={r: i for i, r in enumerate(req_ids)},
                sampled_token_ids=[[11] for _ in req_ids],
            ),
        )
        cpu, wall = time.thread_time_ns() - cpu, time.perf_counter_ns() - wall
        self.top_up()
        zero_ids = len(output.new_block_ids_to_zero or ())
        return cpu, wall, zero_ids, output.total_num_scheduled_tokens

    def warm_up(self) -> int:
        """Untimed steps to a steady state: WARMUP_STEPS, after every first
        prompt when requests never finish (decode)."""
        budget = self.vllm_config.scheduler_config.max_num_batched_tokens
        steps = WARMUP_STEPS
        if self.max_tokens > MAX_MODEL_LEN:
            steps += -(-self.requests * self.prompt_len // budget)
        for _ in range(steps):
            self.step()
        # As EngineCore does after startup: what exists now is never collected.
        gc.collect()
        gc.freeze()
        return steps

    def steps(self, n: int) -> dict[str, Any]:
        rows = [self.step() for _ in range(n)]
        return {
            "cpu_ns": [r[0] for r in rows],
            "wall_ns": [r[1] for r in rows],
            "zero_ids": [r[2] for r in rows],
            "tokens": [r[3] for r in rows],
            "running": len(self.scheduler.running),
            "waiting": len(self.scheduler.waiting),
        }


def handle(bench: Bench | None, request: dict[str, Any]) -> tuple[Bench | None, dict]:
    if request["op"] == "setup":
        bench = None
        gc.unfreeze()
        gc.collect()
        start = time.perf_counter()
        bench = Bench(request["config"], request["requests"], request["workload"])
        warmup = bench.warm_up()
        seconds = round(time.perf_counter() - start, 3)
        return bench, {**bench.facts, "warmup_steps": warmup, "setup_s": seconds}
    if request["op"] == "steps":
        if bench is None:
            raise RuntimeError("`steps` before `setup`")
        return bench, bench.steps(request["n"])
    raise ValueError(f"unknown op {request['op']!r}")


def main() -> None:
    # vllm logs to stdout: keep the real stdout for the protocol only.
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    hello = {"ready": True, "vllm_file": vllm.__file__, "pid": os.getpid()}
    protocol.write(json.dumps(hello) + "\n")
    bench: Bench | None = None
    for line in sys.stdin:
        request = json.loads(line)
        try:
            bench, answer = handle(bench, request)
        except Exception:  # noqa: BLE001 - reported to the orchestrator
            bench, answer = None, {"error": traceback.format_exc()}
        protocol.write(json.dumps(answer) + "\n")


if __name__ == "__main__":
    main()
