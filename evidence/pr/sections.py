"""The Validation section's tables and blocks, each from the results of its checks.

A renderer gets None for a check without a result for this tree and says
"not measured" there.
"""

from __future__ import annotations

import re
import shlex
from collections import Counter
from typing import Any

from evidence import bench
from evidence.precommit import NO_FILES
from forktool.checks import Check, CheckResult
from forktool.pytest_runner import OUTCOMES

NOT_MEASURED = "not measured"
HOOK_STATUS = {"PASS": "passed", "FAIL": "failed", "SKIPPED": "skipped"}
Got = CheckResult | None  # a check's result for this tree, or None
Found = dict[Check, Got]  # each check the description renders -> its result


def row(*cells: str) -> str:
    return "| " + " | ".join(cells) + " |"


def one_line(text: str) -> str:
    return " ".join(text.split())


def reflow(text: str) -> str:
    """Prose as Markdown renders it: each paragraph, and each list item, on one
    line (the prose is wrapped for editing; the description is read rendered)."""
    blocks = []
    for block in re.split(r"\n[ \t]*\n", text.strip()):
        items: list[str] = []
        for line in block.splitlines():
            if items and not re.match(r"(- |\d+\. )", line):
                items[-1] += " " + line.strip()
            else:
                items.append(line.strip())
        blocks.append("\n".join(items))
    return "\n\n".join(blocks)


def counts_text(counts: dict[str, int]) -> str:
    parts = [f"{counts[o]} {o}" for o in OUTCOMES if counts.get(o)]
    return ", ".join(parts) or "nothing ran"


def outcome_text(outcomes: dict[str, str]) -> str:
    return counts_text(Counter(outcomes.values())) if outcomes else ""


def fence(text: str) -> str:
    """`text` as a code block whose fence no line of it can close."""
    ticks = "`" * max([3, *(len(m) + 1 for m in re.findall(r"`{3,}", text))])
    return f"{ticks}text\n{text.rstrip()}\n{ticks}"


def collapsed(summary: str, body: str) -> str:
    return f"<details>\n<summary>{summary}</summary>\n\n{body.strip()}\n\n</details>"


def _sides(matrix: CheckResult, fork: bool) -> tuple[dict, dict[str, dict]]:
    """The base's outcomes and each patch's, in order, of this repository's
    fork_tests/ or (not `fork`) of the series' tests."""
    sides: dict[str, dict] = {}
    for column, got in sorted(matrix.data["columns"].items()):
        tests = got["outcomes"].items()
        sides[column] = {t: o for t, o in tests if t.startswith("fork_tests/") == fork}
    return sides.pop("base+tests"), sides


def _at_each_patch(patches: dict[str, dict]) -> str:
    at_each = (f"{c}: {outcome_text(o) or 'nothing ran'}" for c, o in patches.items())
    return row("The same, at each patch (bisectable)", "—", "; ".join(at_each))


def regression_rows(matrix: Got) -> list[str]:
    """The series' regression tests on the base's code and at the series' head,
    counted over the same tests on both sides; then each patch."""
    what = "The series' regression tests"
    if matrix is None:
        return [row(what, NOT_MEASURED, NOT_MEASURED)]
    base, patches = _sides(matrix, False)
    series = patches[max(patches)]
    both = {test: series[test] for test in base if test in series}
    cells = outcome_text(base), outcome_text(both)
    rows = [row(f"{what} ({len(base)} on both sides)", *cells)]
    if only := {t: o for t, o in series.items() if t not in base}:
        what = f"The series' tests that expect its new field ({len(only)})"
        rows.append(row(what, "—", outcome_text(only)))
    return [*rows, _at_each_patch(patches)]


