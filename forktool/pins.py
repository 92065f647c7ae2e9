"""The pinned base (pins.toml), checked against what it names, its verified
downloads, and the cache they live in: downloads, uv, venvs and results
shared by the clones on this machine (VLLM_FORK_CACHE)."""

from __future__ import annotations

import email.parser
import functools
import hashlib
import os
import re
import shutil
import tarfile
import tempfile
import tomllib
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from forktool import uv
from forktool.layout import LAYOUT
from forktool.process import ForkToolError, git


def cache_dir() -> Path:
    """Where downloads and virtualenvs live: outside the clone, shared by clones.

    A relative VLLM_FORK_CACHE is the clone's, like every path the tool uses:
    it is resolved against the clone's root, never the current folder (run
    from build/vllm it would write into the fork). Resolving rather than
    refusing keeps `VLLM_FORK_CACHE=cache` working from any folder. A cache
    inside the clone holds a `.gitignore` of `*`, so git status ignores it.
    """
    root = os.environ.get("VLLM_FORK_CACHE") or Path.home() / ".cache" / "vllm-fork"
    path = LAYOUT.root / Path(root).expanduser()  # an absolute one stays
    if path.resolve().is_relative_to(LAYOUT.root.resolve()):
        _ignore_in_git(path)
    return path


@functools.cache
def _ignore_in_git(cache: Path) -> None:
    """A `.gitignore` of `*` in `cache`, as venvs have, unless git tracks
    files there (a cache pointed at patches/ must not hide them)."""
    ignore = cache / ".gitignore"
    if ignore.exists():
        return
    tracked = git(LAYOUT.root, "ls-files", "--", str(cache), check=False)
    if tracked.returncode == 0 and not tracked.stdout.strip():
        cache.mkdir(parents=True, exist_ok=True)
        ignore.write_text("# forktool's cache (VLLM_FORK_CACHE)\n*\n")


KEYS = {
    "": ("base", "fork", "venv"),
    "base": ("project", "version", "generated", "sdist", "wheel"),
    "base.sdist": ("filename", "sha256"),
    "base.wheel": ("filename", "sha256"),
    "fork": ("author",),
    "venv": ("python", "platform", "pip", "uv", "constraints", "build", "test"),
}
"""Each table of pins.toml and the keys it takes."""
VERSION = re.compile(r"\d+(\.\d+)*((a|b|rc)\d+)?(\.post\d+)?(\.dev\d+)?")
"""A release's version (PEP 440, without epoch or local part)."""
MOVE = (
    "[base] project and version name the files of [base.sdist] and [base.wheel]: "
    "a move to another release sets all of them, sha256 included (README, Move "
    "to a new vLLM release); nothing was changed"
)


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
        try:
            with path.open("rb") as f:
                data = tomllib.load(f)
        except (OSError, tomllib.TOMLDecodeError) as e:
            raise ForkToolError(f"cannot read {path}: {e}") from None

        _refuse_unknown_keys(data, path)

        def need(dotted: str):
            value = data
            for key in dotted.split("."):
                if not isinstance(value, dict) or key not in value:
                    raise ForkToolError(f"{path} lacks `{dotted}`; see README.md")
                value = value[key]
            return value

        def artifact(kind: str) -> Artifact:
            return Artifact(need(f"base.{kind}.filename"), need(f"base.{kind}.sha256"))

        pins = cls(
            project=need("base.project"),
            version=need("base.version"),
            generated=tuple(need("base.generated")),
            sdist=artifact("sdist"),
            wheel=artifact("wheel"),
            author=need("fork.author"),
            pip=need("venv.pip"),
            build_requirements=tuple(need("venv.build")),
            test_requirements=tuple(need("venv.test")),
            uv=need("venv.uv"),
            constraints=tuple(need("venv.constraints")),
            python=need("venv.python"),
            platform=need("venv.platform"),
        )
        pins.check_filenames(path)
        return pins

    def check_filenames(self, path: Path) -> None:
        """Refuse a version that is not one, or sdist and wheel file names
        of another project or version than [base] names."""
        if not VERSION.fullmatch(self.version):
            raise ForkToolError(
                f"{path}: [base] version {self.version!r} is not a release's "
                'version; set it to one, e.g. version = "0.33.0"'
            )
        stem = f"{re.sub(r'[-_.]+', '_', self.project).lower()}-{self.version}"
        wheel = self.wheel.filename
        for table, name, form, ok in (
            ("base.sdist", self.sdist.filename, f"{stem}.tar.gz", None),
            ("base.wheel", wheel, f"{stem}-<tags>.whl", wheel.startswith(f"{stem}-")),
        ):
            if not (name == form if ok is None else ok and name.endswith(".whl")):
                raise ForkToolError(
                    f"{path}: [{table}] filename is {name}, not a file of "
                    f"[base] {self.project} {self.version} ({form}): {MOVE}"
                )

    @property
    def requirement(self) -> str:
        return f"{self.project}=={self.version}"


