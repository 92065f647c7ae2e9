"""`forktool pr` on a synthetic fork and results: the kit, refusals, budget."""

import functools
import os
import re
import shutil
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import evidence_fixture as ef
import pytest
from evidence_fixture import SIGNER, bench_result, stored

from evidence.matrix import EVIDENCE_FAILURES, failure_evidence
from evidence.pr import description
from evidence.pr import make as pr
from evidence.vllm_tests import Runner
from forktool import checks
from forktool.process import ForkToolError, git
from forktool.pytest_runner import Result


@pytest.fixture
def kit(tmp_path) -> SimpleNamespace:
    """A small fork with every required result; `make` renders its kit."""
    store, out = tmp_path / "results", tmp_path / "kit"
    fork = ef.mini_fork(tmp_path / "fork")
    ef.synthetic_results(store, tree := checks.fork_tree(fork))
    make = functools.partial(ef.make_kit, fork, store, out)
    read = lambda name: (out / f"{name}.md").read_text()  # noqa: E731
    return SimpleNamespace(
        fork=fork, store=store, out=out, tree=tree, make=make, read=read
    )


DESCRIPTION = [
    "| The series' regression tests (3 on both sides) | 1 passed, 2 failed "
    "| 3 passed |",  # the same tests counted on both sides
    "0001: 3 passed; 0002: 3 passed",
    "| 1207 collected; not run, as every test passes on the fork | 1203 passed, 7 "
    "skipped (3 added by the series, 0 lost) |",
    "FAILED t::a - assert False is True",  # the base's failure
    "not run: no 2 GPUs here", "-k test_pp_mixed", "Sign-off still to do",
    "- [x] AI assistance was used", "- [ ] I ran the checklist skill.",
    "#49623", "1. [Core] Keep zeroing",
]  # fmt: skip
EVIDENCE = [  # the fork's own checks, the tracebacks and the CI report
    "### Runners assessed\n\nRead, not run on GPUs. The GPU worker builds",
    "copies of the decision (`fork_tests/`) | 1 failed | 1 passed |",
    "0001: 1 passed; 0002: 1 passed",
    "python3 -m forktool mutate",
    "    E   assert False is True",  # the base's traceback
    "3 passed (3 s)",  # the series' pass
    "| --- | --- |\n| 1 | 2 |",  # the CI report
    "Need 2 GPUs", "python3 -m forktool e2e",
    "Benchmark: not measured",
    "`__dict__` lookup) | 1 passed, 1 failed | 2 passed |",
    "replace  ok  ok",  # the override table, as measured
    "Mutation testing of the lines and hunks the series adds: each line",
    "3 mutants, 1 killed by the series' regression tests, 1 only by the fork "
    "tests, 0 survived, 1 equivalent",
    "`pkg/core.py:1` is killed only by the fork tests: only a GPU zeroes.",
    "<summary>Each mutant</summary>",
    "| `pkg/core.py:1` | True -> False | killed (series) | "
    "tests/test_core.py::test_zero[a\\|b] |",
    "| `pkg/core.py:1` | assignment deleted | killed (fork tests only) | "
    "fork_tests/c.py::d |",
    "| `pkg/core.py:2` | 1 -> 2 | equivalent | no test asks about 2 |",
]  # fmt: skip


