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

Found = dict[Check, CheckResult | None]
"""Each check the description renders -> its result for this tree, or None."""


def one_line(text: str) -> str:
    return " ".join(text.split())


def reflow(text: str) -> str:
    """Prose as Markdown renders it: each paragraph, and each list item, on one
    line (the prose is wrapped for editing; the description is read rendered)."""
    blocks = []
    for block in re.split(r"\n[ \t]*\n", text.strip()):
        items: list[str] = []
        for line in block.splitlines():
            if not items or re.match(r"(- |\d+\. )", line):
                items.append(line.strip())
            else:
                items[-1] += " " + line.strip()
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


def spaced_tables(markdown: str) -> str:
    """Table delimiter rows as `| --- |`, the style vLLM's markdownlint wants."""
    return re.sub(
        r"^\|(?:-+\|)+$",
        lambda m: "|" + " --- |" * m[0].count("-|"),
        markdown,
        flags=re.M,
    )


def collapsed(summary: str, body: str) -> str:
    return f"<details>\n<summary>{summary}</summary>\n\n{body.strip()}\n\n</details>"


def _outcomes(column: dict[str, Any], fork_tests: bool) -> dict[str, str]:
    """A matrix column's outcomes: of this repository's fork_tests/, or (not
    `fork_tests`) of the series' tests."""
    outcomes = column["outcomes"].items()
    return {t: o for t, o in outcomes if t.startswith("fork_tests/") == fork_tests}


def regression_rows(matrix: CheckResult | None) -> list[str]:
    """The series' regression tests on the base's code and at the series' head,
    counted over the same tests on both sides; then each patch."""
    what = "The series' regression tests"
    if matrix is None:
        return [f"| {what} | {NOT_MEASURED} | {NOT_MEASURED} |"]
    columns = matrix.data["columns"]
    base, series = (
        _outcomes(columns[c], False) for c in ("base+tests", _head(columns))
    )
    both = {test: series[test] for test in base if test in series}
    rows = [
        f"| {what} ({len(base)} on both sides) | {outcome_text(base)} "
        f"| {outcome_text(both)} |"
    ]
    if only := {t: o for t, o in series.items() if t not in base}:
        rows.append(
            f"| The series' tests that expect its new field ({len(only)}) | — "
            f"| {outcome_text(only)} |"
        )
    return [*rows, at_each_patch(columns, fork_tests=False)]


def before_block(matrix: CheckResult | None) -> str:
    """The failures of the series' tests on the base's code: the bug."""
    text = matrix.excerpts.get("base") if matrix else None
    if not text:
        return f"Before the fix: {NOT_MEASURED}.\n"
    return (
        "Before the fix, the series' tests on the base's code fail by "
        "assertion about what the scheduler sends and each stage builds:\n\n"
        + fence(text)
        + "\n"
    )


def matrix_evidence(matrix: CheckResult | None) -> str:
    """The regression matrix in full: each side's failures with the end of
    their tracebacks, and each test at each patch."""
    if matrix is None:
        return f"### Regression matrix\n\n{NOT_MEASURED}.\n"
    parts = ["### Regression matrix\n"]
    for side, title in (
        ("base", "On the base's code, with the series' test files"),
        ("series", "On the series"),
    ):
        text = matrix.excerpts.get(f"{side} tracebacks") or matrix.excerpts.get(side)
        parts += [f"{title}:\n", fence(text or NOT_MEASURED) + "\n"]
    parts += [
        "Each test on the base and at each patch:\n",
        fence(matrix.data["table"]) + "\n",
    ]
    return "\n".join(parts)


def _head(columns: dict[str, Any]) -> str:
    return max(c for c in columns if c != "base+tests")


def _counted(column: dict[str, Any], fork_tests: bool) -> str:
    return counts_text(Counter(_outcomes(column, fork_tests).values()))


def matrix_table_rows(
    columns: dict[str, Any], what: str, fork_tests: bool
) -> list[str]:
    """Base against the series' head, then each patch (bisectable), for the
    series' tests or (`fork_tests`) this repository's fork_tests/."""
    base, head = (
        _counted(columns[c], fork_tests) for c in ("base+tests", _head(columns))
    )
    return [f"| {what} | {base} | {head} |", at_each_patch(columns, fork_tests)]


def at_each_patch(columns: dict[str, Any], fork_tests: bool) -> str:
    at_each = "; ".join(
        f"{c}: {_counted(columns[c], fork_tests)}"
        for c in sorted(columns)
        if c != "base+tests"
    )
    return f"| The same, at each patch (bisectable) | — | {at_each} |"


