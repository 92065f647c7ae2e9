"""A byte-level oracle for KV cache zeroing, independent of vLLM's predicate.

It lays every page of every block of a planned KVCacheConfig out in one
address space (KVCacheTensor's docstring: overlapping tensors alias the same
bytes) and asks whether a byte one group writes under one precision is
written (hence read back) by another group under another precision. Mamba
state is read before it is written, so Mamba groups always need zeroing.

Imports only numpy and vllm.v1.kv_cache_interface, so that the planner
fuzz's worker (fuzz/planner_worker.py) can load it into any tree's process.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
from vllm.v1.kv_cache_interface import (
    AttentionSpec,
    KVCacheConfig,
    KVCacheSpec,
    MambaSpec,
    UniformTypeKVCacheSpecs,
)


def _layer_specs(config: KVCacheConfig) -> dict[str, tuple[int, KVCacheSpec]]:
    """Each layer's (group index, own spec)."""
    out: dict[str, tuple[int, KVCacheSpec]] = {}
    for group_id, group in enumerate(config.kv_cache_groups):
        spec = group.kv_cache_spec
        for name in group.layer_names:
            if isinstance(spec, UniformTypeKVCacheSpecs):
                out[name] = (group_id, spec.kv_cache_specs[name])
            else:
                out[name] = (group_id, spec)
    return out


def needs_zeroing(config: KVCacheConfig) -> bool:
    """Mamba anywhere, or a byte shared by two groups under two precisions."""
    for group in config.kv_cache_groups:
        spec = group.kv_cache_spec
        inner = (
            spec.kv_cache_specs.values()
            if isinstance(spec, UniformTypeKVCacheSpecs)
            else [spec]
        )
        if any(isinstance(s, MambaSpec) for s in inner):
            return True

    specs = _layer_specs(config)
    # (tensor, layer index, page bytes, (group, precision)) of every attention page
    pages = []
    for tensor in config.kv_cache_tensors:
        if tensor.host_resident:
            continue
        for i, name in enumerate(tensor.layers):
            group_id, spec = specs[name]
            if isinstance(spec, AttentionSpec):
                precision = (spec.dtype, spec.kv_quant_mode)
                pages.append((tensor, i, spec.page_size_bytes, (group_id, precision)))
    if not pages:
        return False

    # Every offset, stride and size is a multiple of `unit`: one array cell
    # per unit keeps the map exact and small.
    numbers = [config.num_blocks]
    for t, _, page, _ in pages:
        numbers += [t.offset, t.layer_stride, t.block_stride, t.size, page]
    unit = math.gcd(*numbers)
    size = max(t.size for t, _, _, _ in pages) // unit

    # Per (group, precision): how many pages cover each cell, over every block.
    cover: dict[tuple, np.ndarray] = {}
    blocks = np.arange(config.num_blocks)
    for t, i, page, key in pages:
        starts = (t.offset + i * t.layer_stride + blocks * t.block_stride) // unit
        ends = starts + page // unit
        assert ends[-1] <= size, f"a page of {t.layers[i]} lies past its tensor"
        diff = cover.setdefault(key, np.zeros(size + 1, dtype=np.int64))
        np.add.at(diff, starts, 1)
        np.add.at(diff, ends, -1)
    written = {key: np.cumsum(diff[:-1]) > 0 for key, diff in cover.items()}

    for (g1, p1), (g2, p2) in itertools.combinations(written, 2):
        if g1 != g2 and p1 != p2 and (written[g1, p1] & written[g2, p2]).any():
            return True
    return False
