"""Differential, property-based fuzz of vLLM's KV cache planner.

The pristine base and the patch series each run in a long-lived subprocess
(planner_worker.py) that imports that tree's vllm; the Hypothesis test
(test_planner_fuzz.py) feeds both the same JSON planner inputs and compares
their canonical outputs. See test_planner_fuzz.py for the invariants and the
FUZZ_* environment variables.
"""
