"""description.md: vLLM's PR template filled with the prose and the results."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from evidence import checks
from evidence.pr import sections
from evidence.pr.sections import NOT_MEASURED, Found, one_line
from forktool.process import ForkToolError

TEMPLATE = ".github/PULL_REQUEST_TEMPLATE.md"
# The most lines the description may have, collapsed blocks included; the
# rest of the evidence goes to evidence.md beside it.
LINE_BUDGET = 120
EVIDENCE = "evidence.md"


@dataclass(frozen=True)
class Facts:
    """What the description says about the fork itself (not measured by checks)."""

    tree: str
    base_version: str
    patches: list[str]  # each patch's subject, in order
    signer: str | None  # the submitter `--signoff` re-signed the kit's series for
    neutral: str  # the identity the patches carry in this repository


def measured_on(found: Found, facts: Facts) -> str:
    measured = [r for r in found.values() if r is not None]
    dates = sorted(r.date for r in measured)
    when = f"on {dates[0]}" if dates else "(no results)"
    if dates and dates[-1] != dates[0]:
        when = f"between {dates[0]} and {dates[-1]}"
    failing = ", ".join(sorted(r.check for r in measured if not r.ok))
    verdict = f"\n\n**Checks that failed on this tree: {failing}.**" if failing else ""
    return (
        f"Measured on the fork tree `{facts.tree[:12]}` (vLLM "
        f"{facts.base_version} + the {len(facts.patches)} patches) by "
        f"`python3 -m forktool setup`/`test`, {when}, on a CPU-only machine "
        f'(`VLLM_TARGET_DEVICE=cpu`, `HF_HUB_OFFLINE=1`). "{NOT_MEASURED}" marks '
        f"a check without a result for this tree.{verdict}\n"
    )


def validation(found: Found, facts: Facts, prose: dict[str, Any]) -> str:
    matrix = found[checks.REGRESSION_MATRIX]
    table = [
        f"| Check | vLLM {facts.base_version} | This series |",
        "| --- | --- | --- |",
        *sections.regression_rows(matrix),
        *sections.suite_rows(found[checks.UPSTREAM_SELECTION]),
        sections.e2e_row(found[checks.GPU_ONLY], found.get(checks.GPU_E2E), prose),
        *(check.pr_row(got) for check, got in found.items() if check.pr_row),
    ]
    parts = [
        measured_on(found, facts),
        "\n".join(table) + "\n",
        sections.before_block(matrix),
        sections.gpu_command(found[checks.GPU_ONLY]),
        f"Each test at each patch, tracebacks, pre-commit's hooks, the CI steps "
        "that run the E2E test, and the fork's own checks (stand-in stages, "
        f"planner fuzz, override patterns, mutants): `{EVIDENCE}` of the PR kit.",
    ]
    return "\n".join(part for part in parts if part).rstrip()


def evidence(found: Found, facts: Facts, prose: dict[str, Any]) -> str:
    """evidence.md: everything the description leaves out, in full."""
    impact = found[checks.CI_IMPACT]
    report = impact.data["report"].strip() if impact else None
    runners = sections.reflow(prose["runners"])
    parts = [
        f"# Evidence: {prose['title']}\n",
        "## Validation in full\n",
        measured_on(found, facts),
        sections.matrix_evidence(found[checks.REGRESSION_MATRIX]),
        sections.precommit_block(found[checks.PRE_COMMIT]),
        "### CI impact: the Buildkite steps that run the E2E test\n\n"
        f"{report or NOT_MEASURED}\n",
        sections.gpu_block(found[checks.GPU_ONLY], found.get(checks.GPU_E2E), prose),
        sections.bench_block(found[checks.BENCH], prose),
        fork_checks_section(found),
        f"### Runners assessed\n\n{runners}\n",
    ]
    return "\n".join(part for part in parts if part).rstrip() + "\n"


def fork_checks_section(found: Found) -> str:
    """The fork's own checks: what upstream would not merge and a reviewer
    cannot rerun from the PR branch (this repository's fork_tests/, the planner
    fuzz, the override patterns, mutation testing), in a collapsed section of
    their own, with the commands that run them."""
    table = [
        "| Check | Base | This series |",
        "| --- | --- | --- |",
        *sections.fork_tests_rows(found[checks.REGRESSION_MATRIX]),
        sections.fuzz_row(found[checks.PLANNER_FUZZ], found[checks.FUZZ_CATCHES_BASE]),
        sections.overrides_row(found[checks.OVERRIDES]),
    ]
    body = [
        "These run from the fork's repository, against vLLM as released and "
        "the series applied to it; they are not part of this PR.\n",
        "\n".join(table) + "\n",
        sections.fence(sections.COMMANDS) + "\n",
        sections.mutants_block(found[checks.MUTANTS]),
        sections.overrides_block(found[checks.OVERRIDES]),
    ]
    summary = "The fork's own checks (not in this PR), and how to run them"
    return sections.collapsed(summary, "\n".join(part for part in body if part)) + "\n"


def details(prose: dict[str, Any], facts: Facts) -> str:
    titles = {"root_cause": "Root cause", "design": "Design",
              "trade_offs": "Trade-offs", "out_of_tree": "Compatibility",
              "limitations": "Limitations"}  # fmt: skip
    parts = [
        f"### {title}\n\n{sections.reflow(prose[key])}\n"
        for key, title in titles.items()
    ]
    patches = "\n".join(f"{i}. {s}" for i, s in enumerate(facts.patches, 1))
    parts.append(f"### The patches\n\n{patches}\n")
    parts.append(f"### AI assistance\n\n{sections.reflow(prose['ai_assistance'])}\n")
    if facts.signer is None:
        parts.append(
            "**Sign-off still to do.** The commits carry the fork's neutral "
            f"identity `{facts.neutral}`, which is not a DCO sign-off. The "
            'submitter re-signs them with `python3 -m forktool pr --signoff "Name '
            '<email>"`, which also adds the AI-attribution trailer.\n'
        )
    return "\n".join(parts).rstrip()


def fill(template: str, bodies: dict[str, str], ticked: list[str]) -> str:
    """The template with each section's placeholder replaced and the true boxes
    of its checklist ticked. A section or box the template lacks is an error."""
    out = template
    for heading, body in bodies.items():
        found = re.search(
            rf"^## {re.escape(heading)}[ \t]*\n+<!--.*?-->", out, re.M | re.S
        )
        if found is None:
            raise ForkToolError(
                f"{TEMPLATE} has no `## {heading}` section with a placeholder "
                "comment: the template changed; update evidence/pr/description.py"
            )
        out = out[: found.start()] + f"## {heading}\n\n{body}" + out[found.end() :]
    for box in ticked:
        pattern = re.compile(rf"^- \[ \] (.*{re.escape(box)})", re.M)
        out, n = pattern.subn(r"- [x] \1", out)
        if n != 1:
            raise ForkToolError(f"{TEMPLATE} has no checklist item {box!r}")
    return out


def render(
    template: str, prose: dict[str, Any], found: Found, facts: Facts
) -> tuple[str, str]:
    """description.md, within LINE_BUDGET lines, and evidence.md."""
    related = "; ".join(
        f"#{r['number']} {one_line(r['how'])}" for r in prose["related"]
    )
    bodies = {
        "Overview": f"{sections.reflow(prose['summary'])}\n\n"
        f"Related, none a duplicate: {related}.",
        "Claims": "\n".join(f"- {one_line(claim)}" for claim in prose["claims"]),
        "Validation": validation(found, facts, prose),
        "Details": details(prose, facts),
    }
    description = fill(template, bodies, prose["checklist_ticked"])
    if (lines := len(description.splitlines())) > LINE_BUDGET:
        raise ForkToolError(
            f"the description has {lines} lines, more than {LINE_BUDGET}; shorten "
            f"pr/description.toml or move more to {EVIDENCE} in evidence/pr/. "
            "Nothing was written."
        )
    return description, evidence(found, facts, prose)


def plain_text(markdown: str) -> str:
    """The description for a cover letter: without HTML comments and tags."""
    text = re.sub(r"<!--.*?-->\n?", "", markdown, flags=re.S)
    text = re.sub(r"^</?details>\n", "", text, flags=re.M)
    text = re.sub(r"<summary>\s*(.*?)\s*</summary>", r"\1:", text)
    return re.sub(r"\n{3,}", "\n\n", text).strip() + "\n"
