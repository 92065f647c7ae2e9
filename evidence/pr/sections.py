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
from forktool.checks import Check, CheckResult

NOT_MEASURED = "not measured"
OUTCOMES = ("passed", "failed", "error", "skipped")
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


def regression_rows(matrix: CheckResult | None) -> list[str]:
    """The series' regression tests on the base's code and at the series' head,
    counted over the same tests on both sides; then each patch."""
    what = "The series' regression tests"
    if matrix is None:
        return [f"| {what} | {NOT_MEASURED} | {NOT_MEASURED} |"]
    columns = matrix.data["columns"]
    head = max(c for c in columns if c != "base+tests")
    base = _series_outcomes(columns["base+tests"])
    series = _series_outcomes(columns[head])
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


def _series_outcomes(column: dict[str, Any]) -> dict[str, str]:
    return {
        test: outcome
        for test, outcome in column["outcomes"].items()
        if not test.startswith("fork_tests/")
    }


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


def matrix_table_rows(
    columns: dict[str, Any], what: str, fork_tests: bool
) -> list[str]:
    """Base against the series' head, then each patch (bisectable), for the
    series' tests or (`fork_tests`) this repository's fork_tests/."""
    head = max(c for c in columns if c != "base+tests")
    return [
        f"| {what} | {counts_text(_column_counts(columns['base+tests'], fork_tests))}"
        f" | {counts_text(_column_counts(columns[head], fork_tests))} |",
        at_each_patch(columns, fork_tests),
    ]


def at_each_patch(columns: dict[str, Any], fork_tests: bool) -> str:
    at_each = "; ".join(
        f"{c}: {counts_text(_column_counts(columns[c], fork_tests))}"
        for c in sorted(columns)
        if c != "base+tests"
    )
    return f"| The same, at each patch (bisectable) | — | {at_each} |"


def _column_counts(
    column: dict[str, Any], fork_tests: bool | None = None
) -> dict[str, int]:
    """Outcome counts of a matrix column: all tests, or (`fork_tests`) only
    those of this repository's fork_tests/, or (not `fork_tests`) only the series'."""
    counts: dict[str, int] = {}
    for test, outcome in column["outcomes"].items():
        if fork_tests is None or test.startswith("fork_tests/") == fork_tests:
            counts[outcome] = counts.get(outcome, 0) + 1
    return counts


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


def outcome_text(outcomes: dict[str, str]) -> str:
    counts = Counter(outcomes.values())
    return ", ".join(f"{counts[o]} {o}" for o in OUTCOMES if counts[o])


def other_rows(found: Found) -> list[str]:
    """The rows the registry's checks give themselves (`Check.pr_row`)."""
    return [check.pr_row(got) for check, got in found.items() if check.pr_row]


def precommit_row(hooks: CheckResult | None) -> str:
    """vLLM's pre-commit on the files the series changes."""
    return (
        "| vLLM pre-commit on the files the series changes | — | "
        + (
            ", ".join(
                f"{hooks.counts[s]} {word}"
                for s, word in HOOK_STATUS.items()
                if hooks.counts.get(s)
            )
            if hooks
            else NOT_MEASURED
        )
        + " |"
    )


def checkers_row(checkers: CheckResult | None) -> str:
    """vLLM's own CI checkers on the steps the series changes."""
    return (
        "| vLLM's CI checkers (test tethering, step keys) | — | "
        + (
            f"{checkers.counts.get('passed', 0)} passed, "
            f"{checkers.counts.get('failed', 0)} failed"
            if checkers
            else NOT_MEASURED
        )
        + " |"
    )


def precommit_block(hooks: CheckResult | None) -> str:
    if hooks is None:
        return f"### Pre-commit\n\n{NOT_MEASURED}.\n"
    rows = ["| Hook | Result |", "| --- | --- |"]
    cannot_run = []
    for hook, status, detail in hooks.data["hooks"]:
        why = f": {detail}" if status == "SKIPPED" and detail else ""
        rows.append(f"| `{hook}` | {HOOK_STATUS.get(status, status)}{why} |")
        if status == "SKIPPED" and detail != "no files to check":
            cannot_run.append(f"`{hook}`")
    counts = ", ".join(
        f"{hooks.counts[s]} {word}"
        for s, word in HOOK_STATUS.items()
        if hooks.counts.get(s)
    )
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
    args = shlex.join(gpu.data["args"])
    return (
        "The E2E test, on two GPUs (dummy weights; the model's config and "
        "tokenizer come from the Hub):\n\n"
        + fence(f"python -m pytest {args} -v -s")
        + "\n"
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