def suite_rows(suite: CheckResult | None) -> list[str]:
    if suite is None:
        return [
            f"| vLLM's CPU tests for the touched code | {NOT_MEASURED} | "
            f"{NOT_MEASURED} |"
        ]
    return [
        f"| vLLM's CPU job `pytest {' '.join(run['args'])}` | "
        f"{base_cell(run['base'])} | {counts_text(run['fork']['counts'])} "
        f"({len(run['added'])} added by the series, {len(run['lost'])} lost"
        f"{flaky_text(run.get('flaky', []))}) |"
        for run in suite.data["runs"].values()
    ]


def flaky_text(flaky: list[str]) -> str:
    """The fork's failures that passed when run again, named."""
    if not flaky:
        return ""
    names = ", ".join(f"`{test.rpartition('::')[2]}`" for test in flaky)
    return f"; failed, then passed when run again: {names}"


def base_cell(base: dict[str, Any]) -> str:
    """The base runs only what does not pass on the fork; say what ran."""
    collected = f"{base['collected']} collected"
    if not base["rerun"]:
        return f"{collected}; not run, as every test passes on the fork"
    return f"{collected}; the {base['rerun']} not passing on the fork: " + counts_text(
        base["counts"]
    )


def other_rows(found: Found) -> list[str]:
    """The rows the registry's checks give themselves (`Check.pr_row`)."""
    return [check.pr_row(got) for check, got in found.items() if check.pr_row]


def _hook_counts(hooks: CheckResult) -> str:
    counts = hooks.counts
    return ", ".join(
        f"{counts[s]} {w}" for s, w in HOOK_STATUS.items() if counts.get(s)
    )


def precommit_row(hooks: CheckResult | None) -> str:
    """vLLM's pre-commit on the files the series changes."""
    cell = _hook_counts(hooks) if hooks else NOT_MEASURED
    return f"| vLLM pre-commit on the files the series changes | — | {cell} |"


def checkers_row(checkers: CheckResult | None) -> str:
    """vLLM's own CI checkers on the steps the series changes."""
    cell = NOT_MEASURED
    if checkers:
        counts = checkers.counts
        cell = f"{counts.get('passed', 0)} passed, {counts.get('failed', 0)} failed"
    return f"| vLLM's CI checkers (test tethering, step keys) | — | {cell} |"


def precommit_block(hooks: CheckResult | None) -> str:
    if hooks is None:
        return f"### Pre-commit\n\n{NOT_MEASURED}.\n"
    rows = ["| Hook | Result |", "| --- | --- |"]
    cannot_run = []
    for hook, status, detail in hooks.data["hooks"]:
        why = f": {detail}" if status == "SKIPPED" and detail else ""
        rows.append(f"| `{hook}` | {HOOK_STATUS.get(status, status)}{why} |")
        if status == "SKIPPED" and detail != NO_FILES:
            cannot_run.append(f"`{hook}`")
    counts = _hook_counts(hooks)
    messages = hooks.data["messages"]
    bad = [m for m in messages if m[2] == "FAIL"]
    return (
        f"### Pre-commit\n\n{hooks.data['version']} with vLLM's "
        "`.pre-commit-config.yaml`, each hook installed at the version it pins, on "
        f"the {len(hooks.data['files'])} files the series adds or modifies: "
        f"{counts or 'no hooks'}. Skipped because they cannot run on this machine "
        f"(the reasons are in the table): {', '.join(cannot_run) or 'none'}; the "
        "other skipped hooks had no files to check. The commit-msg hooks on the "
        f"{len({m[0] for m in messages})} patch messages: "
        f"{len(messages) - len(bad)} passed, {len(bad)} failed.\n\n"
        + collapsed("Each hook", "\n".join(rows))
        + "\n"
    )


E2E_COMMAND = "python3 -m forktool e2e"


def e2e_row(
    gpu: CheckResult | None, ran: CheckResult | None, prose: dict[str, Any]
) -> str:
    """The E2E test on two GPUs (`ran`, by `e2e`), or collected and skipped here
    (`gpu`)."""
    what = f"E2E on 2 GPUs: {one_line(prose['e2e_config'])}"
    if ran is not None:
        runs = ran.data["runs"]
        return (
            f"| {what} | without the resolution: "
            f"{outcome_text(runs['without-resolution']['outcomes'])} "
            f"| {outcome_text(runs['series']['outcomes'])} |"
        )
    cell = NOT_MEASURED if gpu is None else "not run: no 2 GPUs here"
    return f"| {what} | — | {cell} |"


def gpu_command(gpu: CheckResult | None) -> str:
    """How to run the E2E test on a machine with two GPUs, from the PR branch."""
    if gpu is None:
        return ""
    command = fence(f"python -m pytest {shlex.join(gpu.data['args'])} -v -s")
    return (
        "The E2E test, on two GPUs (dummy weights; the model's config and "
        f"tokenizer come from the Hub):\n\n{command}\n"
    )


