"""Upstream's selection on the fork against the base, on made-up outcomes."""

from __future__ import annotations

from dataclasses import replace

import pytest

from evidence import matrix
from evidence.cpu_selection import compare, needs_base, only, shards
from evidence.matrix import base_problems, drop_not_on_base, may_fail_in, table
from forktool.process import ForkToolError
from forktool.pytest_runner import Result
from forktool.selection import Selection


def result(**outcomes: str) -> Result:
    return Result(outcomes={f"t.py::{k}": o for k, o in outcomes.items()})


def ids(*names: str) -> list[str]:
    return sorted(f"t.py::{n}" for n in names)


def same_tests(on_fork: Result, on_base: Result, again: Result | None = None):
    """compare() where the fork and the base have the tests the fork ran."""
    tests = set(on_fork.outcomes)
    return compare(tests, tests, on_fork, on_base, again)


PRE_EXISTING = "SUITE: fails on the fork and on the base (pre-existing): t.py::old_bug"
ON_FORK = result(same="passed", flaky="failed", old_bug="error", gpu="skipped",
                 gpu_passes="skipped", added="passed", added_bad="failed")  # fmt: skip
BASE_IDS = set(ids("same", "flaky", "old_bug", "gpu", "gpu_passes", "removed"))


def test_each_test_that_does_not_pass_on_the_fork_is_classified():
    """The base runs only what does not pass on the fork and it has too."""
    assert needs_base(ON_FORK, BASE_IDS) == ids("flaky", "old_bug", "gpu", "gpu_passes")
    on_base = result(
        flaky="passed", old_bug="failed", gpu="skipped", gpu_passes="passed"
    )
    comparison = compare(set(ON_FORK.outcomes), BASE_IDS, ON_FORK, on_base)
    assert comparison.added == ids("added", "added_bad")
    assert comparison.lost == ids("removed")
    assert comparison.new == ids("added_bad", "flaky")
    assert comparison.pre_existing == ids("old_bug")
    assert comparison.skipped == ids("gpu_passes")
    assert not comparison.ok
    assert PRE_EXISTING in comparison.report()


def test_failures_the_base_shares_pass_and_one_it_did_not_report_is_new():
    on_fork = result(same="passed", old_bug="failed", gpu="skipped")
    comparison = same_tests(on_fork, result(old_bug="failed", gpu="skipped"))
    assert comparison.ok and comparison.report() == [PRE_EXISTING]
    comparison = same_tests(result(old_bug="failed"), Result())
    assert comparison.new == ids("old_bug") and not comparison.ok


def test_a_failure_that_passes_when_run_again_on_the_fork_is_flaky_not_new():
    """Under load a test hit its own subprocess timeout on the fork, then
    passed on the base: judged only by a second run on the fork."""
    again = result(slow="passed", broken="failed")
    comparison = same_tests(result(slow="failed", broken="failed"), result(), again)
    assert comparison.flaky == ids("slow")
    assert comparison.new == ids("broken")
    said = "SUITE: flaky: failed on the fork, passed there when run again: t.py::slow"
    assert said in comparison.report()
    flaky_only = same_tests(result(slow="failed"), result(), again)
    assert flaky_only.ok and not flaky_only.new


def test_shards_deal_out_the_tests_in_turn_keeping_their_order():
    tests = ["a.py::t", "b.py::slow[1]", "b.py::slow[2]", "b.py::slow[3]", "c.py::t"]
    assert shards(tests, 2) == [
        ["a.py::t", "b.py::slow[2]", "c.py::t"],
        ["b.py::slow[1]", "b.py::slow[3]"],
    ]
    assert shards(tests[:1], 2) == [["a.py::t"]]
    assert shards([], 2) == []


def test_only_keeps_one_runs_outcomes_of_a_shared_session():
    shared = Result(
        outcomes={"core::a": "passed", "core::b": "failed", "kv::c": "failed"},
        reasons={"core::b": "boom", "kv::c": "bang"}, seconds=9.0, cached=True,
        exception_types={"core::b": "AssertionError", "kv::c": "TypeError"},
        tails={"core::b": "tail b", "kv::c": "tail c"},
    )  # fmt: skip
    assert only(shared, ["core::a", "core::b", "core::gone"]) == Result(
        outcomes={"core::a": "passed", "core::b": "failed"}, cached=True,
        reasons={"core::b": "boom"}, exception_types={"core::b": "AssertionError"},
        tails={"core::b": "tail b"},
    )  # fmt: skip


