"""The runner and its plugin forktool/pytest_report.py, in real pytest runs."""

import os
import sys

import pytest
from evidence_fixture import link_venv, new_repo, write

from evidence import cpu_selection, matrix, vllm_tests
from evidence.vllm_tests import Runner
from forktool import process, pytest_runner
from forktool.layout import Layout
from forktool.pytest_runner import Result, progress, read_report
from forktool.selection import Selection

# Imported under its own name, pytest would collect it as a test.
env_for = pytest_runner.test_env
TEST_X = "tests/test_x.py"
X = f"{TEST_X}::"


def reports(nodeid: str, **outcomes: str) -> list[dict]:
    """The plugin's records of one test: `when` -> outcome."""
    return [
        {"event": "report", "nodeid": nodeid, "when": when, "outcome": outcome}
        for when, outcome in outcomes.items()
    ]


RECORDS = [
    {"event": "collected", "count": 7},
    *reports("t.py::test_a", setup="passed", call="passed", teardown="passed"),
    *reports("t.py::test_b", setup="passed", call="failed", teardown="failed"),
    *reports("t.py::test_c", setup="skipped", teardown="passed"),
    *reports("t.py::test_d", setup="passed", call="passed", teardown="failed"),
    *reports("u.py", collect="failed"),  # a module that does not import
]


def test_progress_counts_each_test_once_and_outcomes_keep_every_error(tmp_path):
    """Teardown and import failures are errors; a half-written line is left out."""
    assert progress(RECORDS, 125.7) == "5/7 tests done, 3 failed, 2 min 05 s"
    assert progress(RECORDS[:6], 60) == "2/7 tests done, 1 failed, 1 min 00 s"
    assert progress([], 3) == "0 tests done, 0 failed, 0 min 03 s"  # not collected
    assert Result.of(RECORDS).outcomes == {
        "t.py::test_a": "passed", "t.py::test_b": "failed", "t.py::test_c": "skipped",
        "t.py::test_d": "error", "u.py": "error",
    }  # fmt: skip
    path = tmp_path / "report.jsonl"
    path.write_text('{"event": "collected", "count": 2}\n{"event": "rep')
    assert read_report(path) == [{"event": "collected", "count": 2}]
    assert read_report(tmp_path / "none.jsonl") == []


TESTS = """\
import time, pytest
class TestKind:
    @pytest.mark.parametrize("x", [1, "a b", "c::d"])
    def test_param(self, x):
        assert x != 1
    class TestInner:
        def test_deep(self): pass
@pytest.fixture
def broken(): raise RuntimeError("fixture broke")
@pytest.fixture
def gone(): import not_a_module_here
@pytest.fixture
def untidy():
    yield
    raise ValueError("teardown broke")
def test_setup(broken): pass
def test_gone(gone): pass
def test_teardown(untidy): pass
@pytest.mark.skip(reason="Need 2 GPUs")
def test_skip(): pass
@pytest.mark.xfail(reason="known")
def test_xfail(): assert False
def test_said(): assert False, "no block reused"
def test_raise(): {}["key"]
def test_attr(): object().zeroing
def test_keyword(): dict.fromkeys(resolved=1)
def test_positional(): pytest.approx()
def test_operand(): None + 1
def test_name(): resolve
def test_raises():
    with pytest.raises(ValueError): pass
def test_slow(): time.sleep(1.5)
"""
IN_TESTS = {  # each test of TESTS: its outcome, its exception, a missing API?
    "TestKind::test_param[1]": ("failed", "AssertionError", False),
    "TestKind::test_param[a b]": ("passed", None, False),
    "TestKind::test_param[c::d]": ("passed", None, False),
    "TestKind::TestInner::test_deep": ("passed", None, False),
    "test_setup": ("error", "RuntimeError", False),
    "test_gone": ("error", "ModuleNotFoundError", True),
    "test_teardown": ("error", "ValueError", False),
    "test_skip": ("skipped", None, False),
    "test_xfail": ("skipped", None, False),
    "test_said": ("failed", "AssertionError", False),
    "test_raise": ("failed", "KeyError", False),
    "test_attr": ("failed", "AttributeError", True),
    "test_keyword": ("failed", "TypeError", True),
    "test_positional": ("failed", "TypeError", True),
    "test_operand": ("failed", "TypeError", False),
    "test_name": ("failed", "NameError", True),
    "test_raises": ("failed", "Failed", False),
    "test_slow": ("passed", None, False),
}


