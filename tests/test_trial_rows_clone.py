"""Rows of workflow-trial-4 about the clone (its cache, worktrees, paths and
git's housekeeping); the table of rows is in tests/test_trial_rows.py."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

from fork_fixture import (
    THREE,
    commit,
    commit_series,
    fresh_clone,
    refusal,
    series_of,
    subjects,
    sync,
    trees,
)

from forktool import pins
from forktool.export import export
from forktool.git import NEUTRAL, git
from forktool.layout import REPO


def loose_objects_in_17(count: int) -> list[str]:
    """File contents whose blobs all land in .git/objects/17/: `git gc --auto`
    packs once that folder holds more than gc.auto / 256 (6700 / 256) objects."""
    found: list[str] = []
    i = 0
    while len(found) < count:
        data = f"{i}\n".encode()
        if hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()[:2] == "17":
            found.append(data.decode())
        i += 1
    return found


def test_row_7b_a_truncated_cached_sdist_is_refused_then_fetched_again(
    workspace, monkeypatch, tmp_path, capsys
):
    good_pins, patches, tree = workspace
    series_of(workspace, *THREE)
    cached = Path(os.environ["VLLM_FORK_CACHE"]) / "downloads" / "mini-0.1.tar.gz"
    served = tmp_path / "index" / cached.name
    served.parent.mkdir()
    shutil.copy(cached, served)
    index = {cached.name: (served.as_uri(), good_pins.sdist.sha256)}
    monkeypatch.setattr(pins, "_index", lambda p: index)  # no network
    cached.write_bytes(served.read_bytes()[: served.stat().st_size // 2])
    shutil.rmtree(tree.parent)  # a fresh clone
    message = str(refusal(lambda: sync(workspace)))
    assert f"sha256 mismatch for {cached}" in message
    assert "Nothing was unpacked." in message
    assert "The file is damaged" in message and f"Delete {cached}" in message
    assert not tree.exists() and not tree.parent.exists()
    # Followed: delete it, run again.
    cached.unlink()
    capsys.readouterr()
    assert "base + 3 patches" in sync(workspace)
    assert "downloading mini-0.1.tar.gz" in capsys.readouterr().out
    assert cached.read_bytes() == served.read_bytes()
    assert subjects(tree) == [c[2] for c in THREE]


def test_row_9_each_git_worktree_has_its_own_fork(workspace):
    pins_, patches, tree = workspace
    series_of(workspace, *THREE)
    repo = patches.parent
    wt = repo.parent / "wt"
    git(repo, "worktree", "add", "-q", "-b", "wt-branch", str(wt))
    wt_fork = wt / "build" / "mini"
    on_wt = (pins_, wt / "patches", wt_fork)
    assert "base + 3 patches" in sync(on_wt)
    commit(wt_fork, "DOC.md", "from the worktree\n", "[Doc] From the worktree")
    export(wt_fork, wt / "patches")
    commit_series(wt / "patches")
    # The main clone's fork and series are untouched.
    assert subjects(tree) == [c[2] for c in THREE]
    assert "is what export writes (3 patches)" in export(tree, patches, check=True)
    git(repo, "merge", "-q", "wt-branch")
    message = sync(workspace)
    print(message)
    assert "applied 1 patches" in message
    assert "0004-Doc-From-the-worktree.patch" in message
    assert trees(tree) == trees(wt_fork)
    assert "is what export writes (4 patches)" in export(tree, patches, check=True)


def test_row_10a_run_by_path_from_inside_the_fork_uses_the_clones_paths(
    tmp_path, monkeypatch
):
    """A copy of the tool is a clone of its own: every path it uses is there."""
    monkeypatch.setenv("VLLM_FORK_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("PYTHONPATH", raising=False)
    clone = tmp_path / "clone"
    shutil.copytree(REPO / "forktool", clone / "forktool",
                    ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    shutil.copy(REPO / "pins.toml", clone)
    (clone / "patches").mkdir()
    (clone / "patches" / "series").write_text("# empty\n")
    inside = clone / "build" / "vllm" / "vllm"
    inside.mkdir(parents=True)
    git(clone, "init", "-q")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, *args], cwd=inside,
                              capture_output=True, text=True)  # fmt: skip

    by_module = run("-m", "forktool", "export", "--check")
    assert by_module.returncode == 1 and "No module named forktool" in by_module.stderr
    by_path = run("../../../forktool", "export", "--check")
    print(by_path.stderr)
    assert by_path.returncode == 1 and "Traceback" not in by_path.stderr
    fork_path = clone / "build" / "vllm"
    assert (
        by_path.stderr == f"error: {fork_path} is not a fork tree; run `sync` first\n"
    )
    assert (clone / "build" / "forktool.lock").exists()  # the clone's, not REPO's
    assert "usage:" in run(str(clone / "forktool"), "--help").stdout
    assert not (tmp_path / "cache").exists()


def test_row_e12_the_tools_git_commands_start_no_gc(workspace, monkeypatch):
    _, patches, tree = workspace
    assert "gc.auto=0" in NEUTRAL and "maintenance.auto=false" in NEUTRAL
    sync(workspace)
    for i, text in enumerate(loose_objects_in_17(30)):
        (tree / f"mini/loose{i}.txt").write_text(text)
    git(tree, "add", "mini")
    git(tree, "commit", "-qsm", "[Core] Many objects")
    export(tree, patches)
    commit_series(patches)
    # A gc would run in the foreground, and pack every loose object.
    monkeypatch.setenv("GIT_CONFIG_PARAMETERS", "'gc.autodetach'='false'")
    other = fresh_clone(workspace)
    counts = dict(
        line.split(": ")
        for line in git(other, "count-objects", "-v").stdout.splitlines()
    )
    assert counts["packs"] == "0" and int(counts["count"]) > 30
    assert not (other / ".git" / "gc.pid").exists()
