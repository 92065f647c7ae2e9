"""description.md: vLLM's PR template filled with the prose and the results."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from evidence import checks
from evidence.pr.fork_checks import fork_checks_section
from evidence.pr.sections import (
    NOT_MEASURED,
    Found,
    bench_block,
    collapsed,
    counts_text,
    gpu_block,
    matrix_rows,
    one_line,
    other_rows,
    precommit_block,
    reflow,
    spaced_tables,
    suite_rows,
)
from forktool.errors import ForkToolError

TEMPLATE = ".github/PULL_REQUEST_TEMPLATE.md"
# The most lines the description may show outside collapsed <details> blocks.
LINE_BUDGET = 150


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


def validation(found: Found, facts: Facts, prose: dict[str, Any]) -> str:
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
    rows, evidence = matrix_rows(found[checks.REGRESSION_MATRIX])
    gpu = found[checks.GPU_ONLY]
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
        *suite_rows(found[checks.UPSTREAM_SELECTION]),
        f"| E2E: {one_line(prose['e2e_config'])} | — | {gpu_cell} |",
        *other_rows(found),
    ]
    impact = found[checks.CI_IMPACT]
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
        precommit_block(found[checks.PRE_COMMIT]),
        ci + "\n",
        fork_checks_section(found),
        gpu_block(gpu, prose),
        bench_block(found[checks.BENCH], prose),
    ]
    return "\n".join(part for part in parts if part).rstrip()


def details(prose: dict[str, Any], facts: Facts) -> str:
    parts = []
    for key, title in (
        ("root_cause", "Root cause"),
        ("design", "Design"),
        ("trade_offs", "Trade-offs"),
        ("out_of_tree", "Out-of-tree compatibility"),
        ("limitations", "Limitations"),
    ):
        parts.append(f"### {title}\n\n{reflow(prose[key])}\n")
    runners = facts.runners or reflow(prose["runners"])
    parts.append(collapsed("Runners assessed", runners) + "\n")
    patches = "\n".join(f"{i}. {s}" for i, s in enumerate(facts.patches, 1))
    parts.append(f"### The patches\n\n{patches}\n")
    parts.append(f"### AI assistance\n\n{reflow(prose['ai_assistance'])}\n")
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
    return f"{reflow(prose['summary'])}\n\n" + collapsed(
        "Related upstream PRs, and how this change differs", related
    )


def fill(template: str, sections: dict[str, str], ticked: list[str]) -> str:
    """The template with each section's placeholder replaced and the true boxes
    of its checklist ticked. A section or box the template lacks is an error."""
    out = template
    for heading, body in sections.items():
        pattern = re.compile(
            rf"^## {re.escape(heading)}[ \t]*\n+<!--.*?-->", re.M | re.S
        )
        found = pattern.search(out)
        if found is None:
            raise ForkToolError(
                f"{TEMPLATE} has no `## {heading}` section with a placeholder "
                "comment: the template changed; update evidence/pr/description.py"
            )
        filled = f"## {heading}\n\n{body}"
        out = out[: found.start()] + filled + out[found.end() :]
    for box in ticked:
        pattern = re.compile(rf"^- \[ \] (.*{re.escape(box)})", re.M)
        out, n = pattern.subn(r"- [x] \1", out)
        if n != 1:
            raise ForkToolError(f"{TEMPLATE} has no checklist item {box!r}")
    return out


def render(
    template: str,
    prose: dict[str, Any],
    found: Found,
    facts: Facts,
) -> str:
    claims = "\n".join(f"- {one_line(claim)}" for claim in prose["claims"])
    sections = {
        "Overview": overview(prose),
        "Claims": claims,
        "Validation": validation(found, facts, prose),
        "Details": details(prose, facts),
    }
    description = fill(template, sections, prose["checklist_ticked"])
    shown = visible_lines(description)
    if shown > LINE_BUDGET:
        raise ForkToolError(
            f"the description shows {shown} lines outside <details>, more than "
            f"{LINE_BUDGET}; shorten pr/description.toml or collapse more in "
            "evidence/pr/. Nothing was written."
        )
    return description


def visible_lines(markdown: str) -> int:
    """The lines a reader sees before expanding anything: those outside
    <details> blocks (nested ones included), each collapsed block counted as
    the one line of its summary."""
    depth = seen = 0
    for line in markdown.splitlines():
        opens = line.count("<details>")
        if depth == 0 and (opens or not line.count("</details>")):
            seen += 1
        depth = max(depth + opens - line.count("</details>"), 0)
    return seen


def plain_text(markdown: str) -> str:
    """The description for a cover letter: without HTML comments and tags."""
    text = re.sub(r"<!--.*?-->\n?", "", markdown, flags=re.S)
    text = re.sub(r"^</?details>\n", "", text, flags=re.M)
    text = re.sub(r"<summary>\s*(.*?)\s*</summary>", r"\1:", text)
    return re.sub(r"\n{3,}", "\n\n", text).strip() + "\n"
