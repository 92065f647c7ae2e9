"""Differential, property-based fuzz of the KV cache planner: base vs series.

For every generated case that the pristine base's planner accepts
(get_global_kv_cache_groups + get_kv_cache_configs +
generate_scheduler_kv_cache_config), the candidate tree (the series by
default) must satisfy, in this order (see invariants.py):

  no_new_raise   it raises nowhere the base did not;
  identical      everything but the zeroing decision equals the base's output:
                 global groups, num_blocks, tensors, strides, kv_tp_replicas,
                 groups with layer names and specs, the scheduler config;
  workers_agree  every worker carries the same decision;
  scheduler_agrees  and the scheduler carries it too;
  pickle         the decision (and the config) survives a pickle round trip;
  uniform_false  uniform-precision, attention-only inputs never zero;
  oracle         each worker's needs_kv_cache_zeroing equals the byte-level
                 oracle (fork_tests/zeroing_oracle.py) on its planned config;
  oracle_or      every worker's and the scheduler's decision is the oracle
                 ORed over the workers.

    cd /work/main && $V/bin/python -m pytest fuzz -q -s

Environment:
  FUZZ_EXAMPLES=N     examples to generate (default 300)
  FUZZ_AGAINST=NAME   the candidate: series (default), base (must fail), a
                      build/trees name such as 0001, or a tree path
  FUZZ_SEED=N         a random seed instead of the derandomized CI run
  FUZZ_REPORT=PATH    where to write each violated invariant's shrunk
                      counterexample as JSON ({name: detail})
"""

from __future__ import annotations

import json
import os
import re
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import hypothesis
import pytest
from hypothesis import HealthCheck, Phase, event, given, note, seed, settings

from fuzz.harness import PlannerPair
from fuzz.invariants import (
    INVARIANTS,
    Case,
    Output,
    Verdict,
    check,
    decisions,
    needs_zeroing,
    oracle_or,
    uniform_attention_only,
)
from fuzz.strategies import cases

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "300"))
AGAINST = os.environ.get("FUZZ_AGAINST", "series")
SEED = os.environ.get("FUZZ_SEED")
REPORT = os.environ.get("FUZZ_REPORT")


# How the planner refuses inputs on purpose; anything else is worth a look.
EXPECTED_REJECTIONS = ("ValueError", "NotImplementedError")


class InvariantViolation(AssertionError):
    pass


# One class per invariant: Hypothesis shrinks and reports each separately.
VIOLATIONS = {
    name: type(f"{name}_violated", (InvariantViolation,), {}) for name in INVARIANTS
}


@dataclass(repr=False)  # Hypothesis prints fixture arguments with examples
class Stats:
    """What the run saw, printed when the session ends."""

    started: float = field(default_factory=time.monotonic)
    ready_s: float = 0.0
    examples: int = 0
    accepted: int = 0
    rejections: Counter[str] = field(default_factory=Counter)
    coverage: Counter[str] = field(default_factory=Counter)
    verdicts: dict[str, Counter[str]] = field(
        default_factory=lambda: {name: Counter() for name in INVARIANTS}
    )
    first_failure: dict[str, int] = field(default_factory=dict)
    last_failure: dict[str, tuple[Case, str]] = field(default_factory=dict)
    oracle_configs: int = 0
    odd_rejections: dict[str, Case] = field(default_factory=dict)

    def __repr__(self) -> str:
        return f"<Stats: {self.examples} examples>"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self))

    def reject(self, case: Case, ref: Output, cand: Output) -> None:
        error = ref["error"]
        message = re.sub(r"\d+", "N", error["message"])[:70]
        why = f"{error['type']} in {error['step']}: {message}"
        self.rejections[why] += 1
        if error["type"] not in EXPECTED_REJECTIONS:
            known = self.odd_rejections.get(why)
            if known is None or _size(case) < _size(known):
                self.odd_rejections[why] = case
        self.coverage["candidate also rejects"] += "error" in cand

    def accept(
        self, case: Case, ref: Output, cand: Output, verdicts: dict[str, Verdict]
    ) -> None:
        self.accepted += 1
        self.coverage.update(k for k, v in coverage(case, ref, cand).items() if v)
        self.oracle_configs += len(cand.get("workers", ()))
        for name, (ok, _) in verdicts.items():
            self.verdicts[name][{True: "pass", False: "FAIL", None: "n/a"}[ok]] += 1
            if ok is False:
                self.first_failure.setdefault(name, self.examples)

    def raised(self, name: str, case: Case, detail: str) -> None:
        """Hypothesis replays each distinct failure's shrunk example last."""
        self.last_failure[name] = (case, detail)


def coverage(case: Case, ref: Output, cand: Output) -> dict[str, bool]:
    """What an accepted case exercised."""
    oracle = "workers" in cand and oracle_or(cand)
    stages = case["stages"]
    layers = [x for s in stages for x in s["layers"]]
    return {
        "multi-stage": len(stages) > 1,
        "re-planned (stages' first num_blocks differ)": (
            len(set(ref["first_pass_num_blocks"])) > 1
        ),
        "num_gpu_blocks_override": case["override"] is not None,
        f"layout {case['layout']}": True,
        "has Mamba": any(x["kind"] == "mamba" for x in layers),
        "mixed precision within a stage": any(
            needs_zeroing(x for x in s["layers"] if x["kind"] != "mamba")
            for s in stages
        ),
        "uniform, attention only": uniform_attention_only(case),
        "oracle True (OR over workers)": oracle,
        "precisions mixed, oracle False": not oracle
        and any(needs_zeroing(s["layers"]) for s in stages),
        "base: workers/scheduler disagree": len(set(decisions(ref))) > 1,
        "base: a worker's tensors name layers it lacks": _foreign_tensors(case, ref),
    }