def fork_tests_rows(matrix: Got) -> list[str]:
    """This repository's fork_tests/: base against the series' head, then each patch."""
    if matrix is None:
        return [row("`fork_tests/`", NOT_MEASURED, NOT_MEASURED)]
    base, patches = _sides(matrix, True)
    what = "Stand-in stages and workers, copies of the decision (`fork_tests/`)"
    cells = [outcome_text(o) or "nothing ran" for o in (base, patches[max(patches)])]
    return [row(what, *cells), _at_each_patch(patches)]


def before_block(matrix: Got) -> str:
    """The failures of the series' tests on the base's code: the bug."""
    if not (text := matrix.excerpts.get("base") if matrix else None):
        return f"Before the fix: {NOT_MEASURED}.\n"
    return (
        "Before the fix, the series' tests on the base's code fail by assertion "
        f"about what the scheduler sends and each stage builds:\n\n{fence(text)}\n"
    )


def matrix_evidence(matrix: Got) -> str:
    """Each side's failures with the end of their tracebacks, and each test at
    each patch."""
    if matrix is None:
        return f"### Regression matrix\n\n{NOT_MEASURED}.\n"
    parts = ["### Regression matrix\n"]
    for side, title in (
        ("base", "On the base's code, with the series' test files"),
        ("series", "On the series"),
    ):
        text = matrix.excerpts.get(f"{side} tracebacks") or matrix.excerpts.get(side)
        parts += [f"{title}:\n", fence(text or NOT_MEASURED) + "\n"]
    table = fence(matrix.data["table"]) + "\n"
    return "\n".join([*parts, "Each test on the base and at each patch:\n", table])


def suite_rows(suite: Got) -> list[str]:
    """vLLM's CPU jobs: the base runs only what does not pass on the fork; the
    fork's failures that passed when run again are named."""
    if suite is None:
        what = "vLLM's CPU tests for the touched code"
        return [row(what, NOT_MEASURED, NOT_MEASURED)]
    rows = []
    for run in suite.data["runs"].values():
        base, flaky = run["base"], run.get("flaky", [])
        ran = "not run, as every test passes on the fork"
        if base["rerun"]:
            ran = f"the {base['rerun']} not passing on the fork: "
            ran += counts_text(base["counts"])
        names = ", ".join(f"`{test.rpartition('::')[2]}`" for test in flaky)
        again = f"; failed, then passed when run again: {names}" if flaky else ""
        fork = (
            f"{counts_text(run['fork']['counts'])} ({len(run['added'])} added by "
            f"the series, {len(run['lost'])} lost{again})"
        )
        what = f"vLLM's CPU job `pytest {' '.join(run['args'])}`"
        rows.append(row(what, f"{base['collected']} collected; {ran}", fork))
    return rows


def _hook_counts(hooks: CheckResult) -> str:
    got = hooks.counts
    return ", ".join(f"{got[s]} {w}" for s, w in HOOK_STATUS.items() if got.get(s))


def precommit_row(hooks: Got) -> str:
    """vLLM's pre-commit on the files the series changes."""
    cell = _hook_counts(hooks) if hooks else NOT_MEASURED
    return row("vLLM pre-commit on the files the series changes", "—", cell)


def checkers_row(checkers: Got) -> str:
    """vLLM's own CI checkers on the steps the series changes."""
    got = checkers.counts if checkers else {}
    cell = f"{got.get('passed', 0)} passed, {got.get('failed', 0)} failed"
    what = "vLLM's CI checkers (test tethering, step keys)"
    return row(what, "—", cell if checkers else NOT_MEASURED)


