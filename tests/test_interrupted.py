"""A sync or export stopped part way (Ctrl-C in `git am`, a kill while the
fork moves) leaves the fork as it was or as the command made it."""

from __future__ import annotations

import shutil

import pytest
from fork_fixture import (
    PERSON,
    THREE,
    commit,
    series_of,
    subjects,
    sync,
)

from forktool import journal
from forktool.errors import ForkToolError
from forktool.export import export
from forktool.git import git


def _interrupt_third_am(monkeypatch):
    """Ctrl-C inside the am of the third patch, after it began its file."""
    real = git

    def interrupted(repo, *args, **kwargs):
        if args[:1] == ("am",) and args[-1].endswith("0003-Core-Third.patch"):
            (repo / "mini/extra.py").write_text("EXTRA =")
            real(repo, *args, check=False)  # stops: the file is in the way
            raise KeyboardInterrupt
        return real(repo, *args, **kwargs)

    monkeypatch.setattr("forktool.am.git", interrupted)
    return lambda: monkeypatch.setattr("forktool.am.git", real)


def test_a_sync_stopped_in_git_am_leaves_the_fork_as_it_was(workspace, monkeypatch):
    _, patches, tree = workspace
    series_of(workspace, *THREE)
    commit(tree, "LOCAL.md", "x\n", "[Doc] Local")
    before = git(tree, "rev-parse", "HEAD").stdout
    restore = _interrupt_third_am(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        sync(workspace, force=True)
    restore()
    assert git(tree, "rev-parse", "HEAD").stdout == before
    assert git(tree, "status", "--porcelain").stdout == ""
    message = sync(workspace, force=True)
    print(message)
    assert message.startswith("undid an interrupted command")
    assert subjects(tree) == [c[2] for c in THREE]
    assert "[Doc] Local" in git(tree, "log", "--format=%s", "--branches=backup/").stdout
    assert not list(tree.parent.glob(".mini.*"))


def test_a_sync_killed_while_it_moves_the_fork_is_finished(workspace, monkeypatch):
    """Killed in the final `git reset --hard`, which leaves git's index.lock:
    the next command finishes the move, with nothing to remove by hand."""
    _, patches, tree = workspace
    series_of(workspace, *THREE)
    commit(tree, "LOCAL.md", "x\n", "[Doc] Local")

    def killed(fork_tree, move):
        (fork_tree / ".git" / "index.lock").write_text("")
        raise KeyboardInterrupt

    with monkeypatch.context() as patched, pytest.raises(KeyboardInterrupt):
        patched.setattr(journal, "_finish_sync", killed)
        sync(workspace, force=True)
    assert journal.journal_path(tree).exists()
    message = sync(workspace)
    assert message.startswith("finished an interrupted sync"), message
    assert subjects(tree) == [c[2] for c in THREE]
    assert not (tree / ".git" / "index.lock").exists()
    assert git(tree, "status", "--porcelain").stdout == ""
    assert "[Doc] Local" in git(tree, "log", "--format=%s", "--branches=backup/").stdout


def test_an_export_finished_later_marks_what_it_exported(workspace, monkeypatch):
    """Killed after its journal, then a commit in the fork: the next command
    finishes the export, and the later commit stays local work."""
    _, patches, tree = workspace
    series_of(workspace, *THREE)
    commit(tree, "FOUR.md", "4\n", "[Doc] Four")
    exported = git(tree, "rev-parse", "HEAD").stdout.strip()

    def killed(fork_tree, done):
        raise KeyboardInterrupt

    with monkeypatch.context() as patched, pytest.raises(KeyboardInterrupt):
        patched.setattr(journal, "_finish_export", killed)
        export(tree, patches)
    commit(tree, "FIVE.md", "5\n", "[Doc] Five")
    with pytest.raises(ForkToolError, match="Five.patch: only in the fork"):
        sync(workspace)
    assert (patches / "0004-Doc-Four.patch").exists()
    synced = git(tree, "rev-parse", "refs/forktool/synced").stdout.strip()
    assert synced == exported


def test_a_rebuild_applies_a_pure_rename(workspace):
    """A rename without a content change has no `index` line; the staging
    worktree must still check out the file it moves."""
    _, patches, tree = workspace
    sync(workspace)
    git(tree, "mv", "mini/util.py", "mini/helpers.py")
    git(tree, "commit", "-qm", f"[Misc] Rename\n\nSigned-off-by: {PERSON}")
    export(tree, patches)
    commit(tree, "LOCAL.md", "x\n", "[Doc] Local")
    assert "rebuilt" in sync(workspace, force=True)
    assert (tree / "mini" / "helpers.py").exists()
    assert not (tree / "mini" / "util.py").exists()


def test_a_first_sync_stopped_in_git_am_leaves_no_fork(workspace, monkeypatch):
    _, patches, tree = workspace
    series_of(workspace, *THREE)
    shutil.rmtree(tree)
    restore = _interrupt_third_am(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        sync(workspace)
    restore()
    assert not tree.exists()
    assert "materialised" in sync(workspace)
    assert subjects(tree) == [c[2] for c in THREE]
    assert [p.name for p in tree.parent.iterdir()] == ["mini"]
