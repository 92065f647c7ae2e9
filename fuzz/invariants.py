"""What the planner must produce, computed from the generated inputs alone.

Zeroing rule (the series' design): a worker must zero new KV cache blocks
when it holds Mamba layers or its device attention layers use more than one
precision, i.e. (dtype, kv_quant_mode); every worker and the scheduler must
then carry the OR of that over all workers.

What a "worker's layers" are needs care, because each worker's config is a
projection of the global KV cache groups (`_project_kv_cache_groups_to_worker`):
a group with none of the worker's layers stays in its config with an empty
layer list but its spec (a global UniformTypeKVCacheSpecs keeps every layer's
spec). Two readings follow:

* own layers (the design's intent): only the layers a stage holds. Mamba is
  unaffected by the difference: a Mamba group leaks into every stage, but
  then the stage that holds those Mamba layers already makes the OR True.
  Precisions are affected: stages that are each uniform but differ (BF16 full
  attention on one stage, an FP8 sliding-window group on another) have no
  mixing in their own layers, yet every stage sees the other's group spec.
* planner view: own layers plus the layers of every global group the stage
  has none of. This is what `has_mixed_precision_kv_cache` on a projected
  config sees, on the base and on the series alike.

The planner-view value is exact for the series; the own-layers value must
imply it (the series may over-zero, never under-zero). FUZZ_STRICT=1 demands
equality with the own-layers value instead. The global partition (which
layers form a group) is taken from the base's output; precisions and kinds
come from the inputs.
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
    "equals_or",
    "own_layers",
)


def needs_zeroing(layers: Iterable[Layer]) -> bool:
    """Mamba, or more than one attention precision among these layers."""
    layers = list(layers)
    precisions = {x["precision"] for x in layers if x["kind"] != "mamba"}
    return any(x["kind"] == "mamba" for x in layers) or len(precisions) > 1


def all_layers(case: Case) -> list[Layer]:
    return [x for stage in case["stages"] for x in stage["layers"]]


def own_layers_or(case: Case) -> bool:
    return any(needs_zeroing(stage["layers"]) for stage in case["stages"])


def planner_view_or(case: Case, global_groups: list[dict[str, Any]]) -> bool:
    by_name = {x["name"]: x for x in all_layers(case)}
    groups = [set(g["layer_names"]) for g in global_groups]
    for stage in case["stages"]:
        own = {x["name"] for x in stage["layers"]}
        leaked = {n for g in groups if not g & own for n in g}
        if needs_zeroing(by_name[n] for n in own | leaked):
            return True
    return False


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
    strip = ("decision", "pickled_decision", "pickled_config_equal")

    def facts(c: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in c.items() if k not in strip}

    return {
        "available_memory": out["available_memory"],
        "global_groups": out["global_groups"],
        "first_pass_num_blocks": out["first_pass_num_blocks"],
        "workers": [facts(w) for w in out["workers"]],
        "scheduler": facts(out["scheduler"]),
    }


def check(case: Case, ref: Output, cand: Output, strict: bool) -> dict[str, Verdict]:
    """Every invariant's verdict for a case the base accepted."""
    if "error" in cand:
        e = cand["error"]
        return {"no_new_raise": (False, f"{e['type']} in {e['step']}: {e['message']}")}
    got = decisions(cand)
    view = planner_view_or(case, ref["global_groups"])
    own = own_layers_or(case)
    diff = first_difference(_comparable(ref), _comparable(cand))
    pickled = [w["pickled_decision"] for w in cand["workers"]]
    pickled.append(cand["scheduler"]["pickled_decision"])
    configs_survive = all(
        c["pickled_config_equal"] for c in [*cand["workers"], cand["scheduler"]]
    )
    uniform = uniform_attention_only(case)
    if strict:
        own_ok = all(d == own for d in got)
    else:
        own_ok = not own or all(got)
    return {
        "no_new_raise": (True, ""),
        "identical": (diff is None, diff or ""),
        "workers_agree": (len(set(got[:-1])) == 1, f"workers..scheduler: {got}"),
        "scheduler_agrees": (len(set(got)) == 1, f"workers..scheduler: {got}"),
        "pickle": (pickled == got and configs_survive, f"{got} -> {pickled}"),
        "uniform_false": (not any(got) if uniform else None, f"decisions {got}"),
        "equals_or": (all(d == view for d in got), f"expected {view}, got {got}"),
        "own_layers": (
            own_ok,
            f"own-layers OR {own} ({'==' if strict else 'implies'}), got {got}",
        ),
    }
