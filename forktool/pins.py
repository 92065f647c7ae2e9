"""The pinned base (pins.toml), checked against what it names, its verified
downloads, and the cache they live in: downloads, uv, venvs and results
shared by the clones on this machine (VLLM_FORK_CACHE).

uv, at the version pins.toml pins, locks, creates and fills the venv and
finds where the index serves the pinned downloads. It resolves from its own
index settings (PyPI unless `UV_INDEX_URL`, `UV_DEFAULT_INDEX` or `uv.toml`
say otherwise), never from pip's.
"""

import email.parser
import functools
import hashlib
import os
import re
import shutil
import sys
import tarfile
import tempfile
import tomllib
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from forktool import process
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
    if (cache / ".gitignore").exists():
        return
    tracked = git(LAYOUT.root, "ls-files", "--", str(cache), check=False)
    if tracked.returncode == 0 and not tracked.stdout.strip():
        cache.mkdir(parents=True, exist_ok=True)
        (cache / ".gitignore").write_text("# forktool's cache (VLLM_FORK_CACHE)\n*\n")


# Each table of pins.toml and the keys it takes, all required; a table after
# the one that holds it (`Pins.load` reads it from there).
KEYS = {
    "": ("base", "fork", "venv"),
    "base": ("project", "version", "generated", "sdist", "wheel"),
    "base.sdist": ("filename", "sha256"),
    "base.wheel": ("filename", "sha256"),
    "fork": ("author",),
    "venv": ("python", "platform", "pip", "uv", "constraints", "build", "test"),
}
# A release's version (PEP 440, without epoch or local part).
VERSION = re.compile(r"\d+(\.\d+)*((a|b|rc)\d+)?(\.post\d+)?(\.dev\d+)?")
MOVE = (
    "[base] project and version name the files of [base.sdist] and [base.wheel]: "
    "a move to another release sets all of them, sha256 included (README, Move to "
    "a new vLLM release); nothing was changed"
)


def normal(name: str) -> str:
    """A distribution's name as PEP 503 compares it."""
    return re.sub(r"[-_.]+", "-", name).lower()


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
    uv: str = "uv"  # locks and installs the venv's packages, finds the downloads
    constraints: tuple[str, ...] = ()
    # The interpreter and platform venv.lock is resolved for.
    python: str = "3.11"
    platform: str = "x86_64-manylinux_2_28"

    @classmethod
    def load(cls, path: Path = LAYOUT.pins) -> "Pins":
        """pins.toml, refused with a key missing or unknown, or a version or
        file names that are not [base]'s release."""
        try:
            with path.open("rb") as f:
                data = tomllib.load(f)
        except (OSError, tomllib.TOMLDecodeError) as e:
            raise ForkToolError(f"cannot read {path}: {e}") from None
        tables: dict[str, dict] = {}
        for table, keys in KEYS.items():  # each after its parent, read from it
            parent, _, name = table.rpartition(".")
            found = tables[parent].get(name, {}) if table else data
            tables[table] = found = found if isinstance(found, dict) else {}
            if unknown := sorted(set(found) - set(keys)):
                where = f"[{table}]" if table else "the top level"
                raise ForkToolError(
                    f"{path}: unknown key {unknown[0]!r} in {where}, which takes "
                    f"{', '.join(keys)}; correct or remove it"
                )
            if missing := [key for key in keys if key not in found]:
                dotted = f"{table}.{missing[0]}".lstrip(".")
                raise ForkToolError(f"{path} lacks `{dotted}`; see README.md")
        base, venv, artifact = tables["base"], tables["venv"], Artifact
        pins = cls(
            base["project"],
            base["version"],
            tuple(base["generated"]),
            artifact(**tables["base.sdist"]),
            artifact(**tables["base.wheel"]),
            tables["fork"]["author"],
            venv["pip"],
            tuple(venv["build"]),
            tuple(venv["test"]),
            venv["uv"],
            tuple(venv["constraints"]),
            venv["python"],
            venv["platform"],
        )
        if not VERSION.fullmatch(pins.version):
            raise ForkToolError(
                f"{path}: [base] version {pins.version!r} is not a release's version; "
                'set it to one, e.g. version = "0.33.0"'
            )
        stem = f"{normal(pins.project).replace('-', '_')}-{pins.version}"
        for kind, form in (("sdist", ".tar.gz"), ("wheel", "-<tags>.whl")):
            name = getattr(pins, kind).filename
            if not re.fullmatch(re.escape(stem + form).replace("<tags>", ".+"), name):
                release = f"{pins.project} {pins.version} ({stem}{form})"
                raise ForkToolError(
                    f"{path}: [base.{kind}] filename is {name}, not a "
                    f"file of [base] {release}: {MOVE}"
                )
        return pins

    @property
    def requirement(self) -> str:
        return f"{self.project}=={self.version}"


def fetch_sdist(pins: Pins) -> Path:
    """The verified sdist, refused when its PKG-INFO names another project or
    version than pins.toml."""
    sdist = fetch(pins, pins.sdist)
    with tarfile.open(sdist) as tar:
        top = (m for m in tar if m.name.count("/") == 1)
        info = next((m for m in top if m.name.endswith("/PKG-INFO")), None)
        data = info and tar.extractfile(info)
        text = data.read().decode() if data else ""
    headers = email.parser.HeaderParser().parsestr(text)
    name, version = headers.get("Name", ""), headers.get("Version", "")
    if normal(name) != normal(pins.project) or version != pins.version:
        said = f"{name or '?'} {version or '?'} (its PKG-INFO), not [base] "
        raise ForkToolError(
            f"{sdist} is {said}{pins.project} {pins.version} of pins.toml: {MOVE}"
        )
    return sdist


