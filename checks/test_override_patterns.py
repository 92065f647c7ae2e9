"""Out-of-tree overrides of KVCacheConfig.needs_kv_cache_zeroing keep working.

Public plugin code overrides the property in three ways; each is installed
here as that code does it, by a plugin that must not let vLLM zero blocks in
pools it owns (layers named "proxy.*") and otherwise keeps vLLM's answer:

- replace: ``KVCacheConfig.needs_kv_cache_zeroing = property(fn)``;
- wrap-fget: wrap ``KVCacheConfig.needs_kv_cache_zeroing.fget``;
- dict-lookup: find the property in ``KVCacheConfig.__dict__`` and patch it
  only if it is one (the plugin skips patching otherwise).

Each must install without error, and what vLLM's consumers read (every
worker's config from the planner, and the scheduler's projection) must be
what the plugin's property returns, as on vLLM 0.33.0. Runs against the base
and the fork: a pattern that breaks fails here, never silently.
"""

from collections.abc import Callable

import pytest
import torch
from tests.v1.core.utils import get_kv_cache_configs, new_kv_cache_spec
from vllm.config import ModelConfig, VllmConfig
from vllm.v1.core.kv_cache_utils import generate_scheduler_kv_cache_config
from vllm.v1.kv_cache_interface import KVCacheConfig, KVQuantMode

FP8 = new_kv_cache_spec(dtype=torch.uint8, kv_quant_mode=KVQuantMode.FP8_PER_TENSOR)
BF16 = new_kv_cache_spec(dtype=torch.bfloat16)


def _owned(config: KVCacheConfig) -> bool:
    return any(
        name.startswith("proxy.")
        for group in config.kv_cache_groups
        for name in group.layer_names
    )


def _replace() -> bool:
    def needs_kv_cache_zeroing(self: KVCacheConfig) -> bool:
        return not _owned(self) and (
            self.has_mamba_layers or self.has_mixed_precision_kv_cache
        )

    KVCacheConfig.needs_kv_cache_zeroing = property(needs_kv_cache_zeroing)
    return True


def _wrap_fget() -> bool:
    stock = KVCacheConfig.needs_kv_cache_zeroing.fget
    KVCacheConfig.needs_kv_cache_zeroing = property(
        lambda self: not _owned(self) and stock(self)
    )
    return True


def _dict_lookup() -> bool:
    prop = KVCacheConfig.__dict__.get("needs_kv_cache_zeroing")
    if not isinstance(prop, property):
        return False  # what the plugin does: skip patching
    KVCacheConfig.needs_kv_cache_zeroing = property(
        lambda self: not _owned(self) and prop.fget(self)
    )
    return True


PATTERNS: dict[str, Callable[[], bool]] = {
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


def _plan(prefix: str) -> tuple[list[KVCacheConfig], KVCacheConfig]:
    """Two PP stages, the BF16 layer of an FP8 cache on the first."""
    vllm_config = VllmConfig(model_config=ModelConfig(max_model_len=16))
    vllm_config.cache_config.kv_cache_layout = "LBNHC"
    stages = [[BF16, FP8], [FP8, FP8]]
    kv_cache_specs = [
        {f"{prefix}layer_{2 * stage + i}": s for i, s in enumerate(specs)}
        for stage, specs in enumerate(stages)
    ]
    available_memory = [sum(s.page_size_bytes for s in specs) * 32 for specs in stages]
    workers = get_kv_cache_configs(vllm_config, kv_cache_specs, available_memory)
    return workers, generate_scheduler_kv_cache_config(workers)


@pytest.mark.parametrize("pattern", PATTERNS)
def test_override_pattern_installs_and_wins(restore_property, pattern):
    """The plugin's answer is what every worker and the scheduler read."""
    assert PATTERNS[pattern](), f"{pattern}: the plugin skipped installing"
    workers, scheduler = _plan("proxy.")
    assert [c.needs_kv_cache_zeroing for c in [*workers, scheduler]] == [False] * 3


@pytest.mark.parametrize("pattern", ["wrap-fget", "dict-lookup"])
def test_wrapped_property_keeps_the_resolved_decision(restore_property, pattern):
    """A wrapper of vLLM's getter gets the decision resolved across workers."""
    assert PATTERNS[pattern]()
    workers, scheduler = _plan("model.")
    assert [c.needs_kv_cache_zeroing for c in [*workers, scheduler]] == [True] * 3


def test_replaced_property_that_disagrees_across_workers_fails_loudly(
    restore_property,
):
    """A replacement that ignores the resolved decision cannot be served under
    PP when its workers disagree: startup fails with a message."""
    assert PATTERNS["replace"]()
    with pytest.raises(ValueError, match="needs_kv_cache_zeroing"):
        _plan("model.")
