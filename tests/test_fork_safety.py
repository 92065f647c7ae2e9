"""Issue 18 on the synthetic base: every sync and export verified, and every
command the tool prints followed literally (`follow`), checking that no
patch is lost, none duplicated and nobody else's sign-off changed."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from fork_fixture import (
    PERSON,
    THREE,
    commit,
    commit_series,
    follow,
    fresh_clone,
    refusal,
    refused,
    series_of,
    snapshot,
    subjects,
    sync,
    trailers,
)

from forktool.check_runs import all_checks
from forktool.export import export
from forktool.git import git
from forktool.tool_checks import EXPORT_CHECK

TRIPLE = "def double(x):\n    return 2 * x\n\n\ndef triple(x):\n    return 3 * x\n"


def test_a_patch_whose_hunk_header_counts_too_few_lines_is_refused(workspace):
    _, patches, tree = workspace
    series_of(workspace, THREE[0], ("mini/util.py", TRIPLE, "[Core] Triple"))
    bad = patches / "0002-Core-Triple.patch"
    bad.write_text(bad.read_text().replace("@@ -1,2 +1,6 @@", "@@ -1,2 +1,4 @@"))
    commit_series(patches)
    shutil.rmtree(tree)
    message = refused(lambda: sync(workspace))
    assert "patch 2 of 2 in the series applied other content than it names" in message
    assert "0002-Core-Triple.patch" in message and "mini/util.py: became" in message
    assert subjects(tree) == ["[Core] First"]
    assert git(tree, "status", "--porcelain").stdout == ""


def test_a_commit_message_that_git_am_reads_as_a_diff_is_not_exported(workspace):
    _, patches, tree = workspace
    series_of(workspace, THREE[0])
    before = snapshot(patches)
    fake = (
        "Example:\n---\ndiff --git a/mini/util.py b/mini/util.py\n"
        "--- a/mini/util.py\n+++ b/mini/util.py\n@@ -1 +1 @@\n"
        "-def double(x):\n+def triple(x):\n"
    )
    (tree / "mini/extra.py").write_text("EXTRA = 1\n")
    git(tree, "add", "mini/extra.py")
    git(tree, "commit", "-qm", f"[Core] Extra\n\n{fake}\nSigned-off-by: {PERSON}")
    error = refusal(lambda: export(tree, patches))
    assert "do not rebuild" in str(error)
    assert "mini/util.py" in str(error)
    assert snapshot(patches) == before


def test_a_merge_commit_is_refused_and_the_advice_linearises_it(workspace):
    _, patches, tree = workspace
    series_of(workspace, *THREE[:2])
    before = snapshot(patches)
    git(tree, "checkout", "-q", "-b", "side", "HEAD~1")
    commit(tree, "mini/util.py", "def double(x):\n    return x + x\n", "[Core] Side")
    git(tree, "checkout", "-q", "main")
    assert git(tree, "merge", "-q", "side", check=False).returncode
    resolved = "def double(x):\n    return x * 2  # resolved\n"
    (tree / "mini/util.py").write_text(resolved)
    git(tree, "commit", "-qam", "Merge side")
    for command in (lambda: export(tree, patches), lambda: sync(workspace)):
        message = refused(command)
        assert "merge " in message and "its resolution would be in no patch" in message
    assert snapshot(patches) == before
    # Follow it: the rebase stops at the conflict the merge had resolved.
    line = next(x for x in message.splitlines() if " rebase base" in x)
    assert subprocess.run(line, shell=True).returncode != 0
    (tree / "mini/util.py").write_text(resolved)
    git(tree, "add", "mini/util.py")
    git(tree, "rebase", "--continue", env={"GIT_EDITOR": "true"})
    assert "3 patches" in export(tree, patches)
    commit_series(patches)
    other = fresh_clone(workspace)
    assert (other / "mini/util.py").read_text() == resolved
    assert subjects(other) == ["[Core] First", "[Core] Second", "[Core] Side"]


def test_an_empty_commit_is_refused_and_the_advice_drops_it(workspace):
    _, patches, tree = workspace
    series_of(workspace, THREE[0])
    git(tree, "commit", "-q", "--allow-empty", "-m", f"[Core] Nothing\n\n"
             f"Signed-off-by: {PERSON}")  # fmt: skip
    commit(tree, *THREE[2])
    message = refused(lambda: export(tree, patches))
    assert "empty " in message and "[Core] Nothing" in message
    follow(workspace, message)
    assert subjects(tree) == ["[Core] First", "[Core] Third"]
    assert [p.name for p in sorted(patches.glob("*.patch"))] == [
        "0001-Core-First.patch",
        "0002-Core-Third.patch",
    ]
    assert all(p.stat().st_size for p in patches.glob("*.patch"))


def test_export_check_names_stale_patches_and_writes_nothing(workspace):
    _, patches, tree = workspace
    series_of(workspace, *THREE)
    assert "is what export writes (3 patches)" in export(tree, patches, check=True)
    stale = patches / "0002-Core-Second.patch"
    stale.write_text(stale.read_text().replace("@@ -1,2 +1,2 @@", "@@ -3,2 +3,2 @@"))
    before = snapshot(patches)
    assert "up to date" in sync(workspace)  # git patch-id ignores line numbers
    error = refusal(lambda: export(tree, patches, check=True))
    assert "(1 differ)" in str(error)
    assert "0002-Core-Second.patch: the same change, rewritten" in str(error)
    assert snapshot(patches) == before
    assert EXPORT_CHECK in all_checks() and EXPORT_CHECK.gates_test


def test_signing_and_hooks_of_the_user_leave_the_tools_commits_alone(
    workspace, tmp_path, monkeypatch
):
    _, patches, tree = workspace
    series_of(workspace, *THREE)
    ids = git(fresh_clone(workspace, "plain"), "log", "--format=%H").stdout
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    for hook in ("pre-commit", "commit-msg", "applypatch-msg", "post-checkout"):
        (hooks / hook).write_text('#!/bin/sh\necho hooked >> "$1"\nexit 1\n')
        (hooks / hook).chmod(0o755)
    config = Path(os.environ["GIT_CONFIG_GLOBAL"])
    config.write_text(
        config.read_text() + "[commit]\n\tgpgsign = true\n[gpg]\n\tprogram = false\n"
        f"[core]\n\thooksPath = {hooks}\n[init]\n\ttemplateDir = {tmp_path}\n"
        "[am]\n\tmessageid = true\n"
    )
    other = fresh_clone(workspace)
    assert git(other, "log", "--format=%H").stdout == ids
    # People's own commits keep their settings: their hooks, their signing.
    (other / "mini/extra.py").write_text("EXTRA = 2\n")
    own = ["git", "-C", str(other), "commit", "-qam", "mine"]
    hooked = subprocess.run(own, capture_output=True)
    assert hooked.returncode != 0 and b"hooks/pre-commit" in hooked.stderr
    signed = subprocess.run([*own, "--no-verify"], capture_output=True)
    assert signed.returncode != 0 and b"gpg" in signed.stderr


def test_export_warns_about_two_patches_with_one_subject(workspace):
    _, patches, tree = workspace
    series_of(workspace, *THREE[:2])
    commit(tree, "mini/util.py", "def double(x):\n    return x * 2  # again\n",
           "[Core] Second")  # fmt: skip
    message = export(tree, patches)
    print(message)
    assert "0002-Core-Second.patch and 0003-Core-Second.patch have one subject" in (
        message
    )


def test_sign_off_advice_signs_only_the_commits_that_lack_it(workspace):
    _, patches, tree = workspace
    series_of(workspace, *THREE[:2])
    (tree / "README").write_text("readme\n")
    git(tree, "add", "README")
    git(tree, "commit", "-qm", "[Doc] Readme")
    commit(tree, *THREE[2])
    before = trailers(tree)
    message = export(tree, patches)
    print(message)
    assert "0003-Doc-Readme.patch: no `Signed-off-by" in message
    follow(workspace, message)
    after = trailers(tree)
    assert after["[Doc] Readme"] == [f"Signed-off-by: {PERSON}"]
    assert {s: after[s] for s in before if s != "[Doc] Readme"} == {
        s: v for s, v in before.items() if s != "[Doc] Readme"
    }
    assert "Signed-off-by" not in export(tree, patches)
    assert len(list(patches.glob("*.patch"))) == 4
