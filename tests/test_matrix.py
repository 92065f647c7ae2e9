"""Upstream's selection, fork against base, and the matrix's judgement."""

from dataclasses import replace

import pytest

from evidence.cpu_selection import compare, is_ok, needs_base, only, report, shards
from evidence.matrix import base_problems, drop, may_fail_in, table, unjudged
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


def test_each_test_that_does_not_pass_on_the_fork_is_classified_and_sharded():
    """The base runs what fails on the fork; a pass when run again is flaky."""
    assert needs_base(ON_FORK, BASE_IDS) == ids("flaky", "old_bug", "gpu", "gpu_passes")
    base = result(flaky="passed", old_bug="failed", gpu="skipped", gpu_passes="passed")
    comparison = compare(set(ON_FORK.outcomes), BASE_IDS, ON_FORK, base)
    assert comparison["added"] == ids("added", "added_bad")
    assert comparison["lost"] == ids("removed")
    assert comparison["new"] == ids("added_bad", "flaky")
    assert comparison["pre_existing"] == ids("old_bug")
    assert comparison["skipped"] == ids("gpu_passes")
    assert not is_ok(comparison)
    assert PRE_EXISTING in report(comparison)
    on_fork = result(same="passed", old_bug="failed", gpu="skipped")
    comparison = same_tests(on_fork, result(old_bug="failed", gpu="skipped"))
    assert is_ok(comparison) and report(comparison) == [PRE_EXISTING]
    comparison = same_tests(result(old_bug="failed"), Result())
    assert comparison["new"] == ids("old_bug") and not is_ok(comparison)
    again = result(slow="passed", broken="failed")
    comparison = same_tests(result(slow="failed", broken="failed"), result(), again)
    assert comparison["flaky"] == ids("slow")
    assert comparison["new"] == ids("broken")
    said = "SUITE: flaky: failed on the fork, passed there when run again: t.py::slow"
    assert said in report(comparison)
    flaky_only = same_tests(result(slow="failed"), result(), again)
    assert is_ok(flaky_only) and not flaky_only["new"]
    # Shards deal out the tests in turn; only() splits a shared session.
    tests = ["a.py::t", "b.py::slow[1]", "b.py::slow[2]", "b.py::slow[3]", "c.py::t"]
    assert shards(tests, 2) == [
        ["a.py::t", "b.py::slow[2]", "c.py::t"],
        ["b.py::slow[1]", "b.py::slow[3]"],
    ]
    assert shards(tests[:1], 2) == [["a.py::t"]]
    assert shards([], 2) == []
    shared = Result({"core::a": "passed", "core::b": "failed", "kv::c": "failed"})
    kept = Result({"core::a": "passed", "core::b": "failed"})
    assert only(shared, ["core::a", "core::b", "core::gone"]) == kept


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


NARROW, KEEP = "fork_tests/t.py::narrow", "fork_tests/t.py::keep"
SUBJECTS = ["[Core] Keep", "[Core] Narrow"]
SELECTION = Selection(
    {}, (), ("fork_tests",), frozenset({"b.py::bug"}), (), {},
    not_on_base=("a.py",), fork_tests_from={NARROW: "[Core] Narrow"},
)  # fmt: skip


def test_what_fails_on_the_base_must_be_listed_and_fail_for_the_bug_and_columns():
    """Not for an API the base lacks; the table names each one's exception."""
    problems = base_problems(ON_BASE, frozenset(ids(*BASE_FAILURES, "passes")))
    said = "MATRIX: expected to fail on the base but did not: t.py::passes"
    assert problems[0] == said
    missing = [p.split()[1] for p in problems[1:]]
    assert missing == ids("attr", "fixture", "keyword", "name", "positional")
    assert problems[1] == (
        "MATRIX: t.py::attr fails on the base with AttributeError (AttributeError: "
        "'KVCacheConfig' object has no attribute 'zeroing'), for an API the series "
        "adds rather than for the bug: make it fail there on the bug's behaviour, "
        "through what the base has"
    )
    bug = ids("bug", "raises", "said", "operand", "own")
    outcomes = {t: o for t, o in ON_BASE.outcomes.items() if t in bug}
    on_base = replace(ON_BASE, outcomes=outcomes)
    assert base_problems(on_base, frozenset(bug)) == []
    unlisted = base_problems(on_base, frozenset(ids("bug", "raises", "said", "own")))
    assert unlisted == ["MATRIX: fails on the base but is not listed: t.py::operand"]
    lines = table({"base+tests": ON_BASE, "0001": result(bug="passed")}).splitlines()
    start = lines.index("base, where the series' tests must fail: exceptions (?: none)")
    assert lines[start + 1 : start + 11] == [
        f"  {kind:19}  t.py::{test}"
        for test, (kind, _) in sorted(BASE_FAILURES.items())
    ]
    # A column judges no fork test before the patch it guards, except on the base,
    # nor what the base cannot run.
    columns = {
        "base+tests": Result(outcomes={NARROW: "failed", "a.py::renamed": "failed"}),
        "0001": Result(outcomes={NARROW: "failed", KEEP: "passed"}),
        "0002": Result(outcomes={NARROW: "passed", KEEP: "passed"}),
    }
    may_fail = {"base+tests": ("b.py::bug", "a.py"), "0001": (NARROW,), "0002": ()}
    gone = replace(SELECTION, fork_tests_from={NARROW: "[Core] Gone"})
    for name, column in columns.items():
        drop(column, unjudged(name, SELECTION, SUBJECTS))
        assert may_fail_in(name, SELECTION, SUBJECTS) == may_fail[name]
        with pytest.raises(ForkToolError, match="fork_tests_from names no patch"):
            unjudged(name, gone, SUBJECTS)
    assert columns["base+tests"].outcomes == {NARROW: "failed"}
    assert columns["0001"].outcomes == {KEEP: "passed"}
    assert columns["0002"].outcomes == {NARROW: "passed", KEEP: "passed"}
