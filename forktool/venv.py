"""Each clone's virtualenv (build/.venv), made exactly as venv.lock says,
and the fork installed into it from source; the environment `env` and
`run` give it; what of the shared cache the clones use.

uv creates and fills the venv from its cache, hard-linking the files, so a
second clone's venv adds only its compiled bytecode. The downloads and uv itself
live in the cache shared by the clones; `cache` removes only what no
clone's pins use.
"""

import hashlib
import json
import os
import shlex
import shutil
import sys
import threading
from contextlib import suppress
from pathlib import Path

from forktool import process, venv_lock
from forktool.layout import LAYOUT
from forktool.pins import Pins, cache_dir, fetch, run_uv, uv_binary, uv_path
from forktool.process import ForkToolError

# Written last, holding the digest of the lock the venv was made from.
COMPLETE = ".forktool-complete"


def python(venv: Path) -> str:
    return str(venv / "bin" / "python")


def venv_id(venv: Path) -> str:
    """The digest of the lock `venv` was made from; "" if it is incomplete."""
    marker = venv / COMPLETE
    return marker.read_text().strip() if marker.exists() else ""


def ensure_venv(pins: Pins) -> Path:
    """Make the clone's venv exactly venv.lock, unless it already is."""
    venv, lock_file = LAYOUT.venv, venv_lock.current(pins)
    wanted = venv_lock.digest(lock_file)
    register_clone()
    # Only commands that hold the clone's lock (install, setup, test) call this.
    if venv_id(venv) == wanted:
        return venv
    tool = uv_binary(pins)
    if not Path(python(venv)).exists():
        shutil.rmtree(venv, ignore_errors=True)
        # This Python when it is the one the lock is for, else uv finds one.
        running = ".".join(map(str, sys.version_info[:2]))
        found = sys.executable if running == pins.python else pins.python
        run_uv(tool, "venv", "-q", "--python", found, str(venv))
    (venv / COMPLETE).unlink(missing_ok=True)
    # Exactly the lock: what it lacks is removed, the fork's vllm too
    # (install_fork puts it back). Not compiled: of its 28,500 modules a
    # process importing vLLM's model runners imports about 5,000, which
    # the first one compiles into build/pycache (compiling_once).
    sync = ["pip", "sync", "-q", "--require-hashes"]
    run_uv(tool, *sync, "--python", python(venv), str(lock_file))
    (venv / COMPLETE).write_text(wanted + "\n")
    return venv


