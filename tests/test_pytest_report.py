"""The plugin forktool/pytest_report.py in a real pytest, on tiny test files:
each test's outcome under pytest's own node id, each failure's exception
and message, collection errors, and what the runner makes of it; no vLLM."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from forktool import process, pytest_runner
from forktool.pytest_outcomes import Result, read_report
from forktool.pytest_runner import report_args, report_env, run_pytest

# Imported under its own name, pytest would collect it as a test.
env_for = pytest_runner.test_env

TESTS = """\
import pytest


class TestKind:
    @pytest.mark.parametrize("x", [1, "a b", "c::d"])
    def test_param(self, x):
        assert x != 1

    class TestInner:
        def test_deep(self):
            pass


@pytest.fixture
def broken():
    raise RuntimeError("fixture broke")


@pytest.fixture
def untidy():
    yield
    raise ValueError("teardown broke")


def test_setup(broken):
    pass


def test_teardown(untidy):
    pass


@pytest.mark.skip(reason="Need 2 GPUs")
def test_skip():
    pass


@pytest.mark.xfail(reason="known")
def test_xfail():
    assert False


def test_said():
    assert False, "no block reused"


def test_raise():
    {}["key"]
"""


def pytest_in(tmp_path: Path, files: dict[str, str], *args: str) -> list[dict]:
    """Run pytest with the plugin on `files` in tmp_path; the records."""
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    out = tmp_path / "report.jsonl"
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args]
    env = report_env(env_for(tmp_path / "hf"))
    process.run([*cmd, *report_args(out)], cwd=tmp_path, env=env, check=False)
    return read_report(out)


def test_each_test_under_its_node_id_with_its_outcome(tmp_path):
    records = pytest_in(tmp_path, {"tests/test_t.py": TESTS}, "tests")
    result = Result.of(records)
    t = "tests/test_t.py::"
    assert result.outcomes == {
        f"{t}TestKind::test_param[1]": "failed",
        f"{t}TestKind::test_param[a b]": "passed",
        f"{t}TestKind::test_param[c::d]": "passed",
        f"{t}TestKind::TestInner::test_deep": "passed",
        f"{t}test_setup": "error",
        f"{t}test_teardown": "error",
        f"{t}test_skip": "skipped",
        f"{t}test_xfail": "skipped",
        f"{t}test_said": "failed",
        f"{t}test_raise": "failed",
    }
    assert result.exceptions() == {
        f"{t}TestKind::test_param[1]": "AssertionError",
        f"{t}test_setup": "RuntimeError",
        f"{t}test_teardown": "ValueError",
        f"{t}test_said": "AssertionError",
        f"{t}test_raise": "KeyError",
    }
    assert result.reasons[f"{t}test_skip"] == "Need 2 GPUs"
    assert result.reasons[f"{t}test_xfail"] == "xfail: known"
    assert result.reasons[f"{t}test_setup"] == "RuntimeError: fixture broke"
    assert result.reasons[f"{t}test_raise"] == "KeyError: 'key'"
    assert "no block reused" in result.reasons[f"{t}test_said"]
    assert "assert 1 != 1" in result.reasons[f"{t}TestKind::test_param[1]"]
    assert 'raise RuntimeError("fixture broke")' in result.tails[f"{t}test_setup"]
    assert records[0] == {"event": "collected", "count": 10}
    assert records[-1] == {"event": "finish", "exitstatus": 1}
    calls = [r for r in records if r.get("when") == "call"]
    assert all(r["duration"] >= 0 for r in calls)


def test_a_collection_error_is_an_error_of_its_module(tmp_path):
    files = {"tests/test_ok.py": "def test_ok():\n    pass\n"}
    files["tests/test_gone.py"] = "import not_a_module_here\n"
    result = Result.of(pytest_in(tmp_path, files, "tests"))
    assert result.outcomes == {"tests/test_gone.py": "error"}
    assert result.exceptions() == {"tests/test_gone.py": "ModuleNotFoundError"}
    assert "not_a_module_here" in result.reasons["tests/test_gone.py"]


def test_collect_only_lists_the_ids_after_deselection(tmp_path):
    files = {"tests/test_t.py": TESTS}
    deselect = "--deselect=tests/test_t.py::test_skip"
    records = pytest_in(tmp_path, files, "--collect-only", "-q", deselect, "tests")
    collected = [r for r in records if r["event"] == "collected"]
    ids = collected[0]["ids"]
    assert len(ids) == collected[0]["count"] == 9
    assert "tests/test_t.py::TestKind::test_param[c::d]" in ids
    assert "tests/test_t.py::test_skip" not in ids
    assert not Result.of(records).outcomes


def test_the_runner_reads_the_report_and_writes_the_log(tmp_path, capsys):
    (tmp_path / "test_one.py").write_text("def test_one():\n    assert 1 == 2\n")
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    log = tmp_path / "logs" / "one.log"
    session = run_pytest(
        [*cmd, "test_one.py"], tmp_path, env_for(tmp_path / "hf"), log, "one"
    )
    assert session.status == 1
    assert session.result().outcomes == {"test_one.py::test_one": "failed"}
    assert session.result().reasons["test_one.py::test_one"] == "assert 1 == 2"
    assert "1 failed" in log.read_text()
    assert "[one] " in capsys.readouterr().out
    assert json.loads(json.dumps(session.result().data()))["outcomes"]