def test_renders_the_kit_reading_only_checks_of_the_registry(kit, monkeypatch):
    """Any lookup of a result that is no check the PR renders fails."""
    asked = []

    class Watched(dict):
        def __getitem__(self, check):
            asked.append(check)
            if check not in checks.all_checks() or not check.in_pr:
                raise AssertionError(f"pr renders {check!r}, not in the registry")
            return super().__getitem__(check)

    load = pr.load_results
    monkeypatch.setattr(pr, "load_results", lambda *a: Watched(load(*a)))
    kit.make()
    rows = {check.name for check in checks.all_checks() if check.pr_row}  # all rendered
    assert {check.name for check in asked} | rows == {*ef.required(), "bench"}
    text, evidence = kit.read("description"), kit.read("evidence")
    assert len(text.splitlines()) <= 120
    assert [line for line in DESCRIPTION if line not in text] == []
    assert [line for line in EVIDENCE if line not in evidence] == []
    for section in ("## Overview", "## Claims", "## Validation", "## Details"):
        assert text.count(section) == 1
    for absent in ("<!-- Evidence. -->", "fork_tests/", "Differential planner fuzz"):
        assert absent not in text
    assert "forktool" not in text.partition("## Details")[0].partition("| Check")[2]
    patches = sorted(p.name for p in (kit.out / "series").iterdir())
    assert patches == ["0000-cover-letter.patch", "0001-Core-Keep-zeroing.patch",
                       "0002-Test-Pin-it.patch"]  # fmt: skip
    cover = kit.out / "series" / "0000-cover-letter.patch"
    said = cover.read_text()
    assert "[PATCH 0/2] [Bugfix][Core] Keep KV cache zeroing" in said
    assert "1203 passed" in said and "<details>" not in said
    assert os.access(kit.out / "apply-to-vllm.sh", os.X_OK)
    assert (kit.out / "preimages.pack").stat().st_size > 0
    # --signoff re-signs the kit's copy of the series only.
    head = git(kit.fork, "rev-parse", "HEAD").stdout
    kit.make(signer=SIGNER)
    assert git(kit.fork, "rev-parse", "HEAD").stdout == head
    assert "Sign-off still to do" not in kit.read("description")
    assert f"From: {SIGNER}" in cover.read_text()
    for patch in sorted((kit.out / "series").glob("000[12]-*.patch")):
        text = patch.read_text()
        assert f"From: {SIGNER}" in text and "Co-authored-by: Claude" in text
        assert text.count(f"Signed-off-by: {SIGNER}") == 1 and ef.NEUTRAL not in text


REFUSED = {  # what is done first, the make_kit options, what the refusal says
    "a missing result": (lambda kit, mp: (kit.store / "pre-commit.json").unlink(),
                         {}, ["pre-commit: no result; run `python3 -m forktool test`"]),
    "stale results": (lambda kit, mp: ef.commit(kit.fork, {"pkg/other.py": "X = 2\n"},
                                                "[Core] More"),
                      {}, ["regression-matrix: stale", "gpu-only: stale",
                           "run `python3 -m forktool setup`"]),
    "results measured with other inputs": (
        lambda kit, mp: mp.setattr(checks, "inputs_id", lambda: {"fuzz": "edited"}), {},
        ["regression-matrix: stale, measured on .* with another fuzz;",
         "run `python3 -m forktool setup`"]),
    "no fork": (lambda kit, mp: shutil.rmtree(kit.fork), {},
                ["forktool setup.*forktool test"]),
    "a signer without a name": (lambda kit, mp: None,
                                {"signer": "jane@example.com"}, ["Name <email>"]),
    "a description over the line budget": (
        lambda kit, mp: mp.setattr(description, "LINE_BUDGET", 20), {},
        [r"has \d+ lines, more than 20"]),
}  # fmt: skip


@pytest.mark.parametrize("case", REFUSED)
def test_a_refused_kit_writes_nothing_and_says_why(kit, monkeypatch, case):
    before, options, said = REFUSED[case]
    before(kit, monkeypatch)
    with pytest.raises(ForkToolError) as refused:
        kit.make(**options)
    for pattern in said:
        assert re.search(pattern, str(refused.value)), pattern
    assert not kit.out.exists()
    if case == "a missing result":  # --partial renders it all the same
        kit.make(partial=True)
        assert "### Pre-commit\n\nnot measured." in kit.read("evidence")


def flaky_on_fork(kit):
    suite = stored(kit.store, "upstream-selection")
    run = suite.data["runs"]["v1-core"]
    run["fork"]["counts"] = {"passed": 1202, "failed": 1, "skipped": 7}
    run["flaky"] = ["tests/v1/core/test_a.py::test_slow_subprocess"]
    return suite


RENDERED = {  # the result written over the synthetic one, the file, said, not said
    "a failed check": (lambda kit: replace(stored(kit.store, "ci-checkers"),
                                           ok=False, counts={"passed": 1, "failed": 1}),
                       "description", [
        "**Checks that failed on this tree: ci-checkers.**",
        "| — | 1 passed, 1 failed |",
    ], []),
    "a bench result": (lambda kit: bench_result(kit.tree, [100, 100.5, 99.5]),
                       "evidence", [
        "(goals met)",
        "PASS          mixed: fork/base over all 1 cases 1.004",
        "mixed   1.004",  # the table, collapsed
    ], ["Benchmark: not measured"]),
    "a bench result the noise cannot support": (
        lambda kit: bench_result(kit.tree, [66, 152, 100]), "evidence", [  # once PASS
        "(inconclusive: the A/A noise is wider than a goal's margin",
        "INCONCLUSIVE  mixed: fork/base over all 1 cases 1.004",
    ], ["goals met"]),
    "mutants that could not run": (lambda kit: checks.CheckResult(
        "mutants", False, kit.tree, "0.1", "python3 -m forktool test",
        excerpts={"error": "the regression selection does not pass"},
        inputs=checks.inputs_id()), "evidence", [
        "did not run: the regression selection does not pass",
        "**Checks that failed on this tree: mutants.**",
    ], []),
    "a flaky failure on the fork": (flaky_on_fork, "description", [
        "1202 passed, 1 failed, 7 skipped (3 added by the series, 0 lost; failed, "
        "then passed when run again: `test_slow_subprocess`) |",
    ], []),
}  # fmt: skip


