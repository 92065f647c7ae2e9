"""Hypothesis strategies for planner inputs, as plain JSON values.

A case is what planner_worker.py turns into planner arguments:

    {"layout": "LBNHC" | "BLHNC", "max_model_len": int, "override": int | None,
     "stages": [{"blocks": int, "slack": int, "layers": [LAYER, ...]}, ...]}

One stage is one pipeline-parallel worker. Its available memory is `blocks`
times the raw page bytes of its own layers plus `slack` bytes, drawn per
stage so that stages usually differ and the planner re-plans every worker
down to the smallest block count. A LAYER is

    {"name": str, "kind": "full" | "sliding" | "mla" | "mamba",
     "precision": "bf16" | "fp8" | "fp8_pth" | None (Mamba), "block_size": int,
     ...kind parameters (heads, head_size, window; shapes, state_dtypes,
     spec_blocks)}

Layers are drawn per stage from a model-wide palette of up to three kinds
(each with its own shape parameters, e.g. a target and a draft), and
precisions are one KV cache dtype for the whole model, one per stage (skip
layers that fill a stage), or one per layer (skip layers, mixed drafts).
Everything is drawn per stage, so the shrinker can drop a stage or a layer
without reshuffling the others; the first choice of every `sampled_from` is
the simplest, so counterexamples shrink towards BF16 full attention.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

PRECISIONS = ("bf16", "fp8", "fp8_pth")
# Layer-outermost (as in upstream's planner tests) and block-outermost.
LAYOUTS = ("LBNHC", "BLHNC")
MAX_MODEL_LENS = (16, 64, 256)
MAX_STAGES = 8
MAX_STAGE_LAYERS = 4

Case = dict[str, Any]
Kind = dict[str, Any]

_BLOCK_SIZES = st.sampled_from([16, 32])
_ATTENTION = {
    "block_size": _BLOCK_SIZES,
    "heads": st.sampled_from([2, 1, 4, 8]),
    "head_size": st.sampled_from([64, 128]),
}


def kinds() -> st.SearchStrategy[Kind]:
    """One layer kind with its shape parameters (shared by its layers)."""
    full = st.fixed_dictionaries({"kind": st.just("full"), **_ATTENTION})
    sliding = st.fixed_dictionaries(
        {
            "kind": st.just("sliding"),
            **_ATTENTION,
            "window": st.sampled_from([8, 128, 1024]),
        }
    )
    mla = st.fixed_dictionaries({"kind": st.just("mla"), "block_size": _BLOCK_SIZES})
    mamba = st.fixed_dictionaries(
        {
            "kind": st.just("mamba"),
            "block_size": _BLOCK_SIZES,
            "shapes": st.sampled_from(
                [[[2, 512], [3, 32, 32]], [[4, 128], [2, 16, 16]], [[2, 64], [8, 64]]]
            ),
            "state_dtypes": st.sampled_from(
                [["fp32", "fp32"], ["bf16", "fp32"], ["bf16", "bf16"]]
            ),
            "spec_blocks": st.integers(0, 2),
        }
    )
    return st.one_of(full, sliding, mla, mamba)


def layer(index: int, kind: Kind, precision: str) -> dict[str, Any]:
    name = f"layers.{index}.{kind['kind']}"
    mamba = kind["kind"] == "mamba"
    return {"name": name, **kind, "precision": None if mamba else precision}


@st.composite
def stage(
    draw: st.DrawFn, palette: list[Kind], mode: str, model: str
) -> dict[str, Any]:
    """One stage: 1-4 layers of the model's kinds, and its memory."""
    if mode == "stage":
        model = draw(st.sampled_from(PRECISIONS))
    precision = st.sampled_from(PRECISIONS) if mode == "layer" else st.just(model)
    # A layer's kind and precision are drawn together, so the shrinker can
    # delete a layer without shifting the other layers' precisions.
    layers = st.tuples(st.integers(0, len(palette) - 1), precision)
    return {
        "blocks": draw(st.integers(2, 160)),  # 0-1 blocks: "no available memory"
        "slack": draw(st.integers(0, 1 << 16)),
        "layers": [
            (palette[k], p)
            for k, p in draw(st.lists(layers, min_size=1, max_size=MAX_STAGE_LAYERS))
        ],
    }


@st.composite
def cases(draw: st.DrawFn) -> Case:
    palette = draw(st.lists(kinds(), min_size=1, max_size=3))
    # One KV cache dtype for the model, one per stage, or one per layer.
    mode = draw(st.sampled_from(["model", "stage", "layer"]))
    model = draw(st.sampled_from(PRECISIONS))
    stages = draw(
        st.lists(stage(palette, mode, model), min_size=1, max_size=MAX_STAGES)
    )
    index = 0
    for s in stages:  # name the layers in model order
        s["layers"] = [layer(index + i, *x) for i, x in enumerate(s["layers"])]
        index += len(s["layers"])
    return {
        "layout": draw(st.sampled_from(LAYOUTS)),
        "max_model_len": draw(st.sampled_from(MAX_MODEL_LENS)),
        # Rare: an override gives every stage the same num_blocks (no re-plan).
        "override": draw(st.integers(1, 256)) if draw(st.integers(0, 3)) == 3 else None,
        "stages": stages,
    }
