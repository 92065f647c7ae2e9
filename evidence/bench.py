"""`bench`: the scheduler's cost per step, the fork against the pristine base.

Three processes run fork_tests/bench_scheduler.py: one imports the fork's vllm
(build/vllm), two the base's (build/trees/bench-base), whose ratio is the
noise floor (A/A). For each case all three set up the same scheduler, then
take turns, in an order that rotates every repeat, running the same number
of steps; nothing else of the benchmark runs meanwhile. A repeat's value is
its median step time; ratios pair the processes' values of one repeat.
"""

from __future__ import annotations

import os
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evidence.tree_process import TreeProcess
from evidence.worktrees import worktree
from forktool import hfcache
from forktool.checks import Check, Measured, fork_tree, record
from forktool.layout import LAYOUT
from forktool.pins import Pins
from forktool.prepare import require_setup
from forktool.process import BASE_TAG, ForkToolError
from forktool.pytest_runner import test_env
from forktool.safety import ensure_safe
from forktool.venv import python

BASE_TREE = LAYOUT.trees / "bench-base"
WORKER = LAYOUT.fork_tests / "bench_scheduler.py"

CONFIGS = {
    "mixed": "FP8 KV, one BF16 layer (one group), PP=2",
    "cross-group": "FP8 KV, BF16 sliding-window layers (1 in 2), PP=2",
    "uniform": "FP8 KV, all layers, PP=2",
    "hybrid": "Mamba2 + BF16 attention (1 in 4), PP=2",
}
# The configs where the scheduler zeroes, in the base and the fork alike. No
# byte of the one-group mix changes precision, so neither zeroes it.
ZEROING = {"cross-group", "hybrid"}
WORKLOADS = ("decode", "prefill")
SIZES = (64, 256, 1024)
OVERHEAD_GOAL = 0.02
PROCESSES = ("base", "fork", "base-aa")
# The workers' KV cache holds 1024 tokens per request beyond its prompt:
# room for warm-up and measured decode steps without preemption.
MAX_STEPS = 900
MAX_REQUESTS = 1024  # the workers' max_num_seqs
READY_TIMEOUT_S = 300.0
ANSWER_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class Case:
    config: str
    workload: str
    requests: int


def cases(sizes: tuple[int, ...]) -> list[Case]:
    return [Case(c, w, n) for c in CONFIGS for w in WORKLOADS for n in sizes]


# --- numbers ------------------------------------------------------------------


def spread(values: list[float]) -> tuple[float, float, float]:
    """(median, min, max)."""
    return statistics.median(values), min(values), max(values)


