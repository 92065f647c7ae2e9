"""pre-commit hook by hook: each hook's verdict is its exit status, and the
hash-locked install (split from test_precommit.py)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from evidence.precommit_install import (
    LOCK,
    current_lock,
)
from evidence.precommit_runner import NO_FILES, Outcome, PreCommit, on_files
from forktool import lock
from forktool.errors import ForkToolError
from forktool.pins import Pins


def fake_precommit(tmp_path: Path, status: int) -> PreCommit:
    """A stand-in `pre-commit` that prints its arguments and exits `status`."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    exe = bin_dir / "pre-commit"
    exe.write_text(
        f'#!/bin/sh\necho "ran $*"\necho "said on stderr" >&2\nexit {status}\n'
    )
    exe.chmod(0o755)
    return PreCommit(bin_dir, tmp_path, tmp_path / "config.json", tmp_path / "log")


@pytest.mark.parametrize("status, verdict", [(0, "PASS"), (1, "FAIL")])
def test_a_hooks_verdict_is_the_exit_status_of_its_run(tmp_path, status, verdict):
    pre_commit = fake_precommit(tmp_path, status)
    hook = {"id": "ruff-check", "alias": "ruff-lint"}

    outcome = pre_commit.run_hook(hook, "--files", "a.py")

    assert (outcome.hook, outcome.status) == ("ruff-check (ruff-lint)", verdict)
    said = f"ran run ruff-lint --color=never --config {pre_commit.config} --files a.py"
    assert outcome.detail == ("" if status == 0 else f"{said}\nsaid on stderr")
    log = pre_commit.log.read_text()
    assert log.startswith("$ ") and said in log  # every run's output is kept


def test_pre_commit_failing_is_an_error_not_a_failed_hook(tmp_path):
    pre_commit = fake_precommit(tmp_path, 3)

    with pytest.raises(
        ForkToolError, match=r"(?s)exit status 3.*said on stderr.*pre-commit.log"
    ):
        pre_commit.run_hook({"id": "typos"}, "--files", "a.py")


def test_a_hook_with_no_files_to_check_is_skipped_without_running(tmp_path):
    pre_commit = fake_precommit(tmp_path, 1)
    tags = {"a.py": {"file", "text", "python"}}
    markdown = {"id": "markdownlint-cli2", "types": ["markdown"]}

    skipped = on_files(pre_commit, {}, markdown, ["a.py"], tags)

    assert skipped == Outcome("markdownlint-cli2", "SKIPPED", NO_FILES)
    assert not pre_commit.log.exists()
    always = {"id": "check-filenames", "files": "^none$", "always_run": True}
    assert on_files(pre_commit, {}, always, ["a.py"], tags).status == "FAIL"


def test_the_committed_lock_pins_vllms_precommit_with_hashes():
    text = LOCK.read_text()
    pins = Pins.load()

    assert current_lock("pre-commit", pins) == LOCK
    version = lock.packages(text)["pre-commit"]
    assert current_lock(f"pre-commit=={version}", pins) == LOCK
    # Every package, with its hashes: `uv pip sync --require-hashes` installs it.
    assert "--hash=sha256:" in text
    for name in ("pre-commit", "pyyaml", "identify", "virtualenv"):
        assert name in lock.packages(text)


def test_another_precommit_version_or_python_is_refused_with_the_command(tmp_path):
    pins = Pins.load()
    copy_ = tmp_path / "precommit.lock"
    copy_.write_text(LOCK.read_text())

    with pytest.raises(ForkToolError, match="asks for pre-commit 9.9.9") as refused:
        current_lock("pre-commit==9.9.9", pins, copy_)
    assert "python3 -m evidence.precommit_install" in str(refused.value)
    with pytest.raises(ForkToolError, match="another Python or platform"):
        current_lock("pre-commit", replace(pins, python="3.12"), copy_)
    with pytest.raises(ForkToolError, match="is missing"):
        current_lock("pre-commit", pins, tmp_path / "absent.lock")
