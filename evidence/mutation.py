"""Mutation testing of the lines the series adds (`python3 -m forktool mutate`,
and the check `mutants` of `test`).

Mutants are plausible one-line mistakes in each line the series adds under
vllm/ (`git diff base..HEAD`), found with the ast module: `and`/`or`, an
operand of either dropped, comparison operators, a dropped `not`,
`any`/`all`, True/False and numbers, an element of a pair dropped, an added
term halved, a deleted assignment, `raise`, `assert` or early-exit guard, a
returned value replaced (None, negated); and each hunk of the series' diff
reverted alone. A mutant that does not compile, or that is the same code as
another (docstrings aside), is left out.

Each mutant is written into a scratch worktree of the fork (one per worker,
two side by side), where the series' regression selection runs with -x,
then this repository's fork tests if it survived: the mutant is killed
(series) or killed (fork tests only) (by the first test that failed),
survived, or equivalent (listed with a reason in mutants-equivalent.toml,
and not run). Each worker is a warm server (evidence/pytest_server.py) that
imported the tree's vllm and the tests once and runs a mutant inside a
function in a fork of itself, the function's code swapped; a mutant that
runs at import gets a fresh pytest.

The series' own tests must guard every line it adds: a mutant only
fork_tests/ kills fails the check unless its line is listed as GPU-only
(`[[mutate.gpu_only]]` in upstream-tests.toml, with why no CPU test reaches
it). Outcomes are kept in the results store with the fork's tree and the
selection, so a rerun runs only new mutants.
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
import tempfile
import time
import tomllib
from collections import Counter, deque
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple

from evidence.pytest_server import SWAP_FAILED
from evidence.tree_process import TreeProcess
from evidence.vllm_tests import PLUGIN_SOURCES, Runner
from evidence.worktrees import worktree
from forktool import checks, pytest_runner
from forktool.layout import LAYOUT
from forktool.process import BASE_TAG, SERIES, ForkToolError, git
from forktool.pytest_runner import Result, read_report, report_args
from forktool.selection import Selection
from forktool.venv import python, venv_id

NAME = "mutants"  # the check's name in the registry, and so its results file
COMMAND_LINE = "python3 -m forktool mutate"
READY_TIMEOUT_S, RUN_TIMEOUT_S = 600.0, 900.0
KILLED_SERIES = "killed (series)"
KILLED_FORK_TESTS = "killed (fork tests only)"
FAILED = ("failed", "error")


# --- the mutants -------------------------------------------------------------


class Mutant(NamedTuple):
    path: str  # relative to the tree
    line: int  # in the fork's HEAD
    text: str  # that line, stripped: with path and mutation, the equivalents' key
    mutation: str
    source: str  # the whole mutated file
    # The qualified name of the function or method whose body holds the
    # mutation ("" when it runs at import: a class body, a decorator).
    function: str = ""

    @property
    def id(self) -> str:
        return hashlib.sha256(f"{self.path}\0{self.source}".encode()).hexdigest()[:16]


_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def added_lines(diff: str) -> dict[str, set[int]]:
    """The lines each Python file gains in a `git diff -U0`, by path."""
    files: dict[str, set[int]] = {}
    path = None
    for line in diff.splitlines():
        if line.startswith("+++ "):
            path = line[6:] if line.startswith("+++ b/") else None
        elif (hunk := _HUNK.match(line)) and path and path.endswith(".py"):
            start, count = int(hunk[3]), int(hunk[4] or 1)
            files.setdefault(path, set()).update(range(start, start + count))
    return {path: lines for path, lines in files.items() if lines}


# Each operator next to its opposite, and how each reads.
_NAMES = "And Or Eq NotEq Lt GtE Gt LtE Is IsNot In NotIn".split()
_READS = "and,or,==,!=,<,>=,>,<=,is,is not,in,not in".split(",")
SYMBOLS = {getattr(ast, n): r for n, r in zip(_NAMES, _READS, strict=True)}
SWAPS = {getattr(ast, n): getattr(ast, _NAMES[i ^ 1]) for i, n in enumerate(_NAMES)}
_DELETED = {ast.Raise: "raise", ast.Assert: "assert"}
_DELETED |= dict.fromkeys((ast.Assign, ast.AnnAssign, ast.AugAssign), "assignment")
Point = tuple[Any, str, str]
"""(the node to replace, the replacement's source, what the mistake is)."""


def _swap(op: Any) -> tuple[Any, str]:
    other = SWAPS[type(op)]()
    return other, f"{SYMBOLS[type(op)]} -> {SYMBOLS[type(other)]}"


def _points(node: ast.expr | ast.stmt) -> Iterator[Point]:
    """The mistakes in an expression or a statement."""
    if isinstance(node, ast.stmt):
        return _statement_points(node)
    return _expression_points(node)


def _statement_points(node: ast.stmt) -> Iterator[Point]:
    """The statement deleted, or its returned value replaced."""
    match node:
        case ast.If(body=[ast.Continue() | ast.Break() | ast.Return()], orelse=[]):
            yield node, "pass", "guard deleted"
        case ast.Return(value=ast.expr() as value):
            if not (isinstance(value, ast.Constant) and value.value is None):
                yield value, "None", "returns None"
            negated = f"not ({ast.unparse(value)})"
            if isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.Not):
                negated = ast.unparse(value.operand)
            yield value, negated, "returns its negation"
        case _ if type(node) in _DELETED:
            yield node, "pass", f"{_DELETED[type(node)]} deleted"


