"""Out-of-tree overrides of KVCacheConfig.needs_kv_cache_zeroing keep working.

Public plugin code overrides the property in three ways; each is installed
here as that code does it:

- replace: ``KVCacheConfig.needs_kv_cache_zeroing = property(fn)``;
- wrap-fget: wrap ``KVCacheConfig.needs_kv_cache_zeroing.fget``;
- dict-lookup: find the property in ``KVCacheConfig.__dict__`` and patch it
  only if it is one (the plugin skips patching otherwise).

The plugin must not let vLLM zero blocks in pools it owns (layers named
"proxy.*") and otherwise keeps vLLM's answer. It must install without error
and what vLLM executes (every worker's config from the planner, and the
scheduler's projection) must be what the plugin's property answers. Out-of-tree
callers of the old names work too: a coordinator building managers with
needs_kv_cache_zeroing=, a scheduler subclass reading the attribute.
Runs against the base and the fork: on the base every check but the ones of
the resolved decision must pass.
"""

from collections.abc import Callable

import pytest
from kv_plans import BF16_FIRST, MIXED, UNIFORM, plan
from tests.v1.core.utils import create_requests
from vllm.config import ModelConfig, VllmConfig
from vllm.v1.core.block_pool import BlockPool
from vllm.v1.core.sched.output import SchedulerOutput
from vllm.v1.core.sched.scheduler import Scheduler
from vllm.v1.core.single_type_kv_cache_manager import FullAttentionManager
from vllm.v1.kv_cache_interface import KVCacheConfig
from vllm.v1.structured_output import StructuredOutputManager

# A plugin's answer from the config and vLLM's own answer for it.
Plugin = Callable[[KVCacheConfig, bool], bool]


def _owned(config: KVCacheConfig) -> bool:
    return any(
        name.startswith("proxy.")
        for group in config.kv_cache_groups
        for name in group.layer_names
    )


def keep_off_owned_pools(config: KVCacheConfig, vllm_answer: bool) -> bool:
    return not _owned(config) and vllm_answer


def _replace(plugin: Plugin) -> bool:
    # A replacement brings its own derivation: here vLLM 0.33.0's.
    def needs_kv_cache_zeroing(self: KVCacheConfig) -> bool:
        return plugin(self, self.has_mamba_layers or self.has_mixed_precision_kv_cache)

    KVCacheConfig.needs_kv_cache_zeroing = property(needs_kv_cache_zeroing)
    return True


def _wrap_fget(plugin: Plugin) -> bool:
    stock = KVCacheConfig.needs_kv_cache_zeroing.fget
    KVCacheConfig.needs_kv_cache_zeroing = property(
        lambda self: plugin(self, stock(self))
    )
    return True


def _dict_lookup(plugin: Plugin) -> bool:
    prop = KVCacheConfig.__dict__.get("needs_kv_cache_zeroing")
    if not isinstance(prop, property) or prop.fget is None:
        return False  # what the plugin does: skip patching
    stock = prop.fget
    KVCacheConfig.needs_kv_cache_zeroing = property(
        lambda self: plugin(self, stock(self))
    )
    return True


PATTERNS: dict[str, Callable[[Plugin], bool]] = {
    "replace": _replace,
    "wrap-fget": _wrap_fget,
    "dict-lookup": _dict_lookup,
}


@pytest.fixture
def restore_property():
    saved = KVCacheConfig.__dict__.get("needs_kv_cache_zeroing")
    yield
    if saved is None:
        delattr(KVCacheConfig, "needs_kv_cache_zeroing")
    else:
        KVCacheConfig.needs_kv_cache_zeroing = saved


def _plan(
    prefix: str, stages=(MIXED, UNIFORM)
) -> tuple[list[KVCacheConfig], KVCacheConfig]:
    """PP stages (by default two, bytes changing precision on the first)."""
    return plan(*stages, prefix=prefix)


@pytest.mark.parametrize("pattern", PATTERNS)
def test_override_pattern_installs_and_wins(restore_property, pattern):
    """The plugin's answer is what every worker and the scheduler execute."""
    assert PATTERNS[pattern](keep_off_owned_pools), f"{pattern}: skipped installing"
    workers, scheduler = _plan("proxy.")
    assert [c.needs_kv_cache_zeroing for c in [*workers, scheduler]] == [False] * 3


@pytest.mark.parametrize("pattern", ["wrap-fget", "dict-lookup"])
def test_wrapped_property_keeps_the_resolved_decision(restore_property, pattern):
    """A wrapper of vLLM's getter takes part in the decision resolved across
    workers, which every worker and the scheduler execute."""
    assert PATTERNS[pattern](keep_off_owned_pools)
    workers, scheduler = _plan("model.")
    assert [c.needs_kv_cache_zeroing for c in [*workers, scheduler]] == [True] * 3


def test_replaced_property_decides_per_config(restore_property):
    """A replacement is the platform's whole rule: every worker and the
    scheduler execute what it answers on their own config, as on vLLM 0.33.0
    (the scheduler's config holds one layer spec per group)."""
    assert PATTERNS["replace"](keep_off_owned_pools)
    workers, scheduler = _plan("model.")
    assert [c.needs_kv_cache_zeroing for c in [*workers, scheduler]] == [
        True,
        False,
        False,
    ]


def test_coordinator_passing_the_managers_old_kwarg():
    """An out-of-tree coordinator (tpu-inference's hybrid coordinator) builds
    its managers with needs_kv_cache_zeroing= from the scheduler's config."""
    _, scheduler = _plan("model.", (BF16_FIRST, UNIFORM))
    spec = scheduler.kv_cache_groups[0].kv_cache_spec
    manager = FullAttentionManager(
        spec,
        block_pool=BlockPool(
            num_gpu_blocks=10, enable_caching=False, hash_block_size=spec.block_size
        ),
        enable_caching=False,
        kv_cache_group_id=0,
        scheduler_block_size=spec.block_size,
        needs_kv_cache_zeroing=scheduler.needs_kv_cache_zeroing,
    )
    tokens = 2 * spec.block_size
    blocks = manager.allocate_new_blocks("req", tokens, num_tokens_main_model=tokens)
    assert manager.take_new_block_ids() == [b.block_id for b in blocks]


def test_scheduler_subclass_reading_the_old_attribute():
    """A scheduler subclass reads Scheduler.needs_kv_cache_zeroing, which
    must be what the scheduler acts on."""

    class PluginScheduler(Scheduler):
        def schedule(self) -> SchedulerOutput:
            output = super().schedule()
            assert (output.new_block_ids_to_zero is not None) is (
                self.needs_kv_cache_zeroing
            )
            return output

    _, config = _plan("model.", (BF16_FIRST, UNIFORM))
    vllm_config = VllmConfig(model_config=ModelConfig(max_model_len=64))
    vllm_config.cache_config.num_gpu_blocks = config.num_blocks
    scheduler = PluginScheduler(
        vllm_config=vllm_config,
        kv_cache_config=config,
        block_size=16,
        log_stats=False,
        structured_output_manager=StructuredOutputManager(vllm_config),
    )
    scheduler.add_request(create_requests(num_requests=1, num_tokens=32)[0])
    scheduler.schedule()
    assert scheduler.needs_kv_cache_zeroing
