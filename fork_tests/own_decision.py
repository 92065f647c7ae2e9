"""A KV cache config's own zeroing answer, before it is resolved across workers."""

from dataclasses import fields, replace

from vllm.v1.kv_cache_interface import KVCacheConfig


def own_decision(config: KVCacheConfig) -> bool:
    """What ``needs_kv_cache_zeroing`` derives from this config's layers alone.

    On the series the property returns the decision resolved across workers
    once the planner has set it; vLLM 0.33.0 has no such field."""
    if "resolved_kv_cache_zeroing" in {f.name for f in fields(config)}:
        config = replace(config, resolved_kv_cache_zeroing=None)
    return config.needs_kv_cache_zeroing
