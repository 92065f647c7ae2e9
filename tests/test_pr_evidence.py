"""The PR description's failure evidence and its line budget, on synthetic
results: no vLLM, no network."""

from __future__ import annotations

from pathlib import Path

import pytest
from pr_fixture import bench_result, make_kit, mini_fork, stored, synthetic_results

from evidence.matrix import EVIDENCE_FAILURES, failure_evidence
from evidence.pr import description
from forktool import results
from forktool.errors import ForkToolError
from forktool.pytest_outcomes import Result
from forktool.pytest_runner import Runner


@pytest.fixture
def fork(tmp_path) -> Path:
    return mini_fork(tmp_path / "fork")


# What a traceback's end holds besides the assertion: captured log noise.
HF_RETRY = (
    "ERROR    vllm.transformers_utils.repo_utils:repo_utils.py:126 Error "
    "retrieving safetensors: Cannot reach https://huggingface.co/Qwen/Qwen3-0.6B/"
    "resolve/main/model.safetensors: offline mode is enabled., retrying 1 of 2"
)
RUNNER = Runner(Path("venv"), Path("fixtures"), Path("hf"), {}, Path("logs"))


def failing(count: int) -> Result:
    """A run of the regression selection with `count` failures and a pass."""
    result = Result(outcomes={"tests/test_core.py::test_ok": "passed"}, seconds=3.1)
    for i in range(count):
        test = f"tests/test_core.py::test_zero[{i}]"
        result.outcomes[test] = "failed"
        result.reasons[test] = f"assert None == [{i}]\n +  where None = output.x"
        result.exception_types[test] = "AssertionError"
        result.tails[test] = f"E   assert None == [{i}]\n{HF_RETRY}"
    return result


def test_the_failure_evidence_is_each_failure_with_its_message():
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


def heavy_results(store: Path, tree: str) -> None:
    """The synthetic results made as long as real ones get: a noisy base run
    with many failures, many mutants, long CI and matrix tables, a bench."""
    synthetic_results(store, tree)
    matrix = stored(store, "regression-matrix")
    matrix.excerpts.update(failure_evidence(RUNNER, failing(30), ("tests",), "base"))
    matrix.data["table"] = "\n".join(f"t::t{i}  FAIL  ok  ok" for i in range(60))
    results.write(store, matrix)
    mutants = stored(store, "mutants")
    row = mutants.data["mutants"][0]
    mutants.data["mutants"] = [{**row, "id": f"m{i}", "line": i} for i in range(80)]
    results.write(store, mutants)
    impact = stored(store, "ci-impact")
    impact.data["report"] = "| A | B |\n|---|---|\n" + "| x | y |\n" * 60
    results.write(store, impact)
    results.write(store, bench_result(tree, [100, 100.5, 99.5]))


def test_the_description_fits_the_line_budget_and_the_rest_goes_beside_it(
    fork, tmp_path
):
    store, out = tmp_path / "results", tmp_path / "kit"
    heavy_results(store, results.fork_tree(fork))
    make_kit(fork, store, out)
    text = (out / "description.md").read_text()
    assert len(text.splitlines()) <= description.LINE_BUDGET
    # The long tables are in evidence.md.
    evidence = (out / "evidence.md").read_text()
    assert "| `pkg/core.py:79` |" in evidence  # each mutant
    assert evidence.count("| x | y |") == 60  # the CI impact report
    assert "t::t59  FAIL  ok  ok" in evidence  # the per-test matrix
    assert "Differential planner fuzz" in evidence  # the fork's checks
    for long in ("| `pkg/core.py:79` |", "| x | y |", "t::t59  FAIL"):
        assert long not in text
    # The description's excerpt has the failures' messages, the noise only
    # the tracebacks' ends in evidence.md.
    assert "test_zero[0] - assert None == [0]" in text
    assert "offline mode is enabled" not in text
    assert "offline mode is enabled" in evidence


def test_a_description_over_the_line_budget_is_refused(fork, tmp_path, monkeypatch):
    store, out = tmp_path / "results", tmp_path / "kit"
    synthetic_results(store, results.fork_tree(fork))
    monkeypatch.setattr(description, "LINE_BUDGET", 20)
    with pytest.raises(ForkToolError, match=r"has \d+ lines, more than 20"):
        make_kit(fork, store, out)
    assert not out.exists()
