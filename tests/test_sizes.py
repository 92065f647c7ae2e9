"""Modules of at most 400 lines, functions of at most 60 (issue 23, item 5).

Every .py under forktool/, evidence/, fork_tests/, fuzz/ and tests/ is read with
`ast`: a module over MODULE_LINES lines, or a function (def or async def,
nested ones included, counted from its `def` line to its last line) over
FUNCTION_LINES lines, is named with its path:line.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("forktool", "evidence", "fork_tests", "fuzz", "tests")
MODULE_LINES = 400
FUNCTION_LINES = 60


def oversized(path: Path, shown: str) -> list[str]:
    """`shown:line` and what is too long, for the module at `path`."""
    text = path.read_text()
    lines = len(text.splitlines())
    found = []
    if lines > MODULE_LINES:
        found.append(f"{shown}:1: module of {lines} lines (> {MODULE_LINES})")
    for node in ast.walk(ast.parse(text, filename=str(path))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if length > FUNCTION_LINES:
                found.append(
                    f"{shown}:{node.lineno}: function {node.name} of {length} "
                    f"lines (> {FUNCTION_LINES})"
                )
    return found


def modules() -> list[Path]:
    return sorted(p for package in PACKAGES for p in (ROOT / package).rglob("*.py"))


def test_modules_and_functions_are_within_their_sizes():
    found = [
        line
        for path in modules()
        for line in oversized(path, str(path.relative_to(ROOT)))
    ]
    assert not found, "over the size limits:\n" + "\n".join(found)


def test_the_sizes_are_measured_nested_functions_included(tmp_path):
    """The check itself: a long nested function and a long module are named."""
    inner = "".join(f"        x{i} = {i}\n" for i in range(FUNCTION_LINES))
    source = tmp_path / "long.py"
    source.write_text(f"def outer():\n    async def inner():\n{inner}\n")
    assert oversized(source, "long.py") == [
        f"long.py:1: function outer of {FUNCTION_LINES + 2} lines (> {FUNCTION_LINES})",
        f"long.py:2: function inner of {FUNCTION_LINES + 1} lines (> {FUNCTION_LINES})",
    ]
    source.write_text("x = 1\n" * (MODULE_LINES + 1))
    assert oversized(source, "long.py") == [
        f"long.py:1: module of {MODULE_LINES + 1} lines (> {MODULE_LINES})"
    ]
    source.write_text("def short():\n" + "    pass\n" * (FUNCTION_LINES - 1))
    assert oversized(source, "long.py") == []
