"""evidence.mutation: mutants of added lines, the server's code swap, outcomes."""

import dataclasses
import importlib
import re

import pytest
from evidence_fixture import commit, link_venv, new_repo, write

from evidence import mutation, pytest_server
from evidence.vllm_tests import Runner
from forktool import checks
from forktool.commands import command
from forktool.layout import Layout
from forktool.process import ForkToolError, git
from forktool.selection import Selection

DIFF = """\
diff --git a/vllm/a.py b/vllm/a.py
--- a/vllm/a.py
+++ b/vllm/a.py
@@ -10,0 +11,3 @@ def f():
@@ -20 +23 @@ def g():
diff --git a/vllm/gone.py b/vllm/gone.py
--- a/vllm/gone.py
+++ /dev/null
@@ -1,2 +0,0 @@
diff --git a/vllm/data.json b/vllm/data.json
--- a/vllm/data.json
+++ b/vllm/data.json
@@ -1 +1 @@
"""


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


def made(source: str, lines: set[int]) -> list[mutation.Mutant]:
    return mutation.mutants("vllm/x.py", source, lines)


def found(source: str, lines: set[int]) -> list[tuple[int, str]]:
    return [(m.line, m.mutation) for m in made(source, lines)]


KINDS = [
    (3, "assignment deleted"), (3, "any -> all"),
    (4, "or -> and"), (4, "needed and flag dropped"),
    (4, "len(configs) > 1 dropped"), (4, "and -> or"), (4, "needed dropped"),
    (4, "flag dropped"), (4, "> -> <="), (4, "1 -> 2"),
    (5, "raise deleted"),
    (6, "assignment deleted"), (6, "0 -> 1"), (6, "True -> False"),
    (7, "assert deleted"), (7, "or -> and"), (7, "not flag dropped"),
    (7, "configs dropped"), (7, "not dropped"),
    (8, "returns None"),
    (8, "returns its negation"),  # the same code as dropping its `not`
]  # fmt: skip
# In a class body and a default too (run at import, in a fresh pytest).
OTHERS = """\
class K:
    flag: bool = False

    def m(self, items, x=0.5):
        a, b = items
        a += x + 1
        while all(i is not b for i in items) or a not in b:
            if a is None:
                break
        return None
"""
OTHER_KINDS = [
    (2, "assignment deleted"), (2, "False -> True"),
    (4, "0.5 -> 1.5"),
    (5, "assignment deleted"),  # an unpacking target is no pair to drop from
    (6, "assignment deleted"), (6, "1 -> 2"),  # a constant term is not halved
    (7, "or -> and"), (7, "all((i is not b for i in items)) dropped"),
    (7, "a not in b dropped"), (7, "all -> any"), (7, "is not -> is"),
    (7, "not in -> in"),
    (8, "guard deleted"), (8, "is -> is not"),
    (10, "returns its negation"),  # None is not replaced by None
]  # fmt: skip


@pytest.mark.parametrize(
    "source, added, expected",
    [(SOURCE, range(2, 9), KINDS), (OTHERS, range(1, 11), OTHER_KINDS)],
)
def test_each_kind_of_mistake_on_the_added_lines_only(source, added, expected):
    assert found(source, set(added)) == expected


