"""evidence.mutate: the outcomes of mutants in a tiny synthetic fork with a
tiny pytest test (this interpreter, no vLLM)."""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from evidence import mutate, mutate_runs
from forktool import checks
from forktool.checks import CheckResult
from forktool.layout import LAYOUT, Layout
from forktool.process import git, identity
from forktool.pytest_runner import Runner
from forktool.selection import Selection

# --- outcomes in a tiny fork ---------------------------------------------------

AUTHOR = "t <t@t.invalid>"
CALC = """\
LIMIT = 3


def decide(a, b):
    return a and b


def limit(n):
    return n > LIMIT


def clamp(n):
    return min(n, 10)
"""
TESTS = """\
from vllm.calc import clamp, decide, limit


def test_decide():
    assert decide(True, False) is False
    assert decide(False, True) is False


def test_limit_above():
    assert limit(5) is True


def test_clamp():
    assert clamp(3) == 3
"""
# Left alive by the tests: one at import, one inside a function.
SURVIVORS = [
    ("vllm/calc.py", "LIMIT = 3", "3 -> 4"),
    ("vllm/calc.py", "return min(n, 10)", "10 -> 11"),
]


def tiny_fork(tmp_path: Path) -> Path:
    """A base, and a patch that adds both functions' bodies and their tests."""
    fork = tmp_path / "fork"
    (fork / "vllm").mkdir(parents=True)
    (fork / "vllm" / "__init__.py").write_text("")
    (fork / "vllm" / "calc.py").write_text("def decide(a, b):\n    pass\n")
    git(fork, "init", "-q")
    git(fork, "add", "-A")
    git(fork, "commit", "-q", "-m", "base", env=identity(AUTHOR))
    git(fork, "tag", "base")
    (fork / "vllm" / "calc.py").write_text(CALC)
    (fork / "tests").mkdir()
    (fork / "tests" / "test_calc.py").write_text(TESTS)
    git(fork, "add", "-A")
    git(fork, "commit", "-q", "-m", "[Core] Calc", env=identity(AUTHOR))
    return fork


@pytest.fixture
def setting(tmp_path, monkeypatch):
    monkeypatch.setenv("VLLM_FORK_CACHE", str(tmp_path / "cache"))
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(sys.executable)
    (tmp_path / "fixtures").mkdir()
    runner = Runner(venv, tmp_path / "fixtures", tmp_path / "hf", {}, tmp_path / "logs")
    selection = Selection({}, ("tests/test_calc.py",), (), frozenset(), (), {})
    return tiny_fork(tmp_path), runner, selection


def check(
    tmp_path: Path, setting, equivalents: Path, gpu_lines: Path = Path("/none")
) -> mutate.Measured:
    fork, runner, selection = setting
    store = tmp_path / "results"
    found = mutate.mutation_testing(
        fork, tmp_path / "trees", runner, selection, store, equivalents, gpu_lines
    )
    tree = checks.fork_tree(fork)  # as `test` writes it
    result = CheckResult(mutate.NAME, found.ok, tree, "0.1", mutate.COMMAND_LINE)
    result.counts, result.data = found.counts, found.data
    checks.write(store, result)
    return found


def test_killed_by_which_test_survived_cached_and_equivalent(tmp_path, setting, capsys):
    equivalents = tmp_path / "mutants-equivalent.toml"
    found = check(tmp_path, setting, equivalents)
    assert not found.ok
    assert found.counts["mutants"] == 14
    assert (found.counts["killed"], found.counts["survived"]) == (12, 2)
    rows = {
        (m["line"], m["mutation"]): (m["outcome"], m["detail"])
        for m in found.data["mutants"]
    }
    kinds = {m["kind"] for m in found.data["mutants"]}
    assert kinds == {"killed (series)", "survived"}  # no fork_tests/ here
    assert rows[5, "and -> or"] == ("killed", "tests/test_calc.py::test_decide")
    assert rows[5, "b dropped"] == ("killed", "tests/test_calc.py::test_decide")
    reverted = rows[1, "hunk reverted (-1,2 +1,13)"]
    assert reverted[0] == "killed" and reverted[1].startswith("tests/test_calc.py")
    assert rows[9, "> -> <="] == ("killed", "tests/test_calc.py::test_limit_above")
    assert rows[1, "assignment deleted"] == (
        "killed",
        "tests/test_calc.py::test_limit_above",
    )
    assert rows[1, "3 -> 4"] == ("survived", "")
    assert rows[13, "10 -> 11"] == ("survived", "")
    assert rows[13, "returns None"] == ("killed", "tests/test_calc.py::test_clamp")
    assert re.search(r"\nvllm/calc.py:1 +3 -> 4 +survived\n", found.excerpts["table"])
    fork = setting[0]
    assert git(fork, "status", "--porcelain").stdout == ""  # the fork untouched
    scratch = tmp_path / "trees" / "mutate-1" / "vllm" / "calc.py"
    assert scratch.read_text() == CALC  # and each worktree restored

    # A rerun on the same tree runs nothing; an equivalent mutant keeps its reason.
    capsys.readouterr()
    again = check(tmp_path, setting, equivalents)
    assert again.data["mutants"] == found.data["mutants"]
    assert "0 to run, 14 known" in capsys.readouterr().out
    equivalents.write_text(equivalent(*SURVIVORS))
    settled = check(tmp_path, setting, equivalents)
    assert settled.ok
    assert (settled.counts["equivalent"], settled.counts["survived"]) == (2, 0)
    assert re.search(r"10 -> 11 +equivalent +no test asks", settled.excerpts["table"])


