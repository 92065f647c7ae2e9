"""Upstream's selection on the fork against the base, on made-up outcomes."""

from __future__ import annotations

from dataclasses import replace

import pytest

from evidence.matrix import (
    base_problems,
    drop_fork_tests_before_their_patch,
    drop_not_on_base,
    may_fail_in,
    table,
)
from evidence.suite import compare, needs_base, only, shards
from forktool.errors import ForkToolError
from forktool.pytest_runner import Result
from forktool.selection import Selection


def result(**outcomes: str) -> Result:
    return Result(outcomes={f"t.py::{k}": o for k, o in outcomes.items()})


def ids(*names: str) -> set[str]:
    return {f"t.py::{n}" for n in names}


BASE_IDS = ids("same", "flaky", "old_bug", "gpu", "gpu_passes", "removed")
FORK_IDS = ids("same", "flaky", "old_bug", "gpu", "gpu_passes", "added", "added_bad")
ON_FORK = result(
    same="passed",
    flaky="failed",
    old_bug="error",
    gpu="skipped",
    gpu_passes="skipped",
    added="passed",
    added_bad="failed",
)


def test_the_base_runs_only_what_does_not_pass_on_the_fork_and_it_has():
    assert needs_base(ON_FORK, BASE_IDS) == sorted(
        ids("flaky", "old_bug", "gpu", "gpu_passes")
    )


def test_each_test_that_does_not_pass_on_the_fork_is_classified():
    on_base = result(
        flaky="passed", old_bug="failed", gpu="skipped", gpu_passes="passed"
    )
    comparison = compare(FORK_IDS, BASE_IDS, ON_FORK, on_base)
    assert comparison.added == sorted(ids("added", "added_bad"))
    assert comparison.lost == sorted(ids("removed"))
    assert comparison.new == sorted(ids("added_bad", "flaky"))
    assert comparison.pre_existing == sorted(ids("old_bug"))
    assert comparison.skipped == sorted(ids("gpu_passes"))
    assert not comparison.ok
    assert "SUITE: fails on the fork and on the base (pre-existing): t.py::old_bug" in (
        comparison.report()
    )


def test_failures_the_base_shares_are_printed_but_pass():
    on_fork = result(same="passed", old_bug="failed", gpu="skipped")
    on_base = result(old_bug="failed", gpu="skipped")
    comparison = compare(
        ids("same", "old_bug", "gpu"), ids("same", "old_bug", "gpu"), on_fork, on_base
    )
    assert comparison.ok
    assert comparison.report() == [
        "SUITE: fails on the fork and on the base (pre-existing): t.py::old_bug"
    ]


def test_a_failure_the_base_did_not_report_is_new():
    on_fork = result(old_bug="failed")
    comparison = compare(ids("old_bug"), ids("old_bug"), on_fork, Result())
    assert comparison.new == sorted(ids("old_bug"))
    assert not comparison.ok


def test_a_failure_that_passes_when_run_again_on_the_fork_is_flaky_not_new():
    """Under load a test hit its own subprocess timeout on the fork, then
    passed on the base: judged only by a second run on the fork."""
    on_fork = result(slow="failed", broken="failed")
    again = result(slow="passed", broken="failed")
    comparison = compare(
        ids("slow", "broken"), ids("slow", "broken"), on_fork, result(), again
    )
    assert comparison.flaky == sorted(ids("slow"))
    assert comparison.new == sorted(ids("broken"))
    assert (
        "SUITE: flaky: failed on the fork, passed there when run again: t.py::slow"
        in comparison.report()
    )
    flaky_only = compare(
        ids("slow"), ids("slow"), result(slow="failed"), result(), again
    )
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
        reasons={"core::b": "boom", "kv::c": "bang"},
        exception_types={"core::b": "AssertionError", "kv::c": "TypeError"},
        tails={"core::b": "tail b", "kv::c": "tail c"},
        seconds=9.0,
        cached=True,
    )
    core = only(shared, ["core::a", "core::b", "core::gone"])
    assert core == Result(
        outcomes={"core::a": "passed", "core::b": "failed"},
        reasons={"core::b": "boom"},
        exception_types={"core::b": "AssertionError"},
        tails={"core::b": "tail b"},
        cached=True,
    )


