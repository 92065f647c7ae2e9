"""The cached virtualenv, and the fork installed into it from source.

The venv's packages are installed with uv, as vLLM's own workflow does, at
the version pins.toml pins, from the indexes pip is configured with; with
pip when uv cannot be had.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from forktool.errors import ForkToolError
from forktool.pins import Pins, cache_dir, fetch

COMPLETE = ".forktool-complete"


def venv_dir(pins: Pins) -> Path:
    """The venv for these pins and this interpreter, shared by every clone."""
    key = json.dumps(
        [
            platform.machine(),
            platform.python_version(),
            pins.wheel.sha256,
            pins.pip,
            pins.build_requirements,
            pins.test_requirements,
        ]
    )
    return cache_dir() / f"venv-{hashlib.sha256(key.encode()).hexdigest()[:16]}"


def python(venv: Path) -> str:
    return str(venv / "bin" / "python")


def _pip(venv: Path) -> list[str]:
    return [python(venv), "-m", "pip", "install", "--progress-bar", "off"]


def _install(cmd: list[str], env: dict[str, str] | None = None) -> None:
    print("+", " ".join(cmd), flush=True)
    if subprocess.run(cmd, env={**os.environ, **(env or {})}).returncode != 0:
        raise ForkToolError(f"{' '.join(cmd[:4])} ... failed")


# pip's settings that say where packages come from, and uv's options for them.
_INDEX_OPTIONS = {
    "index-url": "--index-url",
    "extra-index-url": "--extra-index-url",
    "find-links": "--find-links",
    "constraint": "--constraint",
}


def uv_index_options(pip_config: str) -> list[str]:
    """uv options that install from where pip would, given `pip config list`."""
    settings: dict[str, str] = {}
    for scope in ("global", "install", ":env:"):  # pip's precedence, lowest first
        for line in pip_config.splitlines():
            name, _, value = line.partition("=")
            section, _, key = name.rpartition(".")
            if section == scope and key in _INDEX_OPTIONS:
                settings[key] = value.strip("'\"")
    return [
        part
        for key, values in settings.items()
        for value in values.split()
        for part in (_INDEX_OPTIONS[key], value)
    ]


def _uv(pins: Pins) -> list[str] | None:
    """`uv pip install` as pip would install, or None when uv cannot be had."""
    if not pins.uv:
        return None
    tool = cache_dir() / "tools" / pins.uv.replace("==", "-")
    uv = tool / "bin" / "uv"
    if not uv.exists():
        shutil.rmtree(tool, ignore_errors=True)
        made = subprocess.run([sys.executable, "-m", "venv", str(tool)])
        pip = [python(tool), "-m", "pip", "install", "-q", pins.uv]
        if made.returncode != 0 or subprocess.run(pip).returncode != 0:
            print(f"{pins.uv} could not be installed; pip installs instead")
            return None
    config = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True
    )
    # pip takes the best version from all indexes; uv only if told so.
    cmd = [str(uv), "pip", "install", "--index-strategy", "unsafe-best-match"]
    return [*cmd, "--compile-bytecode", *uv_index_options(config.stdout)]


@contextmanager
def _locked(lock: Path) -> Iterator[None]:
    """Hold `lock` exclusively: one forktool at a time creates a venv."""
    with lock.open("w") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"waiting for another forktool that holds {lock}", flush=True)
            fcntl.flock(f, fcntl.LOCK_EX)
        yield


def ensure_venv(pins: Pins) -> Path:
    """Create the venv with vLLM's pinned dependencies, unless it is cached."""
    venv = venv_dir(pins)
    venv.parent.mkdir(parents=True, exist_ok=True)
    # Hidden, so that `ls -d <cache>/venv-*` still names the venv alone.
    with _locked(venv.with_name(f".{venv.name}.lock")):
        if (venv / COMPLETE).exists():
            return venv
        shutil.rmtree(venv, ignore_errors=True)  # a partial one from a broken run
        wheel = fetch(pins, pins.wheel)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        uv = _uv(pins)
        installer = [*uv, "--python", python(venv)] if uv else _pip(venv)
        _install([*installer, pins.pip])
        # The verified wheel brings vLLM's runtime dependencies exactly as it
        # pins them; the fork's editable install replaces its vllm package.
        _install([*installer, str(wheel)])
        _install([*installer, *pins.build_requirements, *pins.test_requirements])
        (venv / COMPLETE).write_text(pins.wheel.sha256 + "\n")
    return venv