def precommit_block(hooks: Got) -> str:
    if hooks is None:
        return f"### Pre-commit\n\n{NOT_MEASURED}.\n"
    rows = ["| Hook | Result |", "| --- | --- |"]
    cannot_run = []
    for hook, status, detail in hooks.data["hooks"]:
        why = f": {detail}" if status == "SKIPPED" and detail else ""
        rows.append(row(f"`{hook}`", HOOK_STATUS.get(status, status) + why))
        if status == "SKIPPED" and detail != NO_FILES:
            cannot_run.append(f"`{hook}`")
    messages = hooks.data["messages"]
    bad = sum(m[2] == "FAIL" for m in messages)
    return (
        f"### Pre-commit\n\n{hooks.data['version']} with vLLM's "
        "`.pre-commit-config.yaml`, each hook installed at the version it pins, on "
        f"the {len(hooks.data['files'])} files the series adds or modifies: "
        f"{_hook_counts(hooks) or 'no hooks'}. Skipped because they cannot run on "
        "this machine (the reasons are in the table): "
        f"{', '.join(cannot_run) or 'none'}; the other skipped hooks had no files to "
        f"check. The commit-msg hooks on the {len({m[0] for m in messages})} patch "
        f"messages: {len(messages) - bad} passed, {bad} failed.\n\n"
        + collapsed("Each hook", "\n".join(rows))
        + "\n"
    )


def e2e_row(gpu: Got, ran: Got, prose: dict[str, Any]) -> str:
    """The E2E test on two GPUs (`ran`, by `e2e`), or collected and skipped here
    (`gpu`)."""
    what = f"E2E on 2 GPUs: {one_line(prose['e2e_config'])}"
    if ran is None:
        return row(what, "—", "not run: no 2 GPUs here" if gpu else NOT_MEASURED)
    runs = ran.data["runs"]
    without = outcome_text(runs["without-resolution"]["outcomes"])
    series = outcome_text(runs["series"]["outcomes"])
    return row(what, f"without the resolution: {without}", series)


def gpu_command(gpu: Got) -> str:
    """How to run the E2E test on a machine with two GPUs, from the PR branch."""
    if gpu is None:
        return ""
    command = fence(f"python -m pytest {shlex.join(gpu.data['args'])} -v -s")
    return (
        "The E2E test, on two GPUs (dummy weights; the model's config and "
        f"tokenizer come from the Hub):\n\n{command}\n"
    )


def gpu_block(gpu: Got, ran: Got, prose: dict[str, Any]) -> str:
    lines = [
        "### GPU end-to-end test\n",
        "`python3 -m forktool e2e` runs it on two GPUs, on the series and with "
        "patch 1's resolution reverted, and records both outcomes for this kit.\n",
    ]
    if ran is not None:
        lines.append(
            f"Measured by `{ran.command}` on {ran.date}; {ran.data['reverted']}\n"
        )
        for side in ("series", "without-resolution"):
            lines.append(f"{side}:\n\n{fence(ran.excerpts.get(side, ''))}\n")
    if gpu is None:
        lines.append(f"{NOT_MEASURED}.\n")
    else:
        outcomes = gpu.data["outcomes"]
        tests = ", ".join(f"`{t.split('::', 1)[1]}`" for t in sorted(outcomes))
        reasons = sorted({gpu.data["reasons"].get(t, "") for t in outcomes} - {""})
        lines.append(
            f"On the CPU machine it is collected ({counts_text(gpu.counts)}: "
            f"{tests}); skip reason: {'; '.join(reasons) or 'none given'}.\n"
        )
    return "\n".join([*lines, reflow(prose["e2e_guards"]) + "\n"])


BENCH_HEADLINE = {
    "PASS": "goals met",
    "FAIL": "goals NOT met",
    bench.INCONCLUSIVE: "inconclusive: the A/A noise is wider than a goal's "
    "margin, so this run supports no performance claim either way",
}


def bench_block(measured: Got, prose: dict[str, Any]) -> str:
    lines = [
        "### Performance of the trade-off\n",
        reflow(prose["tradeoff_cost"]) + "\n",
    ]
    if measured is None:
        lines.append(f"Benchmark: {NOT_MEASURED}; no performance claim is made.\n")
        return "\n".join(lines)
    verdicts = bench.goals(measured.data["rows"])  # as bench judges them now
    headline = BENCH_HEADLINE[bench.overall(verdicts)]
    lines.append(f"Measured by `{measured.command}` on {measured.date} ({headline}):\n")
    lines.append(fence(bench.summary(verdicts)) + "\n")
    for name, text in measured.excerpts.items():
        if name != "goals":
            lines.append(collapsed(name, fence(text)) + "\n")
    return "\n".join(lines)