# Failures on the base as the report plugin gives them: the exception's type
# and its message (Result.exception_types, Result.reasons).
BASE_FAILURES = {
    "bug": ("AssertionError", "assert [] == [3]\n  +  where [] = take_new_block_ids()"),
    "raises": ("Failed", "Failed: DID NOT RAISE <class 'ValueError'>"),
    "said": ("AssertionError", "AssertionError: no freed block was reused"),
    "operand": ("TypeError", "TypeError: unsupported operand type(s) for +"),
    "attr": (
        "AttributeError",
        "AttributeError: 'KVCacheConfig' object has no attribute 'zeroing'",
    ),
    "keyword": (
        "TypeError",
        "TypeError: KVCacheConfig.__init__() got an unexpected keyword "
        "argument 'resolved'",
    ),
    "positional": (
        "TypeError",
        "TypeError: f() missing 1 required positional argument: 'x'",
    ),
    "fixture": ("ModuleNotFoundError", "ModuleNotFoundError: No module named 'v'"),
    "name": ("NameError", "NameError: name 'resolve' is not defined"),
    "own": ("ZeroingError", "vllm.v1.errors.ZeroingError: stages disagree"),
}
ON_BASE = Result(
    outcomes={"t.py::passes": "passed"}
    | {f"t.py::{t}": "error" if t == "fixture" else "failed" for t in BASE_FAILURES},
    reasons={f"t.py::{t}": message for t, (_, message) in BASE_FAILURES.items()},
    exception_types={f"t.py::{t}": kind for t, (kind, _) in BASE_FAILURES.items()},
)


def test_a_listed_test_failing_on_the_base_for_a_missing_api_is_a_problem():
    listed = frozenset(ids(*BASE_FAILURES, "passes"))
    problems = base_problems(ON_BASE, listed)
    print("\n".join(problems))
    assert problems[0] == (
        "MATRIX: expected to fail on the base but did not: t.py::passes"
    )
    missing = [p.split()[1] for p in problems[1:]]
    assert missing == [
        f"t.py::{t}" for t in ("attr", "fixture", "keyword", "name", "positional")
    ]
    assert problems[1] == (
        "MATRIX: t.py::attr fails on the base with AttributeError (AttributeError: "
        "'KVCacheConfig' object has no attribute 'zeroing'), for an API the series "
        "adds rather than for the bug: make it fail there on the bug's behaviour, "
        "through what the base has"
    )


def test_failures_for_the_bug_on_the_base_are_no_problem():
    bug = ids("bug", "raises", "said", "operand", "own")
    only = replace(
        ON_BASE, outcomes={t: o for t, o in ON_BASE.outcomes.items() if t in bug}
    )
    assert base_problems(only, frozenset(bug)) == []
    unlisted = base_problems(only, frozenset(ids("bug", "raises", "said", "own")))
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


def test_a_check_is_not_judged_at_the_patches_before_the_one_it_guards():
    narrow, keep = "fork_tests/t.py::narrow", "fork_tests/t.py::keep"
    columns = {
        "base+tests": Result(outcomes={narrow: "failed"}),
        "0001": Result(outcomes={narrow: "failed", keep: "passed"}),
        "0002": Result(outcomes={narrow: "passed", keep: "passed"}),
    }
    subjects = ["[Core] Keep", "[Core] Narrow"]
    drop_fork_tests_before_their_patch(columns, {narrow: "[Core] Narrow"}, subjects)
    assert columns["base+tests"].outcomes == {narrow: "failed"}
    assert columns["0001"].outcomes == {keep: "passed"}
    assert columns["0002"].outcomes == {narrow: "passed", keep: "passed"}
    with pytest.raises(ForkToolError, match="names no patch"):
        drop_fork_tests_before_their_patch(columns, {narrow: "[Core] Gone"}, subjects)


def test_tests_that_cannot_run_on_the_base_are_not_judged_there():
    base = Result(outcomes={"a.py::renamed": "failed", "b.py::bug": "failed"})
    drop_not_on_base(base, ("a.py",))
    assert base.outcomes == {"b.py::bug": "failed"}


def test_the_failures_a_column_expects_are_the_bugs_and_later_patches_checks():
    """What the runner may keep failing: on the base, the listed failures and
    what cannot run there; at a patch, the fork tests of the patches after it."""
    narrow = "fork_tests/t.py::narrow"
    selection = Selection(
        {},
        (),
        ("fork_tests",),
        frozenset({"b.py::bug"}),
        (),
        {},
        not_on_base=("a.py",),
        fork_tests_from={narrow: "[Core] Narrow"},
    )
    subjects = ["[Core] Keep", "[Core] Narrow"]
    assert may_fail_in("base+tests", selection, subjects) == ("b.py::bug", "a.py")
    assert may_fail_in("0001", selection, subjects) == (narrow,)
    assert may_fail_in("0002", selection, subjects) == ()