def _expression_points(node: ast.expr) -> Iterator[Point]:
    match node:
        case ast.BoolOp(op=op, values=values):
            other, what = _swap(op)
            yield node, f"({ast.unparse(ast.BoolOp(other, values))})", what
            for i, value in enumerate(values):
                rest = [*values[:i], *values[i + 1 :]]
                kept = rest[0] if len(rest) == 1 else ast.BoolOp(op, rest)
                yield node, f"({ast.unparse(kept)})", f"{ast.unparse(value)} dropped"
        case ast.Tuple(elts=[_, _] as elts, ctx=ast.Load()):  # a pair only
            for i, elt in enumerate(elts):
                pair = ast.Tuple([elts[1 - i]], ast.Load())
                yield node, ast.unparse(pair), f"{ast.unparse(elt)} dropped"
        case ast.BinOp(op=ast.Add(), right=term) if not isinstance(term, ast.Constant):
            yield term, f"({ast.unparse(term)}) // 2", "added term halved"
        case ast.Compare(left=left, ops=ops, comparators=comparators):
            for i, cmp in enumerate(ops):
                other, what = _swap(cmp)
                swapped = ast.Compare(left, [*ops], comparators)
                swapped.ops[i] = other
                yield node, f"({ast.unparse(swapped)})", what
        case ast.UnaryOp(op=ast.Not(), operand=operand):
            yield node, f"({ast.unparse(operand)})", "not dropped"
        case ast.Call(func=ast.Name(id="any" | "all") as func):
            callee = "all" if func.id == "any" else "any"
            yield func, callee, f"{func.id} -> {callee}"
        case ast.Constant(value=bool() as value):
            yield node, str(not value), f"{value} -> {not value}"
        case ast.Constant(value=int() | float() as value):
            yield node, repr(value + 1), f"{value!r} -> {value + 1!r}"


def _splice(source: str, node: Any, text: str) -> str:
    """`source` with `node`'s span replaced by `text` (ast columns are bytes)."""
    data = source.encode()
    lines = data.splitlines(keepends=True)
    begin = len(b"".join(lines[: node.lineno - 1])) + node.col_offset
    end = len(b"".join(lines[: node.end_lineno - 1])) + node.end_col_offset
    return (data[:begin] + text.encode() + data[end:]).decode()


