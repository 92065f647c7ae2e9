"""Commands stopped part way, and a second command meeting the clone's lock."""

import shutil
import subprocess
import sys
import time

import pytest
from fork_fixture import SUBJECTS, THREE, clean, commit, git, head, subjects

from forktool import journal, process
from forktool.layout import REPO
from forktool.process import ForkToolError

BACKED_UP = ["log", "--format=%s", "--branches=backup/"]


def interrupt(*args):
    raise KeyboardInterrupt


@pytest.mark.parametrize("fork", ["an existing fork", "no fork yet"])
def test_a_sync_stopped_in_git_am_leaves_the_fork_as_it_was(ws, monkeypatch, fork):
    ws.series_of(*THREE)
    if existing := fork == "an existing fork":
        commit(ws.tree, "LOCAL.md", "x\n", "[Doc] Local")
    else:
        shutil.rmtree(ws.tree)
    before = existing and head(ws.tree)

    def interrupted(repo, *args, **kwargs):
        """Ctrl-C inside the am of the third patch, after it began its file."""
        if args[:1] == ("am",) and args[-1].endswith("0003-Core-Third.patch"):
            (repo / "mini/extra.py").write_text("EXTRA =")
            git(repo, *args, check=False)  # stops: the file is in the way
            raise KeyboardInterrupt
        return git(repo, *args, **kwargs)

    with monkeypatch.context() as patched, pytest.raises(KeyboardInterrupt):
        patched.setattr("forktool.apply.git", interrupted)
        ws.sync(force=existing)
    if existing:
        assert head(ws.tree) == before and clean(ws.tree)
    else:
        assert not ws.tree.exists()
    print(message := ws.sync(force=existing))
    done = "undid an interrupted command" if existing else "materialised"
    assert message.startswith(done) and subjects(ws.tree) == SUBJECTS
    assert [p.name for p in ws.tree.parent.iterdir()] == ["mini"]
    assert ("[Doc] Local" in git(ws.tree, *BACKED_UP).stdout) == existing


def test_a_sync_or_export_killed_while_it_moves_the_fork_is_finished(ws, monkeypatch):
    """A sync killed in its final `git reset --hard` (index.lock left): finished."""
    ws.series_of(*THREE)
    commit(ws.tree, "LOCAL.md", "x\n", "[Doc] Local")

    def killed(fork_tree, move):
        (fork_tree / ".git" / "index.lock").write_text("")
        interrupt()

    with monkeypatch.context() as patched, pytest.raises(KeyboardInterrupt):
        patched.setattr(journal, "_finish", killed)
        ws.sync(force=True)
    assert journal.state_path(ws.tree, "journal").exists()
    assert (message := ws.sync()).startswith("finished an interrupted sync"), message
    assert subjects(ws.tree) == SUBJECTS
    assert not (ws.tree / ".git" / "index.lock").exists() and clean(ws.tree)
    assert "[Doc] Local" in git(ws.tree, *BACKED_UP).stdout
    # An export killed after its journal, then a commit: finished, that commit local.
    commit(ws.tree, "FOUR.md", "4\n", "[Doc] Four")
    exported = head(ws.tree)
    with monkeypatch.context() as patched, pytest.raises(KeyboardInterrupt):
        patched.setattr(journal, "_finish", interrupt)
        ws.export()
    commit(ws.tree, "FIVE.md", "5\n", "[Doc] Five")
    with pytest.raises(ForkToolError, match="Five.patch: only in the fork"):
        ws.sync()
    assert (ws.patches / "0004-Doc-Four.patch").exists()
    assert head(ws.tree, "refs/forktool/synced") == exported


HOLD = """import sys, time
from pathlib import Path
from forktool import process
with process.hold(Path(sys.argv[1]), "sync --force"):
    print("held", flush=True)
    time.sleep(float(sys.argv[2]))
"""


def holder(lock, seconds: float) -> subprocess.Popen:
    """A process holding `lock` for `seconds`, as `sync --force`."""
    command = [sys.executable, "-c", HOLD, str(lock), str(seconds)]
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, text=True)
    assert process.stdout and process.stdout.readline() == "held\n"
    return process


def test_a_second_command_refuses_or_takes_over_or_waits(tmp_path, capsys):
    first = holder(lock := tmp_path / "build" / "forktool.lock", 30)
    try:
        start = time.monotonic()
        with pytest.raises(ForkToolError) as refused:
            with process.hold(lock, "export", wait=0.5):
                raise AssertionError("took a held lock")
        assert time.monotonic() - start >= 0.5
        said = str(refused.value)
        assert f"`python3 -m forktool sync --force` (pid {first.pid})" in said
        assert "changed nothing" in said
    finally:
        first.kill()
        first.wait()
    fork = tmp_path / "build" / "vllm"  # no fork: nothing to recover
    with journal.exclusive(lock, fork, "export"):
        assert f'"pid": {first.pid}' not in lock.read_text()
    said = capsys.readouterr().err
    assert f"sync --force` (pid {first.pid}) ended without finishing" in said
    # A second command gets the lock once the first ends.
    first = holder(lock, 0.5)
    with process.hold(lock, "export", wait=10):
        assert first.wait(timeout=10) == 0  # it ended its block first
        with pytest.raises(RuntimeError, match="held already"):  # never nested
            with process.hold(lock, "export"):
                raise AssertionError("took a held lock again")
    assert lock.read_text() == ""  # released: nobody named
