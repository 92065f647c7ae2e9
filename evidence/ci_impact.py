"""Which vLLM Buildkite steps the series triggers, and which of them run a test.

    <venv>/bin/python -m evidence.ci_impact [FORK]   (default: build/vllm)

prints Markdown for the files `git diff --name-only base..HEAD` changes, with
the pipeline YAML read at `base` and at HEAD: the steps and the rules that
trigger them, and which steps collect the series' E2E test. run_checkers
runs vLLM's own CI checkers on the fork (the check `ci-checkers`).

NVIDIA steps: those of the YAMLs under the `job_dirs:` of
.buildkite/ci_config*.yaml, found as
tools/pre_commit/check_buildkite_step_keys.py finds them (counted per job dir:
the Intel and CPU ones live there too). AMD steps: each step's `mirror.amd`
block (`amd-<key>`), steps on an AMD GPU (`mi…`), .buildkite/test-amd.yaml.

Where the matching rules come from: the pipeline generator, vllm-project/ci-infra
buildkite/pipeline_generator/buildkite_step.py at 0009bdf5 (not in the sdist,
not pinned by vLLM).
* `_matches_source_dependency`: an entry, trailing `/` stripped, matches a path
  equal to it or under it at a `/` boundary; no globs.
* `_source_file_dependencies_match`: a file matching a `!` entry does not
  count, whatever the order; no entries, no match.
* `_get_amd_mirror_effective_step`: a mirror's entries are its own followed by
  its parent's; `optional` is the mirror's, else the parent's.
* `_step_should_run`: an `optional: true` step gets a block step (nightly or a
  manual unblock). run_all patterns, always-run keys and the AMD runtime-script
  rule are not modelled.
In-tree: .buildkite/test-amd.yaml lines 12 (`optional`) and 27
(`source_file_dependencies`: "prefixes to opt-in the test for");
.buildkite/test_areas/distributed.yaml line 13 (a `!` entry).

Which steps collect the test: the fork's tools/pre_commit/check_test_tethering.py
parses each command into test-file selections; for each pytest invocation
selecting the file, `file::name` arguments, `--deselect` and `-k` narrow the
test's items. `-k` goes through pytest's own parser and KeywordMatcher, on
keywords collected once with `--collect-only` in the fork, through the
runner with the plugin
evidence/ci_keywords.py. `-m` (flagged where used) and skip marks are not
evaluated.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import re
import sys
import tempfile
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, NamedTuple

from evidence import cli
from forktool import process
from forktool.checks import Measured
from forktool.layout import LAYOUT
from forktool.process import BASE_TAG, ForkToolError, git
from forktool.pytest_runner import run_pytest, test_env
from forktool.selection import Selection
from forktool.venv import compiling_once

# --- the steps and the files that trigger them -------------------------------

TEST_AMD_YAML = ".buildkite/test-amd.yaml"
NVIDIA, AMD = "NVIDIA", "AMD"
AMD_GPU = re.compile(r"mi\d+_\w+")


def entry_matches(entry: str, path: str) -> bool:
    prefix = entry.rstrip("/")
    return bool(prefix) and (path == prefix or path.startswith(prefix + "/"))


def triggers(deps: list[str], changed: Iterable[str]) -> dict[str, list[str]]:
    """Changed file -> the include entries selecting it, for each file that
    some include entry selects and no `!` entry excludes."""
    excludes = [d[1:] for d in deps if d.startswith("!")]
    hits = {
        path: [d for d in deps if d[:1] != "!" and entry_matches(d, path)]
        for path in changed
        if not any(entry_matches(e, path) for e in excludes)
    }
    return {path: entries for path, entries in hits.items() if entries}


@dataclass(frozen=True)
class Step:
    pipeline: str
    source: str  # the YAML file
    raw: dict[str, Any] = field(compare=False, repr=False)
    key: str | None = None
    inherited: tuple[str, ...] = ()  # a mirror's entries taken from its parent

    @property
    def label(self) -> str:
        return str(self.raw.get("label") or self.key)

    @property
    def runs(self) -> str:
        """Blocked until nightly or a manual unblock, or run on a PR."""
        return "optional" if self.raw.get("optional") else "PR"

    @property
    def deps(self) -> list[str]:
        return [str(d) for d in self.raw.get("source_file_dependencies") or ()]

    @property
    def commands(self) -> list[str]:
        listed = self.raw.get("commands") or [self.raw.get("command")]
        flat = [c for i in listed for c in (i if isinstance(i, list) else [i])]
        return [c for c in flat if isinstance(c, str)]


def mirror_step(parent: dict[str, Any], amd: dict[str, Any], source: str) -> Step:
    """The AMD step the generator publishes for `parent`'s `mirror.amd` block:
    the parent's fields overridden by the mirror's, entries excepted."""
    own = [str(d) for d in amd.get("source_file_dependencies") or ()]
    theirs = [str(d) for d in parent.get("source_file_dependencies") or ()]
    inherited = tuple(d for d in theirs if d not in own)
    label = amd.get("label") or f"AMD: {parent.get('label')} ({amd.get('device')})"
    raw = {**parent, **amd, "label": label}
    raw["source_file_dependencies"] = [*own, *inherited]
    key = f"amd-{parent['key']}" if parent.get("key") else None
    return Step(AMD, source, raw, key, inherited)


def job_steps(doc: Any, source: str, pipeline: str | None = None) -> list[Step]:
    """The steps of one pipeline YAML document, each followed by its AMD mirror."""
    steps = []
    raws = doc.get("steps") if isinstance(doc, dict) else None
    for raw in [r for r in raws or () if isinstance(r, dict)]:
        gpu = AMD_GPU.fullmatch(str(raw.get("device") or ""))
        kind = pipeline or (AMD if gpu else NVIDIA)
        steps.append(Step(kind, source, raw, raw.get("key")))
        amd = (raw.get("mirror") or {}).get("amd")
        if isinstance(amd, dict):
            steps.append(mirror_step(raw, amd, source))
    return steps


def steps_at(fork: Path, rev: str) -> list[Step]:
    """Both pipelines' steps, as the YAML at `rev` defines them."""
    import yaml  # the fork venv's

    def load(path: str) -> Any:
        return yaml.safe_load(git(fork, "show", f"{rev}:{path}").stdout)

    def listed(directory: str, *recursive: str) -> list[str]:
        out = git(fork, "ls-tree", "--name-only", *recursive, rev, "--", directory)
        return sorted(p for p in out.stdout.splitlines() if p.endswith(".yaml"))

    buildkite = listed(".buildkite/")
    configs = [p for p in buildkite if Path(p).name.startswith("ci_config")]
    job_dirs = {d.rstrip("/") + "/" for c in configs for d in load(c)["job_dirs"]}
    files = sorted({p for d in job_dirs for p in listed(d, "-r")})
    steps = [s for path in files for s in job_steps(load(path), path)]
    if TEST_AMD_YAML in buildkite:
        steps += job_steps(load(TEST_AMD_YAML), TEST_AMD_YAML, AMD)
    return steps


