"""Mutation testing of the lines the series adds (`python3 -m forktool mutate`,
and the check `mutants` of `test`).

Mutants are plausible one-line mistakes in each line the series adds under
vllm/ (`git diff base..HEAD`): `and`/`or`, comparison operators, a dropped
`not`, `any`/`all`, True/False and numbers, a deleted assignment, `raise` or
`assert`, a returned value replaced (None, negated). The ast module finds
them; a mutant that does not compile, or that is the same code as another,
is left out.

Each mutant is written into a scratch worktree of the fork (one per worker,
two side by side), where the series' regression selection runs with -x, then
this repository's checks if it survived: the mutant is killed (series) or
killed (checks only) (by the first test that failed), survived, or equivalent
(listed with a reason in mutants-equivalent.toml, and not run). The series'
own tests must guard every line it adds: a mutant only checks/ kills fails
the check unless its line is listed as GPU-only (`[[mutate.gpu_only]]` in
upstream-tests.toml, with why no CPU test reaches it). Outcomes are kept in
the results store with the fork's tree and the selection, so a rerun runs
only new mutants.
"""

from __future__ import annotations

import ast
import hashlib
import json
import queue
import re
import tempfile
import time
import tomllib
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypeVar

from evidence.pytest_server import SWAP_FAILED
from evidence.tree_process import TreeProcess
from forktool import results
from forktool.errors import ForkToolError
from forktool.git import SERIES, git
from forktool.layout import LAYOUT
from forktool.pytest_runner import Result, Runner, parse_junit, test_env
from forktool.results import Measured
from forktool.selection import Selection
from forktool.venv import python, venv_id
from forktool.worktrees import worktree

WORKERS = 2
SERVER = Path(__file__).with_name("pytest_server.py")
READY_TIMEOUT_S = 600.0
RUN_TIMEOUT_S = 900.0

# --- mutants --------------------------------------------------------------------

NAME = "mutants"
"""The check's name in the registry, and so its results file."""
COMMAND_LINE = "python3 -m forktool mutate"


@dataclass(frozen=True)
class Mutant:
    path: str
    """The file, relative to the tree."""
    line: int
    """Its line in the fork's HEAD."""
    text: str
    """That line's text, stripped: with `path` and `mutation`, the key of
    mutants-equivalent.toml."""
    mutation: str
    source: str
    """The whole mutated file."""
    function: str = ""
    """The qualified name of the module's function or method whose body holds
    the mutation ("" when it runs at import: a class body, a decorator)."""

    @property
    def id(self) -> str:
        return hashlib.sha256(f"{self.path}\0{self.source}".encode()).hexdigest()[:16]


_HUNK = re.compile(r"^@@ -\S+ \+(\d+)(?:,(\d+))? @@")


def added_lines(diff: str) -> dict[str, set[int]]:
    """The lines each Python file gains in a `git diff -U0`, by path."""
    files: dict[str, set[int]] = {}
    path = None
    for line in diff.splitlines():
        if line.startswith("+++ "):
            path = line[6:] if line.startswith("+++ b/") else None
        elif (hunk := _HUNK.match(line)) and path and path.endswith(".py"):
            start, count = int(hunk[1]), int(hunk[2] or 1)
            files.setdefault(path, set()).update(range(start, start + count))
    return {path: lines for path, lines in files.items() if lines}


SYMBOLS: dict[type, str] = {
    ast.And: "and",
    ast.Or: "or",
    ast.Eq: "==",
    ast.NotEq: "!=",
    ast.Lt: "<",
    ast.GtE: ">=",
    ast.Gt: ">",
    ast.LtE: "<=",
    ast.Is: "is",
    ast.IsNot: "is not",
    ast.In: "in",
    ast.NotIn: "not in",
}
# Each operator and its opposite.
# An operator _swap replaces by its opposite, of the same kind.
_Op = TypeVar("_Op", ast.boolop, ast.cmpop)
SWAPS: dict[type, type] = {
    ast.And: ast.Or,
    ast.Or: ast.And,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Lt: ast.GtE,
    ast.GtE: ast.Lt,
    ast.Gt: ast.LtE,
    ast.LtE: ast.Gt,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
}


def _swap(op: _Op) -> tuple[_Op, str]:
    other: _Op = SWAPS[type(op)]()
    return other, f"{SYMBOLS[type(op)]} -> {SYMBOLS[type(other)]}"