def installed_from(venv: Path) -> Path | None:
    """The tree vllm is imported from in `venv`, or None if it isn't importable."""
    result = subprocess.run(
        [python(venv), "-c", "import vllm; print(vllm.__file__)"],
        capture_output=True,
        text=True,
        cwd="/",
    )
    if result.returncode != 0:
        return None
    return Path(result.stdout.strip()).parent.parent


def install_fork(pins: Pins, venv: Path, fork: Path) -> None:
    """Build the fork with vLLM's Python-only flow (precompiled extensions)."""
    compiled = fork / "vllm" / "_C_stable_libtorch.abi3.so"
    before = installed_from(venv)
    if before == fork.resolve() and compiled.exists():
        print(f"vllm in {venv} is already the editable fork at {fork}")
        return
    note = repoint_note(venv, before, fork)
    if note:
        print(note, flush=True)
    env = {
        "VLLM_USE_PRECOMPILED": "1",
        "VLLM_PRECOMPILED_WHEEL_LOCATION": str(fetch(pins, pins.wheel)),
        # setuptools-scm would read the fork's own git history and invent a
        # dev version; the fork is vLLM <version> plus patches.
        "SETUPTOOLS_SCM_PRETEND_VERSION": pins.version,
    }
    editable = ["--no-build-isolation", "--no-deps", "-e", str(fork)]
    _install([*_pip(venv), *editable], env)
    if installed_from(venv) != fork.resolve():
        raise ForkToolError(f"vllm in {venv} does not import from {fork}")


def repoint_note(venv: Path, before: Path | None, fork: Path) -> str | None:
    """What installing `fork` replaces in the venv that every clone shares."""
    if before is None or before == fork.resolve() or before.is_relative_to(venv):
        return None
    return (
        f"{venv} is shared by every clone with these pins; its vllm was the "
        f"editable fork at {before}, and now becomes {fork}. To point it back, "
        f"run `python3 -m forktool install` in the clone that holds {before}."
    )


def user_env(venv: Path, hf_home: Path, gpu: bool | None = None) -> dict[str, str]:
    """The variables `env` prints and `run` sets (PATH also gains venv/bin).

    Unlike `upstream.test_env`, which pins tests to the CPU, this leaves a
    GPU visible where there is one.
    """
    if gpu is None:
        gpu = shutil.which("nvidia-smi") is not None
    variables = {"VIRTUAL_ENV": str(venv)}
    if not gpu:
        variables["VLLM_TARGET_DEVICE"] = "cpu"
    variables |= {"HF_HOME": str(hf_home), "HF_HUB_OFFLINE": "1"}
    variables["TRANSFORMERS_OFFLINE"] = "1"
    return variables


def export_lines(variables: dict[str, str]) -> str:
    """Shell lines for `eval "$(python3 -m forktool env)"`."""
    lines = [f"export {k}={shlex.quote(v)}" for k, v in variables.items()]
    bin_dir = shlex.quote(str(Path(variables["VIRTUAL_ENV"]) / "bin"))
    return "\n".join([*lines, f'export PATH={bin_dir}:"$PATH"'])


def run_in(variables: dict[str, str], command: list[str], cwd: str = ".") -> int:
    """Run `command` in the environment, in `cwd`."""
    bin_dir = Path(variables["VIRTUAL_ENV"]) / "bin"
    path = f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"
    env = {**os.environ, **variables, "PATH": path}
    executable = shutil.which(command[0], path=path)
    if executable is None:
        raise ForkToolError(f"{command[0]}: not found in {bin_dir} or on PATH")
    return subprocess.run([executable, *command[1:]], env=env, cwd=cwd).returncode


def stale(pins: Pins) -> list[Path]:
    """Venvs and downloads in the cache that these pins no longer use."""
    root = cache_dir()
    keep = {venv_dir(pins)} | {
        root / "downloads" / a.filename for a in (pins.sdist, pins.wheel)
    }
    found = [*root.glob("venv-*"), *root.glob("downloads/*")]
    return sorted(path for path in found if path not in keep)


def size(path: Path) -> int:
    if path.is_file() or path.is_symlink():
        return path.lstat().st_size
    return sum(p.lstat().st_size for p in path.rglob("*") if not p.is_dir())