@pytest.mark.parametrize("case", RENDERED)
def test_a_result_is_rendered_as_it_stands(kit, case):
    written, name, said, not_said = RENDERED[case]
    checks.write(kit.store, written(kit))
    kit.make()
    text = kit.read(name)
    assert [line for line in said if line not in text] == []
    assert [line for line in not_said if line in text] == []


# What a traceback's end holds besides the assertion: captured log noise.
HF_RETRY = (
    "ERROR    vllm.transformers_utils.repo_utils:repo_utils.py:126 Error "
    "retrieving safetensors: Cannot reach https://huggingface.co/Qwen/Qwen3-0.6B/"
    "resolve/main/model.safetensors: offline mode is enabled., retrying 1 of 2"
)
RUNNER = Runner(Path("venv"), Path("fixtures"), Path("hf"), {}, Path("logs"))


def failing(count: int) -> Result:
    result = Result(outcomes={"tests/test_core.py::test_ok": "passed"}, seconds=3.1)
    for i in range(count):
        test = f"tests/test_core.py::test_zero[{i}]"
        result.outcomes[test] = "failed"
        result.reasons[test] = f"assert None == [{i}]\n +  where None = output.x"
        result.exception_types[test] = "AssertionError"
        result.tails[test] = f"E   assert None == [{i}]\n{HF_RETRY}"
    return result


def test_the_description_fits_the_line_budget_and_the_rest_goes_beside_it(kit):
    """Each failure with its message; results as long as real ones get."""
    found = failure_evidence(RUNNER, failing(2), ("tests", "-k", "zero"), "base")
    assert found["base"].splitlines() == [
        "$ HF_HUB_OFFLINE=1 CUDA_VISIBLE_DEVICES='' VLLM_TARGET_DEVICE=cpu "
        "python -m pytest -q tests -k zero",
        "FAILED tests/test_core.py::test_zero[0] - assert None == [0]",
        "FAILED tests/test_core.py::test_zero[1] - assert None == [1]",
        "1 passed, 2 failed (3 s)",
    ]
    assert "offline mode is enabled" in found["base tracebacks"]
    many = failure_evidence(RUNNER, failing(EVIDENCE_FAILURES + 5), (), "base")
    kept = many["base"].splitlines()
    assert kept[-2] == "(5 more failing tests)"
    assert len(kept) == EVIDENCE_FAILURES + 3
    matrix = stored(kit.store, "regression-matrix")
    matrix.excerpts.update(failure_evidence(RUNNER, failing(30), ("tests",), "base"))
    matrix.data["table"] = "\n".join(f"t::t{i}  FAIL  ok  ok" for i in range(60))
    mutants = stored(kit.store, "mutants")
    row = mutants.data["mutants"][0]
    mutants.data["mutants"] = [{**row, "id": f"m{i}", "line": i} for i in range(80)]
    impact = stored(kit.store, "ci-impact")
    impact.data["report"] = "| A | B |\n| --- | --- |\n" + "| x | y |\n" * 60
    for result in (matrix, mutants, impact, bench_result(kit.tree, [100, 100.5, 99.5])):
        checks.write(kit.store, result)
    kit.make()
    text, evidence = kit.read("description"), kit.read("evidence")
    assert len(text.splitlines()) <= description.LINE_BUDGET
    assert "| `pkg/core.py:79` |" in evidence  # each mutant
    assert evidence.count("| x | y |") == 60  # the CI impact report
    assert "t::t59  FAIL  ok  ok" in evidence  # the per-test matrix
    assert "Differential planner fuzz" in evidence  # the fork's checks
    for long in ("| `pkg/core.py:79` |", "| x | y |", "t::t59  FAIL"):
        assert long not in text
    # The failures' messages in the description, the noise only in evidence.md.
    assert "test_zero[0] - assert None == [0]" in text
    assert "offline mode is enabled" not in text
    assert "offline mode is enabled" in evidence
