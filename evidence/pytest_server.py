"""A warm pytest for evidence.mutation, run with the venv's python in a worktree
of the fork: `python pytest_server.py WARM_JSON TREE`.

It imports the tree's vllm and the selected tests once (pytest
--collect-only of each argument list in WARM_JSON), greets with the
`vllm_file` it imported, then answers one JSON line per request: it forks,
and the child replaces one function's code by the mutant's (compiled from
the mutated file) and runs pytest with the request's arguments, its output
in the request's log. The answer is the child's exit status, SWAP_FAILED
when the code could not be swapped. Standard library and pytest only: it
runs outside this repository.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import json
import os
import sys
import traceback
import types
from typing import Any


def _code(code: types.CodeType, qualname: str) -> types.CodeType:
    """The code object of `qualname` compiled within `code`."""
    todo = [*code.co_consts]
    while todo:  # the first of that name in the order of the source
        if isinstance(found := todo.pop(0), types.CodeType):
            if found.co_qualname == qualname:
                return found
            todo += found.co_consts
    raise LookupError(qualname)


def _function(module: types.ModuleType, qualname: str) -> types.FunctionType:
    """The live function `qualname` of `module`, under its descriptor."""
    found: Any = module
    for part in qualname.split("."):
        found = vars(found)[part]
    if isinstance(found, property):
        found = found.fget
    elif isinstance(found, functools.cached_property):
        found = found.func
    elif isinstance(found, staticmethod | classmethod):
        found = found.__func__
    return inspect.unwrap(found)


def swap(request: dict[str, Any]) -> None:
    """Give the live function the mutant's code, everywhere it is referenced."""
    with open(request["file"]) as f:
        compiled = compile(f.read(), request["file"], "exec")
    module = importlib.import_module(request["module"])
    code = _code(compiled, request["qualname"])
    _function(module, request["qualname"]).__code__ = code


SWAP_FAILED = 70
"""The child's exit status when the mutant's code could not be swapped in
(evidence.mutation then runs that mutant in a fresh pytest)."""


def run(request: dict[str, Any]) -> int:
    """The exit status of a fork that swaps the code in and runs pytest, its
    output in the request's log."""
    if (pid := os.fork()) == 0:
        status = 1
        try:
            log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            os.dup2(log, 1)
            os.dup2(log, 2)
            status = SWAP_FAILED  # e.g. a name bound to something else than a function
            swap(request)
            status = 1
            import pytest

            status = int(pytest.main(request["args"]))
        except BaseException:
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(status)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def warm(arg_lists: list[list[str]]) -> None:
    """Import what the runs import, with pytest's output kept off stdout."""
    import pytest

    out = os.dup(1)
    os.dup2(2, 1)
    try:
        for args in arg_lists:
            pytest.main([*args, "--collect-only", "-q"])
    finally:
        sys.stdout.flush()
        os.dup2(out, 1)
        os.close(out)


def main() -> None:
    warm_json, tree = sys.argv[1:3]
    # Run by path, this folder comes first on sys.path, where forktool's
    # process.py, venv.py, commands/ ... would shadow what the tests import.
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    sys.path.insert(0, tree)
    warm(json.loads(warm_json))
    import vllm

    print(json.dumps({"vllm_file": vllm.__file__}), flush=True)
    for line in sys.stdin:
        print(json.dumps({"status": run(json.loads(line))}), flush=True)


if __name__ == "__main__":
    main()
