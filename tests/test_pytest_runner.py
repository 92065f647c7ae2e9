"""The runner: outcomes and progress from the plugin's report, runs in tiny
trees, the cache; no vLLM."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from evidence import matrix, suite
from forktool import process, pytest_runner
from forktool.pytest_outcomes import Progress, Result, read_report
from forktool.pytest_runner import Runner
from forktool.selection import Selection


def report(nodeid: str, when: str, outcome: str) -> dict:
    return {"event": "report", "nodeid": nodeid, "when": when, "outcome": outcome}


# What the plugin writes for a pass, a failure, a skip, a test that errors
# in teardown after passing, and a collection error (a module that does not
# import), 7 tests collected.
RECORDS = [
    {"event": "collected", "count": 7},
    report("t.py::test_a", "setup", "passed"),
    report("t.py::test_a", "call", "passed"),
    report("t.py::test_a", "teardown", "passed"),
    report("t.py::test_b", "setup", "passed"),
    report("t.py::test_b", "call", "failed"),
    report("t.py::test_b", "teardown", "failed"),
    report("t.py::test_c", "setup", "skipped"),
    report("t.py::test_c", "teardown", "passed"),
    report("t.py::test_d", "setup", "passed"),
    report("t.py::test_d", "call", "passed"),
    report("t.py::test_d", "teardown", "failed"),
    report("u.py", "collect", "failed"),
]


def test_progress_counts_each_test_once_and_keeps_a_teardown_error():
    assert Progress.of(RECORDS) == Progress(done=5, failed=3, total=7)
    outcomes = Result.of(RECORDS).outcomes
    assert outcomes == {
        "t.py::test_a": "passed",
        "t.py::test_b": "failed",
        "t.py::test_c": "skipped",
        "t.py::test_d": "error",
        "u.py": "error",
    }


def test_progress_while_a_run_is_under_way():
    assert Progress.of(RECORDS[:6]) == Progress(done=2, failed=1, total=7)


def test_progress_before_collection_has_no_total():
    assert Progress.of([]) == Progress(done=0, failed=0, total=None)


def test_a_report_line_still_being_written_is_left_out(tmp_path):
    path = tmp_path / "report.jsonl"
    path.write_text('{"event": "collected", "count": 2}\n{"event": "rep')
    assert read_report(path) == [{"event": "collected", "count": 2}]
    assert read_report(tmp_path / "none.jsonl") == []


def test_progress_line():
    line = Progress(done=40, failed=1, total=300).line(125.7)
    assert line == "40/300 tests done, 1 failed, 2 min 05 s"
    assert Progress(0, 0, None).line(3) == "0 tests done, 0 failed, 0 min 03 s"


def tiny_tree(tmp_path, name: str, text: str) -> tuple[Path, Runner]:
    """A committed tree holding tests/<name>, and a Runner on this interpreter."""
    tree = tmp_path / "tree"
    (tree / "tests").mkdir(parents=True)
    (tree / "tests" / name).write_text(text)
    git = ["git", "-C", str(tree), "-c", "user.name=t", "-c", "user.email=t@t"]
    process.run([*git, "init", "-q"])
    process.run([*git, "add", "."])
    process.run([*git, "commit", "-q", "-m", "tests"])
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(sys.executable)
    fixtures = tmp_path / "fixtures"
    fixtures.mkdir()
    return tree, Runner(venv, fixtures, tmp_path / "hf", {}, tmp_path / "logs")


PINS = """\
import os

GIVEN = {given}


def test_pins_the_process_to_one_cpu():
    os.sched_setaffinity(0, {{min(GIVEN)}})


def test_runs_on_every_cpu_it_was_given():
    assert os.sched_getaffinity(0) == GIVEN
"""


@pytest.mark.skipif(
    len(os.sched_getaffinity(0)) < 2, reason="with one CPU, pinning changes nothing"
)
def test_a_test_pinning_the_process_to_one_cpu_leaves_the_next_on_all(
    tmp_path, monkeypatch
):
    """As vLLM's NIXL worker does: the next test runs on every CPU again."""
    monkeypatch.setenv("VLLM_FORK_CACHE", str(tmp_path / "cache"))
    given = os.sched_getaffinity(0)
    tree, runner = tiny_tree(tmp_path, "test_pin.py", PINS.format(given=given))
    result = runner.run(tree, ("tests/test_pin.py",), "pin")
    assert set(result.outcomes.values()) == {"passed"}, result.reasons