@pytest.fixture
def runner(tmp_path, monkeypatch) -> Runner:
    monkeypatch.setenv("VLLM_FORK_CACHE", str(tmp_path / "cache"))
    (tmp_path / "fixtures").mkdir()
    venv = link_venv(tmp_path / "venv")
    return Runner(venv, tmp_path / "fixtures", tmp_path / "hf", {}, tmp_path / "logs")


@pytest.mark.skipif(
    len(os.sched_getaffinity(0)) < 2, reason="with one CPU, pinning changes nothing"
)
def test_a_test_pinning_the_process_to_one_cpu_leaves_the_next_on_all(tmp_path, runner):
    """As vLLM's NIXL worker does: the next test runs on every CPU again."""
    assert all(path.is_file() for path in vllm_tests.PLUGIN_SOURCES)  # key the cache
    given = os.sched_getaffinity(0)
    pins = (
        f"import os\nGIVEN = {given}\n"
        "def test_pin(): os.sched_setaffinity(0, {min(GIVEN)})\n"
        "def test_all(): assert os.sched_getaffinity(0) == GIVEN\n"
    )
    result = runner.run(new_repo(tmp_path / "tree", {TEST_X: pins}), (TEST_X,), "pin")
    assert set(result.outcomes.values()) == {"passed"}, result.reasons


def test_runner_collects_runs_reports_and_caches(tmp_path, runner, monkeypatch, capsys):
    """Outcomes, exceptions, messages; no cache for unexpected failures or dirt."""
    monkeypatch.setattr(pytest_runner, "PROGRESS_EVERY", 0.2)
    tree, args = new_repo(tmp_path / "tree", {TEST_X: TESTS}), (TEST_X,)
    assert runner.collect(tree, args, "collect") == [X + test for test in IN_TESTS]
    result = runner.run(tree, args, "t")
    assert result.outcomes == {X + test: o for test, (o, _, _) in IN_TESTS.items()}
    assert not result.cached
    out = capsys.readouterr().out
    assert f"[t] {len(IN_TESTS) - 1}/{len(IN_TESTS)} tests done, 12 failed" in out
    assert "test_slow PASSED" in (tmp_path / "logs" / "t.log").read_text()
    raised = {X + test: kind for test, (_, kind, _) in IN_TESTS.items() if kind}
    assert result.exceptions() == raised
    for test, (_, kind, missing) in IN_TESTS.items():
        if kind:
            reason = result.reasons[X + test]
            assert matrix.missing_api(kind, reason) is missing, reason
    assert result.reasons[f"{X}test_skip"] == "Need 2 GPUs"
    assert result.reasons[f"{X}test_xfail"] == "xfail: known"
    assert result.reasons[f"{X}test_setup"] == "RuntimeError: fixture broke"
    assert result.reasons[f"{X}test_raise"] == "KeyError: 'key'"
    assert "no block reused" in result.reasons[f"{X}test_said"]
    assert "assert 1 != 1" in result.reasons[f"{X}TestKind::test_param[1]"]
    assert 'raise RuntimeError("fixture broke")' in result.tails[f"{X}test_setup"]
    records = read_report(tmp_path / "logs" / "t.jsonl")
    assert records[0] == {"event": "collected", "count": len(IN_TESTS)}
    assert records[-1] == {"event": "finish", "exitstatus": 1}
    assert all(r["duration"] >= 0 for r in records if r.get("when") == "call")
    assert not runner.run(tree, args, "t").cached
    first = runner.run(tree, args, "t", expected=args)
    again = runner.run(tree, args, "t", expected=args)
    assert not first.cached and again.cached and again.outcomes == result.outcomes
    kept = ("reasons", "exception_types", "tails")
    assert [getattr(again, k) for k in kept] == [getattr(first, k) for k in kept]
    selection = Selection({}, (), (), frozenset(), (f"{X}test_skip",), {})
    found = matrix.gpu_only_skipped(tree, runner, selection)  # all skipped
    assert found.ok and found.data["reasons"] == {f"{X}test_skip": "Need 2 GPUs"}
    write(
        tmp_path, {"fork_tests/test_c.py": "def test_c():\n    pass\n", "plugin.py": ""}
    )
    check = tmp_path / "fork_tests" / "test_c.py"  # read from outside the tree
    outside = (f"--rootdir={tmp_path}", str(check))
    assert runner.run(tree, outside, "c", inputs=(check,)).outcomes
    assert runner.run(tree, outside, "c", inputs=(check,)).cached
    check.write_text("def test_c():\n    assert False\n")  # keys the cache
    rerun = runner.run(tree, outside, "c", inputs=(check,))
    assert not rerun.cached and set(rerun.outcomes.values()) == {"failed"}
    monkeypatch.setattr(vllm_tests, "PLUGIN_SOURCES", (tmp_path / "plugin.py",))
    runs = [runner.run(tree, args, "t", expected=args).cached for _ in "12"]
    assert runs == [False, True]  # other plugins key it anew
    (tmp_path / "plugin.py").write_text("A = 2\n")  # an edit to one
    assert not runner.run(tree, args, "t", expected=args).cached
    (tree / "tests" / "test_y.py").write_text("def test_new():\n    pass\n")
    assert not runner.run(tree, args, "t", expected=args).cached


