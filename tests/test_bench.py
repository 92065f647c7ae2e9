"""evidence.bench's numbers and table, from made-up worker answers (no vLLM)."""

import pytest
from evidence_fixture import bench_row, summarised

from evidence import bench
from forktool.commands import command, parser
from forktool.pins import Pins
from forktool.process import ForkToolError


def test_a_repeat_counts_with_its_median_step_and_ratios_pair_one_repeat():
    base, fork = [[100, 900, 110], [100, 100, 120]], [[105, 101, 1], [99, 500, 130]]
    r = summarised(base, fork, [[100, 100, 100]] * 2)
    assert r["ratios"] == pytest.approx([101 / 110, 130 / 100])
    assert r["base_us"] == pytest.approx(105)  # median of 110 and 100
    assert r["fork_us"] == pytest.approx(115.5)
    # A slow second repeat for everybody: paired ratios see no overhead,
    # a ratio of the medians would.
    times = [[100], [200], [210]]
    r = summarised(times, times, [[101], [198], [210]], "uniform")
    assert r["ratio"] == (1.0, 1.0, 1.0)
    assert r["aa"][1:] == pytest.approx((0.99, 1.01))
    r = bench_row("mixed", [100, 100], [100, 100], ids=(0, 4))  # block ids, per tree
    assert (r["ids_base"], r["ids_fork"]) == (0, 4)
    assert r["ids_total"] == {"base": 0, "fork": 8, "base-aa": 0}


QUIET = [99, 100, 101]
GOALS = {
    "mixed within the goal": (
        [("mixed", [101, 102, 101], [100] * 3), ("mixed", [99] * 3, [100] * 3)],
        ["PASS", "PASS"], []),
    "mixed over the goal": (
        [("mixed", [104, 103, 105], [100] * 3), ("mixed", [102] * 3, [100] * 3)],
        ["FAIL", "PASS"], ["over all 2 cases 1.030", "worst case 1.040"]),
    # As seen on a fresh machine: fork/base 0.796, A/A 0.66-1.52.
    "mixed, noise wider than the goal": (
        [("mixed", [79.6] * 3, [66, 152, 100]), ("mixed", [79.6] * 3, [70, 140, 95])],
        ["INCONCLUSIVE", "PASS"],
        ["over all 2 cases 0.796", "wider than the goal's margin of 0.02"]),
    "an overhead inside the noise is no failure either": (
        [("mixed", [104, 103, 105], [104, 105, 106])], ["INCONCLUSIVE", "PASS"],
        ["wider than the goal's margin"]),
    "a narrow noise floor keeps the verdict": (
        [("mixed", [101] * 3, QUIET)], ["PASS", "PASS"],
        ["A/A noise floor 0.995-1.005;"]),
    "uniform inside the floor": (
        [("uniform", [101, 99, 100], [97, 103, 100])], ["PASS", "PASS"], []),
    "uniform slower than the floor": (
        [("uniform", [108, 109, 107], [97, 103, 100])], ["PASS", "FAIL"], []),
    "uniform, noise wider than the goal": (
        [("uniform", [100] * 3, [80, 120, 100])], ["PASS", "INCONCLUSIVE"],
        ["wider than the goal's margin"]),
    # One case faster, one slower: the pooled ratio sits inside the floor,
    # neither case does.
    "uniform inside overall, no case inside": (
        [("uniform", [95] * 3, QUIET), ("uniform", [105.3] * 3, QUIET)],
        ["PASS", "INCONCLUSIVE"], ["0 of 2 cases inside the floor"]),
}  # fmt: skip


@pytest.mark.parametrize("rows, verdicts, said", GOALS.values(), ids=GOALS)
def test_the_goals_verdicts_and_their_numbers(rows, verdicts, said):
    found = bench.goals([bench_row(*r) for r in rows])
    assert [verdict for verdict, _ in found] == verdicts
    shown = "\n".join(text for _, text in found)
    assert all(s in shown for s in said)
    assert ("wider" in shown) == any("wider" in s for s in said)


def test_uniform_sends_no_ids_a_failed_goal_fails_the_run_and_the_table():
    found = bench.goals([bench_row("uniform", [100] * 3, [100] * 3, ids=(0, 1))])
    assert found[0] == ("FAIL", "uniform: block ids sent to zero, both trees: 3")
    assert [verdict for verdict, _ in found] == ["FAIL", "PASS"]
    assert bench.overall([("PASS", ""), ("INCONCLUSIVE", ""), ("FAIL", "")]) == "FAIL"
    assert bench.overall([("PASS", ""), ("INCONCLUSIVE", "")]) == "INCONCLUSIVE"
    assert bench.overall([("PASS", ""), ("PASS", "")]) == "PASS"
    # The table, the cases and a tree zeroing otherwise than expected.
    r = bench_row("hybrid", [110, 90, 105], [95, 104, 100], ids=(3, 3), n=1024)
    line = bench.render([r], repeats=3, steps=1).splitlines()[-1]
    numbers = "1.050 [0.900-1.100] 1.000 [0.950-1.040] 3.0 3.0"
    assert line.split() == f"hybrid decode 1024 100 105 {numbers}".split()
    all_cases = bench.cases((64, 256))  # every config, workload and size
    assert len(all_cases) == len(bench.CONFIGS) * len(bench.WORKLOADS) * 2
    assert bench.Case("uniform", "prefill", 256) in all_cases
    case = bench.Case("cross-group", "decode", 64)
    facts = {"base": {"zeroing": True}, "fork": {"zeroing": True}}
    bench.check_zeroing(case, {**facts, "base-aa": {"zeroing": True}})
    with pytest.raises(ForkToolError, match="zeroing"):  # stops the run
        bench.check_zeroing(case, {**facts, "base-aa": {"zeroing": False}})


@pytest.mark.parametrize("argv", [
    "--sizes 64 --repeats 100 --steps 10", "--sizes 64 --repeats 0 --steps 10",
    "--sizes 2048", "--sizes 0"])  # fmt: skip
def test_the_options_and_what_the_workers_cannot_run_refused_before_it_starts(argv):
    args = parser(None, ["bench", *argv.split()]).parse_args(["bench", *argv.split()])
    with pytest.raises(ForkToolError, match="--"):
        command("bench").run(Pins.load(), args)


def test_quick_is_an_option_with_the_defaults_of_the_others():
    argv = ["bench", "--quick", "--repeats", "2"]
    args = parser(None, argv).parse_args(argv)
    assert args.quick and args.repeats == 2 and args.sizes == list(bench.SIZES)
