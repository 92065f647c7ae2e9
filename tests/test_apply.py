"""The PR kit's apply-to-vllm.sh on synthetic upstream clones: the release
itself, a main where the touched file moved and changed elsewhere (3-way
merges apply it), and a main where a hunk conflicts."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

import pytest

from evidence.pr.kit import write_kit
from forktool.git import git, identity

AUTHOR = "Test Project <test-project@noreply.invalid>"
USER = "Jane Doe <jane@example.com>"
TESTS = ("tests/test_core.py", "-k", "zero or more")
BRANCH = "kv-cache-zeroing-pp"
HELPERS = [f"def helper_{i}():\n    return {i}\n" for i in range(8)]
CORE = "\n\n".join([*HELPERS[:4], "def zeroing():\n    return False\n", *HELPERS[4:]])
BASE = {"pkg/core.py": CORE, "pkg/other.py": "X = 1\n"}


def commit(repo: Path, files: Mapping[str, str | None], message: str) -> None:
    """Write (or, for None, delete) `files` and commit them."""
    for name, text in files.items():
        if text is None:
            git(repo, "rm", "-q", name)
            continue
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message, env=identity(AUTHOR))


def new_repo(path: Path, tag: str) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q", "--initial-branch=main")
    commit(path, BASE, "release")
    git(path, "tag", tag)
    return path


@pytest.fixture
def kit(tmp_path) -> Path:
    """The kit of a two-patch series that edits pkg/core.py twice."""
    fork = new_repo(tmp_path / "fork", "base")
    core = BASE["pkg/core.py"].replace("return False", "return True")
    commit(fork, {"pkg/core.py": core}, "[Core] Keep zeroing")
    more = {"pkg/core.py": core + "\n\ndef more():\n    return 2\n"}  # at the end
    commit(fork, {**more, "tests/test_core.py": "def test(): pass\n"}, "[Test] More")
    out = tmp_path / "kit"
    title = "[Core] Zeroing"
    write_kit(
        fork, out, {"description.md": "d"}, title, "HEAD", AUTHOR, "v0.1", BRANCH, TESTS
    )
    return out


def run_script(kit: Path, clone: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, **identity(USER), "GIT_CONFIG_GLOBAL": os.devnull}
    return subprocess.run(
        ["bash", str(kit / "apply-to-vllm.sh"), *args],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
    )


def state(clone: Path) -> str:
    return "".join(
        git(clone, *args).stdout
        for args in (("rev-parse", "HEAD"), ("branch", "-a"), ("status", "--porcelain"))
    )


def test_applies_as_is_on_the_release_and_names_the_tests(kit, tmp_path):
    upstream = new_repo(tmp_path / "vllm", "v0.1")
    commit(upstream, {"pkg/core.py": "ZERO = None\n"}, "later work on main")

    done = run_script(kit, upstream)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0001-Core-Keep-zeroing.patch: applied as is" in done.stdout
    assert "0002-Test-More.patch: applied as is" in done.stdout
    assert f"applied 2 patches on the new branch {BRANCH} (from v0.1)" in done.stdout
    assert "python -m pytest tests/test_core.py -k 'zero or more'" in done.stdout
    assert git(upstream, "log", "-1", "--format=%s").stdout.strip() == "[Test] More"
    assert "return True" in (upstream / "pkg/core.py").read_text()


def test_three_way_merges_apply_it_where_the_file_moved(kit, tmp_path):
    upstream = new_repo(tmp_path / "vllm", "v0.1")
    moved = "# Moved.\n" + BASE["pkg/core.py"].replace("return 3\n", "return 30\n")
    commit(
        upstream,
        {"pkg/core.py": None, "pkg/engine/core.py": moved},
        "main moves and edits core.py",
    )
    done = run_script(kit, upstream, "main")
    print(done.stdout)  # the closing note shows this output
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0001-Core-Keep-zeroing.patch: applied with a 3-way merge" in done.stdout
    assert "0002-Test-More.patch: applied with a 3-way merge" in done.stdout
    assert "The series' regression tests" in done.stdout
    core = (upstream / "pkg/engine/core.py").read_text()
    assert core.startswith("# Moved.\n") and "return 30\n" in core
    assert "return True" in core and "def more():" in core
    assert not (upstream / "pkg/core.py").exists()
    assert git(upstream, "status", "--porcelain").stdout == ""
    assert git(upstream, "rev-parse", "--abbrev-ref", "HEAD").stdout.strip() == BRANCH
    assert git(upstream, "log", "-1", "--format=%s", "main").stdout.startswith("main")


def test_a_later_patch_merges_from_the_blobs_the_kit_carries(kit, tmp_path):
    # The first patch applies as is; the second's context changed at main,
    # so its merge needs the file as the first patch left it in the fork,
    # which only the kit's preimages.pack has.
    upstream = new_repo(tmp_path / "vllm", "v0.1")
    core = BASE["pkg/core.py"].replace("\ndef helper_7", "# Seven.\ndef helper_7")
    commit(upstream, {"pkg/core.py": core}, "main edits the last helper")
    done = run_script(kit, upstream, "main")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0001-Core-Keep-zeroing.patch: applied as is" in done.stdout
    assert "0002-Test-More.patch: applied with a 3-way merge" in done.stdout
    core = (upstream / "pkg/core.py").read_text()
    assert "# Seven.\n" in core and "return True" in core and "def more" in core


def conflicting(tmp_path: Path) -> Path:
    upstream = new_repo(tmp_path / "vllm", "v0.1")
    core = BASE["pkg/core.py"].replace("return False", "return None")
    commit(upstream, {"pkg/core.py": core}, "main changes the same line")
    git(upstream, "checkout", "-q", "-b", "mine")
    return upstream


def test_a_conflict_stops_with_the_commands_to_abort(kit, tmp_path):
    upstream = conflicting(tmp_path)
    before = state(upstream)
    stopped = run_script(kit, upstream, "main")
    assert stopped.returncode == 1
    out = stopped.stdout
    assert "0001-Core-Keep-zeroing.patch: stopped" in out
    assert "conflicting files: pkg/core.py" in out
    assert "not applied yet: 2 of 2 patches" in out
    assert "git am --continue" in out
    abort = f"git am --abort && git checkout -q mine && git branch -D {BRANCH}"
    assert abort in out
    assert git(upstream, "rev-parse", "--abbrev-ref", "HEAD").stdout.strip() == BRANCH

    subprocess.run(abort, shell=True, cwd=upstream, check=True, capture_output=True)
    assert state(upstream) == before


def test_after_a_conflict_git_am_continue_applies_the_rest(kit, tmp_path):
    upstream = conflicting(tmp_path)
    assert run_script(kit, upstream, "main").returncode == 1
    resolved = BASE["pkg/core.py"].replace("return False", "return True")
    (upstream / "pkg/core.py").write_text(resolved)
    git(upstream, "add", "pkg/core.py")
    git(upstream, "am", "--continue", env=identity(USER))
    subjects = git(upstream, "log", "-2", "--format=%s").stdout.splitlines()
    assert subjects == ["[Test] More", "[Core] Keep zeroing"]
    assert "def more():" in (upstream / "pkg/core.py").read_text()


@pytest.mark.parametrize("busy", ["dirty", "am"])
def test_refuses_a_busy_clone_and_changes_nothing(kit, tmp_path, busy):
    upstream = new_repo(tmp_path / "vllm", "v0.1")
    if busy == "dirty":
        (upstream / "pkg/other.py").write_text("X = 2\n")
    else:
        (upstream / ".git" / "rebase-apply").mkdir()
    before = state(upstream)
    refused = run_script(kit, upstream)
    assert refused.returncode == 1
    assert "apply-to-vllm:" in refused.stderr
    assert state(upstream) == before
