"""The PR kit's apply-to-vllm.sh on synthetic upstream clones, conflicts too."""

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from evidence_fixture import NEUTRAL, commit, new_repo

from evidence.pr.kit import write_kit
from forktool.process import git, identity

USER = "Jane Doe <jane@example.com>"
TESTS = ("tests/test_core.py", "-k", "zero or more")
BRANCH = "kv-cache-zeroing-pp"
HELPERS = [f"def helper_{i}():\n    return {i}\n" for i in range(8)]
CORE = "\n\n".join([*HELPERS[:4], "def zeroing():\n    return False\n", *HELPERS[4:]])
BASE = {"pkg/core.py": CORE, "pkg/other.py": "X = 1\n"}


def release(path: Path, tag: str) -> Path:
    """A repository whose one commit, BASE, is tagged `tag`."""
    commit(new_repo(path), BASE, "release", tag)
    return path


@pytest.fixture
def kit(tmp_path) -> Path:
    """The kit of a two-patch series that edits pkg/core.py twice."""
    fork = release(tmp_path / "fork", "base")
    core = CORE.replace("return False", "return True")
    commit(fork, {"pkg/core.py": core}, "[Core] Keep zeroing")
    more = {"pkg/core.py": core + "\n\ndef more():\n    return 2\n"}  # at the end
    commit(fork, {**more, "tests/test_core.py": "def test(): pass\n"}, "[Test] More")
    write_kit(fork, kit := tmp_path / "kit", {"description.md": "d"}, "[Core] Zeroing",
              "HEAD", NEUTRAL, "v0.1", BRANCH, TESTS)  # fmt: skip
    return kit


def run_script(kit: Path, clone: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, **identity(USER), "GIT_CONFIG_GLOBAL": os.devnull}
    script = ["bash", str(kit / "apply-to-vllm.sh"), *args]
    return subprocess.run(script, cwd=clone, env=env, capture_output=True, text=True)


def state(clone: Path) -> str:
    what = (("rev-parse", "HEAD"), ("branch", "-a"), ("status", "--porcelain"))
    return "".join(git(clone, *args).stdout for args in what)


def on(clone: Path, *args: str) -> str:
    return git(clone, *args).stdout.strip()


AS_IS, MERGED = "applied as is", "applied with a 3-way merge"
MOVED = "# Moved.\n" + CORE.replace("return 3\n", "return 30\n")
# main's change, the ref, how each patch applies, the changed file, what it keeps
MAIN: dict[str, Any] = {
    "the release": ({"pkg/core.py": "ZERO = None\n"}, "v0.1", (AS_IS, AS_IS),
                    "pkg/core.py", []),
    "core.py moved and changed": (
        {"pkg/engine/core.py": MOVED},
        "main", (MERGED, MERGED), "pkg/engine/core.py", ["return 30\n"]),
    # Patch 2's merge needs patch 1's result, which only preimages.pack has.
    "the last helper changed": (
        {"pkg/core.py": CORE.replace("\ndef helper_7", "# Seven.\ndef helper_7")},
        "main", (AS_IS, MERGED), "pkg/core.py", ["# Seven.\n"]),
}  # fmt: skip


@pytest.mark.parametrize("main", MAIN)
def test_the_series_applies_on_a_new_branch_and_names_its_tests(kit, tmp_path, main):
    change, ref, how, path, kept = MAIN[main]
    upstream = release(tmp_path / "vllm", "v0.1")
    if path != "pkg/core.py":  # main moved it there
        git(upstream, "rm", "-q", "pkg/core.py")
    commit(upstream, change, "later work on main")
    done = run_script(kit, upstream, *(["main"] if ref == "main" else []))
    print(done.stdout)  # the closing note shows this output
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"0001-Core-Keep-zeroing.patch: {how[0]}\n" in done.stdout
    assert f"0002-Test-More.patch: {how[1]}\n" in done.stdout
    assert f"applied 2 patches on the new branch {BRANCH} (from {ref})" in done.stdout
    assert "The series' regression tests" in done.stdout
    assert "python -m pytest tests/test_core.py -k 'zero or more'" in done.stdout
    core = (upstream / path).read_text()
    assert "return True" in core and "def more():" in core
    assert all(text in core for text in kept)
    on_main = core.startswith(change[path].splitlines()[0])  # main's, not v0.1's
    assert on_main == (ref == "main")
    assert (upstream / "pkg/core.py").exists() == (path == "pkg/core.py")
    assert git(upstream, "status", "--porcelain").stdout == ""
    assert on(upstream, "rev-parse", "--abbrev-ref", "HEAD") == BRANCH
    assert on(upstream, "log", "-1", "--format=%s") == "[Test] More"
    assert on(upstream, "log", "-1", "--format=%s", "main").startswith("later")


@pytest.mark.parametrize("then", ["git am --abort", "git am --continue"])
def test_a_conflict_stops_with_the_commands_to_abort_or_continue(kit, tmp_path, then):
    """Where main changed patch 1's line: both ways out work."""
    upstream = release(tmp_path / "vllm", "v0.1")
    core = CORE.replace("return False", "return None")
    commit(upstream, {"pkg/core.py": core}, "main changes the same line")
    git(upstream, "checkout", "-q", "-b", "mine")
    before = state(upstream)
    done = run_script(kit, upstream, "main")
    assert done.returncode == 1
    abort = f"git am --abort && git checkout -q mine && git branch -D {BRANCH}"
    said = ["0001-Core-Keep-zeroing.patch: stopped", "conflicting files: pkg/core.py",
            "not applied yet: 2 of 2 patches", "git am --continue", abort]  # fmt: skip
    assert all(line in done.stdout for line in said), done.stdout
    assert on(upstream, "rev-parse", "--abbrev-ref", "HEAD") == BRANCH
    if then == "git am --abort":
        subprocess.run(abort, shell=True, cwd=upstream, check=True, capture_output=True)
        assert state(upstream) == before
        return
    (upstream / "pkg/core.py").write_text(CORE.replace("return False", "return True"))
    git(upstream, "add", "pkg/core.py")
    git(upstream, "am", "--continue", env=identity(USER))
    subjects = on(upstream, "log", "-2", "--format=%s").splitlines()
    assert subjects == ["[Test] More", "[Core] Keep zeroing"]
    assert "def more():" in (upstream / "pkg/core.py").read_text()


@pytest.mark.parametrize("busy", ["dirty", "am"])
def test_refuses_a_busy_clone_and_changes_nothing(kit, tmp_path, busy):
    upstream = release(tmp_path / "vllm", "v0.1")
    if busy == "dirty":
        (upstream / "pkg/other.py").write_text("X = 2\n")
    else:
        (upstream / ".git" / "rebase-apply").mkdir()
    before, refused = state(upstream), run_script(kit, upstream)
    assert refused.returncode == 1 and "apply-to-vllm:" in refused.stderr
    assert state(upstream) == before
