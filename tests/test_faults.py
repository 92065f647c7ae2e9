"""File-system faults end in one error line naming the path and the cause, and
leave patches/ and the fork as they were. Simulated by raising OSError where
the tool writes, or a git killed by a signal: chmod does not stop root."""

import errno
import os
import pathlib
import tarfile
from pathlib import Path

import pytest
from evidence_fixture import programs
from fork_fixture import THREE, clean, commit, git, head

from forktool import commands, venv
from forktool.__main__ import main
from forktool.commands import Command
from forktool.pins import cache_dir
from forktool.process import ForkToolError


def as_command(monkeypatch, run) -> None:
    """`python3 -m forktool sync` runs `run()`, without the clone's lock."""
    command = Command("d", lambda pins, args: print(run()) or 0, locks=False)
    monkeypatch.setattr(commands, "command", lambda name: command)


def one_error_line(capsys, *said: str, kind: str = "error") -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    assert err.count("\n") == 1 and err.startswith(f"{kind}: "), err
    assert all(s in err for s in said), err
    return err


def read_only(monkeypatch, root: Path) -> None:
    """Writing under `root` (a file or a folder) fails: a read-only file system."""

    def refuse(real):
        def write(self, *args, **kwargs):
            if self == root or root in self.parents:
                raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(self))
            return real(self, *args, **kwargs)

        return write

    for method in ("mkdir", "write_text", "write_bytes", "touch"):
        monkeypatch.setattr(pathlib.Path, method, refuse(getattr(pathlib.Path, method)))


@pytest.mark.parametrize("code", [errno.EROFS, errno.ENOSPC, errno.EACCES])
def test_a_cache_that_cannot_note_the_clone_warns_unless_it_knows_the_clone(
    tmp_path, monkeypatch, capsys, code
):
    monkeypatch.setenv("VLLM_FORK_CACHE", str(tmp_path / "cache"))
    real, known = pathlib.Path.write_text, tmp_path / "known"
    venv.register_clone(known)
    entries = sorted((cache_dir() / "clones").iterdir())

    def fails(self, text, *args, **kwargs):
        real(self, text[:5], *args, **kwargs)  # what fitted
        raise OSError(code, os.strerror(code), str(self))

    with monkeypatch.context() as readonly:
        read_only(readonly, cache_dir())
        venv.register_clone(known)  # already registered: nothing to write
        assert capsys.readouterr() == ("", "")
    monkeypatch.setattr(pathlib.Path, "write_text", fails)
    venv.register_clone(tmp_path / "clone")  # no exception: sync goes on
    clones = str(cache_dir() / "clones")
    one_error_line(capsys, clones, os.strerror(code), kind="warning")
    assert sorted((cache_dir() / "clones").iterdir()) == entries


HINTS = {errno.EROFS: "read-only", errno.EACCES: "permission",
         errno.EPERM: "permission", errno.ENOSPC: "free some space",
         errno.EDQUOT: "quota", errno.EFBIG: "ulimit -f",
         errno.EEXIST: "dangling symbolic link"}  # fmt: skip


@pytest.mark.parametrize("code, path", [*((c, "build/forktool.lock") for c in HINTS),
                                        (errno.ENOSPC, None)])  # fmt: skip
def test_an_os_error_is_one_line_with_the_path_its_cause_and_what_to_do(
    tmp_path, monkeypatch, capsys, code, path
):
    def fail():
        raise OSError(code, os.strerror(code), *([tmp_path / path] if path else []))

    as_command(monkeypatch, fail)
    assert main(["sync"]) == 1
    where = f"{tmp_path / path}: " if path else ""
    one_error_line(capsys, f"error: {where}{os.strerror(code)} (", HINTS[code])


def test_a_full_disk_during_the_first_unpack_leaves_nothing(ws, monkeypatch, capsys):
    before = ws.snapshot()

    def disk_full(self, path, *args, **kwargs):
        part = Path(path) / "mini-0.1" / "mini" / "__init__.py"
        part.parent.mkdir(parents=True)
        part.write_text("VAL")  # what fitted
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(part))

    with monkeypatch.context() as full:
        full.setattr(tarfile.TarFile, "extractall", disk_full)
        as_command(full, ws.sync)
        assert main(["sync"]) == 1
    one_error_line(capsys, "mini/__init__.py: No space left on device (free some")
    assert not ws.tree.exists() and list(ws.tree.parent.iterdir()) == []
    assert ws.snapshot() == before
    assert "materialised" in ws.sync()  # space again: the fork is made


@pytest.mark.parametrize("dangling", [True, False])
def test_a_dangling_or_read_only_build_is_one_error_line(
    ws, monkeypatch, capsys, dangling
):
    before, build = ws.snapshot(), ws.tree.parent
    if dangling:
        build.symlink_to(build.parent / "gone")
    else:
        read_only(monkeypatch, build)
    as_command(monkeypatch, ws.sync)
    assert main(["sync"]) == 1
    said = ["File exists (", "dangling symbolic link"] if dangling else ["Read-only"]
    one_error_line(capsys, f"{build}: {said[0]}", *said[1:])
    assert ws.snapshot() == before and not build.exists()
    assert build.is_symlink() == dangling


def test_git_killed_by_a_file_size_limit_says_so_and_export_changes_nothing(
    ws, tmp_path, monkeypatch, capsys
):
    ws.series_of(*THREE)
    commit(ws.tree, "mini/local.py", "LOCAL = 1\n", "[Core] Local")
    before = ws.snapshot(), head(ws.tree), clean(ws.tree)
    # A git on PATH that a file size limit kills (SIGXFSZ) in `git status`.
    real = git(None, "--exec-path").stdout.strip() + "/git"
    script = f'case " $* " in *" status "*) kill -s XFSZ $$;; esac\nexec {real} "$@"'
    bin = programs(tmp_path / "bin", git=script)
    with monkeypatch.context() as limited:
        limited.setenv("PATH", f"{bin}{os.pathsep}{os.environ['PATH']}")
        as_command(limited, ws.export)
        assert main(["sync"]) == 1
        one_error_line(capsys, "killed by SIGXFSZ", "a file size limit (ulimit -f)")
        with pytest.raises(ForkToolError) as failed:
            git(tmp_path, "status", "--porcelain")
        said = str(failed.value)
        assert said.startswith("`git status --porcelain` failed (killed by SIGXFSZ: a ")
        assert "a file size limit (ulimit -f)" in said and f") in {tmp_path}" in said
        assert "it left" not in said
        # A git killed while it held the index's lock leaves the lock behind.
        (tmp_path / ".git").mkdir()
        (lock := tmp_path / ".git" / "index.lock").write_text("")
        with pytest.raises(ForkToolError, match=f"; it left {lock}: delete it once"):
            git(tmp_path, "status", "--porcelain")
    assert (ws.snapshot(), head(ws.tree), clean(ws.tree)) == before
