"""Reading pytest's output while it runs, and uv's index options: no vLLM."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from evidence import matrix
from forktool import upstream
from forktool.pytest_runner import Progress, Runner, exception
from forktool.selection import Selection

# Real `pytest -v -rfE` output (pytest 9.1) of a file with a pass, a failure,
# a skip, a test that errors in teardown after passing, ids with a space and
# with "::" in a parameter, and an xfail; one test deselected with -k.
VERBOSE = """\
============================= test session starts ==============================
platform linux -- Python 3.11.7, pytest-9.1.0, pluggy-1.7.0 -- /venv/bin/python
rootdir: /tmp/ptest
collecting ... collected 8 items / 1 deselected / 7 selected

test_demo.py::test_a PASSED                                              [ 14%]
test_demo.py::test_b FAILED                                              [ 28%]
test_demo.py::test_c SKIPPED (x)                                         [ 42%]
test_demo.py::test_d PASSED                                              [ 57%]
test_demo.py::test_d ERROR                                               [ 57%]
test_demo.py::test_e[a b] PASSED                                         [ 71%]
test_demo.py::test_e[c::d] PASSED                                        [ 85%]
test_demo.py::test_f XFAIL                                               [100%]

==================================== ERRORS ====================================
_________________________ ERROR at teardown of test_d __________________________
E       RuntimeError: teardown
=========================== short test summary info ============================
FAILED test_demo.py::test_b - assert 0
ERROR test_demo.py::test_d - RuntimeError: teardown
=== 1 failed, 4 passed, 1 skipped, 1 deselected, 1 xfailed, 1 error in 0.51s ===
"""


def test_progress_counts_each_test_once_and_keeps_a_teardown_error():
    assert Progress.of(VERBOSE) == Progress(done=7, failed=2, total=7)


def test_progress_while_a_run_is_under_way():
    partial = VERBOSE[: VERBOSE.index("test_demo.py::test_c")]
    assert Progress.of(partial) == Progress(done=2, failed=1, total=7)


def test_progress_before_collection_has_no_total():
    assert Progress.of("collecting ... ") == Progress(done=0, failed=0, total=None)


def test_progress_total_without_deselection():
    log = "collecting ... collected 12 items\n\ntests/a.py::test_x PASSED  [  8%]\n"
    assert Progress.of(log) == Progress(done=1, failed=0, total=12)


def test_progress_line():
    line = Progress(done=40, failed=1, total=300).line(125.7)
    assert line == "40/300 tests done, 1 failed, 2 min 05 s"
    assert Progress(0, 0, None).line(3) == "0 tests done, 0 failed, 0 min 03 s"


# The same run under pytest-xdist (-n 2), as pytest-xdist 3.8 prints it.
XDIST = """\
created: 2/2 workers
2 workers [7 items]

scheduling tests via LoadScheduling

test_demo.py::test_a 
test_demo.py::test_c 
[gw1] [ 14%] SKIPPED test_demo.py::test_c 
[gw0] [ 28%] PASSED test_demo.py::test_a 
test_demo.py::test_d 
test_demo.py::test_b 
[gw1] [ 42%] PASSED test_demo.py::test_d 
[gw0] [ 57%] FAILED test_demo.py::test_b 
[gw1] [ 57%] ERROR test_demo.py::test_d 
test_demo.py::test_e[c::d] 
test_demo.py::test_e[a b] 
[gw1] [ 71%] PASSED test_demo.py::test_e[a b] 
"""


def test_progress_under_xdist():
    assert Progress.of(XDIST) == Progress(done=5, failed=2, total=7)


def tiny_tree(tmp_path, name: str, text: str) -> tuple[Path, Runner]:
    """A committed tree holding tests/<name>, and a Runner on this interpreter."""
    tree = tmp_path / "tree"
    (tree / "tests").mkdir(parents=True)
    (tree / "tests" / name).write_text(text)
    git = ["git", "-C", str(tree), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "tests"], check=True)
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(sys.executable)
    fixtures = tmp_path / "fixtures"
    fixtures.mkdir()
    return tree, Runner(venv, fixtures, tmp_path / "hf", {}, tmp_path / "logs")


def test_runner_collects_runs_reports_progress_and_caches(
    tmp_path, monkeypatch, capsys
):
    """A real pytest run in a tiny committed tree, with this interpreter."""
    monkeypatch.setenv("VLLM_FORK_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(upstream, "PROGRESS_EVERY", 0.2)
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

    again = runner.run(tree, args, "run")
    assert again.cached and again.outcomes == result.outcomes
    (tree / "tests" / "test_y.py").write_text("def test_new():\n    pass\n")
    assert not runner.run(tree, args, "run").cached  # uncommitted: run again


def test_files_outside_the_tree_key_the_cache_and_gpu_only_reports(
    tmp_path, monkeypatch
):
    """A run that reads checks/ from outside the tree reruns when they change;
    the GPU-only check passes only when everything it selects is skipped."""
    monkeypatch.setenv("VLLM_FORK_CACHE", str(tmp_path / "cache"))
    tree, runner = tiny_tree(
        tmp_path,
        "test_gpu.py",
        "import pytest\n\n@pytest.mark.skip(reason='Need 2 GPUs')\n"
        "def test_e2e():\n    pass\n",
    )
    check = tmp_path / "checks" / "test_c.py"
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


def test_each_failure_names_its_exception_from_pytests_junit(tmp_path, monkeypatch):
    """pytest's JUnit XML has no exception type; its message names it."""
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
    for test in ("test_keyword", "test_positional", "test_attr", "test_setup"):
        reason = result.reasons[f"tests/test_e.py::{test}"]
        assert matrix.missing_api(exception(reason), reason), reason
    for test in ("test_assert", "test_said", "test_raises"):
        reason = result.reasons[f"tests/test_e.py::{test}"]
        assert not matrix.missing_api(exception(reason), reason), reason