def _functions(body: list[ast.stmt], prefix: str = "") -> Iterator[tuple[str, range]]:
    """(qualified name, the lines of its body) of each function and method."""
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            end = node.end_lineno or node.body[-1].lineno  # ast.parse sets it
            yield prefix + node.name, range(node.body[0].lineno, end + 1)
        elif isinstance(node, ast.ClassDef):
            yield from _functions(node.body, f"{prefix}{node.name}.")


def mutants(path: str, source: str, lines: set[int]) -> list[Mutant]:
    """The mutants of `lines` of `source` that compile, one per distinct code,
    in the order of the file; the same mistake twice on one line is told
    apart by " #2", " #3"."""
    texts, module = source.splitlines(), ast.parse(source)
    functions = list(_functions(module.body))
    codes, found = {ast.dump(module)}, []
    for node in ast.walk(module):
        if not isinstance(node, ast.expr | ast.stmt) or node.lineno not in lines:
            continue
        within = "".join(name for name, body in functions if node.lineno in body)
        for target, replacement, what in _points(node):
            mutated = _splice(source, target, replacement)
            try:
                compile(mutated, path, "exec")
            except (SyntaxError, ValueError):
                continue
            if (code := ast.dump(ast.parse(mutated))) not in codes:
                codes.add(code)
                text = texts[node.lineno - 1].strip()
                at = (node.lineno, node.col_offset, target.col_offset)
                found.append((at, text, what, mutated, within))
    numbered, seen = [], Counter[tuple[str, str]]()
    for (line, *_), text, what, mutated, within in sorted(found, key=lambda f: f[0]):
        seen[text, what] += 1
        if (n := seen[text, what]) > 1:
            what = f"{what} #{n}"
        numbered.append(Mutant(path, line, text, what, mutated, within))
    return numbered


def _without_docstrings(source: str) -> str:
    """`source`'s syntax tree's dump, docstrings left out."""
    module = ast.parse(source)
    for node in ast.walk(module):
        match getattr(node, "body", None):
            case [ast.Expr(value=ast.Constant(value=str())), *_] as body:
                body.pop(0)
    return ast.dump(module)


def hunk_reverts(path: str, old: str, new: str, diff: str) -> list[Mutant]:
    """`new` with each hunk of `diff` (from `old`) reverted alone; hunks that
    change no code (comments, docstrings) are left out."""
    old_lines, new_lines = old.splitlines(keepends=True), new.splitlines(keepends=True)
    code, found = _without_docstrings(new), []
    for hunk in filter(None, map(_HUNK.match, diff.splitlines())):
        o_start, o_len, n_start, n_len = (int(g or 1) for g in hunk.groups())
        # A hunk that only removes or only adds lines names the line before it.
        o_begin = o_start - 1 if o_len else o_start
        n_begin = n_start - 1 if n_len else n_start
        old_part = old_lines[o_begin : o_begin + o_len]
        source = "".join(new_lines[:n_begin] + old_part + new_lines[n_begin + n_len :])
        if _without_docstrings(source) != code:
            first = new_lines[n_begin].strip() if n_begin < len(new_lines) else ""
            what = f"hunk reverted (-{o_start},{o_len} +{n_start},{n_len})"
            found.append(Mutant(path, n_start, first, what, source))
    return found


def series_mutants(fork: Path) -> list[Mutant]:
    """The mutants of every line the series adds under vllm/, and each hunk of
    the series reverted alone, at the fork's HEAD."""
    diff = git(fork, "diff", "-U0", "--no-renames", SERIES, "--", "vllm/")
    found = []
    for path, lines in sorted(added_lines(diff.stdout).items()):
        source = git(fork, "show", f"HEAD:{path}").stdout
        found += mutants(path, source, lines)
        base = git(fork, "show", f"{BASE_TAG}:{path}").stdout
        hunks = git(fork, "diff", "--no-renames", SERIES, "--", path).stdout
        found += hunk_reverts(path, base, source, hunks)
    return found


# --- running them ------------------------------------------------------------


