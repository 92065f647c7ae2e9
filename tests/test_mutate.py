"""evidence.mutate: mutants from source (pure), and their outcomes in a tiny
synthetic fork with a tiny pytest test (this interpreter, no vLLM)."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from evidence import mutate, pytest_server
from forktool import pytest_runner, results
from forktool.git import git, identity
from forktool.layout import LAYOUT, Layout
from forktool.pytest_runner import Runner
from forktool.results import CheckResult
from forktool.selection import Selection

DIFF = """\
diff --git a/vllm/a.py b/vllm/a.py
--- a/vllm/a.py
+++ b/vllm/a.py
@@ -10,0 +11,3 @@ def f():
+    x = 1
+    y = 2
+    return x
@@ -20 +23 @@ def g():
-    return 1
+    return 2
diff --git a/vllm/gone.py b/vllm/gone.py
--- a/vllm/gone.py
+++ /dev/null
@@ -1,2 +0,0 @@
-x = 1
-y = 2
diff --git a/vllm/data.json b/vllm/data.json
--- a/vllm/data.json
+++ b/vllm/data.json
@@ -1 +1 @@
-{}
+{"a": 1}
"""


def test_added_lines_of_python_files():
    assert mutate.added_lines(DIFF) == {"vllm/a.py": {11, 12, 13, 23}}


SOURCE = '''\
def decide(configs, flag):
    """Whether to zero: 1 > 0."""
    needed = any(c.zero for c in configs)
    if needed and flag or len(configs) > 1:
        raise ValueError("disagree")
    configs[0].zero = True
    assert not flag or configs
    return not needed


def untouched(a, b):
    return a == b
'''


def found(source: str, lines: set[int]) -> list[tuple[int, str]]:
    return [(m.line, m.mutation) for m in mutate.mutants("vllm/x.py", source, lines)]


def test_each_kind_of_mistake_on_the_added_lines_only():
    assert found(SOURCE, set(range(2, 9))) == [
        (3, "assignment deleted"),
        (3, "any -> all"),
        (4, "or -> and"),
        (4, "and -> or"),
        (4, "> -> <="),
        (4, "1 -> 2"),
        (5, "raise deleted"),
        (6, "assignment deleted"),
        (6, "0 -> 1"),
        (6, "True -> False"),
        (7, "assert deleted"),
        (7, "or -> and"),
        (7, "not dropped"),
        (8, "returns None"),
        (8, "returns its negation"),  # the same code as dropping its `not`
    ]


def test_a_mutant_is_the_whole_file_with_one_change():
    (negated,) = [
        m
        for m in mutate.mutants("vllm/x.py", SOURCE, {8})
        if m.mutation == "returns its negation"
    ]
    assert negated.source == SOURCE.replace("return not needed", "return needed")
    assert negated.text == "return not needed"
    (deleted,) = mutate.mutants("vllm/x.py", SOURCE, {5})
    assert "        pass\n    configs[0]" in deleted.source
    mutations = {m.mutation: m for m in mutate.mutants("vllm/x.py", SOURCE, {12})}
    assert "    return (a != b)\n" in mutations["== -> !="].source


def test_multiline_statements_bytes_and_repeated_mistakes():
    source = (
        'label = "é"; n = 1\n'
        "same = a == b == c\n"
        "total = sum(\n    x for x in range(3)\n)\n"
    )
    mutants = mutate.mutants("vllm/x.py", source, {1, 2, 3})
    by_name = {m.mutation: m for m in mutants if m.line == 1}
    assert 'label = "é"; n = 2\n' in by_name["1 -> 2"].source
    assert [m.mutation for m in mutants if m.line == 2] == [
        "assignment deleted",
        "== -> !=",
        "== -> != #2",
    ]
    (gone,) = [m for m in mutants if m.line == 3]
    assert gone.source.endswith("pass\n") and gone.text == "total = sum("


def test_each_mutant_names_the_function_it_runs_in():
    source = (
        "import functools\n\n\n"
        "class K:\n"
        "    flag: bool = False\n\n"
        "    @property\n"
        "    def m(self):\n"
        "        return self.flag\n\n\n"
        "@functools.lru_cache(maxsize=1)\n"
        "def f(x=1):\n"
        "    return x\n"
    )
    where = {
        (m.line, m.mutation): m.function
        for m in mutate.mutants("vllm/x.py", source, set(range(1, 15)))
    }
    assert where[5, "False -> True"] == ""  # the class body runs at import
    assert where[9, "returns None"] == "K.m"
    assert where[12, "1 -> 2"] == ""  # so does a decorator
    assert where[13, "1 -> 2"] == ""  # and a default
    assert where[14, "returns None"] == "f"


def test_a_mutant_that_does_not_compile_is_left_out(monkeypatch):
    def broken(node):
        if isinstance(node, mutate.ast.Return):
            yield node, "return (", "broken"

    monkeypatch.setattr(mutate, "_points", broken)
    assert found("def f():\n    return 1\n", {2}) == []


SWAPPABLE = """\
import functools