def summarise(case: Case, runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """One table row from each process's repeats (the worker's `steps` answers)."""
    medians = {
        p: [statistics.median(r["cpu_ns"]) / 1000 for r in reps]
        for p, reps in runs.items()
    }
    ids = {p: [i for r in reps for i in r["zero_ids"]] for p, reps in runs.items()}
    ratio = [f / b for f, b in zip(medians["fork"], medians["base"], strict=True)]
    aa = [a / b for a, b in zip(medians["base-aa"], medians["base"], strict=True)]
    return {
        "config": case.config,
        "workload": case.workload,
        "requests": case.requests,
        "base_us": statistics.median(medians["base"]),
        "fork_us": statistics.median(medians["fork"]),
        "ratio": spread(ratio),
        "aa": spread(aa),
        "ratios": ratio,
        "aa_ratios": aa,
        "ids_base": statistics.mean(ids["base"]),
        "ids_fork": statistics.mean(ids["fork"]),
        "ids_total": {p: sum(v) for p, v in ids.items()},
    }


PASS = {True: "PASS", False: "FAIL"}
INCONCLUSIVE = "INCONCLUSIVE"


def pooled(rows: list[dict[str, Any]], key: str) -> float:
    """Geometric mean of every repeat's ratio over `rows`: one overall figure."""
    return statistics.geometric_mean([x for r in rows for x in r[key]])


def noise_floor(rows: list[dict[str, Any]]) -> tuple[float, float, bool, str]:
    """The middle half of every A/A repeat's ratio over `rows` (its quartiles);
    whether it strays from 1 by more than the goal's margin (a verdict on a
    difference that small is not supported by this run); its sentence."""
    values = [x for r in rows for x in r["aa_ratios"]]
    low, _, high = statistics.quantiles(values, n=4, method="inclusive")
    wide = max(1 - low, high - 1) > OVERHEAD_GOAL
    text = f"A/A noise floor {low:.3f}-{high:.3f}"
    if wide:
        text += f", wider than the goal's margin of {OVERHEAD_GOAL:.2f}"
    return low, high, wide, text


def goals(rows: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """The issue's goals: (PASS, FAIL or INCONCLUSIVE, the numbers behind it).

    A timing goal is INCONCLUSIVE when the A/A noise floor (the quartiles of
    every A/A repeat's ratio) reaches further from 1 than the goal's margin:
    the run cannot tell a difference of that size; rerun on a quieter machine.
    """
    out = []
    mixed = [r for r in rows if r["config"] == "mixed"]
    if mixed:
        worst = max(mixed, key=lambda r: r["ratio"][0])
        ratio, aa = pooled(mixed, "ratios"), pooled(mixed, "aa_ratios")
        _, _, wide, floor = noise_floor(mixed)
        text = (
            f"mixed: fork/base over all {len(mixed)} cases {ratio:.3f} (goal "
            f"<= {1 + OVERHEAD_GOAL:.2f}; A/A {aa:.3f}, {floor}; worst case "
            f"{worst['ratio'][0]:.3f}, {worst['workload']} {worst['requests']}, "
            f"its A/A range {worst['aa'][1]:.3f}-{worst['aa'][2]:.3f})"
        )
        out.append((INCONCLUSIVE if wide else PASS[ratio - 1 <= OVERHEAD_GOAL], text))
    for config in ("mixed", "uniform"):
        if config_rows := [r for r in rows if r["config"] == config]:
            sent = sum(
                r["ids_total"]["base"] + r["ids_total"]["fork"] for r in config_rows
            )
            text = f"{config}: block ids sent to zero, both trees: {sent}"
            out.append((PASS[sent == 0], text))
    uniform = [r for r in rows if r["config"] == "uniform"]
    if uniform:
        low, high, wide, floor = noise_floor(uniform)
        ratio = pooled(uniform, "ratios")
        inside = sum(low <= r["ratio"][0] <= high for r in uniform)
        verdict = PASS[low <= ratio <= high]
        # Inside overall while most cases are outside: the cases scatter
        # more than the floor says, so the pooled figure proves nothing.
        if wide or (verdict == "PASS" and 2 * inside < len(uniform)):
            verdict = INCONCLUSIVE
        text = (
            f"uniform: fork/base over all {len(uniform)} cases {ratio:.3f}, "
            f"{floor}; {inside} of {len(uniform)} cases inside the floor"
        )
        out.append((verdict, text))
    return out


def overall(verdicts: list[tuple[str, str]]) -> str:
    """FAIL if a goal failed, else INCONCLUSIVE if one is, else PASS."""
    found = {verdict for verdict, _ in verdicts}
    return next((v for v in ("FAIL", INCONCLUSIVE) if v in found), "PASS")


def summary(verdicts: list[tuple[str, str]]) -> str:
    return "\n".join(f"{verdict:12}  {text}" for verdict, text in verdicts)


def render(rows: list[dict[str, Any]], repeats: int, steps: int) -> str:
    head = (
        f"{'config':8} {'workload':8} {'reqs':>5} {'base µs':>8} {'fork µs':>8} "
        f"{'fork/base [min-max]':>20} {'A/A [min-max]':>20} "
        f"{'ids/step b':>10} {'ids/step f':>10}"
    )
    lines = [
        f"CPU time per schedule() + update_from_output() step: median of "
        f"{repeats} repeats, each the median of {steps} steps",
        head,
    ]
    for r in rows:
        ratio, aa = r["ratio"], r["aa"]
        lines.append(
            f"{r['config']:8} {r['workload']:8} {r['requests']:>5} "
            f"{r['base_us']:>8.0f} {r['fork_us']:>8.0f} "
            f"{ratio[0]:>6.3f} [{ratio[1]:.3f}-{ratio[2]:.3f}] "
            f"{aa[0]:>6.3f} [{aa[1]:.3f}-{aa[2]:.3f}] "
            f"{r['ids_base']:>10.1f} {r['ids_fork']:>10.1f}"
        )
    return "\n".join(lines)


# --- processes ----------------------------------------------------------------


class Worker(TreeProcess):
    """One fork_tests/bench_scheduler.py process importing one tree's vllm."""

    def __init__(self, label: str, tree: Path, venv: Path) -> None:
        env = {**test_env(LAYOUT.hf_home), "VLLM_LOGGING_LEVEL": "ERROR"}
        super().__init__(f"bench-{label}", tree, [python(venv), str(WORKER)], env)

    def answer(self) -> dict[str, Any]:
        answer = self.read(ANSWER_TIMEOUT_S)
        if error := answer.get("error"):
            raise ForkToolError(f"{self.label} worker ({self.tree}) failed: {error}")
        return answer


def measure(
    workers: dict[str, Worker], case: Case, repeats: int, steps: int
) -> tuple[dict[str, Any], dict[str, list[dict[str, Any]]]]:
    """Set the case up in every process (in parallel: untimed), then take turns."""
    for w in workers.values():
        w.write({"op": "setup", **case.__dict__})
    facts = {label: w.answer() for label, w in workers.items()}
    runs: dict[str, list[dict[str, Any]]] = {label: [] for label in workers}
    order = list(workers)
    for r in range(repeats):
        for label in order[r % len(order) :] + order[: r % len(order)]:
            workers[label].write({"op": "steps", "n": steps})
            runs[label].append(workers[label].answer())
    return facts, runs


def check_zeroing(case: Case, facts: dict[str, Any]) -> None:
    """Each tree zeroes as the issue says it does; otherwise the run is wrong."""
    want = dict.fromkeys(PROCESSES, case.config in ZEROING)
    got = {label: f["zeroing"] for label, f in facts.items()}
    if got != want:
        raise ForkToolError(f"{case}: zeroing {got}, expected {want}")


def run(
    pins: Pins,
    sizes: tuple[int, ...],
    repeats: int,
    steps: int,
    check: Check,
    command: str,
) -> bool:
    """Measure every case; print the table and write build/results/<check>.json.
    Refuses first the options the workers' KV cache and request limit cannot
    hold."""
    if repeats < 1 or steps < 1 or repeats * steps > MAX_STEPS:
        raise ForkToolError(
            f"--repeats {repeats} --steps {steps}: each at least 1, together at "
            f"most {MAX_STEPS} measured steps per case"
        )
    if not all(1 <= n <= MAX_REQUESTS for n in sizes):
        raise ForkToolError(f"--sizes: each from 1 to {MAX_REQUESTS} requests")
    require_setup("bench")
    ensure_safe(LAYOUT.fork, "bench")  # results name the fork's HEAD tree
    hfcache.lay_out(LAYOUT.fixtures, LAYOUT.hf_home)
    base = worktree(LAYOUT.fork, BASE_TREE, BASE_TAG)
    trees = {"base": base, "fork": LAYOUT.fork, "base-aa": base}
    start = time.monotonic()
    workers = {label: Worker(label, trees[label], LAYOUT.venv) for label in PROCESSES}
    rows, raw = [], []
    try:
        for w in workers.values():
            w.wait_ready(READY_TIMEOUT_S)
        print(f"workers ready in {time.monotonic() - start:.0f} s", flush=True)
        for case in cases(sizes):
            facts, runs = measure(workers, case, repeats, steps)
            check_zeroing(case, facts)
            rows.append(summarise(case, runs))
            raw.append({"case": case.__dict__, "facts": facts, "runs": runs})
            print(render(rows[-1:], repeats, steps).splitlines()[-1], flush=True)
    finally:
        for w in workers.values():
            w.close()
    seconds = time.monotonic() - start
    table = render(rows, repeats, steps)
    verdicts = goals(rows)
    text = summary(verdicts)
    print(f"\n{table}\n\n{text}\n({seconds:.0f} s, {os.cpu_count()} CPUs)")
    found = Measured(
        overall(verdicts) == "PASS",
        {"cases": len(rows), "repeats": repeats, "steps": steps},
        {"table": table, "goals": text},
        {"configs": CONFIGS, "rows": rows, "raw": raw, "cpus": os.cpu_count()},
    )
    tree = fork_tree(LAYOUT.fork)
    record(check, found, seconds, pins.version, tree, command)
    print(f"wrote {LAYOUT.results / check.name}.json")
    return found.ok
