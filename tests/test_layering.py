"""The tool's import graph, read from the source with `ast` (nothing is
imported): which packages and modules may import which, and no cycles."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("forktool", "evidence")
Is = Callable[[str], bool]

SERIES_WORKFLOW = ("sync", "export", "backups", "journal")  # and what they import
NOT_IN_WORKFLOW = (  # the pytest runner, the registry of checks, the environment
    *("pytest_runner", "pytest_report"),
    *("venv", "venv_probe", "venv_lock", "hfcache"),
    *("checks", "tool_checks", "prepare"),
)


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {
    module_name(p): p for k in PACKAGES for p in sorted((ROOT / k).rglob("*.py"))
}


def _package(name: str) -> str:
    """The package a module's relative imports start from."""
    return name if MODULES[name].name == "__init__.py" else name.rpartition(".")[0]


def imports(name: str) -> dict[str, int]:
    """The modules `name` imports (functions' too), each with its first line."""
    found: dict[str, int] = {}
    for node in ast.walk(ast.parse(MODULES[name].read_text())):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = _package(name).split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, *filter(None, [base])])
            # `from pkg import mod` imports the module; `from mod import x`, mod.
            targets = [f"{base}.{a.name}" for a in node.names]
            targets = [t if t in MODULES else base for t in targets]
        else:
            continue
        for target in targets:
            while target and target not in MODULES:  # `import a.b.c` names a.b.c
                target = target.rpartition(".")[0]
            if target and target != name:
                found.setdefault(target, node.lineno)
    return found


GRAPH = {name: imports(name) for name in MODULES}


def where(importer: str, imported: str) -> str:
    path = MODULES[importer].relative_to(ROOT)
    return f"{path}:{GRAPH[importer][imported]} imports {imported}"


def edges(importer: Is, imported: Is) -> list[str]:
    """Where an `importer` module imports an `imported` one."""
    return [where(a, b) for a in sorted(MODULES) if importer(a)
            for b in GRAPH[a] if imported(b)]  # fmt: skip


def _is_command(name: str) -> bool:
    """One in a package's commands/ (not its `__init__`, nor `command`)."""
    package, _, rest = name.partition(".commands.")
    return bool(rest) and package in PACKAGES and rest != "command"


def test_the_workflow_imports_no_evidence_and_only_commands_init_a_command():
    """The evidence's checks and commands reach the workflow only by module names
    (checks.REGISTERED, commands.COMMANDS); command modules and shared code (an
    upward import) import no command module, only `commands/__init__` does."""
    wrong = edges(
        lambda a: a.startswith("forktool"), lambda b: b.startswith("evidence")
    )
    assert not wrong, "the workflow imports the evidence:\n" + "\n".join(wrong)
    wrong = edges(lambda a: not a.endswith(".commands"), _is_command)
    assert not wrong, "command modules imported:\n" + "\n".join(wrong)


def _chains(roots: list[str], parents: bool = True) -> dict[str, list[str]]:
    """Each module the roots import transitively (with `parents`, and the parent
    packages run first), with its chain of imports; a cycle under its root."""
    chains: dict[str, list[str]] = {}
    todo = [[root] for root in roots]
    while todo:
        chain = todo.pop(0)
        parent = chain[-1].rpartition(".")[0]
        extra = [parent] if parents and parent in MODULES else []
        for nxt in [*GRAPH[chain[-1]], *extra]:
            if nxt not in chains:
                chains[nxt] = [*chain, nxt]
                todo.append(chains[nxt])
    return chains


def test_the_series_workflow_imports_no_runner_environment_or_evidence():
    named = {f"forktool.{m}" for m in (*SERIES_WORKFLOW, *NOT_IN_WORKFLOW)}
    assert named <= set(MODULES), f"no such modules: {sorted(named - set(MODULES))}"
    chains = _chains([f"forktool.{m}" for m in SERIES_WORKFLOW])
    banned = [f"forktool.{m}" for m in NOT_IN_WORKFLOW]
    wrong = [
        f"{where(chain[-2], name)} (via {' -> '.join(chain)})"
        for name, chain in sorted(chains.items())
        if any(name == b or name.startswith(f"{b}.") for b in banned)
        and name in GRAPH[chain[-2]]
    ]
    assert not wrong, "the series workflow imports:\n" + "\n".join(wrong)


def test_no_import_cycles():
    cycles = {}
    for name in MODULES:
        cycle = _chains([name], parents=False).get(name)
        if cycle and frozenset(cycle) not in cycles:
            edges = [where(a, b) for a, b in zip(cycle, cycle[1:], strict=False)]
            cycles[frozenset(cycle)] = " -> ".join(cycle) + ": " + "; ".join(edges)
    assert not cycles, "import cycles:\n" + "\n".join(cycles.values())


def test_the_graph_sees_imports_of_every_kind():
    """`from pkg import module`, `from module import name`, imports in functions."""
    assert "forktool.journal" in GRAPH["forktool.sync"]  # from forktool import
    assert "forktool.series" in GRAPH["forktool.sync"]  # from forktool.series import
    assert "forktool.commands.command" in GRAPH["forktool.commands.sync"]
    assert "forktool.process" in GRAPH["forktool.pins"]
    assert "forktool.venv_lock" in GRAPH["forktool.venv"]
    assert _is_command("evidence.commands.pr") and _is_command("forktool.commands.sync")
    assert not _is_command("forktool.commands.command")
    assert len(MODULES) > 20


def test_help_imports_at_most_25_of_the_projects_modules():
    """`--help` names every command without importing their modules."""
    argv = [sys.executable, "-X", "importtime", "-m", "forktool", "--help"]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=True)
    imported = [x.rsplit("|", 1)[1].strip() for x in done.stderr.splitlines()
                if x.startswith("import time:") and "|" in x]  # fmt: skip
    ours = [name for name in imported if name.split(".")[0] in PACKAGES]
    assert "sync" in done.stdout and "mutate" in done.stdout
    assert "forktool.commands" in ours and len(ours) <= 25, ours