class K:
    @property
    def flag(self):
        return True

    @functools.cached_property
    def cached(self):
        return 1


def f():
    return K().flag


g = functools.partial(f)
"""


@pytest.mark.parametrize(
    "qualname, old, new, check",
    [
        ("K.flag", "return True", "return False", lambda m: m.K().flag),
        ("K.cached", "return 1", "return 2", lambda m: m.K().cached == 1),
        ("f", "return K().flag", "return None", lambda m: m.f()),
    ],
)
def test_the_server_swaps_the_code_of_live_functions(
    tmp_path, monkeypatch, qualname, old, new, check
):
    monkeypatch.syspath_prepend(str(tmp_path))
    module = tmp_path / f"swap_{qualname.replace('.', '_')}.py"
    module.write_text(SWAPPABLE)
    loaded = importlib.import_module(module.stem)
    assert check(loaded)
    module.write_text(SWAPPABLE.replace(old, new))
    request = {"module": module.stem, "qualname": qualname, "file": str(module)}
    pytest_server.swap(request)
    assert not check(loaded)
    with pytest.raises(LookupError):  # no function g: the mutant runs afresh
        pytest_server.swap({**request, "qualname": "g"})


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
    tree = results.fork_tree(fork)  # as `test` writes it
    result = CheckResult(mutate.NAME, found.ok, tree, "0.1", mutate.COMMAND_LINE)
    result.counts, result.data = found.counts, found.data
    results.write(store, result)
    return found


def test_killed_by_which_test_survived_cached_and_equivalent(tmp_path, setting, capsys):
    equivalents = tmp_path / "mutants-equivalent.toml"
    found = check(tmp_path, setting, equivalents)
    assert not found.ok
    assert found.counts["mutants"] == 11
    assert (found.counts["killed"], found.counts["survived"]) == (9, 2)
    rows = {
        (m["line"], m["mutation"]): (m["outcome"], m["detail"])
        for m in found.data["mutants"]
    }
    kinds = {m["kind"] for m in found.data["mutants"]}
    assert kinds == {"killed (series)", "survived"}  # no checks/ here
    assert rows[5, "and -> or"] == ("killed", "tests/test_calc.py::test_decide")
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
    assert "0 to run, 11 known" in capsys.readouterr().out
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


def test_a_line_only_checks_guard_fails_unless_it_is_gpu_only(
    tmp_path, setting, monkeypatch, capsys
):
    """checks/ alone kills `10 -> 11` in clamp: the series' own tests do not
    guard that line, which fails the check until it is listed as GPU-only."""
    repo = tmp_path / "repo"  # this repository, with its checks/
    (repo / "checks").mkdir(parents=True)
    (repo / "checks" / "test_cap.py").write_text(CHECK_CLAMP)
    for module in (mutate, pytest_runner):
        monkeypatch.setattr(module, "LAYOUT", Layout(repo))
    fork, runner, selection = setting
    setting = (fork, runner, replace(selection, checks=("checks",)))
    equivalents = tmp_path / "mutants-equivalent.toml"
    equivalents.write_text(equivalent(SURVIVORS[0]))  # the other survivor
    gpu_lines = tmp_path / "upstream-tests.toml"

    found = check(tmp_path, setting, equivalents, gpu_lines)
    assert not found.ok
    rows = {(m["line"], m["mutation"]): m for m in found.data["mutants"]}
    capped = rows[13, "10 -> 11"]
    assert (capped["outcome"], capped["kind"], capped["detail"]) == (
        "killed",
        "killed (checks only)",
        "checks/test_cap.py::test_clamp_caps",
    )
    assert capped["gpu_only"] == ""
    assert rows[13, "returns None"]["kind"] == "killed (series)"
    assert found.counts["killed only by checks"] == 1
    assert found.counts["killed by the series"] == found.counts["killed"] - 1
    row = r"\nvllm/calc.py:13 +10 -> 11 +killed \(checks only\) +checks/"
    assert re.search(row, found.excerpts["table"])
    out = capsys.readouterr().out
    assert (
        "MUTANTS: vllm/calc.py:13 is guarded only by checks/ (10 -> 11), not by "
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
    assert listed.data["mutants"][-1]["gpu_only"] == "only a GPU clamps"
    out = capsys.readouterr().out
    assert "0 to run" in out and "MUTANTS:" not in out
    assert "vllm/calc.py:13 is guarded only by checks/ (10 -> 11): GPU-only" in out


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