class Outcome(NamedTuple):
    kind: str  # KILLED_SERIES, KILLED_FORK_TESTS, survived or equivalent
    detail: str = ""  # the killing test, or why the mutant is equivalent


def runs(selection: Selection) -> list[tuple[tuple[str, ...], tuple[Path, ...]]]:
    """(pytest arguments, files outside the tree they read): the regression
    selection, then the fork tests in a pytest of their own, as the matrix runs them."""
    paths = tuple(LAYOUT.root / path for path in selection.fork_tests)
    forks = [((f"--rootdir={LAYOUT.root}", *map(str, paths)), paths)] if paths else []
    return [(selection.regression, ()), *forks]


class WarmPytest(TreeProcess):
    """evidence/pytest_server.py in `tree`: the tree's vllm and the selection's
    tests imported once; each run a fork of it with one function's code swapped."""

    def __init__(self, tree: Path, runner: Runner, selection: Selection) -> None:
        warm = [runner.arguments(tree, args) for args, _ in runs(selection)]
        server = Path(__file__).with_name("pytest_server.py")
        command = [python(runner.venv), str(server), json.dumps(warm)]
        env = pytest_runner.report_env(pytest_runner.test_env(runner.hf_home))
        super().__init__(f"mutate-{tree.name}", tree, command, env)
        self.runner, self.selection = runner, selection

    def run(self, mutant: Mutant, args: tuple[str, ...], log: Path) -> Result | None:
        """The outcomes of a fork running `args` with `mutant`'s function
        swapped in; None when it could not be swapped in."""
        with tempfile.TemporaryDirectory() as tmp:
            report = Path(tmp, "report.jsonl")
            pytest = [*self.runner.arguments(self.tree, args), "-q", "-rfE"]
            module = mutant.path.removesuffix(".py").replace("/", ".")
            said = {"module": module, "qualname": mutant.function, "log": str(log)}
            file = str(self.tree / mutant.path)
            self.write({**said, "file": file, "args": [*pytest, *report_args(report)]})
            if self.read(RUN_TIMEOUT_S)["status"] == SWAP_FAILED:
                return None
            return Result.of(read_report(report))

    def classify(self, mutant: Mutant, label: str) -> Outcome:
        """Run the selection against `mutant`, written into the tree, then
        restore the file.

        A mutant inside a function runs in a fork of this server (the file
        is written too, for any process the tests start); one that runs at
        import, or whose function could not be swapped, in a fresh pytest.
        The first test that failed or errored killed it; so did a run
        without results (the baseline passed), its log named.
        """
        target, log = self.tree / mutant.path, self.runner.logs / f"{label}.log"
        original = target.read_text()
        target.write_text(mutant.source)
        try:
            for n, (args, inputs) in enumerate(runs(self.selection)):
                args = ("-x", *args)
                result = self.run(mutant, args, log) if mutant.function else None
                result = result or self.runner.run(self.tree, args, label, inputs)
                failed = [t for t, o in result.outcomes.items() if o in FAILED]
                if failed or not result.outcomes:
                    killer = failed[0] if failed else f"no test result (see {log})"
                    return Outcome(KILLED_FORK_TESTS if n else KILLED_SERIES, killer)
            return Outcome("survived")
        finally:
            target.write_text(original)


def run_all(
    todo: list[Mutant], trees: list[Path], runner: Runner, selection: Selection
) -> dict[str, Outcome]:
    """Each mutant's outcome by id, the trees working side by side, each with
    a warm server."""
    waiting, found = deque(enumerate(todo, 1)), {}

    def work(server: WarmPytest) -> None:
        server.wait_ready(READY_TIMEOUT_S)
        while True:
            try:
                n, m = waiting.popleft()  # thread-safe
            except IndexError:
                return
            o = found[m.id] = server.classify(m, f"mutant-{n:03d}")
            said = f"{m.path}:{m.line}  {m.mutation}  {o.kind}  {o.detail}".rstrip()
            print(f"mutant {n}/{len(todo)}: {said}", flush=True)

    servers = [WarmPytest(tree, runner, selection) for tree in trees]
    try:
        with ThreadPoolExecutor(max_workers=len(trees)) as pool:
            list(pool.map(work, servers))
    finally:
        for server in servers:
            server.close()
    return found