def test_a_mutant_or_a_hunk_reverted_is_the_whole_file_and_compiles(monkeypatch):
    negated = {m.mutation: m for m in made(SOURCE, {8})}["returns its negation"]
    assert negated.source == SOURCE.replace("return not needed", "return needed")
    assert negated.text == "return not needed"
    (deleted,) = made(SOURCE, {5})
    assert "        pass\n    configs[0]" in deleted.source
    swapped = {m.mutation: m for m in made(SOURCE, {10})}["== -> !="]
    assert "    return (a != b)\n" in swapped.source
    pages = """\
def pages(specs):
    for spec in specs:
        if spec.host:
            continue
        key = (spec.dtype, spec.mode)
        end = spec.start + spec.size
        yield key, (spec.start, end, 1)
"""
    by = {m.mutation: m.source for m in made(pages, {3, 5, 6, 7})}
    assert "    for spec in specs:\n        pass\n" in by["guard deleted"]
    assert "key = (spec.dtype,)" in by["spec.mode dropped"]
    assert "key = (spec.mode,)" in by["spec.dtype dropped"]
    assert "spec.start + (spec.size) // 2" in by["added term halved"]
    # Only pairs lose an element; a triple is a record its reader unpacks.
    assert not {"spec.start dropped", "end dropped", "1 dropped"} & set(by)
    # Multiline statements, columns in bytes, the same mistake twice on a line.
    source = 'label = "é"; n = 1\nsame = a == b == c\n'
    source += "total = sum(\n    x for x in range(3)\n)\n"
    mutants = made(source, {1, 2, 3})
    by_name = {m.mutation: m for m in mutants if m.line == 1}
    assert 'label = "é"; n = 2\n' in by_name["1 -> 2"].source
    on_2 = [m.mutation for m in mutants if m.line == 2]
    assert on_2 == ["assignment deleted", "== -> !=", "== -> != #2"]
    (gone,) = [m for m in mutants if m.line == 3]
    assert gone.source.endswith("pass\n") and gone.text == "total = sum("
    # A hunk reverted alone, unless it changes no code.
    assert mutation.added_lines(DIFF) == {"vllm/a.py": {11, 12, 13, 23}}  # .py only
    old = "def f(x):\n    return x\n\n\ndef g():\n    return 1\n"
    f = 'def f(x):\n    """Doc."""\n    return x\n\n\n'
    new = f + "def g():\n    # why\n    y = 2\n    return y\n"
    diff = (
        '@@ -1,2 +1,3 @@\n def f(x):\n+    """Doc."""\n     return x\n'
        "@@ -5,2 +6,4 @@\n def g():\n-    return 1\n+    # why\n+    y = 2\n"
        "+    return y\n"
    )
    (reverted,) = mutation.hunk_reverts("vllm/x.py", old, new, diff)
    assert reverted.source == f + "def g():\n    return 1\n"
    assert (reverted.line, reverted.mutation) == (6, "hunk reverted (-5,2 +6,4)")
    assert reverted.function == ""  # a fresh pytest runs it
    # A mutant that does not compile is left out.
    monkeypatch.setattr(mutation, "_points", lambda n: [(n, "return (", "broken")])
    assert found("def f():\n    return 1\n", {2}) == []


SWAPPABLE = """\
import functools
class K:
    on: bool = False
    @property
    def flag(self):
        return True
    @functools.cached_property
    def cached(self):
        return 1
@functools.lru_cache(maxsize=1)
def h(x=1):
    return x
def f():
    return K().flag
g = functools.partial(f)
"""


@pytest.mark.parametrize("qualname, old, new, check", [
    ("K.flag", "return True", "return False", lambda m: m.K().flag),
    ("K.cached", "return 1", "return 2", lambda m: m.K().cached == 1),
    ("f", "return K().flag", "return None", lambda m: m.f()),
])  # fmt: skip
def test_each_mutant_names_its_function_the_server_swaps_the_code_of(
    tmp_path, monkeypatch, qualname, old, new, check
):
    where = {(m.line, m.mutation): m.function for m in made(SWAPPABLE, set(range(17)))}
    assert where[3, "False -> True"] == ""  # the class body runs at import
    assert where[6, "returns None"] == "K.flag"
    assert where[10, "1 -> 2"] == ""  # so does a decorator
    assert where[11, "1 -> 2"] == ""  # and a default
    assert where[12, "returns None"] == "h"
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
TEST_CALC = "tests/test_calc.py"
# Left alive by the tests: one at import, one inside a function.
SURVIVORS = [("vllm/calc.py", "LIMIT = 3", "3 -> 4"),
             ("vllm/calc.py", "return min(n, 10)", "10 -> 11")]  # fmt: skip


