"""The pinned base (pins.toml) and its verified downloads."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path

from forktool.errors import ForkToolError
from forktool.layout import LAYOUT


@dataclass(frozen=True)
class Artifact:
    filename: str
    sha256: str


@dataclass(frozen=True)
class Pins:
    project: str
    version: str
    generated: tuple[str, ...]
    sdist: Artifact
    wheel: Artifact
    author: str
    pip: str
    build_requirements: tuple[str, ...]
    test_requirements: tuple[str, ...]
    uv: str = ""
    """The installer for the venv's packages; empty: pip."""

    @classmethod
    def load(cls, path: Path = LAYOUT.pins) -> Pins:
        with path.open("rb") as f:
            data = tomllib.load(f)
        base = data["base"]
        return cls(
            project=base["project"],
            version=base["version"],
            generated=tuple(base["generated"]),
            sdist=Artifact(**base["sdist"]),
            wheel=Artifact(**base["wheel"]),
            author=data["fork"]["author"],
            pip=data["venv"]["pip"],
            build_requirements=tuple(data["venv"]["build"]),
            test_requirements=tuple(data["venv"]["test"]),
            uv=data["venv"].get("uv", ""),
        )

    @property
    def requirement(self) -> str:
        return f"{self.project}=={self.version}"


def cache_dir() -> Path:
    """Where downloads and virtualenvs live: outside the clone, shared by clones."""
    root = os.environ.get("VLLM_FORK_CACHE") or Path.home() / ".cache" / "vllm-fork"
    return Path(root)


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def verify(path: Path, artifact: Artifact) -> Path:
    actual = sha256_of(path)
    if actual != artifact.sha256:
        raise ForkToolError(
            f"sha256 mismatch for {path}: expected {artifact.sha256}, got {actual}. "
            "Nothing was unpacked; delete the file to download it again."
        )
    return path


def fetch(pins: Pins, artifact: Artifact, python: str = sys.executable) -> Path:
    """Return the cached, sha256-verified artifact, downloading it with pip.

    `python` must be able to build vLLM's sdist metadata (setup.py imports
    torch) when the sdist is fetched; the venv made by `forktool install`
    can, see `venv.ensure_venv`.
    """
    downloads = cache_dir() / "downloads"
    target = downloads / artifact.filename
    if target.exists():
        return verify(target, artifact)
    downloads.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=downloads) as tmp:
        requirement = Path(tmp, "requirement.txt")
        requirement.write_text(f"{pins.requirement} --hash=sha256:{artifact.sha256}\n")
        binary = ["--only-binary", pins.project]
        if artifact == pins.sdist:
            # vLLM's setup.py needs its build requirements (torch included),
            # and appends a device suffix to the version unless told not to.
            binary = ["--no-binary", pins.project, "--no-build-isolation"]
        cmd = [python, "-m", "pip", "download", "--no-deps", "--require-hashes"]
        cmd += [*binary, "-r", str(requirement), "-d", tmp]
        env = {**os.environ, "VLLM_SKIP_VERSION_SUFFIX": "1"}
        if subprocess.run(cmd, env=env).returncode != 0:
            raise ForkToolError(f"pip could not download {artifact.filename}")
        downloaded = Path(tmp, artifact.filename)
        if not downloaded.exists():
            raise ForkToolError(f"pip did not produce {artifact.filename} in {tmp}")
        verify(downloaded, artifact)
        shutil.move(downloaded, target)
    return target
