"""Which vLLM Buildkite steps the series triggers, and which of them run a test.

    <venv>/bin/python -m evidence.ci_impact --fork build/vllm [--base base]
        [--head HEAD] [--test NODE]

prints Markdown for the files `git diff --name-only base..head` changes, with
the pipeline YAML read at `base` and at `head`: the steps and the rules that
trigger them as evidence/ci_steps.py reads them, which steps collect the test
as evidence/ci_collect.py finds it (the fork must have `head` checked out).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path
from typing import NamedTuple

from evidence.ci_collect import TETHERING, collect, collected, load_tethering
from evidence.ci_steps import AMD, NVIDIA, Step, steps_at, triggers
from forktool import process
from forktool.checks import Measured
from forktool.process import BASE_TAG, ForkToolError, git
from forktool.venv import compiling_once

DEFAULT_TEST = (
    "tests/distributed/test_pipeline_parallel.py::test_pp_mixed_precision_kv_cache"
)
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


def report(fork: Path, base: str, head: str, test: str, python: str) -> str:
    """Markdown: the steps whose commands collect `test`, what triggers them
    with the YAML at `base` and at `head`, and the triggered step counts."""
    file, sep, _ = test.partition("::")
    if not (sep and file.startswith("tests/") and file.endswith(".py")):
        raise ForkToolError(f"give the test as tests/<file>.py::<name>, not {test}")
    changed = git(fork, "diff", "--name-only", f"{base}..{head}").stdout.split()
    sources = [p for p in changed if not p.startswith("tests/")]
    tests = [p for p in changed if p.startswith("tests/")]
    tk, items = load_tethering(fork), collect(fork, head, test, python)
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
        "|---|---|---|---|---|---|---|",
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        "python -m evidence.ci_impact", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    parser.add_argument("--fork", type=Path, required=True, help="build/vllm")
    parser.add_argument("--base", default=BASE_TAG)
    parser.add_argument("--head", default="HEAD")
    parser.add_argument("--test", default=DEFAULT_TEST, help="tests/<file>.py::<name>")
    args = parser.parse_args(argv)
    try:
        print(report(args.fork, args.base, args.head, args.test, sys.executable))
    except ForkToolError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