def test_bytecode_is_written_outside_the_tree(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")  # as this user may have it
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "module.py").write_text("X = 1\n")
    env = pytest_runner.test_env(tmp_path / "hf", tmp_path / "pycache")
    process.run([sys.executable, "-c", "import module"], cwd=tree, env=env)
    assert not (tree / "__pycache__").exists()
    assert [p.name for p in (tmp_path / "pycache").rglob("module.*.pyc")]


def test_importing_humming_starts_no_cuda_build(tmp_path):
    """humming, which vLLM's model runner imports, would start its CUDA
    builds in processes a thread of this name waits for."""
    code = (
        "import threading, humming.ops.utils, humming.utils.nvrtc\n"
        "print(*(thread.name for thread in threading.enumerate()))"
    )
    env = pytest_runner.test_env(tmp_path / "hf")
    run = process.run([sys.executable, "-c", code], cwd=tmp_path, env=env)
    assert "MainThread" in run.stdout
    assert "humming-bg-build-reaper" not in run.stdout


def test_runner_collects_runs_reports_progress_and_caches(
    tmp_path, monkeypatch, capsys
):
    """A real pytest run in a tiny committed tree, with this interpreter."""
    monkeypatch.setenv("VLLM_FORK_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(pytest_runner, "PROGRESS_EVERY", 0.2)
    tree, runner = tiny_tree(
        tmp_path,
        "test_x.py",
        "import time\n\n"
        "def test_pass():\n    pass\n\n"
        "def test_fail():\n    assert False\n\n"
        "def test_slow():\n    time.sleep(1.5)\n",
    )
    args = ("tests/test_x.py",)

    assert runner.collect(tree, args, "collect") == [
        "tests/test_x.py::test_pass",
        "tests/test_x.py::test_fail",
        "tests/test_x.py::test_slow",
    ]
    result = runner.run(tree, args, "run")
    assert result.outcomes == {
        "tests/test_x.py::test_pass": "passed",
        "tests/test_x.py::test_fail": "failed",
        "tests/test_x.py::test_slow": "passed",
    }
    assert not result.cached
    assert "[run] 2/3 tests done, 1 failed" in capsys.readouterr().out
    assert "test_slow PASSED" in (tmp_path / "logs" / "run.log").read_text()

    # A failure nobody expects may be flaky: the run is not kept.
    assert not runner.run(tree, args, "run").cached
    must_fail = ("tests/test_x.py::test_fail",)
    assert not runner.run(tree, args, "run", expected=must_fail).cached
    again = runner.run(tree, args, "run", expected=must_fail)
    assert again.cached and again.outcomes == result.outcomes
    (tree / "tests" / "test_y.py").write_text("def test_new():\n    pass\n")
    assert not runner.run(tree, args, "run").cached  # uncommitted: run again


def test_files_outside_the_tree_key_the_cache_and_gpu_only_reports(
    tmp_path, monkeypatch
):
    """A run that reads fork_tests/ from outside the tree reruns when they change;
    the GPU-only check passes only when everything it selects is skipped."""
    monkeypatch.setenv("VLLM_FORK_CACHE", str(tmp_path / "cache"))
    tree, runner = tiny_tree(
        tmp_path,
        "test_gpu.py",
        "import pytest\n\n@pytest.mark.skip(reason='Need 2 GPUs')\n"
        "def test_e2e():\n    pass\n",
    )
    check = tmp_path / "fork_tests" / "test_c.py"
    check.parent.mkdir()
    check.write_text("def test_c():\n    pass\n")
    args = (f"--rootdir={tmp_path}", str(check))

    assert runner.run(tree, args, "c", inputs=(check,)).outcomes
    assert runner.run(tree, args, "c", inputs=(check,)).cached
    check.write_text("def test_c():\n    assert False\n")
    rerun = runner.run(tree, args, "c", inputs=(check,))
    assert not rerun.cached and set(rerun.outcomes.values()) == {"failed"}

    selection = Selection({}, (), (), frozenset(), ("tests/test_gpu.py",), {})
    found = matrix.gpu_only_skipped(tree, runner, selection)
    assert found.ok and found.data["reasons"] == {
        "tests/test_gpu.py::test_e2e": "Need 2 GPUs"
    }


def test_each_failure_names_its_exception(tmp_path, monkeypatch):
    """The exception pytest caught, kept in the cache too."""
    monkeypatch.setenv("VLLM_FORK_CACHE", str(tmp_path / "cache"))
    tree, runner = tiny_tree(
        tmp_path,
        "test_e.py",
        "import pytest\n\n"
        "@pytest.fixture\ndef gone():\n    import not_a_module_here\n\n"
        "def test_assert():\n    assert [] == [1]\n\n"
        "def test_said():\n    assert False, 'no block reused'\n\n"
        "def test_attr():\n    object().zeroing\n\n"
        "def test_keyword():\n    dict.fromkeys(resolved=1)\n\n"
        "def test_positional():\n    pytest.approx()\n\n"
        "def test_raises():\n    with pytest.raises(ValueError):\n        pass\n\n"
        "def test_setup(gone):\n    pass\n\n"
        "def test_pass():\n    pass\n",
    )
    result = runner.run(tree, ("tests/test_e.py",), "e")
    for found in (result, runner.run(tree, ("tests/test_e.py",), "e")):
        assert found.exceptions() == {
            "tests/test_e.py::test_assert": "AssertionError",
            "tests/test_e.py::test_said": "AssertionError",
            "tests/test_e.py::test_attr": "AttributeError",
            "tests/test_e.py::test_keyword": "TypeError",
            "tests/test_e.py::test_positional": "TypeError",
            "tests/test_e.py::test_raises": "Failed",
            "tests/test_e.py::test_setup": "ModuleNotFoundError",
        }
    kinds = result.exceptions()
    for test in ("test_keyword", "test_positional", "test_attr", "test_setup"):
        reason = result.reasons[f"tests/test_e.py::{test}"]
        assert matrix.missing_api(kinds[f"tests/test_e.py::{test}"], reason), reason
    for test in ("test_assert", "test_said", "test_raises"):
        reason = result.reasons[f"tests/test_e.py::{test}"]
        assert not matrix.missing_api(kinds[f"tests/test_e.py::{test}"], reason)


def test_the_fork_failures_are_run_again_and_the_base_where_needed(
    tmp_path, monkeypatch
):
    """suite._compared with real runs: the fork's failures again, and the
    base the tests that did not pass on the fork."""
    monkeypatch.setenv("VLLM_FORK_CACHE", str(tmp_path / "cache"))
    once = tmp_path / "failed-once"
    tests = (
        "from pathlib import Path\n\n"
        "def test_pass():\n    pass\n\n"
        "def test_old_bug():\n    assert False\n\n"
        f"def test_new_bug():\n    assert {{new_bug}}\n\n"
        f"def test_flaky():\n    p = Path({str(once)!r})\n"
        "    if not p.exists():\n        p.touch()\n        assert False\n"
    )
    fork, runner = tiny_tree(tmp_path / "f", "test_x.py", tests.format(new_bug=False))
    base, _ = tiny_tree(tmp_path / "b", "test_x.py", tests.format(new_bug=True))
    args = ("tests/test_x.py",)
    on_fork = runner.run(fork, args, "run")
    both = (list(on_fork.outcomes), set(on_fork.outcomes))
    ok, data = suite._compared(fork, base, runner, "run", args, both, on_fork)
    x = "tests/test_x.py::"
    assert not ok
    assert (data["new"], data["pre_existing"], data["flaky"]) == (
        [f"{x}test_new_bug"],
        [f"{x}test_old_bug"],
        [f"{x}test_flaky"],
    )
    assert data["base"]["rerun"] == 3  # beside the fork's, not knowing the flaky
