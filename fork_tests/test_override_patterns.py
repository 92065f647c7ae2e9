"""Out-of-tree overrides of KVCacheConfig.needs_kv_cache_zeroing keep working.

Public plugin code overrides the property in three ways; each is installed
here as that code does it:

- replace: ``KVCacheConfig.needs_kv_cache_zeroing = property(fn)``;
- wrap-fget: wrap ``KVCacheConfig.needs_kv_cache_zeroing.fget``;
- dict-lookup: find the property in ``KVCacheConfig.__dict__`` and patch it
  only if it is one (the plugin skips patching otherwise).

Two plugins: one that must not let vLLM zero blocks in pools it owns
(layers named "proxy.*") and otherwise keeps vLLM's answer (idempotent), and
one that negates vLLM's answer (not idempotent: applied twice, it undoes
itself). Each must install without error, and what vLLM executes (every
worker's config from the planner, and the scheduler's projection) must be
what the plugin's property returns on the workers' configs, applied once.
Runs against the base and the fork: a pattern that breaks fails here.
"""

from collections.abc import Callable

import pytest
from executed_decision import zeroing_enabled
from kv_plans import MIXED, UNIFORM, plan
from vllm.v1.kv_cache_interface import KVCacheConfig

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


def negate(config: KVCacheConfig, vllm_answer: bool) -> bool:
    return not vllm_answer


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
    assert [zeroing_enabled(c) for c in [*workers, scheduler]] == [False] * 3


@pytest.mark.parametrize("pattern", ["wrap-fget", "dict-lookup"])
def test_wrapped_property_keeps_the_resolved_decision(restore_property, pattern):
    """A wrapper of vLLM's getter takes part in the decision resolved across
    workers, which every worker and the scheduler execute."""
    assert PATTERNS[pattern](keep_off_owned_pools)
    workers, scheduler = _plan("model.")
    assert [zeroing_enabled(c) for c in [*workers, scheduler]] == [True] * 3


def test_replaced_property_that_disagrees_across_workers_is_resolved(
    restore_property,
):
    """A replacement whose answer differs between PP workers is resolved like
    vLLM's own derivation: every stage zeroes, since all are sent the ids."""
    assert PATTERNS["replace"](keep_off_owned_pools)
    workers, scheduler = _plan("model.")
    assert [c.needs_kv_cache_zeroing for c in workers] == [True, False]
    assert [zeroing_enabled(c) for c in [*workers, scheduler]] == [True] * 3


@pytest.mark.parametrize(
    "stages,answers",
    [
        pytest.param((UNIFORM, UNIFORM), [True, True], id="uniform"),
        pytest.param((MIXED, UNIFORM), [False, True], id="mixed"),
    ],
)
@pytest.mark.parametrize("pattern", PATTERNS)
def test_non_idempotent_override_applies_once(
    restore_property, pattern, stages, answers
):
    """What a negating plugin answers on each worker's config, ORed over the
    workers, is what every worker and the scheduler execute: vLLM never
    feeds it its own answer."""
    assert PATTERNS[pattern](negate)
    workers, scheduler = _plan("model.", stages)
    assert [c.needs_kv_cache_zeroing for c in workers] == answers
    assert [zeroing_enabled(c) for c in [*workers, scheduler]] == [any(answers)] * 3