def _refuse_unknown_keys(data: dict, path: Path) -> None:
    for table, keys in KEYS.items():
        found = data
        for part in filter(None, table.split(".")):
            found = found.get(part, {}) if isinstance(found, dict) else {}
        unknown = sorted(set(found) - set(keys)) if isinstance(found, dict) else []
        if unknown:
            where = f"[{table}]" if table else "the top level"
            raise ForkToolError(
                f"{path}: unknown key {unknown[0]!r} in {where}, which takes "
                f"{', '.join(keys)}; correct or remove it"
            )


def sdist_release(path: Path) -> tuple[str, str]:
    """The project name and version the sdist's PKG-INFO gives."""
    with tarfile.open(path) as tar:
        for member in tar:
            if member.name.count("/") == 1 and member.name.endswith("/PKG-INFO"):
                data = tar.extractfile(member)
                text = data.read().decode() if data else ""
                headers = email.parser.HeaderParser().parsestr(text)
                return headers.get("Name", ""), headers.get("Version", "")
    return "", ""


def fetch_sdist(pins: Pins) -> Path:
    """The verified sdist, refused when its PKG-INFO names another project or
    version than pins.toml."""
    sdist = fetch(pins, pins.sdist)
    name, version = sdist_release(sdist)
    normal = [re.sub(r"[-_.]+", "-", n).lower() for n in (name, pins.project)]
    if normal[0] != normal[1] or version != pins.version:
        raise ForkToolError(
            f"{sdist} is {name or '?'} {version or '?'} (its PKG-INFO), not "
            f"[base] {pins.project} {pins.version} of pins.toml: {MOVE}"
        )
    return sdist


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def verify(path: Path, artifact: Artifact, pins: Pins) -> Path:
    """`path` if its sha256 is the pinned one; else say which side is wrong."""
    actual = sha256_of(path)
    if actual == artifact.sha256:
        return path
    said = (
        f"sha256 mismatch for {path}: pins.toml says {artifact.sha256}, the file "
        f"has {actual}. Nothing was unpacked."
    )
    others = {a.sha256: a.filename for a in (pins.sdist, pins.wheel) if a != artifact}
    if artifact.sha256 in others:
        raise ForkToolError(
            f"{said}\npins.toml gives {artifact.filename} the sha256 of "
            f"{others[artifact.sha256]}: a slip in pins.toml. The file is kept."
        )
    published = index_sha256(pins, artifact.filename)
    if published == actual:
        raise ForkToolError(
            f"{said}\npins.toml is wrong: the file has the sha256 the index "
            f"publishes for {artifact.filename}. If {pins.requirement} is the "
            f'release you mean, set sha256 = "{actual}" for it in pins.toml. '
            "The file is kept."
        )
    if published == artifact.sha256:
        raise ForkToolError(
            f"{said}\nThe file is damaged: pins.toml has the sha256 the index "
            f"publishes. Delete {path} and run again to download it again."
        )
    why = (
        "the index could not be asked"
        if published is None
        else (f"the index publishes a third one, {published}")
    )
    raise ForkToolError(
        f"{said}\nWhich is wrong cannot be told ({why}). Compare both with the "
        f"release's page on PyPI: if pins.toml is right, delete {path} to download "
        "it again; if the file is, correct pins.toml."
    )


def uv_binary(pins: Pins) -> Path:
    return uv.binary(pins.uv, cache_dir() / "tools")


def uv_cached(pins: Pins) -> bool:
    """Whether the cache holds the pinned uv (else pip installs it)."""
    return uv.path(pins.uv, cache_dir() / "tools").exists()


def _index(pins: Pins) -> dict[str, tuple[str, str | None]]:
    return uv.downloads(uv_binary(pins), pins.requirement, pins.python, pins.platform)


def index_sha256(pins: Pins, filename: str) -> str | None:
    """The sha256 the index publishes for `filename`, None if it cannot tell."""
    try:
        return _index(pins).get(filename, ("", None))[1]
    except (ForkToolError, OSError):
        return None


def fetch(pins: Pins, artifact: Artifact) -> Path:
    """Return the cached, sha256-verified artifact, downloading it first.

    uv names the file's URL on the index from the wheel's metadata, so no
    sdist is built and no venv is needed.
    """
    downloads = cache_dir() / "downloads"
    target = downloads / artifact.filename
    if target.exists():
        return verify(target, artifact, pins)
    served = _index(pins)
    if artifact.filename not in served:
        raise ForkToolError(
            f"the index serves no {artifact.filename} for {pins.requirement} "
            f"(it serves: {', '.join(sorted(served)) or 'nothing'})"
        )
    downloads.mkdir(parents=True, exist_ok=True)
    print(f"downloading {artifact.filename}", flush=True)
    with tempfile.TemporaryDirectory(dir=downloads) as tmp:
        downloaded = Path(tmp, artifact.filename)
        with urllib.request.urlopen(served[artifact.filename][0]) as response:
            with downloaded.open("wb") as out:
                shutil.copyfileobj(response, out, 1 << 20)
        shutil.move(downloaded, target)
    # Verified where it stays: the error's advice names the cached file.
    return verify(target, artifact, pins)