# Failures on the base as the report plugin gives them: the exception's type
# and its message (Result.exception_types, Result.reasons).
BASE_FAILURES = {
    "bug": ("AssertionError", "assert [] == [3]\n  +  where [] = take_new_block_ids()"),
    "raises": ("Failed", "Failed: DID NOT RAISE <class 'ValueError'>"),
    "said": ("AssertionError", "AssertionError: no freed block was reused"),
    "operand": ("TypeError", "TypeError: unsupported operand type(s) for +"),
    "attr": ("AttributeError",
             "AttributeError: 'KVCacheConfig' object has no attribute 'zeroing'"),
    "keyword": ("TypeError", "TypeError: KVCacheConfig.__init__() got an unexpected "
                "keyword argument 'resolved'"),
    "positional": ("TypeError",
                   "TypeError: f() missing 1 required positional argument: 'x'"),
    "fixture": ("ModuleNotFoundError", "ModuleNotFoundError: No module named 'v'"),
    "name": ("NameError", "NameError: name 'resolve' is not defined"),
    "own": ("ZeroingError", "vllm.v1.errors.ZeroingError: stages disagree"),
}  # fmt: skip
ON_BASE = Result(
    outcomes={"t.py::passes": "passed"}
    | {f"t.py::{t}": "error" if t == "fixture" else "failed" for t in BASE_FAILURES},
    reasons={f"t.py::{t}": message for t, (_, message) in BASE_FAILURES.items()},
    exception_types={f"t.py::{t}": kind for t, (kind, _) in BASE_FAILURES.items()},
)


def test_a_listed_test_failing_on_the_base_for_a_missing_api_is_a_problem():
    problems = base_problems(ON_BASE, frozenset(ids(*BASE_FAILURES, "passes")))
    assert (
        problems[0] == "MATRIX: expected to fail on the base but did not: t.py::passes"
    )
    missing = [p.split()[1] for p in problems[1:]]
    assert missing == ids("attr", "fixture", "keyword", "name", "positional")
    assert problems[1] == (
        "MATRIX: t.py::attr fails on the base with AttributeError (AttributeError: "
        "'KVCacheConfig' object has no attribute 'zeroing'), for an API the series "
        "adds rather than for the bug: make it fail there on the bug's behaviour, "
        "through what the base has"
    )


def test_failures_for_the_bug_on_the_base_are_no_problem():
    bug = ids("bug", "raises", "said", "operand", "own")
    outcomes = {t: o for t, o in ON_BASE.outcomes.items() if t in bug}
    on_base = replace(ON_BASE, outcomes=outcomes)
    assert base_problems(on_base, frozenset(bug)) == []
    unlisted = base_problems(on_base, frozenset(ids("bug", "raises", "said", "own")))
    assert unlisted == ["MATRIX: fails on the base but is not listed: t.py::operand"]


def test_the_table_names_the_exception_of_each_failure_on_the_base():
    lines = table({"base+tests": ON_BASE, "0001": result(bug="passed")}).splitlines()
    start = lines.index("base: the exception of each failure (?: none named)")
    assert lines[start + 1 : start + 11] == [
        "  AttributeError       t.py::attr",
        "  AssertionError       t.py::bug",
        "  ModuleNotFoundError  t.py::fixture",
        "  TypeError            t.py::keyword",
        "  NameError            t.py::name",
        "  TypeError            t.py::operand",
        "  ZeroingError         t.py::own",
        "  TypeError            t.py::positional",
        "  Failed               t.py::raises",
        "  AssertionError       t.py::said",
    ]


NARROW, KEEP = "fork_tests/t.py::narrow", "fork_tests/t.py::keep"
SUBJECTS = ["[Core] Keep", "[Core] Narrow"]


def test_a_check_is_not_judged_at_the_patches_before_the_one_it_guards():
    drop = matrix.drop_fork_tests_before_their_patch
    columns = {
        "base+tests": Result(outcomes={NARROW: "failed"}),
        "0001": Result(outcomes={NARROW: "failed", KEEP: "passed"}),
        "0002": Result(outcomes={NARROW: "passed", KEEP: "passed"}),
    }
    drop(columns, {NARROW: "[Core] Narrow"}, SUBJECTS)
    assert columns["base+tests"].outcomes == {NARROW: "failed"}
    assert columns["0001"].outcomes == {KEEP: "passed"}
    assert columns["0002"].outcomes == {NARROW: "passed", KEEP: "passed"}
    with pytest.raises(ForkToolError, match="names no patch"):
        drop(columns, {NARROW: "[Core] Gone"}, SUBJECTS)


def test_tests_that_cannot_run_on_the_base_are_not_judged_there():
    base = Result(outcomes={"a.py::renamed": "failed", "b.py::bug": "failed"})
    drop_not_on_base(base, ("a.py",))
    assert base.outcomes == {"b.py::bug": "failed"}


@pytest.mark.parametrize("column, may_fail", [
    ("base+tests", ("b.py::bug", "a.py")), ("0001", (NARROW,)), ("0002", ())
])  # fmt: skip
def test_the_failures_a_column_expects_are_the_bugs_and_later_patches_checks(
    column, may_fail
):
    """What the runner may keep failing: on the base, the listed failures and
    what cannot run there; at a patch, the fork tests of the patches after it."""
    selection = Selection(
        {}, (), ("fork_tests",), frozenset({"b.py::bug"}), (), {},
        not_on_base=("a.py",), fork_tests_from={NARROW: "[Core] Narrow"},
    )  # fmt: skip
    assert may_fail_in(column, selection, SUBJECTS) == may_fail
