"""A zeroing decision resolved across workers survives every way a config travels.

The scheduler projection deep-copies the config, runners copy it, connectors
use dataclasses.replace, and executors pickle it to the workers (MessageQueue,
which RayExecutorV2 uses too). The config is the uniform stage of a PP=2 plan
whose other stage needs zeroing: zeroing only because it was resolved so.
Fails on vLLM 0.33.0, where that stage decides alone and does not zero.
"""

import copy
import pickle
from dataclasses import replace

from kv_plans import MIXED, UNIFORM, plan
from own_decision import own_decision


def test_resolved_decision_survives_copies():
    (_, config), _ = plan(MIXED, UNIFORM)
    assert not own_decision(config)
    assert config.needs_kv_cache_zeroing
    for copied in (
        copy.copy(config),
        copy.deepcopy(config),
        replace(config, num_blocks=1),
        pickle.loads(pickle.dumps(config)),
    ):
        assert copied.needs_kv_cache_zeroing
    # The resolved decision is part of the config's value.
    assert pickle.loads(pickle.dumps(config)) == config
    assert replace(config, resolved_kv_cache_zeroing=False) != config