def sha256_of(path: Path) -> str:
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def verify(path: Path, artifact: Artifact, pins: Pins) -> Path:
    """`path` if its sha256 is the pinned one; else say which side is wrong."""
    actual = sha256_of(path)
    if actual == artifact.sha256:
        return path
    said = (
        f"sha256 mismatch for {path}: pins.toml says {artifact.sha256}, the file "
        f"has {actual}. Nothing was unpacked.\n"
    )
    others = {a.sha256: a.filename for a in (pins.sdist, pins.wheel) if a != artifact}
    if artifact.sha256 in others:
        raise ForkToolError(
            f"{said}pins.toml gives {artifact.filename} the sha256 of "
            f"{others[artifact.sha256]}: a slip in pins.toml. The file is kept."
        )
    try:  # the sha256 the index publishes, None if it cannot tell
        published = _index(pins).get(artifact.filename, ("", None))[1]
    except (ForkToolError, OSError):
        published = None
    if published == actual:
        said += (
            f"pins.toml is wrong: the file has the sha256 the index publishes for "
            f"{artifact.filename}. If {pins.requirement} is the release you mean, "
            f'set sha256 = "{actual}" for it in pins.toml. The file is kept.'
        )
    elif published == artifact.sha256:
        said += (
            "The file is damaged: pins.toml has the sha256 the index publishes. "
            f"Delete {path} and run again to download it again."
        )
    else:
        why = "could not be asked" if published is None else ""
        why = why or f"publishes a third one, {published}"
        said += (
            f"Which is wrong cannot be told (the index {why}). Compare both with "
            f"the release's page on PyPI: if pins.toml is right, delete {path} to "
            "download it again; if the file is, correct pins.toml."
        )
    raise ForkToolError(said)


def uv_path(pins: Pins) -> Path:
    """Where `uv_binary` puts the pinned uv."""
    return cache_dir() / "tools" / pins.uv.replace("==", "-") / "bin" / "uv"


def uv_binary(pins: Pins) -> Path:
    """The pinned uv, installed with pip into the cache once."""
    uv = uv_path(pins)
    if not uv.exists():
        tool = uv.parent.parent
        shutil.rmtree(tool, ignore_errors=True)
        print(f"installing {pins.uv} into {tool}", flush=True)
        pip = [sys.executable, "-m", "pip", "install", "-q", "--prefix", str(tool)]
        ran = process.run([*pip, pins.uv], check=False, capture=False)
        if ran.returncode or not uv.exists():
            shutil.rmtree(tool, ignore_errors=True)
            raise ForkToolError(f"pip could not install {pins.uv} (pins.toml [venv])")
    return uv


def run_uv(uv: Path, *args: str) -> None:
    """`uv args...`, never downloading a Python of its own."""
    print("+", " ".join(["uv", *args]), flush=True)
    env = process.environ(UV_PYTHON_DOWNLOADS="never")
    process.run([uv, *args], env=env, capture=False)


def _index(pins: Pins) -> dict[str, tuple[str, str | None]]:
    """File name -> (URL, sha256 the index publishes) of each sdist and wheel
    the index serves for the pinned release, as uv resolves it: no build, no
    venv."""
    with tempfile.TemporaryDirectory() as tmp:
        spec, lock = Path(tmp, "in.txt"), Path(tmp, "pylock.toml")
        spec.write_text(pins.requirement + "\n")
        target = ["--python-version", pins.python, "--python-platform", pins.platform]
        compile_ = ["pip", "compile", "-q", "--no-deps", "--format", "pylock.toml"]
        run_uv(uv_binary(pins), *compile_, *target, str(spec), "-o", str(lock))
        packages = tomllib.loads(lock.read_text())["packages"]
    files = [f for p in packages for f in [p.get("sdist", {}), *p.get("wheels", [])]]
    return {
        f["url"].rsplit("/", 1)[-1]: (f["url"], f.get("hashes", {}).get("sha256"))
        for f in files
        if "url" in f
    }


def fetch(pins: Pins, artifact: Artifact) -> Path:
    """Return the cached, sha256-verified artifact, downloading it first.

    uv names the file's URL on the index from the wheel's metadata, so no
    sdist is built and no venv is needed.
    """
    downloads = cache_dir() / "downloads"
    target = downloads / artifact.filename
    if not target.exists():
        served = _index(pins)
        if artifact.filename not in served:
            listed = ", ".join(sorted(served)) or "nothing"
            said = f"{artifact.filename} for {pins.requirement} (it serves: {listed})"
            raise ForkToolError(f"the index serves no {said}")
        downloads.mkdir(parents=True, exist_ok=True)
        print(f"downloading {artifact.filename}", flush=True)
        with tempfile.TemporaryDirectory(dir=downloads) as tmp:
            downloaded = Path(tmp, artifact.filename)
            url = served[artifact.filename][0]
            with urllib.request.urlopen(url) as response, downloaded.open("wb") as out:
                shutil.copyfileobj(response, out, 1 << 20)
            shutil.move(downloaded, target)
    # Verified where it stays: the error's advice names the cached file.
    return verify(target, artifact, pins)
