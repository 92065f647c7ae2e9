"""What the planner must produce, from the generated inputs and an oracle.

Zeroing rule (the series' design): a worker must zero new KV cache blocks
when it holds Mamba layers or a byte that one cache group writes under one
attention precision, (dtype, kv_quant_mode), is written by another group
under another (precisions mixed within one group never are); every worker
and the scheduler must then carry the OR of that over all workers.

The byte-level oracle (fork_tests/zeroing_oracle.py, run in the candidate's
worker process on each planned config) decides that rule from the planned
tensors alone; it shares no code with vLLM's predicate.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

Case = dict[str, Any]
Output = dict[str, Any]
Layer = dict[str, Any]
Verdict = tuple[bool | None, str]  # (True pass, False fail, None not applicable)

INVARIANTS = (
    "no_new_raise",
    "identical",
    "workers_agree",
    "scheduler_agrees",
    "pickle",
    "uniform_false",
    "oracle",
    "oracle_or",
)


def needs_zeroing(layers: Iterable[Layer]) -> bool:
    """Mamba, or more than one attention precision among these layers."""
    layers = list(layers)
    precisions = {x["precision"] for x in layers if x["kind"] != "mamba"}
    return any(x["kind"] == "mamba" for x in layers) or len(precisions) > 1


def all_layers(case: Case) -> list[Layer]:
    return [x for stage in case["stages"] for x in stage["layers"]]


def oracle_or(out: Output) -> bool:
    """The byte-level oracle ORed over the candidate's workers."""
    return any(w["oracle"] for w in out["workers"])


def uniform_attention_only(case: Case) -> bool:
    return not needs_zeroing(all_layers(case))


def decisions(out: Output) -> list[bool]:
    """Every worker's decision, then the scheduler's."""
    return [w["decision"] for w in out["workers"]] + [out["scheduler"]["decision"]]


def first_difference(a: Any, b: Any, path: str = "") -> str | None:
    """Where two canonical outputs first differ, or None."""
    if type(a) is not type(b):
        return f"{path}: {a!r} != {b!r}"
    if isinstance(a, dict):
        for key in sorted(set(a) | set(b)):
            if key not in a or key not in b:
                return f"{path}.{key}: present on one side only"
            diff = first_difference(a[key], b[key], f"{path}.{key}")
            if diff:
                return diff
        return None
    if isinstance(a, list):
        if len(a) != len(b):
            return f"{path}: length {len(a)} != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            diff = first_difference(x, y, f"{path}[{i}]")
            if diff:
                return diff
        return None
    return None if a == b else f"{path}: {a!r} != {b!r}"


def _comparable(out: Output) -> dict[str, Any]:
    """Everything the planner produced except the zeroing decision."""
    strip = ("decision", "pickled_decision", "pickled_config_equal", "needs", "oracle")

    def facts(c: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in c.items() if k not in strip}

    return {
        "available_memory": out["available_memory"],
        "global_groups": out["global_groups"],
        "first_pass_num_blocks": out["first_pass_num_blocks"],
        "workers": [facts(w) for w in out["workers"]],
        "scheduler": facts(out["scheduler"]),
    }


def check(case: Case, ref: Output, cand: Output) -> dict[str, Verdict]:
    """Every invariant's verdict for a case the base accepted."""
    if "error" in cand:
        e = cand["error"]
        return {"no_new_raise": (False, f"{e['type']} in {e['step']}: {e['message']}")}
    got = decisions(cand)
    diff = first_difference(_comparable(ref), _comparable(cand))
    pickled = [w["pickled_decision"] for w in cand["workers"]]
    pickled.append(cand["scheduler"]["pickled_decision"])
    configs_survive = all(
        c["pickled_config_equal"] for c in [*cand["workers"], cand["scheduler"]]
    )
    uniform = uniform_attention_only(case)
    needs = [w["needs"] for w in cand["workers"]]
    oracle = [w["oracle"] for w in cand["workers"]]
    return {
        "no_new_raise": (True, ""),
        "identical": (diff is None, diff or ""),
        "workers_agree": (len(set(got[:-1])) == 1, f"workers..scheduler: {got}"),
        "scheduler_agrees": (len(set(got)) == 1, f"workers..scheduler: {got}"),
        "pickle": (pickled == got and configs_survive, f"{got} -> {pickled}"),
        "uniform_false": (not any(got) if uniform else None, f"decisions {got}"),
        "oracle": (needs == oracle, f"needs_kv_cache_zeroing {needs}, oracle {oracle}"),
        "oracle_or": (
            all(d == any(oracle) for d in got),
            f"expected {any(oracle)} (oracle {oracle}), got {got}",
        ),
    }