def _negated(value: ast.expr) -> str:
    if isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.Not):
        return ast.unparse(value.operand)
    return f"not ({ast.unparse(value)})"


def _points(
    node: ast.expr | ast.stmt,
) -> Iterator[tuple[ast.expr | ast.stmt, str, str]]:
    """(the node to replace, the replacement's source, what the mistake is)."""
    match node:
        case ast.BoolOp(op=bool_op, values=values):
            other_bool, what = _swap(bool_op)
            yield node, f"({ast.unparse(ast.BoolOp(other_bool, values))})", what
        case ast.Compare(left=left, ops=ops, comparators=comparators):
            for i, cmp_op in enumerate(ops):
                other_cmp, what = _swap(cmp_op)
                swapped = ast.Compare(
                    left, [*ops[:i], other_cmp, *ops[i + 1 :]], comparators
                )
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
        case ast.Assign() | ast.AnnAssign() | ast.AugAssign():
            yield node, "pass", "assignment deleted"
        case ast.Raise():
            yield node, "pass", "raise deleted"
        case ast.Assert():
            yield node, "pass", "assert deleted"
        case ast.Return(value=ast.expr() as value):
            if not (isinstance(value, ast.Constant) and value.value is None):
                yield value, "None", "returns None"
            yield value, _negated(value), "returns its negation"


def _splice(source: str, node: ast.expr | ast.stmt, text: str) -> str:
    """`source` with `node`'s span replaced by `text` (ast columns are bytes)."""
    # ast.parse sets every node's end; only hand-built nodes lack one.
    assert node.end_lineno is not None and node.end_col_offset is not None
    data = source.encode()
    starts = [0]
    for line in data.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    begin = starts[node.lineno - 1] + node.col_offset
    end = starts[node.end_lineno - 1] + node.end_col_offset
    return (data[:begin] + text.encode() + data[end:]).decode()


def _code(source: str, path: str) -> str | None:
    """`source` as its syntax tree's dump, None when it does not compile."""
    try:
        compile(source, path, "exec")
    except (SyntaxError, ValueError):
        return None
    return ast.dump(ast.parse(source))


def _functions(body: list[ast.stmt], prefix: str = "") -> Iterator[tuple[str, range]]:
    """(qualified name, the lines of its body) of each function and method."""
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            end = node.end_lineno or node.body[-1].lineno  # ast.parse sets it
            yield prefix + node.name, range(node.body[0].lineno, end + 1)
        elif isinstance(node, ast.ClassDef):
            yield from _functions(node.body, f"{prefix}{node.name}.")


def mutants(path: str, source: str, lines: set[int]) -> list[Mutant]:
    """The mutants of `lines` of `source`, in the order of the file."""
    texts = source.splitlines()
    module = ast.parse(source)
    functions = list(_functions(module.body))
    codes = {ast.dump(module)}  # one mutant per distinct code
    found = []
    for node in ast.walk(module):
        # Only expressions and statements have mutation points.
        if not isinstance(node, ast.expr | ast.stmt) or node.lineno not in lines:
            continue
        line = node.lineno
        for target, replacement, what in _points(node):
            mutated = _splice(source, target, replacement)
            code = _code(mutated, path)
            if code is not None and code not in codes:
                codes.add(code)
                spot = (line, node.col_offset, target.col_offset)
                within = [name for name, body in functions if line in body]
                text = texts[line - 1].strip()
                mutant = Mutant(path, line, text, what, mutated, "".join(within))
                found.append((spot, mutant))
    found.sort(key=lambda item: item[0])
    return _numbered([mutant for _, mutant in found])


def _numbered(found: list[Mutant]) -> list[Mutant]:
    """The same mistake twice on one line: " #2", " #3" tell them apart."""
    seen: Counter[tuple[str, str, str]] = Counter()
    out = []
    for m in found:
        seen[m.path, m.text, m.mutation] += 1
        n = seen[m.path, m.text, m.mutation]
        out.append(replace(m, mutation=f"{m.mutation} #{n}") if n > 1 else m)
    return out


