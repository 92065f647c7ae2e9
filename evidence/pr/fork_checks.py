"""The fork's own checks in the PR description: what upstream would not
merge and a reviewer cannot rerun from the PR branch (this repository's
fork_tests/, the planner fuzz, the override patterns, mutation testing), in a
collapsed section of their own, with the commands that run them."""

from __future__ import annotations

from collections import Counter

from evidence import checks
from evidence.pr.sections import (
    NOT_MEASURED,
    Found,
    collapsed,
    counts_text,
    fence,
    matrix_table_rows,
    one_line,
    outcome_text,
)
from forktool.checks import CheckResult

COMMANDS = """\
git clone <this fork's repository> && cd <it>
python3 -m forktool setup    # the regression matrix, fork_tests/ included
python3 -m forktool test     # everything below, and what the table above shows
python3 -m forktool mutate   # mutation testing alone"""


def fork_checks_section(found: Found) -> str:
    matrix = found[checks.REGRESSION_MATRIX]
    rows = (
        matrix_table_rows(
            matrix.data["columns"],
            "Stand-in stages and workers, copies of the decision (`fork_tests/`)",
            fork_tests=True,
        )
        if matrix
        else [f"| `fork_tests/` | {NOT_MEASURED} | {NOT_MEASURED} |"]
    )
    table = [
        "| Check | Base | This series |",
        "| --- | --- | --- |",
        *rows,
        fuzz_row(found),
        overrides_row(found[checks.OVERRIDES]),
    ]
    body = [
        "These run from the fork's repository, against vLLM as released and "
        "the series applied to it; they are not part of this PR.\n",
        "\n".join(table) + "\n",
        fence(COMMANDS) + "\n",
        mutants_block(found[checks.MUTANTS]),
        overrides_block(found[checks.OVERRIDES]),
    ]
    summary = "The fork's own checks (not in this PR), and how to run them"
    return collapsed(summary, "\n".join(part for part in body if part)) + "\n"


def fuzz_row(found: Found) -> str:
    fuzz, caught = found[checks.PLANNER_FUZZ], found[checks.FUZZ_CATCHES_BASE]
    on_base = (
        f"{caught.counts.get('violations', 0)} invariant violations "
        f"({'found' if caught.ok else 'NOT found'})"
        if caught
        else NOT_MEASURED
    )
    on_series = counts_text(fuzz.counts) if fuzz else NOT_MEASURED
    return (
        "| Differential planner fuzz (Hypothesis), invariants of the fix | "
        f"{on_base} | {on_series} |"
    )


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
    return (
        collapsed(
            "Out-of-tree override checks, vLLM as released against this series",
            fence(f"$ {overrides.command}\n{overrides.data['table']}"),
        )
        + "\n"
    )


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
        return (
            f"{title}: recorded without who killed each mutant; "
            f"run `{mutants.command}`.\n"
        )
    tally = Counter(row["kind"] for row in rows)
    gpu_only = sorted(
        {
            (row["file"], row["line"], row["gpu_only"])
            for row in rows
            if row["kind"] == "killed (fork tests only)" and row["gpu_only"]
        }
    )
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