def compiling_once(env: dict[str, str]) -> dict[str, str]:
    """`env` for a process of the venv that writes the bytecode of what it
    imports to build/pycache, where later ones read it, rather than into the
    trees, which stay as git has them."""
    env = {**env, "PYTHONPYCACHEPREFIX": str(LAYOUT.pycache)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def install_fork(pins: Pins, venv: Path, fork: Path) -> None:
    """Build the fork with vLLM's Python-only flow (precompiled extensions)."""

    def installed_from() -> Path | None:
        # Found rather than imported: importing vllm takes seconds.
        where = "import importlib.util as u; s = u.find_spec('vllm'); "
        where += "print(s and s.origin)"
        found = process.run([python(venv), "-c", where], cwd="/", check=False)
        origin = found.stdout.strip()
        bad = found.returncode != 0 or origin in ("", "None")
        return None if bad else Path(origin).parent.parent

    compiled = fork / "vllm" / "_C_stable_libtorch.abi3.so"
    if installed_from() == fork.resolve() and compiled.exists():
        print(f"vllm in {venv} is already the editable fork at {fork}")
        return
    # setuptools-scm would read the fork's own git history and invent a dev
    # version; the fork is vLLM <version> plus patches.
    env = process.environ(
        VLLM_USE_PRECOMPILED="1",
        VLLM_PRECOMPILED_WHEEL_LOCATION=str(fetch(pins, pins.wheel)),
        SETUPTOOLS_SCM_PRETEND_VERSION=pins.version,
    )
    pip = [python(venv), "-m", "pip", "install", "--progress-bar", "off"]
    cmd = [*pip, "--no-build-isolation", "--no-deps", "-e", str(fork)]
    print("+", shlex.join(cmd), flush=True)
    process.run(cmd, env=compiling_once(env), capture=False)
    if installed_from() != fork.resolve():
        raise ForkToolError(f"vllm in {venv} does not import from {fork}")


def user_env(venv: Path, hf_home: Path, gpu: bool | None = None) -> dict[str, str]:
    """The variables `env` prints and `run` sets (PATH also gains venv/bin).

    Unlike `pytest_runner.test_env`, which pins tests to the CPU, this leaves a
    GPU visible where there is one (nvidia-smi is found).
    """
    gpu = shutil.which("nvidia-smi") is not None if gpu is None else gpu
    device = {} if gpu else {"VLLM_TARGET_DEVICE": "cpu"}
    return {"VIRTUAL_ENV": str(venv), **device, "HF_HOME": str(hf_home),
            "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}  # fmt: skip


def export_lines(variables: dict[str, str]) -> str:
    """Shell lines for `eval "$(python3 -m forktool env)"`."""
    lines = [f"export {k}={shlex.quote(v)}" for k, v in variables.items()]
    bin_dir = shlex.quote(str(Path(variables["VIRTUAL_ENV"]) / "bin"))
    return "\n".join([*lines, f'export PATH={bin_dir}:"$PATH"'])


def run_in(variables: dict[str, str], command: list[str], cwd: str = ".") -> int:
    """Run `command` in the environment, in `cwd`."""
    bin_dir = Path(variables["VIRTUAL_ENV"]) / "bin"
    path = f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"
    if (executable := shutil.which(command[0], path=path)) is None:
        raise ForkToolError(f"{command[0]}: not found in {bin_dir} or on PATH")
    env = {**os.environ, **variables, "PATH": path}
    return process.run(
        [executable, *command[1:]], env=env, cwd=cwd, check=False, capture=False
    ).returncode


def register_clone(repo: Path = LAYOUT.root) -> None:
    """Note in the cache that `repo` uses it, so `cache` keeps what its pins use.

    A note already there is not written again, so a read-only cache that
    holds everything stops nothing; one that cannot take the note is a
    warning, not an error. The note is whole or absent (`cache` reads them).
    """
    name = hashlib.sha256(str(repo).encode()).hexdigest()[:16]
    entry = cache_dir() / "clones" / f"{name}.json"
    text = json.dumps({"repo": str(repo)}) + "\n"
    with suppress(OSError, UnicodeDecodeError):
        if entry.read_text() == text:
            return
    # `setup` notes the clone from two threads at once: one file each.
    part = entry.with_name(f".{entry.name}.{threading.get_native_id()}.part")
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        part.write_text(text)
        os.replace(part, entry)
    except OSError as e:
        with suppress(OSError):
            part.unlink(missing_ok=True)
        print(
            f"warning: cannot note this clone in the cache: {e.filename or entry}: "
            f"{e.strerror or e}; `cache` in another clone may count this clone's "
            "downloads unused",
            file=sys.stderr,
        )


def users(pins: Pins) -> dict[Path, list[Path]]:
    """Each path in the cache that a clone on this machine uses, with the
    clones that use it: its pins' downloads and uv, and the venvs an older
    forktool shared that hold its fork."""
    root = cache_dir()

    def used_by(pins: Pins) -> set[Path]:
        downloads = {root / "downloads" / a.filename for a in (pins.sdist, pins.wheel)}
        return {uv_path(pins).parent.parent, *downloads}  # uv's folder in tools/

    used = [(LAYOUT.root, used_by(pins))]
    for entry in sorted(root.glob("clones/*.json")):
        repo = Path(json.loads(entry.read_text())["repo"])
        try:
            used.append((repo, used_by(Pins.load(repo / "pins.toml"))))
        except ForkToolError:
            continue  # gone, or pins this forktool cannot read: nothing kept
    for old in root.glob("venv-*"):
        if (fork := editable_vllm(old)) is not None and fork.exists():
            used.append((fork.parent.parent, {old}))
    found: dict[Path, set[Path]] = {}
    for repo, paths in used:
        for path in filter(Path.exists, paths):
            found.setdefault(path, set()).add(repo)
    return {path: sorted(found[path]) for path in sorted(found)}


def editable_vllm(venv: Path) -> Path | None:
    """The fork tree a venv's editable vllm points at (PEP 610), if any."""
    for record in venv.glob("lib/python*/site-packages/vllm-*.dist-info"):
        try:
            url = json.loads((record / "direct_url.json").read_text())["url"]
        except (OSError, KeyError, ValueError):
            continue
        return Path(url.removeprefix("file://"))
    return None


def which_vllm(venv: Path) -> str:
    """Which venv and which vLLM tree `env` and `run` use."""
    tree = editable_vllm(venv)
    return f"venv {venv} ({f'vLLM from {tree}' if tree else 'no editable vLLM yet'})"


def stale(pins: Pins) -> list[Path]:
    """Downloads, uv builds and old shared venvs in the cache that no
    clone's pins on this machine use."""
    root, keep = cache_dir(), users(pins)
    found = [*root.glob("venv-*"), *root.glob("downloads/*"), *root.glob("tools/*")]
    return sorted(path for path in found if path not in keep)
