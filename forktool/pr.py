"""python3 -m forktool pr: the upstream pull request kit, in build/pr/.

    title.txt          the PR's title
    description.md     vLLM's .github/PULL_REQUEST_TEMPLATE.md from the fork tree,
                       filled with the prose of pr/description.toml and the
                       numbers of build/results/ (written by `setup` and `test`)
    series/            git format-patch --cover-letter base..HEAD; the cover
                       letter's body is the description as plain text
    apply-to-vllm.sh   run in a clone of vllm-project/vllm: `git am -3` of
                       each patch on a new branch at any ref, saying how
                       each applied or where it stopped
    preimages.pack     the blobs the patches were made against, which
                       `git am -3` merges from

Numbers come only from results measured on the fork's current tree; a
missing or stale result stops the command before it writes anything.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import tomllib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from email.utils import parseaddr
from pathlib import Path
from typing import Any

from forktool import bench, results
from forktool.errors import ForkToolError
from forktool.fork import _ISOLATED, BASE_TAG, git, identity
from forktool.results import CheckResult

TEMPLATE = ".github/PULL_REQUEST_TEMPLATE.md"
TEST = "python3 -m forktool test"
# The results the description needs, and the command that writes each.
REQUIRED = {
    "regression-matrix": "python3 -m forktool setup",
    "gpu-only": TEST,
    "upstream-selection": TEST,
    "pre-commit": TEST,
    "ci-checkers": TEST,
    "ci-impact": TEST,
    "planner-fuzz": TEST,
    "fuzz-catches-base": TEST,
    "overrides": TEST,
}
OPTIONAL = {"bench": "python3 -m forktool bench"}
NOT_MEASURED = "not measured"
OUTCOMES = ("passed", "failed", "error", "skipped")
HOOK_STATUS = {"PASS": "passed", "FAIL": "failed", "SKIPPED": "skipped"}


# --- inputs ---------------------------------------------------------------------


def load_results(
    store: Path, tree: str, allow_partial: bool
) -> dict[str, CheckResult | None]:
    """Each check's result for `tree`; None where it is missing or stale.

    Without `allow_partial`, a missing or stale required result is an error
    that names it and the command that refreshes it.
    """
    found: dict[str, CheckResult | None] = {}
    problems = []
    for check, refresh in {**REQUIRED, **OPTIONAL}.items():
        result = results.read(store, check)
        why = results.problem(result, check, tree, refresh)
        if why and check in REQUIRED:
            problems.append(why)
        found[check] = None if why else result
    if problems and not allow_partial:
        raise ForkToolError(
            f"the PR kit needs results measured on the fork's current tree "
            f"({tree[:12]}); nothing was written:\n  "
            + "\n  ".join(problems)
            + "\n(`pr --allow-partial` renders anyway, each missing part marked "
            f'"{NOT_MEASURED}")'
        )
    return found


def load_prose(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as f:
            return tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise ForkToolError(f"cannot read the PR prose {path}: {e}") from e


@dataclass(frozen=True)
class Facts:
    """What the description says about the fork itself (not measured by checks)."""

    tree: str
    base_version: str
    patches: list[str]
    """Each patch's subject, in order."""
    signer: str | None
    """The submitter `--signoff` re-signed the kit's series for, if any."""
    neutral: str
    """The identity the patches carry in this repository."""
    runners: str = ""
    """"Runners assessed" from REVIEW.md, if the repository has one."""


# --- rendering ------------------------------------------------------------------


def one_line(text: str) -> str:
    return " ".join(text.split())


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


def _summary_lines(excerpt: str) -> str:
    """The command, pytest's FAILED/ERROR lines and its final tally."""
    lines = excerpt.splitlines()
    keep = [lines[0]] if lines else []
    keep += [line for line in lines[1:] if line.startswith(("FAILED ", "ERROR "))]
    if len(lines) > 1:
        keep.append(lines[-1])
    return "\n".join(keep)