# --- which steps collect the test --------------------------------------------

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


def collect(fork: Path, test: str, python: str) -> dict[str, frozenset]:
    """The test's items (ids after `file::`) and their `-k` keywords, collected
    in the fork."""
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
            # None: a `find` sweep or `python file.py`
            if (tokens := getattr(sel, "tokens", None)) is None:
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


# --- the report and the checkers ---------------------------------------------

STEP_KEYS = "tools/pre_commit/check_buildkite_step_keys.py"


def trigger_cell(step: Step | None, changed: list[str]) -> str:
    """The step's entries that non-test files match (← the file, when below
    its entry); "tests only" or "no" when none does."""
    if step is None:
        return "absent"
    by_entry: dict[str, list[str]] = {}
    sources = [p for p in changed if not p.startswith("tests/")]
    for path, entries in triggers(step.deps, sources).items():
        for entry in entries:
            by_entry.setdefault(entry, []).append(path.removeprefix(entry))
    if not by_entry:
        return "tests only" if triggers(step.deps, changed) else "no"
    return "<br>".join(
        f"`{entry}`"
        + (" (parent's)" if entry in step.inherited else "")
        + "".join(f" ← `{p.lstrip('/')}`" for p in below if p)
        for entry, below in by_entry.items()
    )


def pipeline_summary(steps: list[Step], sources: list[str]) -> str:
    """Per pipeline, how many of `steps` the non-test files trigger, and how."""
    parts = []
    for pipeline in (NVIDIA, AMD):
        mine, named = [s for s in steps if s.pipeline == pipeline], []
        for s in mine:
            if hits := triggers(s.deps, sources):
                own = any(set(e) - set(s.inherited) for e in hits.values())
                via = "" if own else ", only through its parent's entries"
                name = f"`{s.key}`" if s.key else f"{s.label} ({s.source})"
                named.append(f"{name}: {len(hits)} files, {s.runs}{via}")
        listed = f" ({'; '.join(named)})" if named else ""
        parts.append(f"{len(named)} of the {len(mine)} {pipeline} ones{listed}")
    return " and ".join(parts)


class Found(NamedTuple):
    step: Step
    items: list[str]  # the test's items its commands collect
    unevaluated: bool  # a pytest invocation running the test uses -m


def _items(found: Found | None, n_items: int) -> str:
    ids = [i[i.find("[") :] if "[" in i else i for i in found.items] if found else []
    text = "all" if len(ids) == n_items else ", ".join(ids) or "none"
    return text + (" (-m not applied)" if found and found.unevaluated else "")


def table_row(old: Found | None, new: Found | None, n: int, changed: list[str]) -> str:
    """A step's row: what it collects (base → head where that differs) and
    what triggers it with the YAML at each revision."""
    either = new or old
    assert either is not None  # a row is a step found at one revision at least
    step = either.step
    got = [_items(f, n) for f in (old, new) if f]
    key = f"`{step.key}`" if step.key else f"— ({step.source})"
    cells = [trigger_cell(f and f.step, changed) for f in (old, new)]
    row = [step.pipeline, step.label, key, step.runs, " → ".join(dict.fromkeys(got))]
    return "| " + " | ".join([*row, *cells]) + " |"


