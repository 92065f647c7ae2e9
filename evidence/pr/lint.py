"""The description checked with vLLM's markdownlint settings."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

from evidence.precommit import CONFIG, PreCommit, load_config
from evidence.precommit_install import ensure_precommit, precommit_requirement
from forktool.process import ForkToolError, git


def markdownlint(fork: Path, description: str) -> None:
    """vLLM's markdownlint-cli2 hook, from the fork's pre-commit config, run
    offline through pre-commit as evidence.precommit runs each hook, on the
    description; its exit status is the verdict.

    The template opens with `<!-- markdownlint-disable -->`; the check lints
    the sections this command fills in, with only MD041 (the template's
    headings are level 2) disabled instead, and leaves out the checklist
    footer, which is the template's own text.
    """
    bin_dir = ensure_precommit(precommit_requirement(fork))
    hooks = [
        {**hook, "args": [a for a in hook.get("args", []) if a != "--fix"]}
        for repo in load_config(bin_dir, fork)["repos"]
        for hook in repo["hooks"]
        if hook["id"] == "markdownlint-cli2"
    ]
    if len(hooks) != 1:
        raise ForkToolError(f"{fork / CONFIG} has {len(hooks)} markdownlint-cli2 hooks")
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
        for arg, value in zip(args, args[1:], strict=False):  # the lint settings
            if arg == "--config":
                (repo / value).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(fork / value, repo / value)
        (repo / "description.md").write_text(text)
        git(repo, "init", "-q")
        git(repo, "add", "-A")
        config = Path(tmp, "config.json")
        config.write_text(json.dumps({"repos": [{"repo": "local", "hooks": hooks}]}))
        pre_commit = PreCommit(bin_dir, repo, config, Path(tmp, "log"))
        outcome = pre_commit.run_hook(hooks[0], "--files", "description.md")
    if outcome.status != "PASS":
        failed = "the description fails vLLM's markdownlint; nothing was written"
        raise ForkToolError(f"{failed}:\n{outcome.detail}")