# --- the fork's own checks (description.fork_checks_section) ------------------

COMMANDS = """\
git clone <this fork's repository> && cd <it>
python3 -m forktool setup    # the regression matrix, fork_tests/ included
python3 -m forktool test     # everything below, and what the table above shows
python3 -m forktool mutate   # mutation testing alone"""


def fuzz_row(fuzz: Got, caught: Got) -> str:
    on_base = NOT_MEASURED
    if caught:
        found = "found" if caught.ok else "NOT found"
        on_base = f"{caught.counts.get('violations', 0)} invariant violations ({found})"
    on_series = counts_text(fuzz.counts) if fuzz else NOT_MEASURED
    what = "Differential planner fuzz (Hypothesis), invariants of the fix"
    return row(what, on_base, on_series)


def overrides_row(overrides: Got) -> str:
    what = (
        "Out-of-tree overrides of `needs_kv_cache_zeroing` (replace, wrap "
        "`fget`, `__dict__` lookup)"
    )
    if overrides is None:
        return row(what, NOT_MEASURED, NOT_MEASURED)
    return row(what, *(outcome_text(overrides.data[t]) for t in ("base", "fork")))


def overrides_block(overrides: Got) -> str:
    if overrides is None:
        return ""
    what = "Out-of-tree override checks, vLLM as released against this series"
    table = fence(f"$ {overrides.command}\n{overrides.data['table']}")
    return collapsed(what, table) + "\n"


def _cell(text: str) -> str:
    """`text` for a Markdown table cell."""
    return one_line(text).replace("|", "\\|") or "—"


def mutants_block(mutants: Got) -> str:
    """Mutation testing of the series' added lines: the counts, and each
    mutant in a collapsed table."""
    title = "Mutation testing of the lines and hunks the series adds"
    if mutants is None:
        return f"{title}: {NOT_MEASURED}.\n"
    # None: it could not run (the selection failed unmutated)
    if (rows := mutants.data.get("mutants")) is None:
        why = one_line(mutants.excerpts.get("error", "")) or "no mutants recorded"
        return f"{title}: did not run: {why}\n"
    tally = Counter(r["kind"] for r in rows)
    fork_only = set()
    table = [
        "| File:line | Mutation | Outcome | Killed by (or why equivalent) |",
        "| --- | --- | --- | --- |",
    ]
    for r in rows:
        where = f"`{r['file']}:{r['line']}`"
        table.append(row(where, _cell(r["mutation"]), r["kind"], _cell(r["detail"])))
        if r["kind"] == "killed (fork tests only)" and r["gpu_only"]:
            fork_only.add((r["file"], r["line"], r["gpu_only"]))
    unreachable = "".join(
        f" `{file}:{line}` is killed only by the fork tests: {reason}."
        for file, line, reason in sorted(fork_only)
    )
    return (
        f"{title}: each line the series adds under `vllm/`, mutated one plausible "
        "mistake at a time (`and`/`or` and their operands, comparisons, "
        "constants, a pair's element, an added term halved, deleted statements "
        "and guards, replaced return values), and each hunk of the series "
        "reverted alone, against the series' regression tests, then the "
        f"fork's own checks: {len(rows)} mutants, "
        f"{tally['killed (series)']} killed by the series' regression tests, "
        f"{tally['killed (fork tests only)']} only by the fork tests, "
        f"{tally['survived']} survived, "
        f"{tally['equivalent']} equivalent (no test can tell them apart; "
        f"each with its reason).{unreachable} Measured by `{mutants.command}` on "
        f"{mutants.date}.\n\n" + collapsed("Each mutant", "\n".join(table)) + "\n"
    )
