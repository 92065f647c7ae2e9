"""The synthetic fork the tool tests share: a tiny base (no vLLM, no network),
the `workspace` fixture, and the helpers that commit, sync and follow advice."""

from __future__ import annotations

import hashlib
import io
import re
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

import forktool.sync
from forktool.errors import ForkToolError
from forktool.export import export
from forktool.git import git
from forktool.pins import Artifact, Pins, fetch

AUTHOR = "Test Project <test-project@noreply.invalid>"


PERSON = "Dev Person <dev@example.invalid>"


MESSAGE = "mini 0.1\n"


GENERATED = ("PKG-INFO",)


def make_sdist(path: Path, files: dict[str, str]) -> Artifact:
    """An sdist-like tarball with one top-level directory, owned by uid 1000."""
    with tarfile.open(path, "w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"mini-0.1/{name}")
            info.size, info.uid, info.uname = len(data), 1000, "builder"
            tar.addfile(info, io.BytesIO(data))
    return Artifact(path.name, hashlib.sha256(path.read_bytes()).hexdigest())


def make_pins(sdist: Artifact) -> Pins:
    return Pins("mini", "0.1", GENERATED, sdist, sdist, AUTHOR, "pip", (), ())


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    """This repository (a git checkout holding patches/), a cache holding a
    verified sdist, and a fork path; git knows the person as PERSON."""
    monkeypatch.setenv("VLLM_FORK_CACHE", str(tmp_path / "cache"))
    gitconfig = tmp_path / "gitconfig"
    name, email = PERSON[: PERSON.index(" <")], PERSON[PERSON.index("<") + 1 : -1]
    gitconfig.write_text(f"[user]\n\tname = {name}\n\temail = {email}\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(gitconfig))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    downloads = tmp_path / "cache" / "downloads"
    downloads.mkdir(parents=True)
    pins = make_pins(make_sdist(downloads / "mini-0.1.tar.gz", BASE_FILES))
    repo = tmp_path / "repo"
    patches = repo / "patches"
    patches.mkdir(parents=True)
    (patches / "series").write_text("# empty\n")
    git(repo, "init", "-q")
    commit_series(patches)
    return pins, patches, repo / "build" / "mini"


BASE_FILES = {
    ".gitignore": "*.so\n*_hip*\n",
    "PKG-INFO": "Name: mini\n",
    "mini/rocm_hip.py": "# ignored by .gitignore, shipped anyway\n",
    "mini/__init__.py": "VALUE = 1\n",
    "mini/util.py": "def double(x):\n    return 2 * x\n",
}


def sync(workspace, force=False, tree=None, message=MESSAGE, sdist=None) -> str:
    pins, patches, own = workspace
    return forktool.sync.sync(
        tree or own,
        patches,
        AUTHOR,
        message,
        lambda: fetch(pins, sdist or pins.sdist),
        GENERATED,
        force,
    )


def commit(tree: Path, path: str, text: str, subject: str) -> None:
    (tree / path).parent.mkdir(parents=True, exist_ok=True)
    (tree / path).write_text(text)
    git(tree, "add", path)
    git(tree, "commit", "-qm", f"{subject}\n\nSigned-off-by: {PERSON}")


def commit_series(patches: Path) -> None:
    """`git add patches && git commit` in this repository."""
    git(patches, "add", "-A", ".")
    git(patches, "commit", "-q", "--allow-empty", "-m", "Series")


def head(tree: Path) -> str:
    return git(tree, "rev-parse", "HEAD").stdout.strip()


def subjects(tree: Path) -> list[str]:
    return git(tree, "log", "--reverse", "--format=%s", "base..").stdout.split("\n")[
        :-1
    ]


def snapshot(patches: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(patches.iterdir())}


def series_of(workspace, *changes: tuple[str, str, str]) -> Path:
    """Sync the fork, commit `changes` (path, text, subject), export, commit."""
    _, patches, tree = workspace
    sync(workspace)
    for change in changes:
        commit(tree, *change)
    export(tree, patches)
    commit_series(patches)
    return tree


THREE = [
    ("mini/__init__.py", "VALUE = 2\n", "[Core] First"),
    ("mini/util.py", "def double(x):\n    return x * 2\n", "[Core] Second"),
    ("mini/extra.py", "EXTRA = 1\n", "[Core] Third"),
]


def teammate(workspace) -> Path:
    """A second clone's fork of the same series (after `git pull`)."""
    other = workspace[2].parent.parent / "teammate" / "mini"
    sync(workspace, tree=other)
    return other


def edit_series(tree: Path, script: str) -> None:
    """`git rebase -i base` with `script` (sed) as the editor of the todo list."""
    git(tree, "rebase", "-q", "-i", "base", env={"GIT_SEQUENCE_EDITOR": script})


def head_of(tree: Path, ref: str) -> str:
    return git(tree, "rev-parse", ref).stdout.strip()


def follow(workspace, message: str) -> None:
    """Run every command line `message` prints, as printed: git in a shell
    with the person's own git config, the tool's commands on `workspace`."""
    _, patches, tree = workspace
    for line in message.splitlines():
        line = line.strip()
        if line.startswith("python3 -m forktool "):
            words = line.split("#")[0].split()[3:]
            if words[0] == "sync":
                sync(workspace, force="--force" in words)
            elif words == ["export"]:
                export(tree, patches)
            else:
                raise AssertionError(f"unknown advice: {line}")
        elif line.startswith("git "):
            subprocess.run(line, shell=True, check=True)


def trailers(tree: Path) -> dict[str, list[str]]:
    """Subject -> its Signed-off-by lines, for each patch of the fork."""
    log = git(tree, "log", "--format=%s%x00%B%x1e", "base..").stdout
    found = {}
    for record in filter(str.strip, log.split("\x1e")):
        subject, body = record.strip("\n").split("\0")
        found[subject] = re.findall(r"^Signed-off-by: .*$", body, re.M)
    return found


def fresh_clone(workspace, name: str = "fresh") -> Path:
    """Another clone's fork, built from patches/ alone."""
    other = workspace[2].parent.parent / name / "mini"
    shutil.rmtree(other, ignore_errors=True)
    sync(workspace, tree=other)
    return other


def reword_second(tree: Path, body: str) -> None:
    """`git rebase -i`, `reword` of THREE's second patch: a new message."""
    edit_series(tree, "sed -i 2s/^pick/edit/")
    git(tree, "commit", "-q", "--amend", "-m", body)
    git(tree, "rebase", "--continue", env={"GIT_EDITOR": "true"})


def backed_up(tree: Path) -> str:
    """The subjects on the fork's backup branches."""
    return git(tree, "log", "--format=%s", "--branches=backup/").stdout


def trees(tree: Path) -> list[str]:
    """The tree id at each commit of the fork, base first."""
    return git(tree, "log", "--reverse", "--format=%T", "HEAD").stdout.split()


def refusal(command) -> ForkToolError:
    with pytest.raises(ForkToolError) as excinfo:
        command()
    print(excinfo.value)
    return excinfo.value


def commit_message(tree: Path, path: str, text: str, message: str, **env) -> str:
    """Commit `path` with `message` as written; its short id."""
    (tree / path).write_text(text)
    git(tree, "add", path)
    git(tree, "commit", "-q", "-F", "-", input=message, env=env or None)
    return git(tree, "rev-parse", "--short", "HEAD").stdout.strip()


def refused(command) -> str:
    return str(refusal(command))


def reword_third(tree: Path) -> None:
    """Reword patch 3's subject in `tree`, its code as it was."""
    edit_series(tree, "sed -i 3s/^pick/edit/")
    git(tree, "commit", "-q", "--amend", "-m",
             f"[Core] Third, reworded\n\nSigned-off-by: {PERSON}")  # fmt: skip
    git(tree, "rebase", "--continue", env={"GIT_EDITOR": "true"})


def change_second(tree: Path, body: str) -> None:
    """Amend the second of THREE's patches in place (rebase -i, `edit`)."""
    edit_series(tree, "sed -i 2s/^pick/edit/")
    (tree / "mini/util.py").write_text(body)
    git(tree, "commit", "-q", "--amend", "--no-edit", "-a")
    git(tree, "rebase", "--continue", env={"GIT_EDITOR": "true"})


def teammate_changes_second(workspace) -> dict[str, bytes]:
    """A teammate amends THREE's second patch and commits the series; return
    patches/ as pulled."""
    patches = workspace[1]
    theirs = teammate(workspace)
    change_second(theirs, "def double(x):\n    return x + x  # theirs\n")
    export(theirs, patches)
    commit_series(patches)
    return snapshot(patches)
