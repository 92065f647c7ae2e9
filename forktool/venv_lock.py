"""venv.lock: every package of the venv, exact version and sha256 hashes.

`python3 -m forktool lock` resolves it from pins.toml with `uv pip compile
--generate-hashes`, preferring the versions the lock already pins; `install`
installs exactly it (`uv pip sync`), never a fresh resolution. Its header
records a digest of the pins it was resolved from, so pins changed without
re-locking are refused.
"""

import hashlib
import json
import re
import tempfile
from pathlib import Path

from forktool.layout import LAYOUT
from forktool.pins import Pins, normal, run_uv, uv_binary
from forktool.process import ForkToolError

LOCK = LAYOUT.lock
COMMAND = "python3 -m forktool lock"
_DIGEST = "# pins-digest: "


def _wanted(pins: Pins) -> list[str]:
    # What the lock resolves: vLLM's runtime dependencies (from the pinned
    # version's wheel), pip, the build and test requirements.
    return [
        pins.requirement,
        pins.pip,
        *pins.build_requirements,
        *pins.test_requirements,
    ]


def pins_digest(pins: Pins) -> str:
    inputs = [
        _wanted(pins),
        pins.wheel.sha256,
        pins.constraints,
        pins.python,
        pins.platform,
        pins.uv,
    ]
    return hashlib.sha256(json.dumps(inputs).encode()).hexdigest()


def compile_hashed(
    pins: Pins,
    requirements: list[str],
    lock: Path,
    named: str,
    constraints: tuple[str, ...] = (),
    no_emit: tuple[str, ...] = (),
) -> str:
    """`uv pip compile --generate-hashes` of `requirements` for the pins'
    Python and platform, preferring the versions `lock` already pins; return
    the resolved body, its inputs named `named` (not by temporary paths)."""
    with tempfile.TemporaryDirectory() as tmp:
        spec, limits, out = (Path(tmp, n) for n in ("in", "constraints", "out"))
        spec.write_text("\n".join(requirements) + "\n")
        limits.write_text("\n".join(constraints) + "\n")
        # uv prefers the versions an existing -o file pins: handing it the
        # current lock makes a re-lock change only what the changed inputs
        # need, not every version newer releases would move.
        if lock.exists():
            out.write_text(lock.read_text())
        excluded = [arg for name in no_emit for arg in ("--no-emit-package", name)]
        run_uv(uv_binary(pins), "pip", "compile", "-q", "--generate-hashes",
               "--no-header", "--python-version", pins.python,
               "--python-platform", pins.platform, "-c", str(limits),
               *excluded, str(spec), "-o", str(out))  # fmt: skip
        body = out.read_text().replace(f"-r {spec}", named)
        return body.replace(f"-c {limits}", f"{named} constraints")


def write(pins: Pins, lock: Path = LOCK) -> str:
    """Resolve the lock from the pins, keeping the versions it already pins
    where the pins allow them; return what changed, in a line."""
    before = packages(lock.read_text()) if lock.exists() else {}
    # The fork's editable install provides vllm itself.
    body = compile_hashed(
        pins, _wanted(pins), lock, "pins.toml", pins.constraints, (pins.project,)
    )
    body = body.replace("pins.toml constraints", "pins.toml [venv] constraints")
    lock.write_text(
        f"# The venv's packages, resolved from pins.toml by `{COMMAND}` "
        f"for CPython {pins.python} on {pins.platform}.\n# Do not edit: "
        "change pins.toml and run the command again.\n"
        f"{_DIGEST}{pins_digest(pins)}\n{body}"
    )
    after = packages(body)
    changed = {n for n in before.keys() | after.keys() if before.get(n) != after.get(n)}
    return f"{lock.name}: {len(after)} packages, {len(changed)} changed"


def packages(text: str) -> dict[str, str]:
    """Name -> version of each package a lock pins."""
    pinned = re.findall(r"^([A-Za-z0-9._-]+)==([^\s;\\]+)", text, re.MULTILINE)
    return {normal(name): version for name, version in pinned}


def current(pins: Pins, lock: Path = LOCK) -> Path:
    """The lock, refused when it is missing or was resolved from other pins."""
    if not lock.exists():
        raise ForkToolError(f"{lock} is missing; run `{COMMAND}` and commit it")
    recorded = re.search(rf"^{re.escape(_DIGEST)}(.*)$", lock.read_text(), re.M)
    if recorded is None or recorded[1] != pins_digest(pins):
        raise ForkToolError(
            f"pins.toml changed since {lock.name} was resolved from it; run "
            f"`{COMMAND}` and commit {lock.name} with pins.toml"
        )
    return lock


def digest(lock: Path) -> str:
    """What identifies the venv a lock makes."""
    return hashlib.sha256(lock.read_bytes()).hexdigest()