def series_mutants(fork: Path) -> list[Mutant]:
    """The mutants of every line the series adds under vllm/, at the fork's HEAD."""
    diff = git(fork, "diff", "-U0", "--no-renames", SERIES, "--", "vllm/")
    found = []
    for path, lines in sorted(added_lines(diff.stdout).items()):
        source = git(fork, "show", f"HEAD:{path}").stdout
        found += mutants(path, source, lines)
    return found


def _reasons(
    path: Path, section: tuple[str, ...], keys: tuple[str, ...]
) -> dict[tuple[str, ...], str]:
    """The entries of the array of tables `section` in `path`: their `keys`
    -> their reason."""
    if not path.exists():
        return {}
    try:
        with path.open("rb") as f:
            data = tomllib.load(f)
        for name in section[:-1]:
            data = data.get(name, {})
        entries = data.get(section[-1], [])
        return {tuple(e[k] for k in keys): e["reason"] for e in entries}
    except (OSError, tomllib.TOMLDecodeError, KeyError) as e:
        raise ForkToolError(f"cannot read {path}: {e}") from e


def load_equivalents(path: Path) -> dict[tuple[str, ...], str]:
    """(file, line text, mutation) -> why no test can tell the mutant apart."""
    return _reasons(path, ("equivalent",), ("file", "line", "mutation"))


def load_gpu_only(path: Path) -> dict[tuple[str, ...], str]:
    """(file, line text) -> why no CPU test can reach that line."""
    return _reasons(path, ("mutate", "gpu_only"), ("file", "line"))


# --- running ----------------------------------------------------------------------


KILLED_SERIES = "killed (series)"
KILLED_CHECKS = "killed (checks only)"


@dataclass(frozen=True)
class Outcome:
    kind: str
    """KILLED_SERIES (by the regression selection), KILLED_CHECKS (only by
    checks/), survived or equivalent."""
    detail: str = ""
    """The killing test, or why the mutant is equivalent."""

    @property
    def outcome(self) -> str:
        """killed, survived or equivalent."""
        return self.kind.split()[0]


def _runs(selection: Selection) -> list[tuple[tuple[str, ...], tuple[Path, ...]]]:
    """(pytest arguments, files outside the tree they read): the regression
    selection, then the checks in a pytest of their own, as the matrix runs them."""
    runs: list[tuple[tuple[str, ...], tuple[Path, ...]]] = [(selection.regression, ())]
    if selection.checks:
        paths = tuple(LAYOUT.root / path for path in selection.checks)
        runs.append(((f"--rootdir={LAYOUT.root}", *map(str, paths)), paths))
    return runs


def first_failure(result: Result, log: Path) -> str:
    """The first test that failed or errored; a run without results counts
    as killed too (the baseline passed), its log named."""
    failed = [t for t, o in result.outcomes.items() if o in ("failed", "error")]
    if failed:
        return failed[0]
    return "" if result.outcomes else f"no test result (see {log})"


class WarmPytest(TreeProcess):
    """evidence/pytest_server.py in `tree`: the tree's vllm and the selection's
    tests imported once; each run a fork of it with one function's code swapped."""

    def __init__(self, tree: Path, runner: Runner, selection: Selection) -> None:
        warm = [runner.arguments(tree, args) for args, _ in _runs(selection)]
        command = [python(runner.venv), str(SERVER), json.dumps(warm)]
        env = test_env(runner.hf_home)
        super().__init__(f"mutate-{tree.name}", tree, command, env)
        self.runner = runner

    def run(self, mutant: Mutant, args: tuple[str, ...], log: Path) -> Result | None:
        """The outcomes of a fork running `args` with `mutant`'s function
        swapped in; None when it could not be swapped in."""
        with tempfile.TemporaryDirectory() as tmp:
            junit = Path(tmp, "junit.xml")
            arguments = self.runner.arguments(self.tree, args)
            self.write(
                {
                    "module": mutant.path.removesuffix(".py").replace("/", "."),
                    "qualname": mutant.function,
                    "file": str(self.tree / mutant.path),
                    "args": [*arguments, "-q", "-rfE", f"--junitxml={junit}"],
                    "log": str(log),
                }
            )
            if self.read(RUN_TIMEOUT_S)["status"] == SWAP_FAILED:
                return None
            return parse_junit(self.tree, junit) if junit.exists() else Result()


