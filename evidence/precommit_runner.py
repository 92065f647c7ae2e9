"""pre-commit run hook by hook: each hook's verdict is the exit status of
`pre-commit run <hook>`, and a hook none of whose files it would get is
skipped, as pre-commit skips it, without running pre-commit at all.

The config is YAML and the standard library has no YAML parser: it is read
with the pre-commit venv's Python (pre-commit depends on PyYAML) into plain
dicts, and files are typed there with `identify`, the library pre-commit
types them with. The generated config is written as JSON, which YAML
readers, pre-commit's included, accept as it is.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evidence.precommit_config import Hook, hook_files, hook_key, label
from forktool import process
from forktool.pins import cache_dir
from forktool.process import ForkToolError

NO_FILES = "no files to check"


@dataclass(frozen=True)
class Outcome:
    hook: str
    status: str
    """PASS, FAIL or SKIPPED."""
    detail: str = ""
    """Why it was skipped, or what pre-commit printed for a failed hook."""
    seconds: float = field(default=0.0, compare=False)
    """How long its `pre-commit run` took; 0 when it did not run."""


def _python(bin_dir: Path, script: str, stdin: str, what: str) -> Any:
    """What `script`, run by the pre-commit venv's Python, prints as JSON."""
    result = process.run([bin_dir / "python", "-c", script], input=stdin, check=False)
    if result.returncode != 0:
        raise ForkToolError(f"could not {what}:\n{result.stderr.strip()[-3000:]}")
    return json.loads(result.stdout)


def load_yaml(bin_dir: Path, path: Path) -> dict[str, Any]:
    """Parse `path` with PyYAML from the pre-commit venv."""
    script = (
        "import json, sys, yaml\n"
        "json.dump(yaml.safe_load(sys.stdin), sys.stdout, default=str)"
    )
    return _python(bin_dir, script, path.read_text(), f"parse {path}")


def file_tags(bin_dir: Path, tree: Path, files: list[str]) -> dict[str, set[str]]:
    """Each file's `identify` tags (python, shell, text, ...), as pre-commit
    reads them for its `types` filters."""
    script = (
        "import json, os, sys\n"
        "from identify.identify import tags_from_path\n"
        "request = json.load(sys.stdin)\n"
        "os.chdir(request['tree'])\n"
        "json.dump({p: sorted(tags_from_path(p)) for p in request['files']}, "
        "sys.stdout)"
    )
    request = json.dumps({"tree": str(tree), "files": files})
    tagged = _python(bin_dir, script, request, f"type the files in {tree}")
    return {path: set(tags) for path, tags in tagged.items()}


@dataclass(frozen=True)
class PreCommit:
    """pre-commit from `bin_dir`, run in `tree` with `config`, output to `log`."""

    bin_dir: Path
    tree: Path
    config: Path
    log: Path

    def version(self) -> str:
        return process.run([self.bin_dir / "pre-commit", "--version"]).stdout.strip()

    def run_hook(
        self, hook: Hook, *args: str, env: dict[str, str] | None = None
    ) -> Outcome:
        """`pre-commit run <hook> args...`: exit status 0 passes it, 1 fails
        it, any other is pre-commit failing. Its output goes to the log, as
        it runs, and a failed hook's is the outcome's detail."""
        env = process.environ(
            # Hook environments are cached across runs and worktrees.
            PRE_COMMIT_HOME=str(cache_dir() / "pre-commit-home"),
            **(env or {}),
        )
        cmd = [str(self.bin_dir / "pre-commit"), "run", hook_key(hook)]
        cmd += ["--color=never", "--config", str(self.config), *args]
        start = self.log.stat().st_size if self.log.exists() else 0
        began = time.monotonic()
        with self.log.open("a") as out:  # appended as it runs, to follow it
            out.write(f"$ {' '.join(cmd)}\n")
            out.flush()
            status = process.run(
                cmd, cwd=self.tree, env=env, check=False, capture=False,
                stdout=out, stderr=out,
            ).returncode  # fmt: skip
        seconds = time.monotonic() - began
        with self.log.open(errors="replace") as out:
            out.seek(start)
            output = out.read().split("\n", 1)[1].strip()
        if status not in (0, 1):
            failed = process.failure(cmd, status, output, self.tree)
            home = env["PRE_COMMIT_HOME"]
            raise ForkToolError(
                f"{failed}\n(pre-commit's own log: {home}/pre-commit.log)"
            )
        verdict = "PASS" if status == 0 else "FAIL"
        return Outcome(label(hook), verdict, output if status else "", seconds)


def on_files(
    pre_commit: PreCommit,
    config: dict[str, Any],
    hook: Hook,
    files: list[str],
    tags: dict[str, set[str]],
) -> Outcome:
    """`hook` on `files` (tagged by `file_tags`); skipped, as pre-commit
    skips it, when it gets none of them and does not always run."""
    if not hook_files(config, hook, files, tags) and not hook.get("always_run"):
        return Outcome(label(hook), "SKIPPED", NO_FILES)
    return pre_commit.run_hook(hook, "--files", *files)
