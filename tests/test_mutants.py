"""evidence.mutants: the mutants of added lines, from source (pure); and the
warm server's swap of a live function's code."""

from __future__ import annotations

import ast
import importlib

import pytest

from evidence import mutants, pytest_server

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
    assert mutants.added_lines(DIFF) == {"vllm/a.py": {11, 12, 13, 23}}


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
    return [(m.line, m.mutation) for m in mutants.mutants("vllm/x.py", source, lines)]


def test_each_kind_of_mistake_on_the_added_lines_only():
    assert found(SOURCE, set(range(2, 9))) == [
        (3, "assignment deleted"),
        (3, "any -> all"),
        (4, "or -> and"),
        (4, "needed and flag dropped"),
        (4, "len(configs) > 1 dropped"),
        (4, "and -> or"),
        (4, "needed dropped"),
        (4, "flag dropped"),
        (4, "> -> <="),
        (4, "1 -> 2"),
        (5, "raise deleted"),
        (6, "assignment deleted"),
        (6, "0 -> 1"),
        (6, "True -> False"),
        (7, "assert deleted"),
        (7, "or -> and"),
        (7, "not flag dropped"),
        (7, "configs dropped"),
        (7, "not dropped"),
        (8, "returns None"),
        (8, "returns its negation"),  # the same code as dropping its `not`
    ]


def test_a_pair_an_added_term_and_an_early_exit():
    source = (
        "def pages(specs):\n"
        "    for spec in specs:\n"
        "        if spec.host:\n"
        "            continue\n"
        "        key = (spec.dtype, spec.mode)\n"
        "        end = spec.start + spec.size\n"
        "        yield key, (spec.start, end, 1)\n"
    )
    made = {m.mutation: m for m in mutants.mutants("vllm/x.py", source, {3, 5, 6, 7})}
    assert "    for spec in specs:\n        pass\n" in made["guard deleted"].source
    assert "key = (spec.dtype,)" in made["spec.mode dropped"].source
    assert "key = (spec.mode,)" in made["spec.dtype dropped"].source
    assert "spec.start + (spec.size) // 2" in made["added term halved"].source
    # Only pairs lose an element; a triple is a record its reader unpacks.
    assert not {"spec.start dropped", "end dropped", "1 dropped"} & set(made)


def test_each_hunk_reverted_alone_unless_it_changes_no_code():
    old = "def f(x):\n    return x\n\n\ndef g():\n    return 1\n"
    new = (
        'def f(x):\n    """Doc."""\n    return x\n\n\n'
        "def g():\n    # why\n    y = 2\n    return y\n"
    )
    diff = (
        '@@ -1,2 +1,3 @@\n def f(x):\n+    """Doc."""\n     return x\n'
        "@@ -5,2 +6,4 @@\n def g():\n-    return 1\n+    # why\n+    y = 2\n"
        "+    return y\n"
    )
    (reverted,) = mutants.hunk_reverts("vllm/x.py", old, new, diff)
    assert reverted.source == 'def f(x):\n    """Doc."""\n    return x\n\n\n' + (
        "def g():\n    return 1\n"
    )
    assert (reverted.line, reverted.mutation) == (6, "hunk reverted (-5,2 +6,4)")
    assert reverted.function == ""  # a fresh pytest runs it


def test_a_mutant_is_the_whole_file_with_one_change():
    (negated,) = [
        m
        for m in mutants.mutants("vllm/x.py", SOURCE, {8})
        if m.mutation == "returns its negation"
    ]
    assert negated.source == SOURCE.replace("return not needed", "return needed")
    assert negated.text == "return not needed"
    (deleted,) = mutants.mutants("vllm/x.py", SOURCE, {5})
    assert "        pass\n    configs[0]" in deleted.source
    mutations = {m.mutation: m for m in mutants.mutants("vllm/x.py", SOURCE, {12})}
    assert "    return (a != b)\n" in mutations["== -> !="].source


def test_multiline_statements_bytes_and_repeated_mistakes():
    source = (
        'label = "é"; n = 1\n'
        "same = a == b == c\n"
        "total = sum(\n    x for x in range(3)\n)\n"
    )
    made = mutants.mutants("vllm/x.py", source, {1, 2, 3})
    by_name = {m.mutation: m for m in made if m.line == 1}
    assert 'label = "é"; n = 2\n' in by_name["1 -> 2"].source
    assert [m.mutation for m in made if m.line == 2] == [
        "assignment deleted",
        "== -> !=",
        "== -> != #2",
    ]
    (gone,) = [m for m in made if m.line == 3]
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
        for m in mutants.mutants("vllm/x.py", source, set(range(1, 15)))
    }
    assert where[5, "False -> True"] == ""  # the class body runs at import
    assert where[9, "returns None"] == "K.m"
    assert where[12, "1 -> 2"] == ""  # so does a decorator
    assert where[13, "1 -> 2"] == ""  # and a default
    assert where[14, "returns None"] == "f"


def test_a_mutant_that_does_not_compile_is_left_out(monkeypatch):
    def broken(node):
        if isinstance(node, ast.Return):
            yield node, "return (", "broken"

    monkeypatch.setattr(mutants, "_points", broken)
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


def test_the_other_operators_and_what_they_leave_alone():
    """In a class body and a default too (they run at import, in the same fresh
    pytest as any other mutant)."""
    source = (
        "class K:\n"
        "    flag: bool = False\n"
        "\n"
        "    def m(self, items, x=0.5):\n"
        "        a, b = items\n"
        "        a += x + 1\n"
        "        while all(i is not b for i in items) or a not in b:\n"
        "            if a is None:\n"
        "                break\n"
        "        return None\n"
    )
    assert found(source, set(range(1, 11))) == [
        (2, "assignment deleted"),
        (2, "False -> True"),
        (4, "0.5 -> 1.5"),
        (5, "assignment deleted"),  # an unpacking target is no pair to drop from
        (6, "assignment deleted"),
        (6, "1 -> 2"),  # a constant term is not halved
        (7, "or -> and"),
        (7, "all((i is not b for i in items)) dropped"),
        (7, "a not in b dropped"),
        (7, "all -> any"),
        (7, "is not -> is"),
        (7, "not in -> in"),
        (8, "guard deleted"),
        (8, "is -> is not"),
        (10, "returns its negation"),  # None is not replaced by None
    ]