def baseline(tree: Path, runner: Runner, selection: Selection) -> None:
    """The selection must pass on the unmutated tree, or no kill means anything.

    The same runs as the regression matrix's at the series' head, so after
    the matrix (as `test` runs them) they come from its cache."""
    for args, inputs in runs(selection):
        result = runner.run(tree, args, "mutate-baseline", inputs)
        if (failing := result.with_outcome(*FAILED)) or not result.outcomes:
            raise ForkToolError(
                "the regression selection does not pass on the fork itself, so "
                f"mutants would tell nothing: {failing or 'no test ran'}"
            )


# --- the check ---------------------------------------------------------------


def _reasons(path: Path, keys: tuple[str, ...], *section: str) -> dict[tuple, str]:
    """The entries of the array of tables `section` in `path`: their `keys`
    -> their reason."""
    try:
        data: Any = tomllib.loads(path.read_text("utf-8")) if path.exists() else {}
        for name in section:  # a missing table or array reads as {}: no entries
            data = data.get(name, {})
        return {tuple(e[k] for k in keys): e["reason"] for e in data}
    except (OSError, tomllib.TOMLDecodeError, KeyError) as e:
        raise ForkToolError(f"cannot read {path}: {e}") from e


def outcomes_key(selection: Selection, runner: Runner) -> str:
    """What a mutant's outcome depends on besides the tree: the tests run, and
    the content of what they read and of the plugins that record it (the lists
    of equivalent and GPU-only lines only change what an outcome means, which
    is judged anew each run)."""
    pyproject = LAYOUT.root / "pyproject.toml"
    read = checks.digest(LAYOUT.fork_tests, runner.fixtures, pyproject, *PLUGIN_SOURCES)
    tests = [selection.regression, selection.fork_tests, runner.excluded]
    what = [*tests, read, venv_id(runner.venv)]
    return hashlib.sha256(json.dumps(what).encode()).hexdigest()


def known_outcomes(
    every: list[Mutant], known: dict[tuple, str], old: checks.CheckResult | None
) -> dict[str, Outcome]:
    """The outcomes not to measure, by mutant id: the equivalent mutants (with
    their reason), and those in `old`, measured on this tree with this
    selection."""
    before = {r["id"]: r for r in (old.data["mutants"] if old else [])}
    outcomes = {}
    for m in every:
        if reason := known.get((m.path, m.text, m.mutation)):
            outcomes[m.id] = Outcome("equivalent", reason)
        elif m.id in before and before[m.id]["kind"] != "equivalent":
            outcomes[m.id] = Outcome(before[m.id]["kind"], before[m.id]["detail"])
    return outcomes


def table(found: list[tuple[Mutant, Outcome]]) -> str:
    heads = ("file:line", "mutation", "outcome", "killed by / why equivalent")
    rows = [heads, *((f"{m.path}:{m.line}", m.mutation, *o) for m, o in found)]
    widths = [*(max(len(r[i]) for r in rows) for i in range(3)), 0]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    )


def only_fork_tests(
    found: list[tuple[Mutant, Outcome]], gpu_only: dict[tuple, str], listed_in: str
) -> tuple[list[str], list[str]]:
    """The lines only fork_tests/ guards, one sentence each: notes for the lines
    listed as GPU-only, failures for the others."""
    lines: dict[tuple[str, int, str], list[str]] = {}
    for m, o in found:
        if o.kind == KILLED_FORK_TESTS:
            lines.setdefault((m.path, m.line, m.text), []).append(m.mutation)
    notes, failures = [], []
    for (file, line, text), mutations in sorted(lines.items()):
        what = f"{file}:{line} is guarded only by fork_tests/ ({', '.join(mutations)})"
        if reason := gpu_only.get((file, text)):
            notes.append(f"{what}: GPU-only, {reason}")
        else:
            failures.append(
                f"MUTANTS: {what}, not by the series' regression selection: make "
                "an upstream test reach it, or list the line under "
                f"[[mutate.gpu_only]] in {listed_in} with why no CPU test can"
            )
    return notes, failures


