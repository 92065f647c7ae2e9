"""The patch-queue workflow against a tiny synthetic base: no vLLM, no network."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from fork_fixture import (
    AUTHOR,
    PERSON,
    THREE,
    commit,
    commit_series,
    edit_series,
    make_pins,
    refused,
    series_of,
    snapshot,
    sync,
)

from forktool.errors import ForkToolError
from forktool.export import export
from forktool.git import git
from forktool.pins import Artifact
from forktool.series import read_series


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
    assert git(tree, "rev-list", "--count", "HEAD").stdout.strip() == "1"
    assert git(tree, "describe", "--tags").stdout.strip() == "base"
    tracked = git(tree, "ls-files").stdout.split()
    assert "mini/rocm_hip.py" in tracked and "PKG-INFO" not in tracked
    assert git(tree, "status", "--porcelain").stdout == ""
    # Ownership normalised: git accepts the tree without safe.directory.
    assert (tree / "mini" / "__init__.py").stat().st_uid != 1000
    head = git(tree, "rev-parse", "HEAD").stdout
    assert "up to date" in sync(workspace)
    assert git(tree, "rev-parse", "HEAD").stdout == head


def test_round_trip_is_byte_identical(workspace):
    _, patches, tree = workspace
    sync(workspace)
    commit(tree, "mini/__init__.py", "VALUE = 2\n", "[Core] Bump VALUE")
    commit(tree, "mini/util.py", "def double(x):\n    return x + x\n", "Add twice")
    export(tree, patches)
    exported = snapshot(patches)
    assert read_series(patches) == [
        patches / "0001-Core-Bump-VALUE.patch",
        patches / "0002-Add-twice.patch",
    ]
    # Rebuild from scratch: same commits, same bytes on re-export.
    shutil.rmtree(tree)
    assert "base + 2 patches" in sync(workspace)
    assert "0 written, 0 removed" in export(tree, patches)
    assert snapshot(patches) == exported
    assert "up to date" in sync(workspace)
    subject = git(tree, "log", "-1", "--format=%s", "HEAD~1").stdout.strip()
    assert subject == "[Core] Bump VALUE"


def test_sync_refuses_uncommitted_changes(workspace):
    _, _, tree = workspace
    sync(workspace)
    (tree / "mini" / "util.py").write_text("changed\n")
    with pytest.raises(ForkToolError, match="uncommitted changes"):
        sync(workspace)
    assert (tree / "mini" / "util.py").read_text() == "changed\n"
    git(tree, "checkout", "--", "mini/util.py")
    (tree / "new_file.py").write_text("new\n")
    with pytest.raises(ForkToolError, match="uncommitted changes"):
        sync(workspace)
    assert (tree / "new_file.py").exists()


def test_sync_refuses_unexported_commits_and_force_keeps_them(workspace):
    _, patches, tree = workspace
    sync(workspace)
    commit(tree, "mini/__init__.py", "VALUE = 3\n", "Local work")
    head = git(tree, "rev-parse", "HEAD").stdout.strip()
    with pytest.raises(ForkToolError, match="forktool export") as refused:
        sync(workspace)
    assert refused.value.status == 1  # a refusal, not a conflict to resolve
    assert git(tree, "rev-parse", "HEAD").stdout.strip() == head
    message = sync(workspace, force=True)
    backup = message.rsplit("branch ", 1)[1]
    assert git(tree, "rev-parse", backup).stdout.strip() == head
    assert (tree / "mini" / "__init__.py").read_text() == "VALUE = 1\n"


def test_issue_1_rebase_in_progress_is_refused_and_nothing_is_lost(workspace):
    _, patches, tree = workspace
    series_of(workspace, *THREE)
    exported = snapshot(patches)
    # Stop an interactive rebase at the second patch, as `edit` does.
    edit_series(tree, "sed -i 2s/^pick/edit/")
    assert (tree / ".git" / "rebase-merge").exists()
    for command in (export, lambda tree, _: sync(workspace)):
        message = refused(lambda command=command: command(tree, patches))
        assert "interactive rebase" in message
        assert f"git -C {tree} rebase --continue" in message
        assert f"git -C {tree} rebase --abort" in message
    assert snapshot(patches) == exported
    assert (tree / ".git" / "rebase-merge").exists()
    git(tree, "rebase", "--continue")
    assert "0 written, 0 removed" in export(tree, patches)
    assert snapshot(patches) == exported


@pytest.mark.parametrize("operation", ["cherry-pick", "merge", "am", "revert"])
def test_other_git_operations_in_progress_are_refused(workspace, operation):
    _, patches, tree = workspace
    series_of(workspace, *THREE[:2])
    exported = snapshot(patches)
    git(tree, "checkout", "-q", "-b", "side", "base")
    commit(tree, "mini/util.py", "def double(x):\n    return x + x\n", "[Core] Side")
    git(tree, "checkout", "-q", "main")
    if operation == "am":
        side = git(tree, "format-patch", "-1", "side", "-o", "../am").stdout
        args = ["am", side.strip()]
    elif operation == "revert":
        commit(tree, "mini/util.py", "def double(x):\n    return 3 * x\n", "[A] B")
        args = ["revert", "--no-edit", "HEAD~1"]
    else:
        args = [operation, "side"]
    assert git(tree, *args, check=False).returncode != 0
    with pytest.raises(ForkToolError, match=f"in the middle of a.*{operation}"):
        export(tree, patches)
    with pytest.raises(ForkToolError, match="--abort|merge --abort"):
        sync(workspace)
    assert snapshot(patches) == exported


def test_export_refuses_to_delete_a_patch_file_that_is_not_committed(workspace):
    _, patches, tree = workspace
    sync(workspace)
    for change in THREE:
        commit(tree, *change)
    export(tree, patches)  # not committed in this repository yet
    exported = snapshot(patches)
    git(tree, "reset", "-q", "--hard", "HEAD~1")  # drop the third patch
    with pytest.raises(ForkToolError) as excinfo:
        export(tree, patches)
    assert "0003-Core-Third.patch (export would delete it)" in str(excinfo.value)
    assert "not committed in this repository" in str(excinfo.value)
    assert snapshot(patches) == exported
    commit_series(patches)  # now the file is in this repository's history
    assert "1 removed" in export(tree, patches)
    assert not (patches / "0003-Core-Third.patch").exists()


def test_export_outside_a_git_checkout_keeps_every_file(workspace):
    _, patches, tree = workspace
    series_of(workspace, *THREE)
    shutil.rmtree(patches.parent / ".git")
    git(tree, "reset", "-q", "--hard", "HEAD~1")
    with pytest.raises(ForkToolError, match="not in a git checkout"):
        export(tree, patches)
    assert (patches / "0003-Core-Third.patch").exists()


def test_issue_7_patch_that_does_not_apply_gets_one_message(workspace):
    pins, patches, tree = workspace
    sync(workspace)
    commit(tree, "mini/__init__.py", "VALUE = 2\n", "Good")
    commit(tree, "mini/util.py", "def double(x):\n    return x << 1\n", "Bad")
    export(tree, patches)
    # Make the second patch's context disagree with the base.
    bad = patches / "0002-Bad.patch"
    bad.write_text(
        bad.read_text()
        .replace("     return 2 * x", "     return 3 * x")
        .replace("-    return 2 * x", "-    return 3 * x")
    )
    shutil.rmtree(tree)
    message = refused(lambda: sync(workspace))
    assert "patch 2 of 2 in the series does not apply: 0002-Bad.patch" in message
    assert "conflicting: mini/util.py" in message
    assert f"git -C {tree} am -3 --keep-non-patch {bad}" in message
    assert "Patch failed at" not in message  # git's own text is in the log
    log = tree.parent / "logs" / "sync-git-am.log"
    assert f"git's output: {log}" in message and "Patch failed at" in log.read_text()
    assert not (tree / ".git" / "rebase-apply").exists()
    assert git(tree, "status", "--porcelain").stdout == ""
    assert git(tree, "log", "-1", "--format=%s").stdout.strip() == "Good"
    # Nothing is lost by the half-built fork: export refuses to drop the patch.
    with pytest.raises(ForkToolError, match="0002-Bad.patch: not applied yet"):
        export(tree, patches)


def test_issue_4_commits_carry_their_authors_identity(workspace):
    _, patches, tree = workspace
    series_of(workspace, THREE[0])
    config = git(tree, "config", "--local", "--list").stdout
    assert "user.name" not in config and "user.email" not in config
    log = git(tree, "log", "--format=%an <%ae>|%cn <%ce>").stdout.splitlines()
    assert log == [f"{PERSON}|{PERSON}", f"{AUTHOR}|{AUTHOR}"]
    # A fork made by an earlier version of the tool loses the tool's identity.
    git(tree, "config", "user.name", "Test Project")
    git(tree, "config", "user.email", "test-project@noreply.invalid")
    sync(workspace)
    assert "user." not in git(tree, "config", "--local", "--list").stdout
    # Rebuilt by the tool: the author stays the person, the tool commits it.
    shutil.rmtree(tree)
    sync(workspace)
    log = git(tree, "log", "-1", "--format=%an <%ae>|%cn <%ce>").stdout
    assert log.strip() == f"{PERSON}|{AUTHOR}"


def test_issue_7_export_warns_about_unsigned_commits_and_subjects(workspace):
    _, patches, tree = workspace
    sync(workspace)
    (tree / "README").write_text("readme\n")
    git(tree, "add", "README")
    git(tree, "commit", "-qm", "fix readme")
    commit(tree, *THREE[0])
    message = export(tree, patches)
    print(message)
    assert f"warning: 0001-fix-readme.patch: no `Signed-off-by: {PERSON}`" in message
    assert "0001-fix-readme.patch: subject 'fix readme' is not in" in message
    assert "0002-Core-First.patch" not in message.split("warning", 1)[1]
    assert (patches / "0001-fix-readme.patch").exists()
    # The advice works: the commit gets the author's sign-off.
    command = message.splitlines()[-1].strip()
    assert command.startswith(f"git -C {tree} rebase -q base --exec")
    subprocess.run(command, shell=True, check=True)
    assert "Signed-off-by" not in export(tree, patches)


def test_series_rejects_orphan_and_missing_patches(workspace):
    _, patches, _ = workspace
    (patches / "0001-orphan.patch").write_text("")
    with pytest.raises(ForkToolError, match="not listed.*0001-orphan.patch"):
        read_series(patches)
    (patches / "series").write_text("0001-orphan.patch\n0002-gone.patch\n")
    with pytest.raises(ForkToolError, match="missing patch files: 0002-gone.patch"):
        read_series(patches)
