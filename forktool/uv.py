"""uv, at the version pins.toml pins: it locks, creates and fills the venv,
and finds where the index serves the pinned downloads.

uv resolves from its own index settings (PyPI unless `UV_INDEX_URL`,
`UV_DEFAULT_INDEX` or `uv.toml` say otherwise), never from pip's.
"""

import shutil
import sys
import tempfile
import tomllib
from pathlib import Path

from forktool import process
from forktool.process import ForkToolError


def path(requirement: str, tools: Path) -> Path:
    """Where `binary` puts uv at `requirement`."""
    return tools / requirement.replace("==", "-") / "bin" / "uv"


def binary(requirement: str, tools: Path) -> Path:
    """`uv`, installed with pip under `tools` once."""
    uv = path(requirement, tools)
    if not uv.exists():
        tool = uv.parent.parent
        shutil.rmtree(tool, ignore_errors=True)
        print(f"installing {requirement} into {tool}", flush=True)
        pip = [sys.executable, "-m", "pip", "install", "-q", "--prefix", str(tool)]
        ran = process.run([*pip, requirement], check=False, capture=False)
        if ran.returncode or not uv.exists():
            shutil.rmtree(tool, ignore_errors=True)
            raise ForkToolError(
                f"pip could not install {requirement} (pins.toml [venv])"
            )
    return uv


def run(uv: Path, *args: str) -> None:
    """`uv args...`, never downloading a Python of its own."""
    print("+", " ".join(["uv", *args]), flush=True)
    env = process.environ(UV_PYTHON_DOWNLOADS="never")
    process.run([uv, *args], env=env, capture=False)


def downloads(
    uv: Path,
    requirement: str,
    python: str,
    platform: str,
) -> dict[str, tuple[str, str | None]]:
    """File name -> (URL, sha256 the index publishes) of each sdist and wheel
    the index serves for `requirement` (one exact version), as uv resolves
    it: no build, no venv."""
    with tempfile.TemporaryDirectory() as tmp:
        spec, lock = Path(tmp, "in.txt"), Path(tmp, "pylock.toml")
        spec.write_text(requirement + "\n")
        run(uv, "pip", "compile", "-q", "--no-deps", "--format", "pylock.toml",
            "--python-version", python, "--python-platform", platform,
            str(spec), "-o", str(lock))  # fmt: skip
        packages = tomllib.loads(lock.read_text())["packages"]
    files = [f for p in packages for f in [p.get("sdist", {}), *p.get("wheels", [])]]
    return {
        f["url"].rsplit("/", 1)[-1]: (f["url"], f.get("hashes", {}).get("sha256"))
        for f in files
        if "url" in f
    }