def mutation_testing(
    fork: Path, trees: Path, runner: Runner, selection: Selection, store: Path
) -> checks.Measured:
    """The check: every mutant of the series' added lines killed or equivalent,
    and killed by the series' regression selection unless its line is GPU-only
    (LAYOUT's equivalents and selection list them).

    Reuses the outcomes in `store` measured on the fork's tree with this
    selection and the same content of what its tests read; runs the other
    mutants in worktrees under `trees`, once the unmutated selection passed.
    """
    start, every = time.monotonic(), series_mutants(fork)
    equivalents, gpu_lines = LAYOUT.equivalents, LAYOUT.selection
    known = _reasons(equivalents, ("file", "line", "mutation"), "equivalent")
    gpu_only = _reasons(gpu_lines, ("file", "line"), "mutate", "gpu_only")
    key, old = outcomes_key(selection, runner), checks.read(store, NAME)
    if old is None or (old.tree, old.data.get("key")) != (checks.fork_tree(fork), key):
        old = None
    outcomes = known_outcomes(every, known, old)
    todo = [m for m in every if m.id not in outcomes]
    said = f"{len(every)} mutants of the series' added lines under vllm/: "
    print(f"{said}{len(todo)} to run, {len(every) - len(todo)} known", flush=True)
    if todo:
        baseline(fork, runner, selection)
        scratch = [worktree(fork, trees / f"mutate-{i}", "HEAD") for i in (1, 2)]
        outcomes.update(run_all(todo, scratch, runner, selection))
    found = [(m, outcomes[m.id]) for m in every]
    kinds = Counter(o.kind for _, o in found)
    series, forks = kinds[KILLED_SERIES], kinds[KILLED_FORK_TESTS]
    survived, equivalent = kinds["survived"], kinds["equivalent"]
    tally = {
        "mutants": len(found),
        "killed": series + forks,
        "killed by the series": series,
        "killed only by fork tests": forks,
        "survived": survived,
        "equivalent": equivalent,
    }
    notes, failures = only_fork_tests(found, gpu_only, gpu_lines.name)
    said = (
        f"{len(found)} mutants: {series + forks} killed ({series} by the series' "
        f"regression selection, {forks} only by fork_tests/), {survived} survived, "
        f"{equivalent} equivalent; {time.monotonic() - start:.0f} s, {len(todo)} run"
    )
    text = "\n".join([table(found), said, *notes, *failures])
    print(text)
    # The entries of the two lists that name no mutant (any more).
    for file, line, mutation in sorted(
        set(known) - {(m.path, m.text, m.mutation) for m in every}
    ):
        print(f"{equivalents.name}: no mutant is {file}: {line!r}: {mutation}")
    for file, line in sorted(set(gpu_only) - {(m.path, m.text) for m in every}):
        print(f"{gpu_lines.name}: gpu_only: no mutant's line is {file}: {line!r}")
    ok = not survived and not failures
    print(f"mutation testing: {'ok' if ok else 'FAILED'}")
    rows = [  # outcome: killed, survived or equivalent
        {"id": m.id, "file": m.path, "line": m.line, "text": m.text}
        | {"mutation": m.mutation, "outcome": o.kind.split()[0], "kind": o.kind}
        | {"detail": o.detail, "gpu_only": gpu_only.get((m.path, m.text), "")}
        for m, o in found
    ]
    data = {"key": key, "mutants": rows}
    return checks.Measured(ok, tally, {"table": f"$ {COMMAND_LINE}\n{text}"}, data)
