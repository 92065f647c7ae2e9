"""The patch-queue workflow against a tiny synthetic base: no vLLM, no network."""

from __future__ import annotations

import hashlib
import io
import shutil
import tarfile
from pathlib import Path

import pytest

from forktool import fork
from forktool.errors import ForkToolError
from forktool.pins import Artifact, Pins, fetch
from forktool.series import read_series

AUTHOR = "Test Project <test-project@noreply.invalid>"
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
    """A cache holding a verified sdist, an empty patches/ and a fork path."""
    monkeypatch.setenv("VLLM_FORK_CACHE", str(tmp_path / "cache"))
    downloads = tmp_path / "cache" / "downloads"
    downloads.mkdir(parents=True)
    files = {
        ".gitignore": "*.so\n*_hip*\n",
        "PKG-INFO": "Name: mini\n",
        "mini/rocm_hip.py": "# ignored by .gitignore, shipped anyway\n",
        "mini/__init__.py": "VALUE = 1\n",
        "mini/util.py": "def double(x):\n    return 2 * x\n",
    }
    pins = make_pins(make_sdist(downloads / "mini-0.1.tar.gz", files))
    patches = tmp_path / "patches"
    patches.mkdir()
    (patches / "series").write_text("# empty\n")
    return pins, patches, tmp_path / "build" / "mini"


def sync(workspace, force=False) -> str:
    pins, patches, tree = workspace
    return fork.sync(
        tree,
        patches,
        AUTHOR,
        MESSAGE,
        lambda: fetch(pins, pins.sdist),
        GENERATED,
        force,
    )


def commit(tree: Path, path: str, text: str, subject: str) -> None:
    (tree / path).write_text(text)
    fork.git(tree, "commit", "-qam", f"{subject}\n\nSigned-off-by: {AUTHOR}")


def snapshot(patches: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(patches.iterdir())}


def test_sha256_mismatch_is_refused_and_nothing_is_extracted(workspace):
    pins, patches, tree = workspace
    bad = make_pins(Artifact(pins.sdist.filename, "0" * 64))
    with pytest.raises(ForkToolError, match="sha256 mismatch"):
        sync((bad, patches, tree))
    assert not tree.exists()
    assert list(tree.parent.glob("*")) == []


def test_sync_materialises_base_and_is_idempotent(workspace):
    _, _, tree = workspace
    assert "materialised" in sync(workspace)
    assert fork.git(tree, "rev-list", "--count", "HEAD").stdout.strip() == "1"
    assert fork.git(tree, "describe", "--tags").stdout.strip() == "base"
    tracked = fork.git(tree, "ls-files").stdout.split()
    assert "mini/rocm_hip.py" in tracked and "PKG-INFO" not in tracked
    assert fork.git(tree, "status", "--porcelain").stdout == ""
    # Ownership normalised: git accepts the tree without safe.directory.
    assert (tree / "mini" / "__init__.py").stat().st_uid != 1000
    head = fork.git(tree, "rev-parse", "HEAD").stdout
    assert "up to date" in sync(workspace)
    assert fork.git(tree, "rev-parse", "HEAD").stdout == head


def test_round_trip_is_byte_identical(workspace):
    _, patches, tree = workspace
    sync(workspace)
    commit(tree, "mini/__init__.py", "VALUE = 2\n", "[Core] Bump VALUE")
    commit(tree, "mini/util.py", "def double(x):\n    return x + x\n", "Add twice")
    fork.export(tree, patches)
    exported = snapshot(patches)
    assert read_series(patches) == [
        patches / "0001-Core-Bump-VALUE.patch",
        patches / "0002-Add-twice.patch",
    ]
    # Rebuild from scratch: same commits, same bytes on re-export.
    shutil.rmtree(tree)
    assert "base + 2 patches" in sync(workspace)
    assert "0 written, 0 removed" in fork.export(tree, patches)
    assert snapshot(patches) == exported
    assert "up to date" in sync(workspace)
    subject = fork.git(tree, "log", "-1", "--format=%s", "HEAD~1").stdout.strip()
    assert subject == "[Core] Bump VALUE"


def test_sync_refuses_uncommitted_changes(workspace):
    _, _, tree = workspace
    sync(workspace)
    (tree / "mini" / "util.py").write_text("changed\n")
    with pytest.raises(ForkToolError, match="uncommitted changes"):
        sync(workspace)
    assert (tree / "mini" / "util.py").read_text() == "changed\n"
    fork.git(tree, "checkout", "--", "mini/util.py")
    (tree / "new_file.py").write_text("new\n")
    with pytest.raises(ForkToolError, match="uncommitted changes"):
        sync(workspace)
    assert (tree / "new_file.py").exists()


def test_sync_refuses_unexported_commits_and_force_keeps_them(workspace):
    _, patches, tree = workspace
    sync(workspace)
    commit(tree, "mini/__init__.py", "VALUE = 3\n", "Local work")
    head = fork.git(tree, "rev-parse", "HEAD").stdout.strip()
    with pytest.raises(ForkToolError, match="forktool export"):
        sync(workspace)
    assert fork.git(tree, "rev-parse", "HEAD").stdout.strip() == head
    message = sync(workspace, force=True)
    backup = message.rsplit("branch ", 1)[1]
    assert fork.git(tree, "rev-parse", backup).stdout.strip() == head
    assert (tree / "mini" / "__init__.py").read_text() == "VALUE = 1\n"


def test_sync_applies_patches_appended_to_the_series(workspace):
    _, patches, tree = workspace
    sync(workspace)
    commit(tree, "mini/__init__.py", "VALUE = 2\n", "First")
    commit(tree, "mini/util.py", "def double(x):\n    return x * 2\n", "Second")
    fork.export(tree, patches)
    fork.git(tree, "reset", "-q", "--hard", "HEAD~1")
    assert "applied 1 new patches" in sync(workspace)
    assert "up to date" in sync(workspace)


def test_patch_that_does_not_apply_is_named_and_tree_left_clean(workspace):
    pins, patches, tree = workspace
    sync(workspace)
    commit(tree, "mini/__init__.py", "VALUE = 2\n", "Good")
    commit(tree, "mini/util.py", "def double(x):\n    return x << 1\n", "Bad")
    fork.export(tree, patches)
    # Make the second patch's context disagree with the base.
    bad = patches / "0002-Bad.patch"
    bad.write_text(
        bad.read_text()
        .replace("     return 2 * x", "     return 3 * x")
        .replace("-    return 2 * x", "-    return 3 * x")
    )
    shutil.rmtree(tree)
    with pytest.raises(ForkToolError) as excinfo:
        sync(workspace)
    assert "0002-Bad.patch" in str(excinfo.value)
    assert "mini/util.py" in str(excinfo.value)
    assert not (tree / ".git" / "rebase-apply").exists()
    assert fork.git(tree, "status", "--porcelain").stdout == ""
    assert fork.git(tree, "log", "-1", "--format=%s").stdout.strip() == "Good"


def test_series_rejects_orphan_and_missing_patches(workspace):
    _, patches, _ = workspace
    (patches / "0001-orphan.patch").write_text("")
    with pytest.raises(ForkToolError, match="not listed.*0001-orphan.patch"):
        read_series(patches)
    (patches / "series").write_text("0001-orphan.patch\n0002-gone.patch\n")
    with pytest.raises(ForkToolError, match="missing patch files: 0002-gone.patch"):
        read_series(patches)
