"""The cache and the backups (issue 22, rows 10b, E13 and E11 of
workflow-trial-4): a relative cache is the clone's, `cache` names each path
once, and `backups --prune` removes what the series superseded."""

from __future__ import annotations

from pathlib import Path

from fork_fixture import (
    THREE,
    commit,
    series_of,
    sync,
    teammate_changes_second,
)

from forktool import backups, cache, venv
from forktool.__main__ import main
from forktool.cache import cache_dir
from forktool.git import git
from forktool.layout import LAYOUT, Layout
from forktool.pins import Pins

# --- 10b. A relative VLLM_FORK_CACHE -----------------------------------------


def clone_at(tmp_path: Path, monkeypatch) -> Path:
    """A clone (its .gitignore and patches/) with a fork in build/vllm; the tool's
    paths are this clone's."""
    clone = tmp_path / "clone"
    (clone / "build" / "vllm").mkdir(parents=True)
    (clone / "patches").mkdir()
    (clone / "patches" / "series").write_text("# empty\n")
    (clone / ".gitignore").write_text("build/\n")
    git(clone, "init", "-q")
    git(clone, "add", ".gitignore", "patches")
    git(clone, "commit", "-qm", "Series")
    git(clone / "build" / "vllm", "init", "-q")
    monkeypatch.setattr(cache, "LAYOUT", Layout(clone))
    return clone


def test_a_relative_cache_is_the_clones_root_from_any_folder(tmp_path, monkeypatch):
    clone = clone_at(tmp_path, monkeypatch)
    fork_tree = clone / "build" / "vllm"
    monkeypatch.setenv("VLLM_FORK_CACHE", "relcache")
    monkeypatch.chdir(fork_tree)  # `python3 ../../forktool sync` from the fork
    assert cache_dir() == clone / "relcache"
    venv.register_clone(clone)
    (cache_dir() / "downloads").mkdir()
    (cache_dir() / "downloads" / "base.tar.gz").write_text("sdist")
    assert list((clone / "relcache" / "clones").glob("*.json"))
    assert not (fork_tree / "relcache").exists()
    # Neither the fork nor the project's git status shows the cache.
    assert git(fork_tree, "status", "--porcelain").stdout == ""
    assert git(clone, "status", "--porcelain").stdout == ""
    monkeypatch.setenv("VLLM_FORK_CACHE", str(tmp_path / "elsewhere"))
    assert cache_dir() == tmp_path / "elsewhere"
    assert not (tmp_path / "elsewhere").exists()  # nothing written outside


def test_a_cache_pointed_at_tracked_files_does_not_hide_them(tmp_path, monkeypatch):
    clone = clone_at(tmp_path, monkeypatch)
    monkeypatch.setenv("VLLM_FORK_CACHE", "patches")
    assert cache_dir() == clone / "patches"
    assert not (clone / "patches" / ".gitignore").exists()  # it would hide them


# --- E13. `cache` lists each path once, only what is there --------------------


def test_cache_lists_each_path_once_and_only_what_is_there(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("VLLM_FORK_CACHE", str(tmp_path / "cache"))
    on_these_pins = Pins.load()
    others = [tmp_path / f"clone{i}" for i in range(3)]
    for other in others:  # clones on the same pins, as a team's are
        other.mkdir()
        (other / "pins.toml").write_text(LAYOUT.pins.read_text())
        venv.register_clone(other)
    downloads = cache_dir() / "downloads"
    downloads.mkdir(parents=True)
    sdist = downloads / on_these_pins.sdist.filename
    sdist.write_text("x")  # the wheel was never downloaded
    uv_build = cache_dir() / "tools" / on_these_pins.uv.replace("==", "-")
    uv_build.mkdir(parents=True)
    assert main(["cache"]) == 0
    out = capsys.readouterr().out
    print(out)
    assert out.count("in use by") == 1
    assert f"in use by {', '.join(map(str, sorted([*others, LAYOUT.root])))}:" in out
    assert out.count(str(sdist)) == 1 and out.count(str(uv_build)) == 1
    assert on_these_pins.wheel.filename not in out
    assert "nothing stale" in out
    assert venv.stale(on_these_pins) == [] and sdist.exists() and uv_build.exists()


# --- E11. `backups --prune` after a teammate's change -----------------------

LOCAL_WORK = ("mini/local.py", "LOCAL = 1\n", "[Core] Local")


def test_the_backup_a_teammates_change_leaves_is_pruned(workspace):
    _, patches, tree = workspace
    series_of(workspace, *THREE)
    teammate_changes_second(workspace)  # pushed; I pull
    print(sync(workspace))  # backs up my fork: its old patch 2 is in no fork
    (backup,) = backups.backups(tree, patches)
    assert backup.lacking == [] and backup.superseded == ["[Core] Second"]
    listed = backups.report(tree, False, patches)
    print(listed)
    assert ": 3 commits, 1 not in the fork\n" in listed
    assert "      [Core] Second  (a version committed in patches/)" in listed
    assert "deletes the 1 whose patches are all in the fork or in" in listed
    pruned = backups.report(tree, True, patches)
    print(pruned)
    assert "deleted 1 backup branches" in pruned and "kept" not in pruned
    assert backups.backups(tree, patches) == []


def test_a_backup_holding_unexported_work_is_kept(workspace):
    _, patches, tree = workspace
    series_of(workspace, *THREE)
    commit(tree, *LOCAL_WORK)  # never exported
    teammate_changes_second(workspace)
    print(sync(workspace, force=True))
    (backup,) = backups.backups(tree, patches)
    assert backup.lacking == ["[Core] Local"]
    assert backup.superseded == ["[Core] Second"]
    listed = backups.report(tree, False, patches)
    print(listed)
    assert "[Core] Local  (local work, saved nowhere else)" in listed
    assert "      [Core] Second  (a version committed in patches/)" in listed
    pruned = backups.report(tree, True, patches)
    assert "deleted 0 backup branches" in pruned and "kept 1" in pruned
    assert [b.name for b in backups.backups(tree, patches)] == [backup.name]
