"""The tool tests' synthetic fork (tiny base, no network), its fixture, helpers."""

import hashlib
import io
import re
import shutil
import subprocess
import tarfile
from email.utils import parseaddr
from pathlib import Path
from typing import NamedTuple

import pytest

import forktool.sync
from forktool.export import export
from forktool.pins import Artifact, Pins, fetch
from forktool.process import ForkToolError, git, identity
from forktool.series import read_series

AUTHOR = "Test Project <test-project@noreply.invalid>"
PERSON = "Dev Person <dev@example.invalid>"
MESSAGE = "mini 0.1\n"
GENERATED = ("PKG-INFO",)
BASE_FILES = {
    ".gitignore": "*.so\n*_hip*\n",
    "PKG-INFO": "Name: mini\nVersion: 0.1\n",
    "mini/rocm_hip.py": "# ignored by .gitignore, shipped anyway\n",
    "mini/__init__.py": "VALUE = 1\n",
    "mini/util.py": "def double(x):\n    return 2 * x\n",
}
THREE = [
    ("mini/__init__.py", "VALUE = 2\n", "[Core] First"),
    ("mini/util.py", "def double(x):\n    return x * 2\n", "[Core] Second"),
    ("mini/extra.py", "EXTRA = 1\n", "[Core] Third"),
]
SUBJECTS = [c[2] for c in THREE]
LOCAL = ("mini/local.py", "LOCAL = 1\n", "[Core] Local")
THEIRS = "def double(x):\n    return x + x  # theirs\n"
MINE = "def double(x):\n    return x + x  # mine\n"