def test_a_collection_error_bytecode_outside_the_tree_no_cuda(tmp_path, monkeypatch):
    """A collection error is its module's; collect-only lists the ids left after
    deselection; humming (vLLM's model runner imports it) starts no CUDA builds."""
    files = {"tests/test_t.py": TESTS, "tests/test_gone.py": "import not_a_module\n"}
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--collect-only"]
    cmd += ["-q", "--deselect=tests/test_t.py::test_skip", "tests"]
    tree, env = new_repo(tmp_path / "run", files), env_for(tmp_path / "hf")
    session = pytest_runner.run_pytest(cmd, tree, env, tmp_path / "c.log", "c")
    records, result = session.records, session.result()
    assert result.outcomes == {"tests/test_gone.py": "error"}
    assert result.exceptions() == {"tests/test_gone.py": "ModuleNotFoundError"}
    assert "not_a_module" in result.reasons["tests/test_gone.py"]
    collected = [r for r in records if r["event"] == "collected"]
    ids = collected[0]["ids"]
    assert len(ids) == collected[0]["count"] == len(IN_TESTS) - 1
    assert "tests/test_t.py::TestKind::test_param[c::d]" in ids
    assert "tests/test_t.py::test_skip" not in ids
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")  # as this user may have it
    monkeypatch.setattr("forktool.venv.LAYOUT", Layout(tmp_path))  # its pycache
    write(tmp_path / "tree", {"module.py": "X = 1\n"})
    code = "import module, threading, humming.ops.utils, humming.utils.nvrtc\n"
    code += "print(*(thread.name for thread in threading.enumerate()))"
    env = env_for(tmp_path / "hf")
    run = process.run([sys.executable, "-c", code], cwd=tmp_path / "tree", env=env)
    assert "MainThread" in run.stdout
    assert "humming-bg-build-reaper" not in run.stdout
    assert not (tmp_path / "tree" / "__pycache__").exists()
    assert [p.name for p in Layout(tmp_path).pycache.rglob("module.*.pyc")]


def test_the_fork_failures_are_run_again_and_the_base_where_needed(tmp_path, runner):
    once = tmp_path / "failed-once"
    tests = (
        "from pathlib import Path\ndef test_pass(): pass\n"
        "def test_old_bug(): assert False\ndef test_new_bug(): assert {new_bug}\n"
        f"def test_flaky():\n    p = Path({str(once)!r})\n"
        "    if not p.exists():\n        p.touch()\n        assert False\n"
    )
    fork = new_repo(tmp_path / "fork", {TEST_X: tests.format(new_bug=False)})
    base = new_repo(tmp_path / "base", {TEST_X: tests.format(new_bug=True)})
    args = (TEST_X,)
    on_fork = runner.run(fork, args, "run")
    both = (list(on_fork.outcomes), set(on_fork.outcomes))
    ok, data = cpu_selection._compared(fork, base, runner, "run", args, both, on_fork)
    assert not ok
    found = [data[key] for key in ("new", "pre_existing", "flaky")]
    assert found == [[f"{X}test_new_bug"], [f"{X}test_old_bug"], [f"{X}test_flaky"]]
    assert data["base"]["rerun"] == 3  # with the fork's rerun, not knowing the flaky
