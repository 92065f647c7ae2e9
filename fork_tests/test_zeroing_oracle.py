"""vLLM's zeroing decision equals a byte-level oracle on planned configs.

zeroing_oracle.needs_zeroing marks every byte of every block with the
(group, precision) pairs that write it; it shares no code with vLLM's
predicate. Each case is planned by vLLM for each layout the planner accepts.
"""

import pytest
from kv_plans import (
    BF16,
    BF16_FIRST,
    BF16_SWA,
    FP8,
    FP8_SWA,
    MIXED,
    ONE_GROUP,
    UNIFORM,
    plan,
)
from own_decision import own_decision
from tests.v1.core.utils import new_kv_cache_spec, new_mamba_spec
from zeroing_oracle import needs_zeroing

LAYOUTS = ["BLNHC", "LBNHC"]
# name: (stages, what the oracle must say for each of LAYOUTS). LBNHC gives
# a layer of its own region per group but starts every group's regions at
# offset 0, so layers of different precisions in different groups alias.
CASES = {
    "uniform": ([UNIFORM], (False, False)),
    "one-group-skip-layer": ([ONE_GROUP], (False, False)),
    "aliasing-bf16-first": ([BF16_FIRST], (True, True)),
    "pp2-bf16-first-stage-0": ([BF16_FIRST, UNIFORM], (True, True)),
    # One stage, BLNHC: the sliding-window groups reuse only the FP8 page.
    "aliasing-bf16-not-first": ([MIXED], (False, True)),
    "unaliased-bf16-page": ([[FP8, BF16, FP8_SWA, FP8_SWA]], (False, True)),
    "bf16-swa-fp8-full": ([[FP8, FP8, BF16_SWA, BF16_SWA]], (True, True)),
    # Same page size (16 KiB), as upstream's hybrid planning tests arrange.
    "mamba-hybrid": ([[new_mamba_spec(), new_kv_cache_spec()]], (True, True)),
    **{
        f"pp{n}-mixed-stage-{i}": (
            [MIXED if s == i else UNIFORM for s in range(n)],
            (True, True),
        )
        for n in (2, 4)
        for i in range(n)
    },
    "pp2-one-group": ([ONE_GROUP, ONE_GROUP], (False, False)),
}


def _plan(stages, layout):
    try:
        return plan(*stages, layout=layout, blocks=48)
    except (ValueError, NotImplementedError) as e:
        pytest.skip(f"the planner rejects {layout}: {type(e).__name__}: {e}")


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("case", CASES)
def test_decision_equals_oracle(case, layout):
    stages, per_layout = CASES[case]
    expected = per_layout[LAYOUTS.index(layout)]
    workers, scheduler = _plan(stages, layout)
    oracle = [needs_zeroing(w) for w in workers]
    assert [own_decision(w) for w in workers] == oracle
    # What every stage and the scheduler execute: the OR over the stages.
    executed = [c.needs_kv_cache_zeroing for c in [*workers, scheduler]]
    assert executed == [any(oracle)] * len(executed)
    assert any(oracle) is expected


@pytest.mark.parametrize("layout", LAYOUTS)
def test_oracle_rejects_the_base_predicate_on_one_group_mixes(layout):
    """vLLM 0.33.0 zeroes whenever precisions mix, even within one group,
    where no byte changes precision: the oracle tells the two apart."""
    (config,), _ = _plan([ONE_GROUP], layout)
    base = config.has_mamba_layers or config.has_mixed_precision_kv_cache
    assert base and not needs_zeroing(config)