def classify(
    mutant: Mutant, server: WarmPytest, selection: Selection, label: str
) -> Outcome:
    """Run the selection against `mutant`, written into the server's tree,
    then restore the file.

    A mutant inside a function runs in a fork of the warm `server` (the file
    is written too, for any process the tests start); one that runs at
    import, or whose function could not be swapped, in a fresh pytest.
    """
    target = server.tree / mutant.path
    log = server.runner.logs / f"{label}.log"
    original = target.read_text()
    target.write_text(mutant.source)
    try:
        for n, (args, inputs) in enumerate(_runs(selection)):
            result = None
            if mutant.function:
                result = server.run(mutant, ("-x", *args), log)
            if result is None:
                result = server.runner.run(server.tree, ("-x", *args), label, inputs)
            killer = first_failure(result, log)
            if killer:
                return Outcome(KILLED_CHECKS if n else KILLED_SERIES, killer)
        return Outcome("survived")
    finally:
        target.write_text(original)


def run_all(
    todo: list[Mutant], trees: list[Path], runner: Runner, selection: Selection
) -> dict[str, Outcome]:
    """Each mutant's outcome by id, the trees working side by side."""
    waiting: queue.SimpleQueue[tuple[int, Mutant]] = queue.SimpleQueue()
    for item in enumerate(todo, 1):
        waiting.put(item)
    found: dict[str, Outcome] = {}

    def work(server: WarmPytest) -> None:
        server.wait_ready(READY_TIMEOUT_S)
        while True:
            try:
                n, mutant = waiting.get_nowait()
            except queue.Empty:
                return
            label = f"mutant-{n:03d}"
            outcome = classify(mutant, server, selection, label)
            found[mutant.id] = outcome
            print(f"mutant {n}/{len(todo)}: {_row(mutant, outcome)}", flush=True)

    servers = [WarmPytest(tree, runner, selection) for tree in trees]
    try:
        with ThreadPoolExecutor(max_workers=len(servers)) as pool:
            list(pool.map(work, servers))
    finally:
        for server in servers:
            server.close()
    return found


def baseline(tree: Path, runner: Runner, selection: Selection) -> None:
    """The selection must pass on the unmutated tree, or no kill means anything.

    The same runs as the regression matrix's at the series' head, so after
    the matrix (as `test` runs them) they come from its cache."""
    for args, inputs in _runs(selection):
        result = runner.run(tree, args, "mutate-baseline", inputs)
        failing = result.with_outcome("failed", "error")
        if failing or not result.outcomes:
            raise ForkToolError(
                "the regression selection does not pass on the fork itself, so "
                f"mutants would tell nothing: {failing or 'no test ran'}"
            )


def selection_key(selection: Selection, runner: Runner) -> str:
    """What outcomes depend on besides the tree: the selection, checks/, the venv
    (by the digest of the lock it was made from)."""
    digest = hashlib.sha256(
        json.dumps(
            [
                selection.regression,
                selection.checks,
                runner.excluded,
                venv_id(runner.venv),
            ]
        ).encode()
    )
    for check in selection.checks:
        for path in sorted((LAYOUT.root / check).rglob("*.py")):
            digest.update(path.read_bytes())
    return digest.hexdigest()


def cached(store: Path, tree: str, key: str) -> dict[str, Outcome]:
    """The outcomes measured on this tree with this selection, by mutant id
    (a row without a kind, from an older forktool, runs again)."""
    old = results.read(store, NAME)
    if old is None or old.tree != tree or old.data.get("key") != key:
        return {}
    return {
        m["id"]: Outcome(m["kind"], m["detail"])
        for m in old.data["mutants"]
        if m.get("kind", "equivalent") != "equivalent"
    }


# --- report -----------------------------------------------------------------------


def _row(mutant: Mutant, outcome: Outcome) -> str:
    return f"{mutant.path}:{mutant.line}  {mutant.mutation}  {outcome.kind}" + (
        f"  {outcome.detail}" if outcome.detail else ""
    )


def table(found: list[tuple[Mutant, Outcome]]) -> str:
    heads = ("file:line", "mutation", "outcome", "killed by / why equivalent")
    rows = [(f"{m.path}:{m.line}", m.mutation, o.kind, o.detail) for m, o in found]
    widths = [*(max(len(r[i]) for r in [heads, *rows]) for i in range(3)), 0]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in [heads, *rows]
    )


