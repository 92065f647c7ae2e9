"""Which steps collect the test: the fork's tools/pre_commit/check_test_tethering.py
parses each command into test-file selections; for each pytest invocation
selecting the file, `file::name` arguments, `--deselect` and `-k` narrow the
test's items. `-k` goes through pytest's own parser and KeywordMatcher, on
keywords collected once with `--collect-only` in the fork (which must have
the revision checked out), through the runner with the plugin
evidence/ci_keywords.py. `-m` (flagged where used) and skip marks are not
evaluated.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType
from typing import Any

from evidence.ci_steps import Step
from forktool.layout import LAYOUT
from forktool.process import ForkToolError, git
from forktool.pytest_runner import run_pytest, test_env

TETHERING = "tools/pre_commit/check_test_tethering.py"


def load_tethering(fork: Path) -> ModuleType:
    """The fork's command parser; each pytest selection keeps its tokens."""
    spec = importlib.util.spec_from_file_location("_tethering", fork / TETHERING)
    if spec is None or spec.loader is None:
        raise ForkToolError(f"{fork / TETHERING} cannot be loaded as a module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    saved, sys.dont_write_bytecode = sys.dont_write_bytecode, True  # no pyc there
    try:
        spec.loader.exec_module(module)
    finally:
        sys.dont_write_bytecode = saved
    parse = module._parse_pytest_command

    def parse_keeping_tokens(tokens: list[str]) -> Any:
        selection = parse(tokens)
        selection.tokens = tokens
        return selection

    vars(module)["_parse_pytest_command"] = parse_keeping_tokens
    return module


def collect(fork: Path, rev: str, test: str, python: str) -> dict[str, frozenset]:
    """The test's items (ids after `file::`) and their `-k` keywords, collected
    in the fork, which must have `rev` checked out."""
    commit = [git(fork, "rev-parse", f"{r}^{{commit}}").stdout for r in (rev, "HEAD")]
    if commit[0] != commit[1]:
        raise ForkToolError(f"check out {rev} in {fork}: the test is collected there")
    label = "ci-impact-collect"
    with tempfile.TemporaryDirectory(prefix="ci-impact-") as tmp:
        out = Path(tmp, "items.json")
        cmd = [python, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
        cmd += ["-p", "evidence.ci_keywords", f"--ci-keywords={out}", test]
        env, log = test_env(LAYOUT.hf_home), LAYOUT.logs / f"{label}.log"
        with contextlib.redirect_stdout(sys.stderr):  # stdout is the report
            session = run_pytest(cmd, fork, env, log, label)
        items = json.loads(out.read_text()) if out.exists() else {}
    if session.status != 0 or not items:
        errors = "".join(f"\n  {e}" for e in session.collection_errors()[:5])
        raise ForkToolError(f"collecting {test} failed; see {session.log}{errors}")
    return {i.partition("::")[2]: frozenset(kw) for i, kw in items.items()}


def pytest_options(tokens: list[str]) -> argparse.Namespace:
    """The `-k`, `-m` and `--deselect` of a pytest command line, read as
    pytest's own argparse reads them (the last `-k` or `-m` wins)."""
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    parser.add_argument("-k", "--keyword")
    parser.add_argument("-m", dest="marker")
    parser.add_argument("--deselect", action="append", default=[])
    return parser.parse_known_args(tokens)[0]


def k_selects(expr: str, keywords: Iterable[str]) -> bool:
    """pytest's `-k`: its expression grammar and its KeywordMatcher."""
    from _pytest.mark import KeywordMatcher
    from _pytest.mark.expression import Expression

    if not expr.strip():  # pytest ignores an empty -k
        return True
    return Expression.compile(expr).evaluate(KeywordMatcher(frozenset(keywords)))


def node_selects(arg: str, item: str) -> bool:
    """Does a pytest path argument's `::` part select `item`?"""
    sel = arg.partition("::")[2]
    return not sel or item == sel or item.startswith((sel + "[", sel + "::"))


def collected(
    step: Step, file: str, items: dict[str, frozenset], tk: ModuleType
) -> tuple[list[str], bool]:
    """The items of `file` the step's commands collect, and whether a pytest
    invocation that runs the file filters with `-m` (not evaluated)."""
    rel = tk.normalize_test_path(file)
    chosen: set[str] = set()
    unevaluated = False
    for command in step.commands:
        for sel in (s for s in tk._parse_command(command) if s.runs(rel)):
            tokens = getattr(sel, "tokens", None)
            if tokens is None:  # a `find` sweep or `python file.py`
                chosen.update(items)
                continue
            args = [a for a in sel.included_paths if sel._arg_covers(a, rel)]
            opts = pytest_options(tokens)
            dropped = [d for d in opts.deselect if sel._arg_covers(d, rel)]
            chosen.update(
                i
                for i, keywords in items.items()
                if any(node_selects(a, i) for a in args)
                and not any("::" in d and node_selects(d, i) for d in dropped)
                and (opts.keyword is None or k_selects(opts.keyword, keywords))
            )
            unevaluated |= opts.marker is not None
    return [i for i in items if i in chosen], unevaluated
