"""Rows of workflow-trial-4 about hand edits (a teammate's reworded subject,
a hand-edited patch line or message line); the table of rows is in
tests/test_trial_rows.py."""

from __future__ import annotations

from pathlib import Path

from fork_fixture import (
    PERSON,
    THREE,
    commit_series,
    head,
    refusal,
    reword_third,
    series_of,
    snapshot,
    subjects,
    sync,
    teammate,
    trees,
)

from forktool import backups
from forktool.export import export
from forktool.git import git


def tree_of(tree: Path, rev: str) -> str:
    return git(tree, "rev-parse", f"{rev}^{{tree}}").stdout.strip()


def test_row_e3_a_subject_reworded_by_a_teammate_updates_the_fork(workspace):
    _, patches, mine = workspace
    series_of(workspace, *THREE)
    theirs = teammate(workspace)
    reword_third(theirs)
    export(theirs, patches)
    commit_series(patches)  # pushed; here: git pull
    message = sync(workspace)
    print(message)
    assert "0003-Core-Third-reworded.patch: changed in the series" in message
    assert "0003-Core-Third.patch" not in message  # one patch, not two
    assert subjects(mine) == ["[Core] First", "[Core] Second", "[Core] Third, reworded"]
    assert trees(mine) == trees(theirs)
    assert "is what export writes (3 patches)" in export(mine, patches, check=True)
    assert "deleted 1 backup branches" in backups.report(mine, True, patches)


def test_row_e7_a_hand_edited_plus_line_is_named_and_recovered(workspace):
    _, patches, tree = workspace
    series_of(workspace, *THREE)
    old_head = head(tree)
    second = patches / "0002-Core-Second.patch"
    second.write_text(
        second.read_text().replace("+    return x * 2", "+    return x * 4")
    )
    error = refusal(lambda: sync(workspace))
    message = str(error)
    assert error.status == 1
    assert "patch 2 of 3 in the series applied other content than it names" in message
    assert "0002-Core-Second.patch" in message
    assert "a `+` or `-` line changed" in message
    assert subjects(tree) == ["[Core] First"]
    assert git(tree, "status", "--porcelain").stdout == ""
    assert old_head in git(tree, "rev-parse", "--branches=backup/").stdout
    git(patches, "checkout", "--", ".")  # `git checkout patches`
    assert "applied 2 patches" in sync(workspace)
    assert head(tree) != old_head and trees(tree)[-1] == tree_of(tree, old_head)
    assert "is what export writes (3 patches)" in export(tree, patches, check=True)


def test_row_e9_a_hand_edited_message_line_is_named_then_synced(workspace):
    _, patches, tree = workspace
    series_of(workspace, *THREE)
    second = patches / "0002-Core-Second.patch"
    signed = f"Signed-off-by: {PERSON}"
    reviewed = f"Reviewed-by: Re Viewer <re@example.invalid>\n{signed}"
    second.write_text(second.read_text().replace(signed, reviewed, 1))
    edited = snapshot(patches)
    message = str(refusal(lambda: export(tree, patches, check=True)))
    assert "0002-Core-Second.patch: changed in the series" in message
    assert snapshot(patches) == edited
    message = sync(workspace)
    assert "0002-Core-Second.patch: changed in the series" in message
    assert reviewed in git(tree, "log", "-1", "--format=%B", "HEAD~1").stdout
    assert "is what export writes (3 patches)" in export(tree, patches, check=True)
    assert snapshot(patches) == edited