def make_sdist(path: Path, files: dict[str, str]) -> Artifact:
    """An sdist-like tarball with one top-level directory, owned by uid 1000."""
    with tarfile.open(path, "w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"mini-0.1/{name}")
            info.size, info.uid, info.uname = len(data), 1000, "builder"
            tar.addfile(info, io.BytesIO(data))
    return Artifact(path.name, hashlib.sha256(path.read_bytes()).hexdigest())


def make_pins(sdist: Artifact, wheel: Artifact | None = None) -> Pins:
    return Pins("mini", "0.1", GENERATED, sdist, wheel or sdist, AUTHOR, "pip", (), ())


class Workspace(NamedTuple):
    """patches/ in a git checkout, pins of a cached sdist, the fork; tool commands."""

    pins: Pins
    patches: Path
    tree: Path

    def sync(
        self, force=False, tree=None, message=MESSAGE, sdist=None, selection=None
    ) -> str:
        fetched = lambda: fetch(self.pins, sdist or self.pins.sdist)  # noqa: E731
        return forktool.sync.sync(tree or self.tree, self.patches, AUTHOR, message,
                                  fetched, GENERATED, force, selection)  # fmt: skip

    def export(self, tree: Path | None = None, check: bool = False) -> str:
        return export(tree or self.tree, self.patches, check=check)

    def series_of(self, *changes: tuple[str, str, str]) -> dict[str, bytes]:
        """Sync the fork, commit `changes` (path, text, subject); publish them."""
        self.sync()
        for change in changes:
            commit(self.tree, *change)
        return self.publish()

    def clone(self, name: str = "fresh") -> Path:
        """Another clone's fork, built from patches/ alone (as after `git pull`)."""
        other = self.tree.parent.parent / name / "mini"
        shutil.rmtree(other, ignore_errors=True)
        self.sync(tree=other)
        return other

    def publish(self, tree: Path | None = None) -> dict[str, bytes]:
        """Export `tree` (or the fork) and commit patches/; patches/ as pulled."""
        self.export(tree)
        commit_series(self.patches)
        return self.snapshot()

    def snapshot(self) -> dict[str, bytes]:
        return snapshot(self.patches)

    def downloads(self) -> Path:  # the cache's downloads, where the sdist is
        return self.patches.parent.parent / "cache" / "downloads"

    def names(self) -> list[str]:  # the series' patch files, in order
        return [p.name for p in read_series(self.patches)]

    def follow(self, message: str) -> None:
        """Run `message`'s command lines: git in a shell, the tool's here."""
        for line in message.splitlines():
            line = line.strip()
            if line.startswith("python3 -m forktool "):
                words = line.split("#")[0].split()[3:]
                if words[0] == "sync":
                    self.sync(force="--force" in words)
                elif words == ["export"]:
                    self.export()
                else:
                    raise AssertionError(f"unknown advice: {line}")
            elif line.startswith("git "):
                subprocess.run(line, shell=True, check=True)


@pytest.fixture
def workspace(tmp_path, monkeypatch) -> Workspace:
    """An empty series committed; git knows the person as PERSON."""
    gitconfig, (name, email) = tmp_path / "gitconfig", parseaddr(PERSON)
    gitconfig.write_text(f"[user]\n\tname = {name}\n\temail = {email}\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(gitconfig))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("VLLM_FORK_CACHE", str(tmp_path / "cache"))
    (downloads := tmp_path / "cache" / "downloads").mkdir(parents=True)
    pins = make_pins(make_sdist(downloads / "mini-0.1.tar.gz", BASE_FILES))
    (patches := tmp_path / "repo" / "patches").mkdir(parents=True)
    (patches / "series").write_text("# empty\n")
    git(patches.parent, "init", "-q")
    commit_series(patches)
    return Workspace(pins, patches, patches.parent / "build" / "mini")


@pytest.fixture
def ws(workspace) -> Workspace:
    return workspace


def commit(tree: Path, path: str, text: str, subject: str) -> None:
    (tree / path).parent.mkdir(parents=True, exist_ok=True)
    (tree / path).write_text(text)
    git(tree, "add", path)
    git(tree, "commit", "-qm", f"{subject}\n\nSigned-off-by: {PERSON}")


def commit_message(tree: Path, path: str, text: str, message: str, **env) -> str:
    """Commit `path` with `message` as written; its short id."""
    (tree / path).write_text(text)
    git(tree, "add", path)
    git(tree, "commit", "-q", "-F", "-", input=message, env=env or None)
    return git(tree, "rev-parse", "--short", "HEAD").stdout.strip()


def authored_by(person: str) -> dict[str, str]:
    """The environment that makes `person` a commit's author (not committer)."""
    return {k: v for k, v in identity(person).items() if "AUTHOR" in k}


def commit_series(patches: Path) -> None:
    """`git add patches && git commit` in this repository."""
    git(patches, "add", "-A", ".")
    git(patches, "commit", "-q", "--allow-empty", "-m", "Series")


def head(tree: Path, ref: str = "HEAD") -> str:
    return git(tree, "rev-parse", ref).stdout.strip()


def subjects(tree: Path) -> list[str]:
    return git(tree, "log", "--reverse", "--format=%s", "base..").stdout.splitlines()


def snapshot(patches: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(patches.iterdir())}


def swap_second_and_third(patches: Path) -> None:
    """The series file edited by hand: its second and third patches swapped."""
    lines = (series := patches / "series").read_text().splitlines()
    at = [i for i, line in enumerate(lines) if line.endswith(".patch")]
    lines[at[1]], lines[at[2]] = lines[at[2]], lines[at[1]]
    series.write_text("\n".join(lines) + "\n")


def trees(tree: Path) -> list[str]:
    """The tree id at each commit of the fork, base first."""
    return git(tree, "log", "--reverse", "--format=%T", "HEAD").stdout.split()


def edit_series(tree: Path, script: str) -> None:
    """`git rebase -i base` with `script` (sed) as the editor of the todo list."""
    git(tree, "rebase", "-q", "-i", "base", env={"GIT_SEQUENCE_EDITOR": script})


def amend(tree: Path, n: int, path: str | None, text: str) -> None:
    """`git rebase -i`, `edit` of patch `n`: `text` in `path`, or as its message."""
    edit_series(tree, f"sed -i {n}s/^pick/edit/")
    if path:
        (tree / path).write_text(text)
        git(tree, "commit", "-q", "--amend", "--no-edit", "-a")
    else:
        git(tree, "commit", "-q", "--amend", "-m", text)
    git(tree, "rebase", "--continue", env={"GIT_EDITOR": "true"})


def change_second(tree: Path, body: str) -> None:
    amend(tree, 2, "mini/util.py", body)


def reword_third(tree: Path) -> None:
    amend(tree, 3, None, f"[Core] Third, reworded\n\nSigned-off-by: {PERSON}")


def teammate_changes_second(ws: Workspace) -> dict[str, bytes]:
    theirs = ws.clone("teammate")
    change_second(theirs, THEIRS)
    return ws.publish(theirs)


def trailers(tree: Path) -> dict[str, list[str]]:
    """Subject -> its Signed-off-by lines, for each patch of the fork."""
    log, found = git(tree, "log", "--format=%s%x00%B%x1e", "base..").stdout, {}
    for record in filter(str.strip, log.split("\x1e")):
        subject, body = record.strip("\n").split("\0")
        found[subject] = re.findall(r"^Signed-off-by: .*$", body, re.M)
    return found


def refusal(command) -> ForkToolError:
    with pytest.raises(ForkToolError) as excinfo:
        command()
    print(excinfo.value)
    return excinfo.value


def refused(command) -> str:
    return str(refusal(command))


def clean(tree: Path) -> bool:
    return git(tree, "status", "--porcelain").stdout == ""
