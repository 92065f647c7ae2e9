"""evidence.bench's numbers and table, from made-up worker answers (no vLLM)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from evidence import bench
from evidence.bench import Case
from evidence.checks import BENCH
from forktool.layout import REPO
from forktool.pins import Pins
from forktool.process import ForkToolError


def answers(step_us: list[list[float]], ids: int = 0) -> list[dict]:
    """One worker's `steps` answers: one list of step times per repeat."""
    return [
        {"cpu_ns": [t * 1000 for t in steps], "zero_ids": [ids] * len(steps)}
        for steps in step_us
    ]


def row(config: str, fork: list[float], aa: list[float], ids=(0, 0), n=64) -> dict:
    base = [100.0] * len(fork)
    runs = {
        "base": answers([[b] for b in base], ids[0]),
        "fork": answers([[f] for f in fork], ids[1]),
        "base-aa": answers([[a] for a in aa], ids[0]),
    }
    return bench.summarise(Case(config, "decode", n), runs)


def test_a_repeat_counts_with_its_median_step():
    runs = {
        "base": answers([[100, 900, 110], [100, 100, 120]]),
        "fork": answers([[105, 101, 1], [99, 500, 130]]),
        "base-aa": answers([[100, 100, 100], [100, 100, 100]]),
    }
    r = bench.summarise(Case("mixed", "decode", 64), runs)
    assert r["ratios"] == pytest.approx([101 / 110, 130 / 100])
    assert r["base_us"] == pytest.approx(105)  # median of 110 and 100
    assert r["fork_us"] == pytest.approx(115.5)


def test_ratios_pair_the_processes_of_one_repeat():
    # A slow second repeat for everybody: paired ratios see no overhead,
    # a ratio of the medians would.
    runs = {
        "base": answers([[100], [200], [210]]),
        "fork": answers([[100], [200], [210]]),
        "base-aa": answers([[101], [198], [210]]),
    }
    r = bench.summarise(Case("uniform", "decode", 64), runs)
    assert r["ratio"] == (1.0, 1.0, 1.0)
    assert r["aa"][1] == pytest.approx(0.99)
    assert r["aa"][2] == pytest.approx(1.01)


def test_block_ids_per_step_are_per_tree():
    r = row("mixed", [100, 100], [100, 100], ids=(0, 4))
    assert (r["ids_base"], r["ids_fork"]) == (0, 4)
    assert r["ids_total"] == {"base": 0, "fork": 8, "base-aa": 0}


def test_the_overhead_goal_is_met_over_all_mixed_cases():
    fine = [row("mixed", [101, 102, 101], [100] * 3), row("mixed", [99] * 3, [100] * 3)]
    assert [verdict for verdict, _ in bench.goals(fine)] == ["PASS", "PASS"]
    slow = [
        row("mixed", [104, 103, 105], [100] * 3),
        row("mixed", [102] * 3, [100] * 3),
    ]
    verdict, text = bench.goals(slow)[0]
    assert verdict == "FAIL"
    assert "over all 2 cases 1.030" in text and "worst case 1.040" in text


def test_no_timing_verdict_when_the_noise_is_wider_than_the_goal():
    # As seen on a fresh machine: fork/base 0.796, A/A 0.66-1.52.
    noisy = [
        row("mixed", [79.6] * 3, [66, 152, 100]),
        row("mixed", [79.6] * 3, [70, 140, 95]),
    ]
    verdict, text = bench.goals(noisy)[0]
    assert verdict == "INCONCLUSIVE"
    assert "over all 2 cases 0.796" in text
    assert "wider than the goal's margin of 0.02" in text
    # An overhead inside the noise is no failure either.
    slow = [row("mixed", [104, 103, 105], [104, 105, 106])]
    assert bench.goals(slow)[0][0] == "INCONCLUSIVE"


def test_a_narrow_noise_floor_keeps_the_verdict():
    quiet = [row("mixed", [101, 101, 101], [99, 100, 101])]
    verdict, text = bench.goals(quiet)[0]
    assert verdict == "PASS"
    assert "A/A noise floor 0.995-1.005;" in text and "wider" not in text


def test_uniform_must_send_no_ids_and_stay_within_the_noise_floor():
    def verdicts(rows):
        return [verdict for verdict, _ in bench.goals(rows)]

    assert verdicts([row("uniform", [101, 99, 100], [97, 103, 100])]) == [
        "PASS",
        "PASS",
    ]
    sends = [row("uniform", [100] * 3, [100] * 3, ids=(0, 1))]
    assert verdicts(sends) == ["FAIL", "PASS"]
    slower = [row("uniform", [108, 109, 107], [97, 103, 100])]
    assert verdicts(slower) == ["PASS", "FAIL"]
    noisy = [row("uniform", [100] * 3, [80, 120, 100])]
    assert verdicts(noisy) == ["PASS", "INCONCLUSIVE"]


def test_uniform_inside_overall_with_no_case_inside_is_no_verdict():
    # One case faster, one slower: the pooled ratio sits inside the floor,
    # neither case does.
    rows = [
        row("uniform", [95, 95, 95], [99, 101, 100]),
        row("uniform", [105.3] * 3, [99, 101, 100], n=256),
    ]
    verdict, text = bench.goals(rows)[1]
    assert verdict == "INCONCLUSIVE"
    assert "0 of 2 cases inside the floor" in text


def test_one_failed_goal_fails_the_run_and_one_inconclusive_leaves_it_open():
    assert bench.overall([("PASS", ""), ("INCONCLUSIVE", ""), ("FAIL", "")]) == "FAIL"
    assert bench.overall([("PASS", ""), ("INCONCLUSIVE", "")]) == "INCONCLUSIVE"
    assert bench.overall([("PASS", ""), ("PASS", "")]) == "PASS"


def test_the_table_shows_every_number_of_a_row():
    r = row("hybrid", [110, 90, 105], [95, 104, 100], ids=(3, 3), n=1024)
    line = bench.render([r], repeats=3, steps=1).splitlines()[-1]
    assert line.split() == [
        "hybrid",
        "decode",
        "1024",
        "100",
        "105",
        "1.050",
        "[0.900-1.100]",
        "1.000",
        "[0.950-1.040]",
        "3.0",
        "3.0",
    ]


def test_a_tree_that_zeroes_otherwise_than_expected_stops_the_run():
    case = Case("cross-group", "decode", 64)
    facts = {"base": {"zeroing": True}, "fork": {"zeroing": True}}
    bench.check_zeroing(case, {**facts, "base-aa": {"zeroing": True}})
    with pytest.raises(ForkToolError, match="zeroing"):
        bench.check_zeroing(case, {**facts, "base-aa": {"zeroing": False}})


def test_every_config_workload_and_size_is_a_case():
    all_cases = bench.cases((64, 256))
    assert len(all_cases) == len(bench.CONFIGS) * len(bench.WORKLOADS) * 2
    assert Case("uniform", "prefill", 256) in all_cases


def test_the_command_is_registered():
    run = subprocess.run(
        [sys.executable, "-m", "forktool", "bench", "--help"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0
    assert "--repeats" in run.stdout and "--quick" in run.stdout


@pytest.mark.parametrize(
    "sizes, repeats, steps",
    [((64,), 100, 10), ((64,), 0, 10), ((2048,), 5, 20), ((0,), 5, 20)],
)
def test_what_the_workers_cannot_run_is_refused_before_anything_starts(
    sizes, repeats, steps
):
    with pytest.raises(ForkToolError, match="--"):
        bench.run(
            Pins.load(), sizes, repeats, steps, BENCH, "python3 -m forktool bench"
        )