@pytest.fixture
def check(tmp_path, monkeypatch):
    """Runs the check on a patch adding CALC: (found, its rows by line, mutation)."""
    monkeypatch.setenv("VLLM_FORK_CACHE", str(tmp_path / "cache"))
    for module in (mutation, checks):  # its lists, fork_tests/, the inputs
        monkeypatch.setattr(module, "LAYOUT", Layout(tmp_path))
    monkeypatch.setattr(mutation, "PLUGIN_SOURCES", (tmp_path / "plugin.py",))
    base = {"vllm/__init__.py": "", "vllm/calc.py": "def decide(a, b):\n    pass\n"}
    commit(fork := new_repo(tmp_path / "fork"), base, "base", tag="base")
    commit(fork, {"vllm/calc.py": CALC, TEST_CALC: TESTS}, "[Core] Calc")
    (tmp_path / "fixtures").mkdir()
    venv = link_venv(tmp_path / "venv")
    runner = Runner(venv, tmp_path / "fixtures", tmp_path / "hf", {}, tmp_path / "logs")
    store, trees = tmp_path / "results", tmp_path / "trees"

    def check(*fork_tests: str, excluded: dict | None = None, tests=(TEST_CALC,)):
        selection = Selection({}, tests, fork_tests, frozenset(), (), excluded or {})
        ran = dataclasses.replace(runner, excluded=selection.excluded)
        found = mutation.mutation_testing(fork, trees, ran, selection, store)
        tree, line = checks.fork_tree(fork), mutation.COMMAND_LINE
        result = checks.CheckResult(
            mutation.NAME, found.ok, tree, "0.1", line, inputs=checks.inputs_id()
        )
        result.counts, result.data = found.counts, found.data
        checks.write(store, result)
        return found, {(m["line"], m["mutation"]): m for m in found.data["mutants"]}

    return check


def listed(*entries: tuple[str, str, str]) -> str:
    return "".join(
        f'[[equivalent]]\nfile = "{file}"\nline = "{line}"\n'
        f'mutation = "{mutation}"\nreason = "no test asks about 4"\n'
        for file, line, mutation in entries
    )


def test_killed_by_which_test_survived_cached_and_equivalent(
    tmp_path, check, capsys, monkeypatch
):
    found, by_line = check()
    assert not found.ok
    assert [found.counts[k] for k in ("mutants", "killed", "survived")] == [14, 12, 2]
    rows = {at: (m["outcome"], m["detail"]) for at, m in by_line.items()}
    # No fork_tests/ here.
    assert {m["kind"] for m in found.data["mutants"]} == {"killed (series)", "survived"}
    test = "tests/test_calc.py::test_"
    assert rows[3, "and -> or"] == rows[3, "b dropped"] == ("killed", test + "decide")
    limit = ("killed", test + "limit_above")
    assert rows[5, "> -> <="] == rows[1, "assignment deleted"] == limit
    reverted = rows[1, "hunk reverted (-1,2 +1,7)"]
    assert reverted[0] == "killed" and reverted[1].startswith("tests/test_calc.py")
    assert rows[1, "3 -> 4"] == rows[7, "10 -> 11"] == ("survived", "")
    assert rows[7, "returns None"] == ("killed", test + "clamp")
    assert re.search(r"\nvllm/calc.py:1 +3 -> 4 +survived\n", found.excerpts["table"])
    assert git(tmp_path / "fork", "status", "--porcelain").stdout == ""  # untouched
    scratch = tmp_path / "trees" / "mutate-1" / "vllm" / "calc.py"
    assert scratch.read_text() == CALC  # and each worktree restored
    # A rerun runs nothing; equivalents keep their reason; a stale entry is named.
    capsys.readouterr()
    again, _ = check()
    assert again.data["mutants"] == found.data["mutants"]
    assert "0 to run, 14 known" in capsys.readouterr().out
    edits = {
        "venv/.forktool-complete": "another lock",
        "fixtures/c.json": "{}",
        "fork_tests/test_ok.py": "def test_ok():\n    pass\n",
        "pyproject.toml": "",
        "plugin.py": "A = 1\n",  # a plugin recording the outcomes
    }
    for edit, text in edits.items():  # what the tests read: all again
        write(tmp_path, {edit: text})
        check()
        assert "14 to run, 0 known" in capsys.readouterr().out
    commit(tmp_path / "fork", {"tests/test_more.py": "X = 1\n"}, "[Core] More")
    check()  # another tree, then other tests, one change at a time: all again
    ran: dict = {"tests": (TEST_CALC, "-p", "no:warnings")}
    check(**ran)
    check("fork_tests", **ran)
    ran["excluded"] = {f"{TEST_CALC}::test_none": "absent"}
    check("fork_tests", **ran)
    assert capsys.readouterr().out.count("14 to run, 0 known") == 4
    gone = ("vllm/calc.py", "x = 1", "1 -> 2")
    (tmp_path / "mutants-equivalent.toml").write_text(listed(*SURVIVORS, gone))
    settled, _ = check("fork_tests", **ran)
    out = capsys.readouterr().out
    assert "0 to run, 14 known" in out  # what an outcome means changed, not it
    assert settled.ok
    assert (settled.counts["equivalent"], settled.counts["survived"]) == (2, 0)
    assert re.search(r"10 -> 11 +equivalent +no test asks", settled.excerpts["table"])
    assert "mutants-equivalent.toml: no mutant is vllm/calc.py: 'x = 1': 1 -> 2" in out


