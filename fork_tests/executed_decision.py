"""The KV cache zeroing decision vLLM executes, read as its readers read it."""

from vllm.v1.kv_cache_interface import KVCacheConfig


def zeroing_enabled(config: KVCacheConfig) -> bool:
    """What the scheduler, the KV cache coordinator and the GPU worker read:
    ``kv_cache_zeroing_enabled`` on the series, the property on vLLM 0.33.0."""
    if hasattr(KVCacheConfig, "kv_cache_zeroing_enabled"):
        return config.kv_cache_zeroing_enabled
    return config.needs_kv_cache_zeroing
