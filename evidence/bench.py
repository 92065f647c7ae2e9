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
from typing import Any, NamedTuple

from evidence.tree_process import TreeProcess
from evidence.worktrees import worktree
from forktool import hfcache
from forktool.checks import Measured
from forktool.layout import LAYOUT
from forktool.process import BASE_TAG, ForkToolError
from forktool.pytest_runner import test_env
from forktool.venv import python

# mixed: FP8 KV, one BF16 layer (one group); cross-group: FP8 KV, BF16
# sliding-window layers (1 in 2); uniform: FP8 KV, all layers; hybrid: Mamba2 +
# BF16 attention (1 in 4); all PP=2.
CONFIGS = ("mixed", "cross-group", "uniform", "hybrid")
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
READY_TIMEOUT_S, ANSWER_TIMEOUT_S = 300.0, 600.0
PASS = {True: "PASS", False: "FAIL"}
INCONCLUSIVE = "INCONCLUSIVE"


class Case(NamedTuple):
    config: str
    workload: str
    requests: int


def cases(sizes: tuple[int, ...]) -> list[Case]:
    return [Case(c, w, n) for c in CONFIGS for w in WORKLOADS for n in sizes]


# --- numbers ------------------------------------------------------------------


def summarise(case: Case, runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """One table row from each process's repeats (the worker's `steps` answers);
    "ratio" and "aa" are (median, min, max) of the repeats' ratios."""
    medians = {
        p: [statistics.median(r["cpu_ns"]) / 1000 for r in reps]
        for p, reps in runs.items()
    }
    ids = {p: [i for r in reps for i in r["zero_ids"]] for p, reps in runs.items()}
    ratio, aa = (
        [x / b for x, b in zip(medians[p], medians["base"], strict=True)]
        for p in ("fork", "base-aa")
    )
    return {
        **case._asdict(),
        "base_us": statistics.median(medians["base"]),
        "fork_us": statistics.median(medians["fork"]),
        "ratio": (statistics.median(ratio), min(ratio), max(ratio)),
        "aa": (statistics.median(aa), min(aa), max(aa)),
        "ratios": ratio,
        "aa_ratios": aa,
        "ids_base": statistics.mean(ids["base"]),
        "ids_fork": statistics.mean(ids["fork"]),
        "ids_total": {p: sum(v) for p, v in ids.items()},
    }


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
    out, by = [], {c: [r for r in rows if r["config"] == c] for c in CONFIGS}
    mixed, uniform = by["mixed"], by["uniform"]
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
    for config, some in (("mixed", mixed), ("uniform", uniform)):
        if some:
            sent = sum(r["ids_total"]["base"] + r["ids_total"]["fork"] for r in some)
            text = f"{config}: block ids sent to zero, both trees: {sent}"
            out.append((PASS[sent == 0], text))
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
    lines = [
        f"CPU time per schedule() + update_from_output() step: median of "
        f"{repeats} repeats, each the median of {steps} steps",
        "config   workload  reqs  base µs  fork µs "
        " fork/base [min-max]        A/A [min-max] ids/step b ids/step f",
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

    def answer(self) -> dict[str, Any]:
        answer = self.read(ANSWER_TIMEOUT_S)
        if error := answer.get("error"):
            raise ForkToolError(f"{self.label} worker ({self.tree}) failed: {error}")
        return answer


def measure_case(
    workers: dict[str, Worker], case: Case, repeats: int, steps: int
) -> tuple[dict[str, Any], dict[str, list[dict[str, Any]]]]:
    """Set the case up in every process (in parallel: untimed), then take turns."""
    for w in workers.values():
        w.write({"op": "setup", **case._asdict()})
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
    if (got := {label: f["zeroing"] for label, f in facts.items()}) != want:
        raise ForkToolError(f"{case}: zeroing {got}, expected {want}")


def measure(sizes: tuple[int, ...], repeats: int, steps: int) -> Measured:
    """Every case, the fork's and the base's workers taking turns; print the
    table."""
    hfcache.lay_out(LAYOUT.fixtures, LAYOUT.hf_home)
    base = worktree(LAYOUT.fork, LAYOUT.trees / "bench-base", BASE_TAG)
    trees = {"base": base, "fork": LAYOUT.fork, "base-aa": base}
    env = {**test_env(LAYOUT.hf_home), "VLLM_LOGGING_LEVEL": "ERROR"}
    command = [python(LAYOUT.venv), str(LAYOUT.fork_tests / "bench_scheduler.py")]
    start = time.monotonic()
    workers = {p: Worker(f"bench-{p}", trees[p], command, env) for p in PROCESSES}
    rows, raw = [], []
    try:
        for w in workers.values():
            w.wait_ready(READY_TIMEOUT_S)
        print(f"workers ready in {time.monotonic() - start:.0f} s", flush=True)
        for case in cases(sizes):
            facts, runs = measure_case(workers, case, repeats, steps)
            check_zeroing(case, facts)
            rows.append(summarise(case, runs))
            raw.append({"case": case._asdict(), "facts": facts, "runs": runs})
            print(render(rows[-1:], repeats, steps).splitlines()[-1], flush=True)
    finally:
        for w in workers.values():
            w.close()
    table, verdicts = render(rows, repeats, steps), goals(rows)
    text, cpus = summary(verdicts), os.cpu_count()
    print(f"\n{table}\n\n{text}\n({time.monotonic() - start:.0f} s, {cpus} CPUs)")
    counts = {"cases": len(rows), "repeats": repeats, "steps": steps}
    data = {"rows": rows, "raw": raw, "cpus": cpus}
    ok = overall(verdicts) == "PASS"
    return Measured(ok, counts, {"table": table, "goals": text}, data)
