"""The clone's lock: a second command waits, then refuses naming the first;
a holder that ended without releasing it is taken over, and says so."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from forktool import clone_lock, journal
from forktool.errors import ForkToolError
from forktool.layout import REPO

HOLD = """
import sys, time
from pathlib import Path
from forktool import clone_lock
with clone_lock.hold(Path(sys.argv[1]), "sync --force"):
    print("held", flush=True)
    time.sleep(float(sys.argv[2]))
"""


def holder(lock, seconds: float) -> subprocess.Popen:
    process = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(lock), str(seconds)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    assert process.stdout.readline() == "held\n"
    return process


def test_a_second_command_waits_then_refuses_naming_the_first(tmp_path):
    lock = tmp_path / "build" / "forktool.lock"
    first = holder(lock, 30)
    try:
        start = time.monotonic()
        with pytest.raises(ForkToolError) as refused:
            with clone_lock.hold(lock, "export", wait=0.5):
                raise AssertionError("took a held lock")
        assert time.monotonic() - start >= 0.5
        said = str(refused.value)
        assert f"`python3 -m forktool sync --force` (pid {first.pid})" in said
        assert "changed nothing" in said
    finally:
        first.kill()
        first.wait()


def test_a_second_command_gets_the_lock_once_the_first_ends(tmp_path):
    lock = tmp_path / "build" / "forktool.lock"
    first = holder(lock, 0.5)
    with clone_lock.hold(lock, "export", wait=10):
        assert first.wait(timeout=10) == 0  # it ended its block first
    assert lock.read_text() == ""  # released: nobody named


def test_a_killed_holders_lock_is_taken_over_and_said(tmp_path, capsys):
    lock = tmp_path / "build" / "forktool.lock"
    first = holder(lock, 30)
    first.kill()
    first.wait()
    fork = tmp_path / "build" / "vllm"  # no fork: nothing to recover
    with journal.exclusive(lock, fork, "export"):
        assert f'"pid": {first.pid}' not in lock.read_text()
    said = capsys.readouterr().err
    assert f"sync --force` (pid {first.pid}) ended without finishing" in said
