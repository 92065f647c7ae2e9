"""The mutants of the lines the series adds under vllm/ (`git diff base..HEAD`):
plausible one-line mistakes, found with the ast module: `and`/`or`, an
operand of either dropped, comparison operators, a dropped `not`,
`any`/`all`, True/False and numbers, an element of a pair dropped, an added
term halved, a deleted assignment, `raise`, `assert` or early-exit guard, a
returned value replaced (None, negated); and each hunk of the series'
diff reverted alone. A mutant that does not compile, or that is the same
code as another (docstrings aside), is left out. Pure but for reading the
fork with git.
"""

from __future__ import annotations

import ast
import hashlib
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypeVar

from forktool.process import BASE_TAG, SERIES, git


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


Point = tuple[ast.expr | ast.stmt, str, str]
"""A mutation point: the node to replace, the replacement's source, what the
mistake is."""


def _bool_op_points(node: ast.BoolOp) -> Iterator[Point]:
    """`and`/`or` swapped, and each operand dropped."""
    other, what = _swap(node.op)
    yield node, f"({ast.unparse(ast.BoolOp(other, node.values))})", what
    for i, value in enumerate(node.values):
        rest = [*node.values[:i], *node.values[i + 1 :]]
        kept = rest[0] if len(rest) == 1 else ast.BoolOp(node.op, rest)
        yield node, f"({ast.unparse(kept)})", f"{ast.unparse(value)} dropped"


def _pair_points(node: ast.Tuple) -> Iterator[Point]:
    """Each element of a pair dropped."""
    for i, elt in enumerate(node.elts):
        pair = ast.Tuple([*node.elts[:i], *node.elts[i + 1 :]], ast.Load())
        yield node, ast.unparse(pair), f"{ast.unparse(elt)} dropped"


def _compare_points(node: ast.Compare) -> Iterator[Point]:
    """Each comparison operator swapped for its opposite."""
    for i, op in enumerate(node.ops):
        other, what = _swap(op)
        ops = [*node.ops[:i], other, *node.ops[i + 1 :]]
        swapped = ast.Compare(node.left, ops, node.comparators)
        yield node, f"({ast.unparse(swapped)})", what


def _return_points(value: ast.expr) -> Iterator[Point]:
    """The returned value replaced by None (unless it is None), and negated."""
    if not (isinstance(value, ast.Constant) and value.value is None):
        yield value, "None", "returns None"
    yield value, _negated(value), "returns its negation"


def _expression_points(node: ast.expr) -> Iterator[Point]:
    """The mistakes in an expression."""
    match node:
        case ast.BoolOp():
            yield from _bool_op_points(node)
        case ast.Tuple(elts=elts, ctx=ast.Load()) if len(elts) == 2:
            yield from _pair_points(node)
        case ast.BinOp(op=ast.Add(), right=right) if not isinstance(
            right, ast.Constant
        ):
            yield right, f"({ast.unparse(right)}) // 2", "added term halved"
        case ast.Compare():
            yield from _compare_points(node)
        case ast.UnaryOp(op=ast.Not(), operand=operand):
            yield node, f"({ast.unparse(operand)})", "not dropped"
        case ast.Call(func=ast.Name(id="any" | "all") as func):
            callee = "all" if func.id == "any" else "any"
            yield func, callee, f"{func.id} -> {callee}"
        case ast.Constant(value=bool() as value):
            yield node, str(not value), f"{value} -> {not value}"
        case ast.Constant(value=int() | float() as value):
            yield node, repr(value + 1), f"{value!r} -> {value + 1!r}"


def _statement_points(node: ast.stmt) -> Iterator[Point]:
    """The mistakes in a statement: deleted, or its returned value replaced."""
    match node:
        case ast.If(body=[ast.Continue() | ast.Break() | ast.Return()], orelse=[]):
            yield node, "pass", "guard deleted"
        case ast.Assign() | ast.AnnAssign() | ast.AugAssign():
            yield node, "pass", "assignment deleted"
        case ast.Raise():
            yield node, "pass", "raise deleted"
        case ast.Assert():
            yield node, "pass", "assert deleted"
        case ast.Return(value=ast.expr() as value):
            yield from _return_points(value)


def _points(node: ast.expr | ast.stmt) -> Iterator[Point]:
    """(the node to replace, the replacement's source, what the mistake is)."""
    if isinstance(node, ast.expr):
        return _expression_points(node)
    return _statement_points(node)


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


_FULL_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def _without_docstrings(source: str) -> str:
    """`source`'s syntax tree's dump, docstrings left out."""
    module = ast.parse(source)
    for node in ast.walk(module):
        body = getattr(node, "body", None)
        if (
            isinstance(body, list)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            body.pop(0)
    return ast.dump(module)


def hunk_reverts(path: str, old: str, new: str, diff: str) -> list[Mutant]:
    """`new` with each hunk of `diff` (from `old`) reverted alone; hunks that
    change no code (comments, docstrings) are left out."""
    old_lines, new_lines = old.splitlines(keepends=True), new.splitlines(keepends=True)
    code = _without_docstrings(new)
    found = []
    for line in diff.splitlines():
        if not (hunk := _FULL_HUNK.match(line)):
            continue
        o_start, o_len, n_start, n_len = (
            int(g) if g is not None else 1 for g in hunk.groups()
        )
        # A hunk that only removes or only adds lines names the line before it.
        o_begin = o_start - 1 if o_len else o_start
        n_begin = n_start - 1 if n_len else n_start
        source = "".join(
            new_lines[:n_begin]
            + old_lines[o_begin : o_begin + o_len]
            + new_lines[n_begin + n_len :]
        )
        if _without_docstrings(source) == code:
            continue
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
