"""vLLM's own pre-commit hooks, run offline on the files the series changes.

The fork's .pre-commit-config.yaml is made offline (precommit_config: each
hook pre-commit would clone from GitHub becomes the same tool at the same
version from PyPI or npm) and written next to the worktree; pre-commit,
installed as precommit.lock says (precommit_install), then runs it hook by
hook (precommit_runner) in a detached worktree of the fork's HEAD (hooks
such as `ruff check --fix` rewrite files; the fork itself is never
touched), and its commit-msg hooks on each patch's message.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

from evidence.precommit_config import (
    CONFIG,
    in_scope,
    label,
    runnable,
    selected,
    skip_reason,
    stage_hooks,
    substitute,
)
from evidence.precommit_install import ensure_precommit, precommit_requirement
from evidence.precommit_runner import (
    Outcome,
    PreCommit,
    file_tags,
    load_yaml,
    on_files,
)
from evidence.worktrees import worktree
from forktool.checks import Measured
from forktool.prerequisites import Program, on_path
from forktool.process import SERIES, git, series_commits

NEEDS = (
    Program("Node.js (node)", on_path("node"), "the markdownlint-cli2 hook"),
    Program("npm", on_path("npm"), "installing markdownlint-cli2 for pre-commit"),
)
"""What pre-commit's markdownlint-cli2 hook needs (`test`, `pr`); pre-commit
itself is installed with the pinned uv, which needs nothing more."""


def changed_files(tree: Path) -> list[str]:
    """Files the series adds or modifies (a renamed file counts as added)."""
    diff = git(tree, "diff", "--name-only", "--no-renames", "--diff-filter=AM", SERIES)
    return diff.stdout.split()


def check_files(
    pre_commit: PreCommit, config: dict[str, Any], files: list[str]
) -> list[Outcome]:
    """The pre-commit stage's hooks on `files`, one by one in pre-commit's
    order, one outcome per hook of `config`, each printed as it comes."""
    tags = file_tags(pre_commit.bin_dir, pre_commit.tree, files)
    can_run = runnable(config)
    outcomes = []
    for hook in stage_hooks(config, "pre-commit"):
        reason = skip_reason(hook)
        if reason is None:
            selected(can_run, "pre-commit", hook)
            outcome = on_files(pre_commit, config, hook, files, tags)
        else:
            if not in_scope(config, hook, files):
                reason += "; none of the files is in its scope anyway"
            outcome = Outcome(label(hook), "SKIPPED", reason)
        _print(outcome)
        outcomes.append(outcome)
    return outcomes


def _as_author(name: str, email: str) -> dict[str, str]:
    """The environment in which `git config user.*` reads as this author."""
    return {
        "GIT_CONFIG_COUNT": "2",
        "GIT_CONFIG_KEY_0": "user.name",
        "GIT_CONFIG_VALUE_0": name,
        "GIT_CONFIG_KEY_1": "user.email",
        "GIT_CONFIG_VALUE_1": email,
    }


def check_messages(
    pre_commit: PreCommit, config: dict[str, Any]
) -> list[tuple[str, Outcome]]:
    """The commit-msg hooks, one by one, on each patch's message: (patch,
    outcome) pairs, each printed as it comes.

    vLLM's sign-off hook reads the message from the worktree's COMMIT_EDITMSG,
    not from its argument, and appends a missing `Signed-off-by:` instead of
    failing; so the message is written there before each hook, and a message
    a hook changes fails it. `git config user.*` reads as the patch's author,
    the identity a DCO check asks the sign-off of.
    """
    can_run = runnable(config)
    hooks = [
        selected(can_run, "commit-msg", h) for h in stage_hooks(can_run, "commit-msg")
    ]
    if not hooks:
        return []
    tree = pre_commit.tree
    editmsg = Path(git(
        tree, "rev-parse", "--path-format=absolute", "--git-path", "COMMIT_EDITMSG"
    ).stdout.strip())  # fmt: skip
    args = ("--hook-stage", "commit-msg", "--commit-msg-filename", str(editmsg))
    results = []
    for number, commit in enumerate(series_commits(tree), 1):
        name, email, message = git(
            tree, "log", "-1", "--format=%an%x00%ae%x00%B", commit
        ).stdout.split("\0", 2)
        patch = f"{number:04d} {message.splitlines()[0]}"
        for hook in hooks:
            editmsg.write_text(message)
            try:
                ran = pre_commit.run_hook(hook, *args, env=_as_author(name, email))
                outcome = message_outcome(ran, message, editmsg.read_text())
            finally:
                editmsg.unlink(missing_ok=True)
            _print(outcome, f"  {patch}")
            results.append((patch, outcome))
    return results


def message_outcome(outcome: Outcome, message: str, rewritten: str) -> Outcome:
    """A hook that rewrote the message failed it, whatever its exit status."""
    if rewritten == message or outcome.status == "FAIL":
        return outcome
    added = rewritten.removeprefix(message).strip() or rewritten.strip()
    return Outcome(
        outcome.hook,
        "FAIL",
        f"the hook rewrote the message: {added}",
        outcome.seconds,
    )


def _print(outcome: Outcome, patch: str = "") -> None:
    took = f"  ({outcome.seconds:.1f} s)" if outcome.status != "SKIPPED" else ""
    reason = f"  ({outcome.detail})" if outcome.status == "SKIPPED" else ""
    print(f"  {outcome.status:<8} {outcome.hook}{patch}{reason}{took}", flush=True)
    if outcome.status == "FAIL" and outcome.detail:
        print("\n".join(f"           | {line}" for line in outcome.detail.splitlines()))


def run_precommit(fork: Path, worktree_path: Path) -> Measured:
    """Run vLLM's pre-commit offline on the series; print a report per hook.

    Passes iff every hook passed or was skipped for a stated reason, and every
    patch's message passed the commit-msg hooks.
    """
    start = time.monotonic()
    # git resolves a relative worktree path against the fork, not against us.
    fork, worktree_path = fork.resolve(), worktree_path.resolve()
    head = git(fork, "rev-parse", "HEAD").stdout.strip()
    tree = worktree(fork, worktree_path, head)
    bin_dir = ensure_precommit(precommit_requirement(tree))
    config = substitute(load_yaml(bin_dir, tree / CONFIG), (tree / CONFIG).read_text())
    config_file = worktree_path.with_name(f"{worktree_path.name}-config.json")
    config_file.write_text(json.dumps(runnable(config), indent=2) + "\n")
    log = worktree_path.with_name(f"{worktree_path.name}.log")
    log.unlink(missing_ok=True)
    pre_commit = PreCommit(bin_dir, tree, config_file, log)
    version = pre_commit.version()
    files = changed_files(tree)
    print(
        f"{version} in {tree} at {head[:12]} on the {len(files)} files the series "
        f"adds or modifies (config {config_file}, output {log})",
        flush=True,
    )
    # Messages first: at the commit-msg stage pre-commit stashes unstaged
    # changes, which the file hooks may have made.
    print("commit-msg hooks on each patch's message:")
    messages = check_messages(pre_commit, config)
    print("hooks on the series' files:")
    outcomes = check_files(pre_commit, config, files)
    changes = git(tree, "diff").stdout
    if changes:
        print(f"what the hooks changed in {tree}:\n{changes.rstrip()}")
    ok = all(o.status != "FAIL" for o in [*outcomes, *(o for _, o in messages)])
    print(f"pre-commit: {'ok' if ok else 'FAILED'} ({time.monotonic() - start:.0f} s)")
    return Measured(
        ok,
        dict(Counter(o.status for o in outcomes)),
        data={
            "version": version,
            "files": files,
            "hooks": [[o.hook, o.status, o.detail] for o in outcomes],
            "messages": [[patch, o.hook, o.status, o.detail] for patch, o in messages],
            # Each hook's `pre-commit run`, in seconds (not the skipped ones).
            "seconds": {o.hook: round(o.seconds, 1) for o in outcomes if o.seconds},
        },
    )
