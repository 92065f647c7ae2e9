"""`pr`: load the results and the prose, render the description, write the kit."""

from __future__ import annotations

import tomllib
from collections.abc import Callable
from email.utils import parseaddr
from pathlib import Path

from evidence.pr.description import TEMPLATE, Facts, render
from evidence.pr.kit import resign, write_kit
from evidence.pr.sections import NOT_MEASURED, Found
from forktool import checks
from forktool.checks import SETUP, TEST, all_checks, problem
from forktool.process import ForkToolError, git, series_subjects


def load_results(store: Path, tree: str, allow_partial: bool) -> Found:
    """Each check's result for `tree`; None where it is missing or stale.

    Without `allow_partial`, a missing or stale required result is an error
    that names it and the command that refreshes it.
    """
    found: Found = {}
    problems = []
    inputs = checks.inputs_id()
    for check in (c for c in all_checks() if c.in_pr):
        result = checks.read(store, check.name)
        if (why := problem(result, check, tree, inputs)) and check.gates_test:
            problems.append(why)
        found[check] = None if why else result
    if problems and not allow_partial:
        raise ForkToolError(
            f"the PR kit needs results measured on the fork's current tree "
            f"({tree[:12]}) and inputs; nothing was written:\n  "
            + "\n  ".join(problems)
            + "\n(`pr --allow-partial` renders anyway, each missing part marked "
            f'"{NOT_MEASURED}")'
        )
    return found


def make_kit(
    fork: Path,
    store: Path,
    out: Path,
    prose_file: Path,
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
            f"`{SETUP}` and `{TEST}` first. Nothing was written."
        )
    name, email = parseaddr(signer or "")
    if signer is not None and not (name and "@" in email):
        raise ForkToolError(f'--signoff takes "Name <email>", not {signer!r}')
    tree = checks.fork_tree(fork)
    found = load_results(store, tree, allow_partial)
    try:
        with prose_file.open("rb") as f:
            prose = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise ForkToolError(f"cannot read the PR prose {prose_file}: {e}") from e
    facts = Facts(tree, version, series_subjects(fork), signer, neutral)
    template = git(fork, "show", f"HEAD:{TEMPLATE}").stdout
    description, evidence = render(template, prose, found, facts)
    lint(fork, description)
    lint(fork, evidence)
    head = resign(fork, signer, neutral, prose["ai_trailer"]) if signer else "HEAD"
    documents = {"description.md": description, "evidence.md": evidence}
    write_kit(fork, out, documents, prose["title"], head, signer or neutral,
              f"v{version}", prose["branch"], tests)  # fmt: skip
    missing = ", ".join(sorted(c.name for c, got in found.items() if got is None))
    return f"wrote {out}" + (f" ({NOT_MEASURED}: {missing})" if missing else "")
