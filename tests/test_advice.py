"""Issue 22 on the synthetic base: advice that is right when followed
literally (`follow`)."""

from __future__ import annotations

import re
import subprocess

import pytest
from fork_fixture import (
    PERSON,
    THREE,
    commit,
    commit_message,
    commit_series,
    edit_series,
    follow,
    refused,
    reword_third,
    series_of,
    snapshot,
    subjects,
    sync,
    teammate,
    trailers,
)

from forktool.errors import ConflictError
from forktool.export import export
from forktool.git import git

OTHER = "Con Tributor <con@example.invalid>"


def test_sign_off_advice_never_signs_someone_elses_commit(workspace):
    _, patches, tree = workspace
    series_of(workspace, THREE[0])
    name, email = OTHER[: OTHER.index(" <")], OTHER[OTHER.index("<") + 1 : -1]
    theirs = {"GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email}
    commit_message(tree, "mini/theirs.py", "T = 1\n", "[Core] Theirs\n", **theirs)
    commit_message(tree, "mini/mine.py", "M = 1\n", "[Core] Mine\n")
    message = export(tree, patches)
    print(message)
    assert f"no `Signed-off-by: {OTHER}` (DCO): {OTHER} wrote it" in message
    assert "Ask them for it" in message
    follow(workspace, message)
    assert trailers(tree)["[Core] Mine"] == [f"Signed-off-by: {PERSON}"]
    assert trailers(tree)["[Core] Theirs"] == []
    # Only their commit lacks it now: no command to run, just whom to ask.
    message = export(tree, patches)
    print(message)
    assert f"{OTHER} wrote it" in message and "rebase -q" not in message
    assert len(list(patches.glob("*.patch"))) == 3


def test_a_reworded_subject_and_a_code_change_end_in_one_patch(workspace):
    _, patches, mine = workspace
    series_of(workspace, *THREE)
    theirs = teammate(workspace)
    reword_third(theirs)
    export(theirs, patches)
    commit_series(patches)
    edit_series(mine, "sed -i 3s/^pick/edit/")
    (mine / "mini/extra.py").write_text("EXTRA = 2\n")
    git(mine, "commit", "-q", "--amend", "--no-edit", "-a")
    git(mine, "rebase", "--continue", env={"GIT_EDITOR": "true"})
    with pytest.raises(ConflictError) as excinfo:
        sync(workspace)
    message = str(excinfo.value)
    print(message)
    assert "0003-Core-Third-reworded.patch: changed on both sides" in message
    assert "cherry-pick" not in message
    follow(workspace, message)
    assert subjects(mine) == ["[Core] First", "[Core] Second", "[Core] Third, reworded"]
    assert (mine / "mini/extra.py").read_text() == "EXTRA = 2\n"
    assert sorted(p.name for p in patches.glob("*.patch"))[-1] == (
        "0003-Core-Third-reworded.patch"
    )
    assert len(list(patches.glob("*.patch"))) == 3


def test_a_subject_reworded_in_the_fork_is_one_patch_changed(workspace):
    _, patches, mine = workspace
    series_of(workspace, *THREE)
    reword_third(mine)
    said = export(mine, patches)
    print(said)
    assert "0003-Core-Third-reworded.patch: changed in the fork" in said
    assert (
        "0003-Core-Third.patch -> 0003-Core-Third-reworded.patch: its subject changed"
        in said
    )
    assert "removed from the series" not in said


def test_the_uncommitted_changes_refusal_gives_a_stash_that_takes_untracked_files(
    workspace,
):
    _, patches, tree = workspace
    series_of(workspace, THREE[0])
    (tree / "mini/util.py").write_text("# edited\n")
    (tree / "NOTES.txt").write_text("mine\n")
    message = refused(lambda: sync(workspace))
    advised = re.search(r"`(git -C \S+ stash -u)`", message)
    assert advised, message
    stash = advised.group(1)
    subprocess.run(stash, shell=True, check=True)
    assert "up to date" in sync(workspace)
    git(tree, "stash", "pop")
    assert (tree / "NOTES.txt").read_text() == "mine\n"


def test_a_fixup_commit_is_refused_and_the_advice_squashes_it(workspace):
    _, patches, tree = workspace
    series_of(workspace, *THREE[:2])
    before = snapshot(patches)
    (tree / "mini/__init__.py").write_text("VALUE = 3\n")
    git(tree, "commit", "-q", "-a", "--fixup=HEAD~1")
    message = refused(lambda: export(tree, patches))
    assert "fixup! [Core] First" in message and "--autosquash" in message
    assert snapshot(patches) == before
    follow(workspace, message)
    assert subjects(tree) == ["[Core] First", "[Core] Second"]
    assert "VALUE = 3" in (patches / "0001-Core-First.patch").read_text()
    assert len(list(patches.glob("*.patch"))) == 2


@pytest.mark.parametrize("where", ["detached", "branch"])
def test_a_fork_off_its_branch_is_named_and_the_advice_goes_back(workspace, where):
    _, patches, tree = workspace
    series_of(workspace, *THREE)
    before = snapshot(patches)
    if where == "detached":
        git(tree, "checkout", "-q", "HEAD~1")
    else:
        git(tree, "checkout", "-q", "-b", "feature")
        commit(tree, "mini/feature.py", "F = 1\n", "[Core] Feature")
    head = git(tree, "rev-parse", "HEAD").stdout
    for command in (lambda: sync(workspace), lambda: export(tree, patches)):
        message = refused(command)
        named = "a detached HEAD (" if where == "detached" else "branch feature,"
        assert f"{tree} is on {named}" in message and "not on its branch `main`" in (
            message
        )
        assert f"git -C {tree} checkout main" in message
    assert snapshot(patches) == before
    assert git(tree, "rev-parse", "HEAD").stdout == head
    follow(workspace, message)
    assert subjects(tree) == [c[2] for c in THREE]
    assert "is what export writes (3 patches)" in export(tree, patches, check=True)
    if where == "branch":
        assert "[Core] Feature" in git(tree, "log", "-1", "feature").stdout


def test_conflict_markers_in_the_series_are_named_as_an_unresolved_merge(workspace):
    _, patches, _ = workspace
    series_of(workspace, *THREE[:2])
    text = (patches / "series").read_text()
    (patches / "series").write_text(
        text + "<<<<<<< HEAD\n0003-a.patch\n=======\n0003-b.patch\n>>>>>>> d3f6317\n"
    )
    message = refused(lambda: sync(workspace))
    assert "holds an unresolved merge" in message and "missing" not in message
    assert f"`git add {patches / 'series'}`" in message


def test_a_renumbered_patch_is_reported_as_renumbered(workspace):
    _, patches, tree = workspace
    series_of(workspace, *THREE)
    edit_series(tree, "sed -i 1s/^pick/drop/")
    message = export(tree, patches)
    print(message)
    assert "0002-Core-Second.patch -> 0001-Core-Second.patch: renumbered" in message
    assert "0003-Core-Third.patch -> 0002-Core-Third.patch: renumbered" in message
    assert "0001-Core-First.patch: removed from the series" in message
    assert message.count("removed from the series") == 1


def test_a_hand_renamed_patch_is_reported_as_renamed(workspace):
    _, patches, tree = workspace
    series_of(workspace, *THREE)
    git(patches, "mv", "0002-Core-Second.patch", "0002-second.patch")
    series = patches / "series"
    series.write_text(series.read_text().replace("0002-Core-Second", "0002-second"))
    commit_series(patches)
    assert "up to date" in sync(workspace)
    message = refused(lambda: export(tree, patches, check=True))
    assert "0002-second.patch -> 0002-Core-Second.patch: renamed" in message
    assert "removed from the series" not in message


def test_commits_made_on_a_detached_head_are_kept_by_the_advice(workspace):
    _, patches, tree = workspace
    series_of(workspace, *THREE[:2])
    git(tree, "checkout", "-q", "HEAD~1")
    commit(tree, "mini/detached.py", "D = 1\n", "[Core] Detached")
    detached = git(tree, "rev-parse", "HEAD").stdout.strip()
    message = refused(lambda: export(tree, patches))
    assert f"branch kept-{detached[:12]} {detached[:12]}" in message
    follow(workspace, message)
    assert subjects(tree) == ["[Core] First", "[Core] Second"]
    kept = git(tree, "rev-parse", f"kept-{detached[:12]}").stdout.strip()
    assert kept == detached
