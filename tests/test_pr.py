"""`forktool pr` against a synthetic fork and results set: no vLLM, no network."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pr_fixture import (
    NEUTRAL,
    SIGNER,
    bench_result,
    commit,
    make_kit,
    mini_fork,
    stored,
    synthetic_results,
)

from evidence.pr import make as pr
from forktool import results
from forktool.check_runs import all_checks
from forktool.errors import ForkToolError
from forktool.git import git
from forktool.results import CheckResult


@pytest.fixture
def fork(tmp_path) -> Path:
    return mini_fork(tmp_path / "fork")


def test_renders_the_kit_from_a_results_set(fork, tmp_path):
    store, out = tmp_path / "results", tmp_path / "kit"
    synthetic_results(store, results.fork_tree(fork))
    (fork / "REVIEW.md").write_text(
        "# Review\n\n## Runners assessed\n\nMRV2 read, not run.\n\n## Next\n\nx\n"
    )
    make_kit(fork, store, out)

    text = (out / "description.md").read_text()
    evidence = (out / "evidence.md").read_text()
    assert len(text.splitlines()) <= 120
    assert "### Runners assessed\n\nMRV2 read, not run.\n" in evidence
    for section in ("## Overview", "## Claims", "## Validation", "## Details"):
        assert text.count(section) == 1
    assert "<!-- Evidence. -->" not in text
    # The same tests counted on both sides.
    assert (
        "| The series' regression tests (3 on both sides) | 1 passed, 2 failed "
        "| 3 passed |" in text
    )
    assert "0001: 3 passed; 0002: 3 passed" in text
    assert "fork_tests/" not in text and "Differential planner fuzz" not in text
    # The fork's own checks, the tracebacks and the CI report go beside it.
    assert "copies of the decision (`fork_tests/`) | 1 failed | 1 passed |" in evidence
    assert "0001: 1 passed; 0002: 1 passed" in evidence
    assert "python3 -m forktool mutate" in evidence
    assert (
        "| 1207 collected; not run, as every test passes on the fork "
        "| 1203 passed, 7 skipped (3 added by the series, 0 lost) |" in text
    )
    assert "FAILED t::a - assert False is True" in text  # the base's failure
    assert "    E   assert False is True" in evidence  # and its traceback
    assert "3 passed (3 s)" in evidence  # and the series' pass
    assert "| --- | --- |\n| 1 | 2 |" in evidence  # the CI report, delimiters spaced
    assert "not run: no 2 GPUs here" in text and "Need 2 GPUs" in evidence
    assert "-k test_pp_mixed" in text and "python3 -m forktool e2e" in evidence
    assert "forktool" not in text.partition("## Details")[0].partition("| Check")[2]
    assert "Benchmark: not measured" in evidence
    assert "`__dict__` lookup) | 1 passed, 1 failed | 2 passed |" in evidence
    assert "replace  ok  ok" in evidence  # the override table, as measured
    assert "Sign-off still to do" in text
    assert "- [x] AI assistance was used" in text
    assert "- [ ] I ran the checklist skill." in text
    assert "#49623" in text and "1. [Core] Keep zeroing" in text

    patches = sorted(p.name for p in (out / "series").iterdir())
    assert patches == [
        "0000-cover-letter.patch",
        "0001-Core-Keep-zeroing.patch",
        "0002-Test-Pin-it.patch",
    ]
    cover = (out / "series" / "0000-cover-letter.patch").read_text()
    assert "[PATCH 0/2] [Bugfix][Core] Keep KV cache zeroing" in cover
    assert "1203 passed" in cover and "<details>" not in cover
    assert os.access(out / "apply-to-vllm.sh", os.X_OK)
    assert (out / "preimages.pack").stat().st_size > 0


def test_refuses_missing_results_and_writes_nothing(fork, tmp_path):
    store, out = tmp_path / "results", tmp_path / "kit"
    synthetic_results(store, results.fork_tree(fork))
    (store / "pre-commit.json").unlink()
    with pytest.raises(ForkToolError) as e:
        make_kit(fork, store, out)
    assert "pre-commit: no result; run `python3 -m forktool test`" in str(e.value)
    assert not out.exists()

    make_kit(fork, store, out, partial=True)
    text = (out / "evidence.md").read_text()
    assert "### Pre-commit\n\nnot measured." in text


def test_refuses_stale_results_and_writes_nothing(fork, tmp_path):
    store, out = tmp_path / "results", tmp_path / "kit"
    synthetic_results(store, results.fork_tree(fork))
    commit(fork, {"pkg/other.py": "X = 2\n"}, "[Core] More")
    with pytest.raises(ForkToolError) as e:
        make_kit(fork, store, out)
    message = str(e.value)
    assert "regression-matrix: stale" in message
    assert "run `python3 -m forktool setup`" in message
    assert "gpu-only: stale" in message
    assert not out.exists()


def test_no_fork_names_what_to_run(tmp_path):
    with pytest.raises(ForkToolError, match="forktool setup.*forktool test"):
        make_kit(tmp_path / "none", tmp_path / "results", tmp_path / "kit")
    assert not (tmp_path / "kit").exists()


def test_signoff_resigns_the_kit_only(fork, tmp_path):
    store, out = tmp_path / "results", tmp_path / "kit"
    synthetic_results(store, results.fork_tree(fork))
    with pytest.raises(ForkToolError, match="Name <email>"):
        make_kit(fork, store, out, signer="jane@example.com")
    assert not out.exists()
    head = git(fork, "rev-parse", "HEAD").stdout
    make_kit(fork, store, out, signer=SIGNER)

    assert git(fork, "rev-parse", "HEAD").stdout == head
    assert "Sign-off still to do" not in (out / "description.md").read_text()
    cover = (out / "series" / "0000-cover-letter.patch").read_text()
    assert f"From: {SIGNER}" in cover
    for patch in sorted((out / "series").glob("000[12]-*.patch")):
        text = patch.read_text()
        assert f"From: {SIGNER}" in text
        assert text.count(f"Signed-off-by: {SIGNER}") == 1
        assert "Co-authored-by: Claude" in text
        assert NEUTRAL not in text


def test_a_failed_check_is_said_so(fork, tmp_path):
    store, out = tmp_path / "results", tmp_path / "kit"
    synthetic_results(store, results.fork_tree(fork))
    failed = stored(store, "ci-checkers")
    failed.ok, failed.counts = False, {"passed": 1, "failed": 1}
    results.write(store, failed)
    make_kit(fork, store, out)
    text = (out / "description.md").read_text()
    assert "**Checks that failed on this tree: ci-checkers.**" in text
    assert "| — | 1 passed, 1 failed |" in text


def test_renders_a_bench_result_when_there_is_one(fork, tmp_path):
    store, out = tmp_path / "results", tmp_path / "kit"
    tree = results.fork_tree(fork)
    synthetic_results(store, tree)
    results.write(store, bench_result(tree, [100, 100.5, 99.5]))
    make_kit(fork, store, out)
    text = (out / "evidence.md").read_text()
    assert "(goals met)" in text
    assert "PASS          mixed: fork/base over all 1 cases 1.004" in text
    assert "mixed   1.004" in text  # the table, collapsed
    assert "Benchmark: not measured" not in text


def test_renders_only_checks_of_the_registry(fork, tmp_path, monkeypatch):
    """Every result the description reads is looked up as a check of the
    registry that the PR renders; any other lookup fails."""
    store, out = tmp_path / "results", tmp_path / "kit"
    synthetic_results(store, results.fork_tree(fork))
    asked = []

    class Watched(dict):
        def __getitem__(self, check):
            asked.append(check)
            if check not in all_checks() or not check.in_pr:
                raise AssertionError(f"pr renders {check!r}, not in the registry")
            return super().__getitem__(check)

    load = pr.load_results
    monkeypatch.setattr(pr, "load_results", lambda *a: Watched(load(*a)))
    make_kit(fork, store, out)
    rows = {check.name for check in all_checks() if check.pr_row}  # all rendered
    assert {check.name for check in asked} | rows == {*pr.required(), "bench"}


def test_a_bench_result_the_noise_cannot_support_is_inconclusive(fork, tmp_path):
    store, out = tmp_path / "results", tmp_path / "kit"
    tree = results.fork_tree(fork)
    synthetic_results(store, tree)
    results.write(store, bench_result(tree, [66, 152, 100]))  # once said PASS
    make_kit(fork, store, out)
    text = (out / "evidence.md").read_text()
    assert "(inconclusive: the A/A noise is wider than a goal's margin" in text
    assert "INCONCLUSIVE  mixed: fork/base over all 1 cases 1.004" in text
    assert "goals met" not in text


def test_renders_the_mutants_counts_and_each_mutant(fork, tmp_path):
    store, out = tmp_path / "results", tmp_path / "kit"
    synthetic_results(store, results.fork_tree(fork))
    make_kit(fork, store, out)
    text = (out / "evidence.md").read_text()
    assert "Mutation testing of the lines and hunks the series adds: each line" in text
    assert (
        "3 mutants, 1 killed by the series' regression tests, 1 only by the "
        "fork tests, 0 survived, 1 equivalent" in text
    )
    assert (
        "`pkg/core.py:1` is killed only by the fork tests: only a GPU zeroes." in text
    )
    assert "<summary>Each mutant</summary>" in text
    assert (
        "| `pkg/core.py:1` | True -> False | killed (series) | "
        "tests/test_core.py::test_zero[a\\|b] |" in text
    )
    assert (
        "| `pkg/core.py:1` | assignment deleted | killed (fork tests only) | "
        "fork_tests/c.py::d |" in text
    )
    assert "| `pkg/core.py:2` | 1 -> 2 | equivalent | no test asks about 2 |" in text


def test_mutants_that_could_not_run_say_why(fork, tmp_path):
    store, out = tmp_path / "results", tmp_path / "kit"
    tree = results.fork_tree(fork)
    synthetic_results(store, tree)
    failed = CheckResult(
        "mutants",
        False,
        tree,
        "0.1",
        "python3 -m forktool test",
        excerpts={"error": "the regression selection does not pass"},
    )
    results.write(store, failed)
    make_kit(fork, store, out)
    text = (out / "evidence.md").read_text()
    assert "did not run: the regression selection does not pass" in text
    assert "**Checks that failed on this tree: mutants.**" in text


def test_mutants_recorded_without_their_kind_are_not_counted(fork, tmp_path):
    store, out = tmp_path / "results", tmp_path / "kit"
    tree = results.fork_tree(fork)
    synthetic_results(store, tree)
    old = stored(store, "mutants")
    for row in old.data["mutants"]:
        del row["kind"]
    results.write(store, old)
    make_kit(fork, store, out)
    text = (out / "evidence.md").read_text()
    assert "recorded without who killed each mutant; run `" in text
    assert "<summary>Each mutant</summary>" not in text


def test_a_flaky_failure_on_the_fork_is_named_in_its_row(fork, tmp_path):
    store, out = tmp_path / "results", tmp_path / "kit"
    synthetic_results(store, results.fork_tree(fork))
    suite = stored(store, "upstream-selection")
    run = suite.data["runs"]["v1-core"]
    run["fork"]["counts"] = {"passed": 1202, "failed": 1, "skipped": 7}
    run["flaky"] = ["tests/v1/core/test_a.py::test_slow_subprocess"]
    results.write(store, suite)
    make_kit(fork, store, out)
    text = (out / "description.md").read_text()
    assert (
        "1202 passed, 1 failed, 7 skipped (3 added by the series, 0 lost; failed, "
        "then passed when run again: `test_slow_subprocess`) |" in text
    )