def gpu_block(
    gpu: CheckResult | None, ran: CheckResult | None, prose: dict[str, Any]
) -> str:
    lines = [
        "### GPU end-to-end test\n",
        f"`{E2E_COMMAND}` runs it on two GPUs, on the series and with patch 1's "
        "resolution reverted, and records both outcomes for this kit.\n",
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
        reasons = sorted({gpu.data["reasons"].get(t, "") for t in outcomes})
        lines.append(
            f"On the CPU machine it is collected ({counts_text(gpu.counts)}: "
            f"{tests}); skip reason: "
            f"{'; '.join(r for r in reasons if r) or 'none given'}.\n"
        )
    lines.append(reflow(prose["e2e_guards"]) + "\n")
    return "\n".join(lines)


BENCH_HEADLINE = {
    "PASS": "goals met",
    "FAIL": "goals NOT met",
    bench.INCONCLUSIVE: "inconclusive: the A/A noise is wider than a goal's "
    "margin, so this run supports no performance claim either way",
}


def bench_block(measured: CheckResult | None, prose: dict[str, Any]) -> str:
    lines = [
        "### Performance of the trade-off\n",
        reflow(prose["tradeoff_cost"]) + "\n",
    ]
    if measured is None:
        lines.append(f"Benchmark: {NOT_MEASURED}; no performance claim is made.\n")
        return "\n".join(lines)
    # The verdicts as bench.goals gives them now, from the measured numbers.
    verdicts = bench.goals(measured.data["rows"])
    lines.append(
        f"Measured by `{measured.command}` on {measured.date} "
        f"({BENCH_HEADLINE[bench.overall(verdicts)]}):\n"
    )
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


def fuzz_row(fuzz: CheckResult | None, caught: CheckResult | None) -> str:
    on_base = on_series = NOT_MEASURED
    if caught:
        found = "found" if caught.ok else "NOT found"
        on_base = f"{caught.counts.get('violations', 0)} invariant violations ({found})"
    if fuzz:
        on_series = counts_text(fuzz.counts)
    what = "Differential planner fuzz (Hypothesis), invariants of the fix"
    return f"| {what} | {on_base} | {on_series} |"


def overrides_row(overrides: CheckResult | None) -> str:
    cells = [
        outcome_text(overrides.data[tree]) if overrides else NOT_MEASURED
        for tree in ("base", "fork")
    ]
    return (
        "| Out-of-tree overrides of `needs_kv_cache_zeroing` (replace, wrap "
        f"`fget`, `__dict__` lookup) | {' | '.join(cells)} |"
    )


def overrides_block(overrides: CheckResult | None) -> str:
    if overrides is None:
        return ""
    what = "Out-of-tree override checks, vLLM as released against this series"
    table = fence(f"$ {overrides.command}\n{overrides.data['table']}")
    return collapsed(what, table) + "\n"


def _cell(text: str) -> str:
    """`text` for a Markdown table cell."""
    return one_line(text).replace("|", "\\|") or "—"


def mutants_block(mutants: CheckResult | None) -> str:
    """Mutation testing of the series' added lines: the counts, and each
    mutant in a collapsed table."""
    title = "Mutation testing of the lines and hunks the series adds"
    if mutants is None:
        return f"{title}: {NOT_MEASURED}.\n"
    rows = mutants.data.get("mutants")
    if rows is None:  # it could not run (the selection failed unmutated)
        why = one_line(mutants.excerpts.get("error", "")) or "no mutants recorded"
        return f"{title}: did not run: {why}\n"
    if any("kind" not in row for row in rows):
        again = f"run `{mutants.command}`"
        return f"{title}: recorded without who killed each mutant; {again}.\n"
    tally = Counter(row["kind"] for row in rows)
    fork_only = [r for r in rows if r["kind"] == "killed (fork tests only)"]
    gpu_only = sorted({(r["file"], r["line"], r["gpu_only"]) for r in fork_only})
    gpu_only = [(file, line, why) for file, line, why in gpu_only if why]
    table = [
        "| File:line | Mutation | Outcome | Killed by (or why equivalent) |",
        "| --- | --- | --- | --- |",
        *(
            f"| `{row['file']}:{row['line']}` | {_cell(row['mutation'])} | "
            f"{row['kind']} | {_cell(row['detail'])} |"
            for row in rows
        ),
    ]
    unreachable = "".join(
        f" `{file}:{line}` is killed only by the fork tests: {reason}."
        for file, line, reason in gpu_only
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