def equivalent(*entries: tuple[str, str, str]) -> str:
    return "".join(
        f'[[equivalent]]\nfile = "{file}"\nline = "{line}"\n'
        f'mutation = "{mutation}"\nreason = "no test asks about 4"\n'
        for file, line, mutation in entries
    )


CHECK_CLAMP = """\
from vllm.calc import clamp


def test_clamp_caps():
    assert clamp(20) == 10
"""


def test_a_line_only_fork_tests_guard_fails_unless_it_is_gpu_only(
    tmp_path, setting, monkeypatch, capsys
):
    """fork_tests/ alone kills `10 -> 11` in clamp: the series' own tests do not
    guard that line, which fails the check until it is listed as GPU-only."""
    repo = tmp_path / "repo"  # this repository, with its fork_tests/
    (repo / "fork_tests").mkdir(parents=True)
    (repo / "fork_tests" / "test_cap.py").write_text(CHECK_CLAMP)
    for module in (mutate, mutate_runs):
        monkeypatch.setattr(module, "LAYOUT", Layout(repo))
    fork, runner, selection = setting
    setting = (fork, runner, replace(selection, fork_tests=("fork_tests",)))
    equivalents = tmp_path / "mutants-equivalent.toml"
    equivalents.write_text(equivalent(SURVIVORS[0]))  # the other survivor
    gpu_lines = tmp_path / "upstream-tests.toml"

    found = check(tmp_path, setting, equivalents, gpu_lines)
    assert not found.ok
    rows = {(m["line"], m["mutation"]): m for m in found.data["mutants"]}
    capped = rows[13, "10 -> 11"]
    assert (capped["outcome"], capped["kind"], capped["detail"]) == (
        "killed",
        "killed (fork tests only)",
        "fork_tests/test_cap.py::test_clamp_caps",
    )
    assert capped["gpu_only"] == ""
    assert rows[13, "returns None"]["kind"] == "killed (series)"
    assert found.counts["killed only by fork tests"] == 1
    assert found.counts["killed by the series"] == found.counts["killed"] - 1
    row = r"\nvllm/calc.py:13 +10 -> 11 +killed \(fork tests only\) +fork_tests/"
    assert re.search(row, found.excerpts["table"])
    out = capsys.readouterr().out
    assert (
        "MUTANTS: vllm/calc.py:13 is guarded only by fork_tests/ (10 -> 11), not by "
        "the series' regression selection" in out
    )
    assert "mutation testing: FAILED" in out

    # Listed as a line no CPU test reaches, with why: the check passes, from
    # the cached outcomes, and says why.
    gpu_lines.write_text(
        '[[mutate.gpu_only]]\nfile = "vllm/calc.py"\n'
        'line = "return min(n, 10)"\nreason = "only a GPU clamps"\n'
    )
    listed = check(tmp_path, setting, equivalents, gpu_lines)
    assert listed.ok
    listed_rows = {(m["line"], m["mutation"]): m for m in listed.data["mutants"]}
    assert listed_rows[13, "10 -> 11"]["gpu_only"] == "only a GPU clamps"
    out = capsys.readouterr().out
    assert "0 to run" in out and "MUTANTS:" not in out
    assert "vllm/calc.py:13 is guarded only by fork_tests/ (10 -> 11): GPU-only" in out


def test_a_selection_that_fails_unmutated_is_refused(tmp_path, setting):
    fork, runner, selection = setting
    (fork / "tests" / "test_calc.py").write_text("def test_no():\n    assert False\n")
    git(fork, "commit", "-qam", "broken", env=identity(AUTHOR))
    with pytest.raises(mutate.ForkToolError, match="does not pass on the fork"):
        mutate.mutation_testing(
            fork, tmp_path / "trees", runner, selection, tmp_path / "r", Path("/none")
        )


def test_the_command_is_registered():
    run = subprocess.run(
        [sys.executable, "-m", "forktool", "mutate", "--help"],
        cwd=LAYOUT.root,
        capture_output=True,
        text=True,
    )
    unwrapped = re.sub(r"-\n\s*", "-", run.stdout)  # argparse wraps at hyphens
    assert run.returncode == 0 and "mutants-equivalent.toml" in unwrapped
