"""The cached virtualenv, and the fork installed into it from source."""

from __future__ import annotations

import hashlib
import json
import os
import platform
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
    if installed_from(venv) == fork.resolve() and compiled.exists():
        print(f"vllm in {venv} is already the editable fork at {fork}")
        return
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
