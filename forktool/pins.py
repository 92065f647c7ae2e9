"""The pinned base (pins.toml) and its verified downloads."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import tomllib
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from forktool import uv
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
    uv: str = "uv"
    """Locks and installs the venv's packages, finds the downloads."""
    constraints: tuple[str, ...] = ()
    python: str = "3.11"
    platform: str = "x86_64-manylinux_2_28"
    """The interpreter and platform venv.lock is resolved for."""

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
            uv=data["venv"]["uv"],
            constraints=tuple(data["venv"]["constraints"]),
            python=data["venv"]["python"],
            platform=data["venv"]["platform"],
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


def uv_binary(pins: Pins) -> Path:
    return uv.binary(pins.uv, cache_dir() / "tools")


def fetch(pins: Pins, artifact: Artifact) -> Path:
    """Return the cached, sha256-verified artifact, downloading it first.

    uv names the file's URL on the index from the wheel's metadata, so no
    sdist is built and no venv is needed.
    """
    downloads = cache_dir() / "downloads"
    target = downloads / artifact.filename
    if target.exists():
        return verify(target, artifact)
    urls = uv.download_urls(
        uv_binary(pins), pins.requirement, pins.python, pins.platform
    )
    if artifact.filename not in urls:
        raise ForkToolError(
            f"the index serves no {artifact.filename} for {pins.requirement} "
            f"(it serves: {', '.join(sorted(urls)) or 'nothing'})"
        )
    downloads.mkdir(parents=True, exist_ok=True)
    print(f"downloading {artifact.filename}", flush=True)
    with tempfile.TemporaryDirectory(dir=downloads) as tmp:
        downloaded = Path(tmp, artifact.filename)
        with urllib.request.urlopen(urls[artifact.filename]) as response:
            with downloaded.open("wb") as out:
                shutil.copyfileobj(response, out, 1 << 20)
        verify(downloaded, artifact)
        shutil.move(downloaded, target)
    return target
