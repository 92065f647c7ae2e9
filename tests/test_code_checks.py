"""ruff and mypy on the tool's own code: checks `test` runs with the venv's
programs, that `pr` neither renders nor requires."""

import os

from evidence_fixture import link_venv, new_repo, programs, required

from forktool import checks, tool_checks
from forktool.checks import all_checks
from forktool.layout import Layout


def test_a_code_check_passes_only_when_every_command_exits_0(tmp_path):
    """... and fails on a missing program; ruff and mypy gate `test`, not `pr`."""
    for check in (tool_checks.RUFF, tool_checks.MYPY):
        assert check in all_checks() and check.gates_test
        assert check.command == checks.TEST and check.name not in required()
    venv = programs(tmp_path / "bin", ruff='echo "ruff $*"; [ "$2" = x ]').parent
    lint, form = ["ruff", "check", "x"], ["ruff", "format", "x"]
    found = tool_checks.code_check(venv, lint, form)
    where = os.path.relpath(venv / "bin" / "ruff", tool_checks.LAYOUT.root)
    said = f"$ {where} check x\nruff check x\n$ {where} format x\nruff format x"
    assert found.ok and found.excerpts["output"] == said
    found = tool_checks.code_check(venv, lint, ["ruff", "format", "y"])
    assert not found.ok and found.excerpts["output"].endswith("format y\nruff format y")
    missing = tool_checks.code_check(venv, ["mypy"])
    assert not missing.ok and "the venv lacks mypy" in missing.excerpts["output"]


def test_the_repositorys_tests_run_through_the_runner(tmp_path, monkeypatch):
    """Outcomes from the runner's plugin, failures' messages in the excerpt, a log."""
    test = "def test_env():\n    assert os.environ.get('EXTRA') == 'yes', 'no EXTRA'\n"
    files = {"tests/test_t.py": f"import os\n\ndef test_ok():\n    pass\n\n{test}"}
    repo = new_repo(tmp_path / "repo", files)
    monkeypatch.setattr(tool_checks, "LAYOUT", Layout(repo))
    venv = link_venv(tmp_path / "venv")
    session = tool_checks.repo_pytest(venv, "tests", label="mine")
    found = tool_checks.measured(session, "tests")
    assert not found.ok and found.counts == {"passed": 1, "failed": 1}
    assert found.excerpts["output"].splitlines() == [
        "$ python -m pytest -q tests",
        "FAILED tests/test_t.py::test_env - AssertionError: no EXTRA",
        f"1 passed, 1 failed ({session.seconds:.0f} s)",
    ]
    assert "1 failed, 1 passed" in (repo / "build" / "logs" / "mine.log").read_text()
    again = tool_checks.repo_pytest(venv, "tests", label="mine", EXTRA="yes")
    assert tool_checks.measured(again, "tests").ok