def counts(found: list[tuple[Mutant, Outcome]]) -> dict[str, int]:
    kinds = Counter(o.kind for _, o in found)
    return {
        "mutants": len(found),
        "killed": kinds[KILLED_SERIES] + kinds[KILLED_CHECKS],
        "killed by the series": kinds[KILLED_SERIES],
        "killed only by checks": kinds[KILLED_CHECKS],
        **{k: kinds[k] for k in ("survived", "equivalent")},
    }


def only_checks(
    found: list[tuple[Mutant, Outcome]],
    gpu_only: dict[tuple[str, ...], str],
    listed_in: str,
) -> tuple[list[str], list[str]]:
    """The lines only checks/ guards, one sentence each: notes for the lines
    listed as GPU-only, failures for the others."""
    lines: dict[tuple[str, int, str], list[str]] = {}
    for m, o in found:
        if o.kind == KILLED_CHECKS:
            lines.setdefault((m.path, m.line, m.text), []).append(m.mutation)
    notes, failures = [], []
    for (file, line, text), mutations in sorted(lines.items()):
        what = f"{file}:{line} is guarded only by checks/ ({', '.join(mutations)})"
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
    fork: Path,
    trees: Path,
    runner: Runner,
    selection: Selection,
    store: Path,
    equivalents: Path = LAYOUT.equivalents,
    gpu_lines: Path = LAYOUT.selection,
) -> Measured:
    """The check: every mutant of the series' added lines killed or equivalent,
    and killed by the series' regression selection unless its line is GPU-only.

    Reuses the outcomes in `store` measured on the fork's tree with this
    selection; runs the other mutants in worktrees under `trees`.
    """
    start = time.monotonic()
    every = series_mutants(fork)
    known = load_equivalents(equivalents)
    gpu_only = load_gpu_only(gpu_lines)
    key = selection_key(selection, runner)
    done = cached(store, results.fork_tree(fork), key)
    outcomes: dict[str, Outcome] = {}
    for m in every:
        reason = known.get((m.path, m.text, m.mutation))
        if reason or m.id in done:
            outcomes[m.id] = Outcome("equivalent", reason) if reason else done[m.id]
    todo = [m for m in every if m.id not in outcomes]
    print(
        f"{len(every)} mutants of the series' added lines under vllm/: "
        f"{len(todo)} to run, {len(every) - len(todo)} known",
        flush=True,
    )
    if todo:
        baseline(fork, runner, selection)
        head = git(fork, "rev-parse", "HEAD").stdout.strip()
        scratch = [
            worktree(fork, trees / f"mutate-{i}", head) for i in range(1, WORKERS + 1)
        ]
        outcomes.update(run_all(todo, scratch, runner, selection))
    found = [(m, outcomes[m.id]) for m in every]
    tally = counts(found)
    summary = (
        f"{tally['mutants']} mutants: {tally['killed']} killed "
        f"({tally['killed by the series']} by the series' regression selection, "
        f"{tally['killed only by checks']} only by checks/), "
        f"{tally['survived']} survived, {tally['equivalent']} equivalent; "
        f"{time.monotonic() - start:.0f} s, {len(todo)} run"
    )
    notes, failures = only_checks(found, gpu_only, gpu_lines.name)
    text = "\n".join([table(found), summary, *notes, *failures])
    print(text)
    for file, line, mutation in sorted(
        set(known) - {(m.path, m.text, m.mutation) for m in every}
    ):
        print(f"{equivalents.name}: no mutant is {file}: {line!r}: {mutation}")
    for file, line in sorted(set(gpu_only) - {(m.path, m.text) for m in every}):
        print(f"{gpu_lines.name}: gpu_only: no mutant's line is {file}: {line!r}")
    ok = not tally["survived"] and not failures
    print(f"mutation testing: {'ok' if ok else 'FAILED'}")
    data = {
        "key": key,
        "mutants": [
            {
                "id": m.id,
                "file": m.path,
                "line": m.line,
                "text": m.text,
                "mutation": m.mutation,
                "outcome": o.outcome,
                "kind": o.kind,
                "detail": o.detail,
                "gpu_only": gpu_only.get((m.path, m.text), ""),
            }
            for m, o in found
        ],
    }
    return Measured(ok, tally, {"table": f"$ {COMMAND_LINE}\n{text}"}, data)