def matrix_rows(matrix: CheckResult | None) -> tuple[list[str], str]:
    """Table rows for the regression tests, and the evidence below the table."""
    if matrix is None:
        return [
            f"| Regression tests of the series | {NOT_MEASURED} | {NOT_MEASURED} |"
        ], ""
    columns = matrix.data["columns"]
    head = max(c for c in columns if c != "base+tests")
    rows = []
    for what, checks in (
        ("Regression tests of the series (its test files on the base's code)", False),
        ("The fork's own deeper checks (not in the PR; run the same way)", True),
    ):
        base = _column_counts(columns["base+tests"], checks)
        if base:
            rows.append(
                f"| {what} | {counts_text(base)} | "
                f"{counts_text(_column_counts(columns[head], checks))} |"
            )
    rows.append(
        "| Both, at each patch (bisectable) | — | "
        + "; ".join(
            f"{c}: {counts_text(_column_counts(columns[c]))}"
            for c in sorted(columns)
            if c != "base+tests"
        )
        + " |"
    )
    parts = ["### The failure before the fix, and the fix\n"]
    for side, title in (
        ("base", "On the base's code, with the series' test files"),
        ("series", "On the series"),
    ):
        text = matrix.excerpts.get(side)
        if not text:
            parts.append(f"{title}: {NOT_MEASURED}.\n")
            continue
        summary = _summary_lines(text)
        parts += [f"{title}:\n", fence(summary) + "\n"]
        if summary != text:
            parts.append(collapsed("Full output", fence(text)) + "\n")
    parts.append(
        collapsed(
            "Regression matrix: each test on the base and at each patch",
            fence(matrix.data["table"]),
        )
        + "\n"
    )
    return rows, "\n".join(parts)


def _column_counts(
    column: dict[str, Any], checks: bool | None = None
) -> dict[str, int]:
    """Outcome counts of a matrix column: all tests, or (`checks`) only those
    of this repository's checks/, or (not `checks`) only the series' own."""
    counts: dict[str, int] = {}
    for test, outcome in column["outcomes"].items():
        if checks is None or test.startswith("checks/") == checks:
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
        f"({len(run['added'])} added by the series, {len(run['lost'])} lost) |"
        for run in suite.data["runs"].values()
    ]


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