def _foreign_tensors(case: Case, ref: Output) -> bool:
    """A global UniformTypeKVCacheSpecs group projected to a stage holding
    none of its layers keeps every layer's spec, and gets their tensors."""
    for stage, worker in zip(case["stages"], ref["workers"], strict=True):
        own = {x["name"] for x in stage["layers"]}
        tensors = worker["config"]["kv_cache_tensors"]
        if any(set(t["layers"]) - own for t in tensors):
            return True
    return False


def _size(case: Case) -> tuple[int, int]:
    return sum(len(s["layers"]) for s in case["stages"]), len(case["stages"])


def describe(case: Case) -> str:
    """A case, one stage per line."""
    head = (
        f"layout={case['layout']} max_model_len={case['max_model_len']} "
        f"num_gpu_blocks_override={case['override']}"
    )
    lines = [head]
    for i, stage in enumerate(case["stages"]):
        layers = ", ".join(_describe_layer(x) for x in stage["layers"])
        memory = f"blocks={stage['blocks']}, slack={stage['slack']}"
        lines.append(f"  stage {i} ({memory}): {layers}")
    return "\n".join(lines)


_PARAMS = ("block_size", "heads", "head_size", "window", "shapes", "state_dtypes")


def _describe_layer(layer: dict[str, Any]) -> str:
    keys = [k for k in (*_PARAMS, "spec_blocks") if k in layer]
    params = " ".join(f"{k}={layer[k]}" for k in keys)
    precision = f" {layer['precision']}" if layer["precision"] else ""
    return f"{layer['name']}{precision} [{params}]"


def summary(stats: Stats, planners: PlannerPair) -> str:
    elapsed = time.monotonic() - stats.started
    out = [
        "",
        f"=== planner fuzz: candidate {AGAINST!r} ({planners.candidate.vllm_file}) "
        f"vs base ({planners.reference.vllm_file}) ===",
        f"hypothesis {hypothesis.__version__}; max_examples={EXAMPLES}; "
        f"{'seed ' + SEED if SEED else 'derandomized'}",
        f"time: {elapsed:.1f} s total, {stats.ready_s:.1f} s to start both workers",
        f"examples tried: {stats.examples} (shrinking replays included); "
        f"accepted by base: {stats.accepted}; "
        f"rejected: {sum(stats.rejections.values())}",
        f"worker configs compared with the byte-level oracle: {stats.oracle_configs}",
    ]
    out += [f"  rejected: {n:4d}  {why}" for why, n in stats.rejections.most_common()]
    out.append("accepted cases covering:")
    out += [f"  {n:4d}  {what}" for what, n in sorted(stats.coverage.items())]
    out.append("invariants on the candidate (pass / FAIL / n/a):")
    for name in INVARIANTS:
        c = stats.verdicts[name]
        first = stats.first_failure.get(name)
        where = f"   first failed at example #{first}" if first else ""
        counts = f"{c['pass']:4d} / {c['FAIL']:4d} / {c['n/a']:4d}"
        out.append(f"  {name:16s} {counts}{where}")
    for name, (case, detail) in stats.last_failure.items():
        out += [f"shrunk counterexample, {name}_violated: {detail}", describe(case)]
    for why, case in stats.odd_rejections.items():
        out += [f"smallest case the base rejects with {why}", describe(case)]
    return "\n".join(out)


@pytest.fixture(scope="module")
def stats() -> Stats:
    return Stats()


@pytest.fixture(scope="module")
def planners(stats: Stats) -> Iterator[PlannerPair]:
    pair = PlannerPair(AGAINST)
    stats.ready_s = time.monotonic() - stats.started
    try:
        yield pair
    finally:
        print(summary(stats, pair), flush=True)
        pair.close()
        if REPORT:
            violated = {n: d for n, (_, d) in stats.last_failure.items()}
            with open(REPORT, "w") as f:
                json.dump(violated, f)


def _settings(test: Any) -> Any:
    test = settings(
        max_examples=EXAMPLES,
        derandomize=SEED is None,
        database=None,  # every run replays nothing: reproducible in CI
        deadline=None,
        print_blob=True,
        phases=[p for p in Phase if p is not Phase.explain],
        suppress_health_check=list(HealthCheck),
    )(test)
    return seed(int(SEED))(test) if SEED else test


@_settings
@given(case=cases())
def test_planner_fuzz(planners: PlannerPair, stats: Stats, case: Case) -> None:
    ref, cand = planners.plan(case)
    stats.examples += 1
    if "error" in ref:
        stats.reject(case, ref, cand)
        event(f"base rejects: {ref['error']['type']} in {ref['error']['step']}")
        return
    event("accepted by base")
    verdicts = check(case, ref, cand)
    stats.accept(case, ref, cand, verdicts)
    for name in INVARIANTS:
        ok, detail = verdicts.get(name, (None, ""))
        if ok is False:
            note(describe(case))
            note(f"base decisions (workers..scheduler): {decisions(ref)}")
            note("case JSON: " + json.dumps(case))
            stats.raised(name, case, detail)
            raise VIOLATIONS[name](f"{name}: {detail}")
