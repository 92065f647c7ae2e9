"""pre-commit itself, installed into the cache with the pinned uv exactly as
precommit.lock says: the version vLLM's tree asks for, every package of it
pinned with its sha256 hashes.

`python3 -m evidence.precommit_install [TREE]` (re-)locks it, with `uv pip
compile --generate-hashes`, for the pre-commit version TREE's (default: the
fork's) requirements/lint.txt names and pins.toml's [venv] python and
platform; an existing lock's versions are kept where they still fit. The
venv is then `uv pip sync --require-hashes` of the lock, never a fresh
resolution, and is made again whenever the lock changes.
"""

from __future__ import annotations

import fcntl
import json
import re
import shutil
import sys
from pathlib import Path

from evidence import cli
from forktool import venv_lock
from forktool.layout import LAYOUT
from forktool.pins import Pins, cache_dir, run_uv, uv_binary
from forktool.process import ForkToolError
from forktool.venv import COMPLETE, venv_id

LOCK = LAYOUT.root / "precommit.lock"
COMMAND = "python3 -m evidence.precommit_install"


def precommit_requirement(tree: Path) -> str:
    """pre-commit at the lowest version vLLM's requirements/lint.txt accepts."""
    lint = tree / "requirements" / "lint.txt"
    text = lint.read_text() if lint.exists() else ""
    found = re.search(r"^pre-commit\s*(?:>=|==|~=)\s*([\w.]+)", text, re.M)
    if found is None:
        print(f"note: no pre-commit version in {lint}; using {LOCK.name}'s")
        return "pre-commit"
    return f"pre-commit=={found[1]}"


def _inputs(pins: Pins) -> str:
    """The lock's line saying what it is resolved for, besides pre-commit's version."""
    return "# inputs: " + json.dumps({"python": pins.python, "platform": pins.platform})


def write_lock(requirement: str, pins: Pins, path: Path = LOCK) -> str:
    """Resolve `requirement` into `path`; return what it pins, in a line."""
    named = "vLLM's requirements/lint.txt"
    body = venv_lock.compile_hashed(pins, [requirement], path, named)
    header = (
        f"# pre-commit's venv in the cache: {requirement}, resolved by `{COMMAND}` "
        f"for CPython {pins.python} on {pins.platform}.\n"
        "# Do not edit: run the command again when vLLM's pre-commit version, or "
        "pins.toml's [venv] python or platform, changes.\n"
        f"{_inputs(pins)}\n"
    )
    path.write_text(header + body)
    pinned = venv_lock.packages(body)
    return (
        f"{path.name}: pre-commit=={pinned.get('pre-commit')}, {len(pinned)} packages"
    )


def current_lock(requirement: str, pins: Pins, path: Path = LOCK) -> Path:
    """The lock, refused when it is missing, pins another pre-commit than
    `requirement`, or was resolved for another Python or platform."""
    again = f"run `{COMMAND}` and commit {path.name}"
    if not path.exists():
        raise ForkToolError(f"{path} is missing; {again}")
    text = path.read_text()
    locked = venv_lock.packages(text).get("pre-commit")
    if (wanted := requirement.partition("==")[2]) and locked != wanted:
        raise ForkToolError(
            f"the fork's requirements/lint.txt asks for pre-commit {wanted}, "
            f"{path.name} pins {locked}; {again}"
        )
    recorded = [line for line in text.splitlines() if line.startswith("# inputs: ")]
    if recorded != [_inputs(pins)]:
        raise ForkToolError(
            f"{path.name} was resolved for another Python or platform than "
            f"pins.toml's [venv] names; {again}"
        )
    return path


def ensure_precommit(requirement: str, path: Path = LOCK) -> Path:
    """pre-commit's venv, exactly the lock (made again when the lock
    changed); return its bin directory."""
    pins = Pins.load()
    lock_file = current_lock(requirement, pins, path)
    venv, wanted = cache_dir() / "pre-commit-venv", venv_lock.digest(lock_file)
    venv.parent.mkdir(parents=True, exist_ok=True)
    # One forktool at a time makes it; the others wait, then find it made.
    with (venv.parent / f"{venv.name}.lock").open("w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        if venv_id(venv) == wanted:
            return venv / "bin"
        tool = uv_binary(pins)
        shutil.rmtree(venv, ignore_errors=True)
        run_uv(tool, "venv", "-q", "--python", pins.python, str(venv))
        sync = ("pip", "sync", "-q", "--require-hashes", "--python")
        run_uv(tool, *sync, str(venv / "bin" / "python"), str(lock_file))
        (venv / COMPLETE).write_text(wanted + "\n")
    return venv / "bin"


def main(argv: list[str]) -> int:
    def lock(tree: Path) -> str:
        return write_lock(precommit_requirement(tree), Pins.load())

    return cli.main(COMMAND, __doc__, argv, lock)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