def other_rows(found: dict[str, CheckResult | None]) -> list[str]:
    rows = []
    fuzz, caught = found["planner-fuzz"], found["fuzz-catches-base"]
    rows.append(
        "| Differential planner fuzz (Hypothesis), invariants of the fix | "
        + (
            f"{caught.counts.get('violations', 0)} invariant violations "
            f"({'found' if caught.ok else 'NOT found'})"
            if caught
            else NOT_MEASURED
        )
        + " | "
        + (counts_text(fuzz.counts) if fuzz else NOT_MEASURED)
        + " |"
    )
    hooks = found["pre-commit"]
    rows.append(
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
    overrides = found["overrides"]
    rows.append(
        "| Out-of-tree overrides of `needs_kv_cache_zeroing` (replace, wrap "
        "`fget`, `__dict__` lookup) | "
        + " | ".join(
            outcome_text(overrides.data[tree]) if overrides else NOT_MEASURED
            for tree in ("base", "fork")
        )
        + " |"
    )
    checkers = found["ci-checkers"]
    rows.append(
        "| vLLM's CI checkers (test tethering, step keys) | — | "
        + (
            f"{checkers.counts.get('passed', 0)} passed, "
            f"{checkers.counts.get('failed', 0)} failed"
            if checkers
            else NOT_MEASURED
        )
        + " |"
    )
    return rows


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


def gpu_block(gpu: CheckResult | None, prose: dict[str, Any]) -> str:
    lines = ["### GPU end-to-end test\n"]
    if gpu is None:
        lines.append(f"{NOT_MEASURED}.\n")
    else:
        outcomes = gpu.data["outcomes"]
        tests = ", ".join(f"`{t.split('::', 1)[1]}`" for t in sorted(outcomes))
        if outcomes and set(outcomes.values()) == {"passed"}:
            lines.append(f"Passed ({len(outcomes)}): {tests}.\n")
        elif not outcomes or set(outcomes.values()) != {"skipped"}:
            lines.append(
                f"{counts_text(gpu.counts)} ({tests}); no pass is claimed. "
                f"Measured by `{gpu.command}` on {gpu.date}.\n"
            )
        else:
            reasons = sorted({gpu.data["reasons"].get(t, "") for t in outcomes})
            lines.append(
                f"Not run on GPUs for this revision, so no pass is claimed. "
                f"On the CPU machine it is collected and skipped "
                f"({counts_text(gpu.counts)}: {tests}); skip reason: "
                f"{'; '.join(r for r in reasons if r) or 'none given'}.\n"
            )
        args = shlex.join(gpu.data["args"])
        lines += [
            "To run it (two GPUs, model weights in the HF cache):\n",
            fence(
                "HF_HUB_OFFLINE=1 CUDA_VISIBLE_DEVICES=0,1 \\\n"
                f"  python -m pytest {args} -v -s --tb=short"
            )
            + "\n",
        ]
    lines.append(prose["e2e_guards"].strip() + "\n")
    return "\n".join(lines)


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


BENCH_HEADLINE = {
    "PASS": "goals met",
    "FAIL": "goals NOT met",
    bench.INCONCLUSIVE: "inconclusive: the A/A noise is wider than a goal's "
    "margin, so this run supports no performance claim either way",
}


def bench_block(measured: CheckResult | None, prose: dict[str, Any]) -> str:
    lines = [
        "### Performance of the trade-off\n",
        prose["tradeoff_cost"].strip() + "\n",
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


def validation(
    found: dict[str, CheckResult | None], facts: Facts, prose: dict[str, Any]
) -> str:
    measured = [r for r in found.values() if r is not None]
    dates = sorted(r.date for r in measured)
    when = f"on {dates[0]}" if dates else "(no results)"
    if dates and dates[-1] != dates[0]:
        when = f"between {dates[0]} and {dates[-1]}"
    failing = sorted(r.check for r in measured if not r.ok)
    verdict = (
        f"**Checks that failed on this tree: {', '.join(failing)}.**\n"
        if failing
        else ""
    )
    rows, evidence = matrix_rows(found["regression-matrix"])
    gpu = found["gpu-only"]
    gpu_cell = NOT_MEASURED
    if gpu is not None:
        outcomes = set(gpu.data["outcomes"].values())
        gpu_cell = (
            "passed"
            if outcomes == {"passed"}
            else (f"collected, {counts_text(gpu.counts)} (no 2 GPUs here); not run")
        )
    table = [
        f"| Check | vLLM {facts.base_version} (base) | This series |",
        "| --- | --- | --- |",
        *rows,
        *suite_rows(found["upstream-selection"]),
        f"| E2E: {one_line(prose['e2e_config'])} | — | {gpu_cell} |",
        *other_rows(found),
    ]
    impact = found["ci-impact"]
    ci = (
        collapsed(
            "CI impact: the Buildkite steps that run the E2E test",
            spaced_tables(impact.data["report"]),
        )
        if impact
        else f"CI impact: {NOT_MEASURED}."
    )
    parts = [
        f"Measured on the fork tree `{facts.tree[:12]}` (vLLM "
        f"{facts.base_version} + the {len(facts.patches)} patches) by "
        f"`python3 -m forktool setup`/`test`, {when}, on a CPU-only machine "
        "(`CUDA_VISIBLE_DEVICES=''`, `VLLM_TARGET_DEVICE=cpu`, "
        f'`HF_HUB_OFFLINE=1`). "{NOT_MEASURED}" marks a check without a '
        "result for this tree.\n",
        verdict,
        "\n".join(table) + "\n",
        evidence,
        precommit_block(found["pre-commit"]),
        overrides_block(found["overrides"]),
        ci + "\n",
        gpu_block(gpu, prose),
        bench_block(found["bench"], prose),
    ]
    return "\n".join(part for part in parts if part).rstrip()


def details(prose: dict[str, Any], facts: Facts) -> str:
    parts = []
    for key, title in (
        ("root_cause", "Root cause"),
        ("design", "Design"),
        ("trade_offs", "Trade-offs"),
        ("out_of_tree", "Out-of-tree compatibility"),
        ("runners", "Runners assessed"),
        ("limitations", "Limitations"),
    ):
        text = facts.runners if key == "runners" and facts.runners else prose[key]
        parts.append(f"### {title}\n\n{text.strip()}\n")
    patches = "\n".join(f"{i}. {s}" for i, s in enumerate(facts.patches, 1))
    parts.append(f"### The patches\n\n{patches}\n")
    parts.append(f"### AI assistance\n\n{prose['ai_assistance'].strip()}\n")
    if facts.signer is None:
        parts.append(
            "**Sign-off still to do.** The commits carry the fork's neutral "
            f"identity `{facts.neutral}`, which is not a DCO sign-off. The "
            'submitter re-signs them with `python3 -m forktool pr --signoff "Name '
            '<email>"`, which also adds the AI-attribution trailer.\n'
        )
    return "\n".join(parts).rstrip()


def overview(prose: dict[str, Any]) -> str:
    related = "\n".join(
        f"- #{pr['number']}: {one_line(pr['how'])}" for pr in prose["related"]
    )
    return (
        f"{prose['summary'].strip()}\n\nRelated upstream PRs, and how this change "
        f"differs:\n\n{related}"
    )


def fill(template: str, sections: dict[str, str], ticked: list[str]) -> str:
    """The template with each section's placeholder replaced and the true boxes
    of its checklist ticked. A section or box the template lacks is an error."""
    out = template
    for heading, body in sections.items():
        pattern = re.compile(
            rf"^## {re.escape(heading)}[ \t]*\n+<!--.*?-->", re.M | re.S
        )
        filled = f"## {heading}\n\n{body}"
        out, n = pattern.subn(lambda _, filled=filled: filled, out, count=1)
        if n != 1:
            raise ForkToolError(
                f"{TEMPLATE} has no `## {heading}` section with a placeholder "
                "comment: the template changed; update forktool/pr.py"
            )
    for box in ticked:
        pattern = re.compile(rf"^- \[ \] (.*{re.escape(box)})", re.M)
        out, n = pattern.subn(r"- [x] \1", out)
        if n != 1:
            raise ForkToolError(f"{TEMPLATE} has no checklist item {box!r}")
    return out


def render(
    template: str,
    prose: dict[str, Any],
    found: dict[str, CheckResult | None],
    facts: Facts,
) -> str:
    claims = "\n".join(f"- {one_line(claim)}" for claim in prose["claims"])
    sections = {
        "Overview": overview(prose),
        "Claims": claims,
        "Validation": validation(found, facts, prose),
        "Details": details(prose, facts),
    }
    return fill(template, sections, prose["checklist_ticked"])


def plain_text(markdown: str) -> str:
    """The description for a cover letter: without HTML comments and tags."""
    text = re.sub(r"<!--.*?-->\n?", "", markdown, flags=re.S)
    text = re.sub(r"^</?details>\n", "", text, flags=re.M)
    text = re.sub(r"<summary>\s*(.*?)\s*</summary>", r"\1:", text)
    return re.sub(r"\n{3,}", "\n\n", text).strip() + "\n"


# --- the series, re-signed -------------------------------------------------------


def resign(fork: Path, signer: str, neutral: str, trailer: str) -> str:
    """A copy of base..HEAD authored and signed off by `signer`, with the AI
    attribution `trailer`; the neutral identity's sign-off is dropped. Built
    with commit-tree: no branch, worktree or ref of the fork changes."""
    parent = git(fork, "rev-parse", f"{BASE_TAG}^{{commit}}").stdout.strip()
    commits = git(fork, "rev-list", "--reverse", f"{BASE_TAG}..HEAD").stdout.split()
    for commit in commits:
        message = git(fork, "log", "-1", "--format=%B", commit).stdout
        kept = [
            line
            for line in message.splitlines()
            if line.strip() != f"Signed-off-by: {neutral}"
        ]
        message = subprocess.run(
            [
                "git",
                "interpret-trailers",
                "--if-exists",
                "addIfDifferent",
                "--trailer",
                trailer,
                "--trailer",
                f"Signed-off-by: {signer}",
            ],
            input="\n".join(kept).rstrip() + "\n",
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        date = git(fork, "log", "-1", "--format=%aI", commit).stdout.strip()
        env = {**identity(signer), "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
        parent = subprocess.run(
            [
                "git",
                "-C",
                str(fork),
                "commit-tree",
                f"{commit}^{{tree}}",
                "-p",
                parent,
                "-F",
                "-",
            ],
            input=message,
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, **env},
        ).stdout.strip()
    return parent


def format_series(
    fork: Path, head: str, out: Path, subject: str, body: str, sender: str
) -> None:
    """`git format-patch --cover-letter base..head` into `out`, the cover
    letter from `sender`, its subject and blurb filled in."""
    git(
        fork,
        "format-patch",
        "--cover-letter",
        "--no-signature",
        "--full-index",
        "-o",
        str(out),
        f"{BASE_TAG}..{head}",
        env={**_ISOLATED, **identity(sender)},
    )
    cover = out / "0000-cover-letter.patch"
    text = cover.read_text()
    if "*** SUBJECT HERE ***" not in text or "*** BLURB HERE ***" not in text:
        raise ForkToolError(f"git format-patch wrote an unexpected {cover.name}")
    text = text.replace("*** SUBJECT HERE ***", subject, 1)
    cover.write_text(text.replace("*** BLURB HERE ***", body.rstrip(), 1))


def preimage_blobs(fork: Path) -> list[str]:
    """The blob each patch changes or deletes, as the fork had it before that
    patch: what `git am -3` needs to merge a patch onto files that differ."""
    diff = git(
        fork,
        "log",
        "--format=",
        "--raw",
        "--no-abbrev",
        "--no-renames",
        f"{BASE_TAG}..HEAD",
    )
    # ":100644 100644 <before> <after> M\t<path>"
    blobs = {line.split()[2] for line in diff.stdout.splitlines() if line}
    return sorted(b for b in blobs if set(b) != {"0"})


def pack_blobs(fork: Path, blobs: list[str], out: Path) -> None:
    """`blobs` as one self-contained pack file, `out`."""
    run = subprocess.run(
        ["git", "-C", str(fork), "pack-objects", "--stdout"],
        input="".join(f"{b}\n" for b in blobs).encode(),
        capture_output=True,
    )
    if run.returncode:
        raise ForkToolError(f"git pack-objects failed: {run.stderr.decode().strip()}")
    out.write_bytes(run.stdout)


APPLY = r"""#!/usr/bin/env bash
# Apply the KV cache zeroing series to a clone of vllm-project/vllm.
# Written by `python3 -m forktool pr`. Run it inside the clone:
#
#   bash /path/to/build/pr/apply-to-vllm.sh [REF] [BRANCH]
#
# It creates BRANCH (default: @@BRANCH@@) at REF (default: @@REF@@, the
# release the series was made on; main works too) and applies the patches
# there one by one with `git am -3`, saying for each whether it applied as
# is, with a 3-way merge (its files changed or moved at REF), or stopped on
# a conflict, with the commands that finish or abort. Only the new branch
# moves: it refuses a clone with uncommitted changes or a git operation in
# progress. preimages.pack holds the blobs the patches were made against;
# it is unpacked into the clone so that git can merge them.
set -euo pipefail

ref=${1:-@@REF@@}
branch=${2:-@@BRANCH@@}
kit=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
tests=@@TESTS@@

die() { echo "apply-to-vllm: $*" >&2; exit 1; }

git rev-parse --is-inside-work-tree >/dev/null 2>&1 ||
  die "run this inside a clone of vllm-project/vllm"
git rev-parse -q --verify "$ref^{commit}" >/dev/null ||
  die "no commit $ref in this clone (git fetch --tags?)"
if git rev-parse -q --verify "refs/heads/$branch" >/dev/null; then
  die "branch $branch exists; pass another name as the second argument"
fi
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
  die "the clone has uncommitted changes; commit or stash them first"
fi
for op in rebase-apply rebase-merge MERGE_HEAD CHERRY_PICK_HEAD REVERT_HEAD; do
  if [ -e "$(git rev-parse --git-path "$op")" ]; then
    die "a git operation ($op) is in progress here; finish or abort it first"
  fi
done

start=$(git symbolic-ref -q --short HEAD || git rev-parse HEAD)
patches=("$kit"/series/[0-9][0-9][0-9][0-9]-*.patch)
patches=("${patches[@]:1}") # the first is the cover letter
log=$(mktemp)
trap 'rm -f "$log"' EXIT

git unpack-objects -q <"$kit/preimages.pack"
git checkout -q -b "$branch" "$ref"
echo "apply-to-vllm: on the new branch $branch at $ref (you were on $start)"
for i in "${!patches[@]}"; do
  patch=${patches[$i]}
  how="applied with a 3-way merge"
  if git apply --check "$patch" 2>/dev/null; then how="applied as is"; fi
  if git am -3 --keep-non-patch "$patch" >"$log" 2>&1; then
    echo "  $(basename "$patch"): $how"
    continue
  fi
  # Start over from this patch with the rest of the series queued, so that
  # `git am --continue` applies the rest once this one is resolved.
  git am --abort >/dev/null 2>&1 || true
  git am -3 --keep-non-patch "${patches[@]:$i}" >"$log" 2>&1 || true
  echo "  $(basename "$patch"): stopped; git am said:"
  sed 's/^/    /' "$log"
  conflicts=$(git diff --name-only --diff-filter=U)
  echo "  conflicting files: ${conflicts:-none (the patch did not apply; see above)}"
  echo "  not applied yet: $((${#patches[@]} - i)) of ${#patches[@]} patches"
  echo "To finish: resolve the conflicts, git add the files, then"
  echo "  git am --continue   # applies the rest, stopping again at a conflict"
  echo "and run the series' regression tests from this clone:"
  echo "  $tests"
  echo "To abort, back where you were:"
  echo "  git am --abort && git checkout -q $start && git branch -D $branch"
  exit 1
done
echo "applied ${#patches[@]} patches on the new branch $branch (from $ref)"
echo "The series' regression tests, from this clone (on a CPU-only machine"
echo "with VLLM_TARGET_DEVICE=cpu CUDA_VISIBLE_DEVICES=''):"
echo "  $tests"
"""


def apply_script(ref: str, branch: str, tests: tuple[str, ...]) -> str:
    """The script, `tests` the pytest arguments of the series' regression tests."""
    command = shlex.join(["python", "-m", "pytest", *tests])
    return (
        APPLY.replace("@@REF@@", ref)
        .replace("@@BRANCH@@", branch)
        .replace("@@TESTS@@", shlex.quote(command))
    )


# --- the kit ------------------------------------------------------------------------


def review_runners(review: Path) -> str:
    """The "Runners assessed" section of REVIEW.md, if it has one."""
    if not review.exists():
        return ""
    found = re.search(
        r"^#+ [^\n]*[Rr]unners[^\n]*\n(.*?)(?=^#+ |\Z)",
        review.read_text(),
        re.M | re.S,
    )
    return found[1].strip() if found else ""


def write_kit(
    fork: Path,
    out: Path,
    description: str,
    subject: str,
    head: str,
    sender: str,
    ref: str,
    branch: str,
    tests: tuple[str, ...],
) -> None:
    """Write the kit to a sibling directory, then move it over `out`."""
    partial = out.with_name(f".{out.name}.partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    try:
        (partial / "description.md").write_text(description)
        (partial / "title.txt").write_text(subject + "\n")
        series = partial / "series"
        format_series(fork, head, series, subject, plain_text(description), sender)
        pack_blobs(fork, preimage_blobs(fork), partial / "preimages.pack")
        script = partial / "apply-to-vllm.sh"
        script.write_text(apply_script(ref, branch, tests))
        script.chmod(0o755)
        old = out.with_name(f".{out.name}.old")
        shutil.rmtree(old, ignore_errors=True)
        if out.exists():
            os.replace(out, old)
        os.replace(partial, out)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(partial, ignore_errors=True)


def make_kit(
    fork: Path,
    store: Path,
    out: Path,
    prose_file: Path,
    review: Path,
    version: str,
    neutral: str,
    signer: str | None,
    allow_partial: bool,
    lint: Callable[[Path, str], None],
    tests: tuple[str, ...],
) -> str:
    """Render, lint, then write build/pr/; any error before that writes nothing.

    `tests`: the pytest arguments of the series' regression tests, which the
    apply script prints for the upstream clone.
    """
    if not (fork / ".git").exists():
        raise ForkToolError(
            f"no fork tree at {fork} and so no results to render; run "
            "`python3 -m forktool setup` and `python3 -m forktool test` first. "
            "Nothing was written."
        )
    name, email = parseaddr(signer or "")
    if signer is not None and not (name and "@" in email):
        raise ForkToolError(f'--signoff takes "Name <email>", not {signer!r}')
    tree = results.fork_tree(fork)
    found = load_results(store, tree, allow_partial)
    prose = load_prose(prose_file)
    subjects = git(fork, "log", "--reverse", "--format=%s", f"{BASE_TAG}..HEAD")
    facts = Facts(
        tree,
        version,
        subjects.stdout.splitlines(),
        signer,
        neutral,
        review_runners(review),
    )
    template = git(fork, "show", f"HEAD:{TEMPLATE}").stdout
    description = render(template, prose, found, facts)
    lint(fork, description)
    head = resign(fork, signer, neutral, prose["ai_trailer"]) if signer else "HEAD"
    write_kit(
        fork,
        out,
        description,
        prose["title"],
        head,
        signer or neutral,
        f"v{version}",
        prose["branch"],
        tests,
    )
    missing = sorted(k for k, v in found.items() if v is None)
    return f"wrote {out}" + (
        f" ({NOT_MEASURED}: {', '.join(missing)})" if missing else ""
    )


def markdownlint(fork: Path, description: str) -> None:
    """vLLM's markdownlint-cli2 hook, from the fork's pre-commit config, run
    offline through pre-commit as forktool.precommit runs it, on the description.

    The template opens with `<!-- markdownlint-disable -->`; the check lints
    the sections this command fills in, with only MD041 (the template's
    headings are level 2) disabled instead, and leaves out the checklist
    footer, which is the template's own text.
    """
    from forktool import precommit

    bin_dir = precommit.ensure_precommit(precommit.precommit_requirement(fork))
    config_path = fork / precommit.CONFIG
    config = precommit.substitute(
        precommit.load_yaml(bin_dir, config_path), config_path.read_text()
    )
    hooks = [
        {**hook, "args": [a for a in hook.get("args", []) if a != "--fix"]}
        for repo in config["repos"]
        for hook in repo["hooks"]
        if hook["id"] == "markdownlint-cli2"
    ]
    if len(hooks) != 1:
        raise ForkToolError(f"{config_path} has {len(hooks)} markdownlint-cli2 hooks")
    text = description.replace(
        "<!-- markdownlint-disable -->", "<!-- markdownlint-disable MD041 -->", 1
    )
    # The checklist after the template's last `---` is upstream's own text.
    if "\n---\n" in text:
        text = text[: text.rfind("\n---\n")].rstrip() + "\n"
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp, "lint")
        repo.mkdir()
        args = hooks[0]["args"]
        for i, arg in enumerate(args[:-1]):  # the lint settings the hook names
            if arg == "--config":
                dest = repo / args[i + 1]
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(fork / args[i + 1], dest)
        (repo / "description.md").write_text(text)
        git(repo, "init", "-q")
        git(repo, "add", "-A")
        config_file = Path(tmp, "config.json")
        config_file.write_text(
            json.dumps({"repos": [{"repo": "local", "hooks": hooks}]})
        )
        pre_commit = precommit.PreCommit(bin_dir, repo, config_file, Path(tmp, "log"))
        output = pre_commit.run("--files", "description.md")
        (outcome,) = precommit.parse_run(output, hooks)
    if outcome.status != "PASS":
        raise ForkToolError(
            f"the description fails vLLM's markdownlint; nothing was written:\n"
            f"{outcome.detail}"
        )