def test_a_line_only_fork_tests_guard_fails_unless_gpu_only(tmp_path, check, capsys):
    """Only fork_tests/ kills `10 -> 11`: a failure until GPU-only."""
    cap = "def test_clamp_caps():\n    assert clamp(20) == 10\n"
    write(tmp_path, {"fork_tests/test_cap.py": TESTS.split("def")[0] + cap})
    (tmp_path / "mutants-equivalent.toml").write_text(listed(SURVIVORS[0]))
    found, rows = check("fork_tests")
    assert not found.ok
    capped = [rows[7, "10 -> 11"][k] for k in ("outcome", "kind", "detail", "gpu_only")]
    assert capped == ["killed", "killed (fork tests only)",
                      "fork_tests/test_cap.py::test_clamp_caps", ""]  # fmt: skip
    assert rows[7, "returns None"]["kind"] == "killed (series)"
    assert found.counts["killed only by fork tests"] == 1
    assert found.counts["killed by the series"] == found.counts["killed"] - 1
    row = r"\nvllm/calc.py:7 +10 -> 11 +killed \(fork tests only\) +fork_tests/"
    assert re.search(row, found.excerpts["table"])
    out = capsys.readouterr().out
    said = "MUTANTS: vllm/calc.py:7 is guarded only by fork_tests/ (10 -> 11), not by "
    assert said + "the series' regression selection" in out
    assert "mutation testing: FAILED" in out
    # Listed as GPU-only, with why: it passes, from cached outcomes, and says why.
    (tmp_path / "upstream-tests.toml").write_text(
        '[[mutate.gpu_only]]\nfile = "vllm/calc.py"\n'
        'line = "return min(n, 10)"\nreason = "only a GPU clamps"\n'
    )
    again, rows = check("fork_tests")
    assert again.ok and rows[7, "10 -> 11"]["gpu_only"] == "only a GPU clamps"
    out = capsys.readouterr().out
    assert "0 to run" in out and "MUTANTS:" not in out
    assert "vllm/calc.py:7 is guarded only by fork_tests/ (10 -> 11): GPU-only" in out
    # A selection that fails on the unmutated fork is refused.
    commit(tmp_path / "fork", {TEST_CALC: "def test_no():\n    assert False\n"}, "x")
    with pytest.raises(ForkToolError, match="does not pass on the fork"):
        check()
    assert "mutants-equivalent.toml" in str(command("mutate").description)