def trigger_counts(steps: list[Step], changed: list[str]) -> str:
    """How many steps `changed` triggers per pipeline, NVIDIA's per job dir."""
    hit = [s for s in steps if triggers(s.deps, changed)]
    dirs = Counter(s.source.split("/")[1] for s in hit if s.pipeline == NVIDIA)
    by_dir = ", ".join(f"{d} {n}" for d, n in dirs.most_common())
    amd = sum(s.pipeline == AMD for s in hit)
    return f"{NVIDIA} {len(hit) - amd} ({by_dir}), {AMD} {amd}"


def report(fork: Path, python: str) -> str:
    """Markdown: the steps whose commands collect the E2E test ([gpu_only] of
    upstream-tests.toml), what triggers them with the YAML at the base and at
    HEAD, and the triggered step counts."""
    base, head, args = BASE_TAG, "HEAD", Selection.load(LAYOUT.selection).gpu_only
    if len(args) != 1 or "::" not in args[0] or args[0].startswith("-"):
        raise ForkToolError(
            f"{LAYOUT.selection.name}: [gpu_only] args is {list(args)}; the CI impact "
            'report needs the one node id of the E2E test: args = ["<file>::<test>"]'
        )
    test = args[0]
    file = test.partition("::")[0]
    changed = git(fork, "diff", "--name-only", f"{base}..{head}").stdout.split()
    sources = [p for p in changed if not p.startswith("tests/")]
    tests = [p for p in changed if p.startswith("tests/")]
    tk, items = load_tethering(fork), collect(fork, test, python)
    sides: list[dict[tuple, Found]] = []  # every step at base, at head
    counts = []
    for rev in (base, head):
        steps = steps_at(fork, rev)
        ident = [(s.pipeline, s.source, s.key or s.label) for s in steps]
        found = [Found(s, *collected(s, file, items, tk)) for s in steps]
        sides.append(dict(zip(ident, found, strict=True)))
        counts.append(f"`{rev}`: {trigger_counts(steps, changed)}")
    old, new = sides
    idents = [i for i in {**new, **old} if any(i in s and s[i].items for s in sides)]
    rows = [table_row(old.get(i), new.get(i), len(items), changed) for i in idents]
    collecting = [[f.step for f in side.values() if f.items] for side in sides]
    by_tests = [sum(bool(triggers(s.deps, tests)) for s in c) for c in collecting]
    summary = [pipeline_summary(c, sources) for c in collecting]
    lines = [
        f"### CI impact of `{base}..{head}` on `{test}`\n",
        f"Changed files ({len(changed)}): {', '.join(f'`{p}`' for p in changed)}\n",
        f"Steps whose commands collect the test ({len(items)} items). Triggered: "
        "the `source_file_dependencies` entries the series' non-test files match; "
        "*tests only*: only its test files trigger the step. *optional*: blocked "
        "until nightly or a manual unblock; *PR*: runs on a PR when triggered.\n",
        "| Pipeline | Step | Key | Runs | Collects "
        f"| Triggered, YAML at `{base}` | Triggered, YAML at `{head}` |",
        "| --- | --- | --- | --- | --- | --- | --- |",
        *rows,
        f"\nThe series' {len(tests)} test files trigger {by_tests[0]} of these steps "
        f"with the YAML at `{base}` and {by_tests[1]} at `{head}`.\n",
        f"**Before/after.** Of the steps that collect the test, the series' "
        f"{len(sources)} non-test files trigger, with the YAML at `{base}`, "
        f"{summary[0]}; with the YAML at `{head}`, {summary[1]}.\n",
        f"Steps triggered by the changed files, YAML at {counts[0]}; at {counts[1]}.",
    ]
    return "\n".join(lines) + "\n"


def run_checkers(fork: Path, python: str) -> Measured:
    """Run vLLM's two CI checkers from the fork root (check_buildkite_step_keys
    reads `.buildkite` from the cwd); print their output and a PASS/FAIL line
    each. Passes iff both pass; the excerpts are their commands and output."""
    found = Measured(True, {"passed": 0, "failed": 0})
    for args in ([TETHERING, "--all"], [STEP_KEYS]):
        env = compiling_once(process.environ())
        run = process.run([python, *args], cwd=fork, env=env, check=False)
        ok, output = run.returncode == 0, (run.stdout + run.stderr).rstrip()
        output = output or "(no output)"
        print(f"{output}\n{'PASS' if ok else 'FAIL'}  {' '.join(args)}")
        found.ok &= ok
        found.counts["passed" if ok else "failed"] += 1
        found.excerpts[Path(args[0]).stem] = (
            f"$ python {' '.join(args)}\n{output[-4000:]}\n(exit {run.returncode})"
        )
    return found


def main(argv: list[str]) -> int:
    prog = "python -m evidence.ci_impact"
    return cli.main(prog, __doc__, argv, lambda fork: report(fork, sys.executable))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
