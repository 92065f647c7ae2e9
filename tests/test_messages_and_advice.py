"""Issue 22 on the synthetic base: commit messages that `git am` reads back
as written, and advice that is right when followed literally (`follow`)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from test_fork import (
    PERSON,
    THREE,
    commit,
    commit_series,
    edit_series,
    series_of,
    snapshot,
    subjects,
    sync,
    teammate,
)
from test_fork_safety import (
    change_second_code,
    follow,
    fresh_clone,
    reword_second,
    trailers,
)

from forktool.errors import ConflictError, ForkToolError
from forktool.export import export
from forktool.git import git

OTHER = "Con Tributor <con@example.invalid>"


def commit_message(tree: Path, path: str, text: str, message: str, **env) -> str:
    """Commit `path` with `message` as written; its short id."""
    (tree / path).write_text(text)
    git(tree, "add", path)
    git(tree, "commit", "-q", "-F", "-", input=message, env=env or None)
    return git(tree, "rev-parse", "--short", "HEAD").stdout.strip()


def message_of(tree: Path, rev: str = "HEAD") -> str:
    return git(tree, "log", "-1", "--format=%B", rev).stdout


def refused(command) -> str:
    with pytest.raises(ForkToolError) as excinfo:
        command()
    print(excinfo.value)
    return str(excinfo.value)


# --- E5/E6: messages git am would cut or misread -------------------------------

TABLE = (
    "[Core] Extra\n\nSummary of the change.\n\n---\n\n| case | ms |\n| a | 1 |\n\n"
    f"Signed-off-by: {PERSON}\n"
)


def test_a_separator_line_is_refused_and_the_advice_keeps_the_whole_message(
    workspace, monkeypatch
):
    _, patches, tree = workspace
    series_of(workspace, THREE[0])
    before = snapshot(patches)
    short = commit_message(tree, "mini/extra.py", "EXTRA = 1\n", TABLE)
    for check in (True, False):
        message = refused(lambda c=check: export(tree, patches, check=c))
        assert f"{short} [Core] Extra, line 5 '---': `git am` ends the message" in (
            message
        )
        assert f"git -C {tree} rebase -i base   # mark {short} `reword`" in message
    assert snapshot(patches) == before
    # Followed as it says: `reword` the commit, indent the line by a space.
    monkeypatch.setenv(
        "GIT_SEQUENCE_EDITOR", f"sed -i 's/^pick {short}/reword {short}/'"
    )
    monkeypatch.setenv("GIT_EDITOR", "sed -i 's/^---$/ ---/'")
    follow(workspace, message)
    commit_series(patches)
    other = fresh_clone(workspace)
    assert message_of(other) == message_of(tree)
    assert "| a | 1 |" in message_of(other) and f"Signed-off-by: {PERSON}" in (
        message_of(other)
    )
    assert "is what export writes (2 patches)" in export(other, patches, check=True)


MISREAD = {
    "dashes": ("\n---\n", 3, "ends the message before it"),
    "a diff's old file": ("\n--- a/mini/x.py\n", 3, "ends the message before it"),
    "a git diff": ("\ndiff --git a/x.py b/x.py\n", 3, "ends the message before it"),
    "a plain diff": ("\ndiff -u a b\n", 3, "ends the message before it"),
    "a CVS diff": ("\nIndex: mini/x.py\n", 3, "ends the message before it"),
    "a mail's first line": (
        "\nFrom 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n",
        3,
        "first line of another mail",
    ),
    "a From: header first": ("From: Some One <one@example.invalid>\n", 3, "header"),
    "a Subject: header first": ("subject: Another\n", 3, "mail header"),
    "a [PATCH] line first": ("[PATCH] Another subject\n", 3, "mail header"),
}


@pytest.mark.parametrize("case", MISREAD)
def test_each_line_git_am_misreads_is_named_and_the_proof_catches_it_too(
    workspace, monkeypatch, case
):
    _, patches, tree = workspace
    series_of(workspace, THREE[0])
    line, number, what = MISREAD[case]
    body = f"[Core] Extra\n\n{line}\nAfter it.\n\nSigned-off-by: {PERSON}\n"
    short = commit_message(tree, "mini/extra.py", "EXTRA = 1\n", body)
    shown = repr(line.strip("\n"))
    message = refused(lambda: export(tree, patches))
    assert f"{short} [Core] Extra, line {number} {shown}: `git am`" in message
    assert what in message
    # Without the line check, the proof (`git am`'s reading of each patch
    # file against the commit) refuses it all the same.
    monkeypatch.setattr("forktool.export.misread", lambda commit: [])
    message = refused(lambda: export(tree, patches))
    assert "do not rebuild" in message
    assert re.search(r"another message|author|mails from|does not apply", message)


def test_a_subject_of_two_lines_is_named(workspace):
    _, patches, tree = workspace
    series_of(workspace, THREE[0])
    body = f"[Core] Extra over\ntwo lines\n\nSigned-off-by: {PERSON}\n"
    short = commit_message(tree, "mini/extra.py", "EXTRA = 1\n", body)
    message = refused(lambda: export(tree, patches))
    assert f"{short} [Core] Extra over two lines, line 2 'two lines'" in message


@pytest.mark.parametrize(
    "line", ["----", " ---", "---  spaced text", "From the docs:", "Index:x"]
)
def test_lines_git_am_keeps_are_exported_as_they_are(workspace, line):
    _, patches, tree = workspace
    series_of(workspace, THREE[0])
    body = f"[Core] Extra\n\nAbove.\n{line}\nAfter it.\n\nSigned-off-by: {PERSON}\n"
    commit_message(tree, "mini/extra.py", "EXTRA = 1\n", body)
    assert "2 patches" in export(tree, patches)
    commit_series(patches)
    assert message_of(fresh_clone(workspace)) == message_of(tree)


def test_the_proof_compares_the_message_git_am_would_commit(workspace, monkeypatch):
    _, patches, tree = workspace
    series_of(workspace, THREE[0])
    before = snapshot(patches)
    body = f"Re: [Core] Extra\n\nWhy.\n\nSigned-off-by: {PERSON}\n"
    short = commit_message(tree, "mini/extra.py", "EXTRA = 1\n", body)
    message = refused(lambda: export(tree, patches))
    assert "do not rebuild" in message and "patch 2, 0002-Re-Core-Extra.patch" in (
        message
    )
    assert f"another message than {short} Re: [Core] Extra's" in message
    assert snapshot(patches) == before


# --- Row 3 / E1: sign-off advice ------------------------------------------------


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


def test_a_subject_without_its_area_says_how_git_am_keeps_it(workspace):
    _, patches, tree = workspace
    sync(workspace)
    commit(tree, "mini/extra.py", "EXTRA = 1\n", "Contributor tweak")
    message = export(tree, patches)
    assert "plain `git am` loses its `[Area]` tag" in message
    assert "`git am --keep-non-patch` keeps it" in message


# --- Row 3: a non-ASCII subject changed on both sides ----------------------------

UNICODE = "[Doc] Ångström naïve façade"


def test_a_non_ascii_subject_changed_on_both_sides_gets_the_fixup_advice(workspace):
    _, patches, mine = workspace
    second = ("mini/util.py", "def double(x):\n    return x * 2\n", UNICODE)
    series_of(workspace, THREE[0], second, THREE[2])
    assert "=?UTF-8?q?" in (patches / "0002-Doc-ngstr-m-na-ve-fa-ade.patch").read_text()
    theirs = teammate(workspace)
    reword_second(theirs, f"{UNICODE}\n\nWhy, reworded.\n\nSigned-off-by: {PERSON}")
    export(theirs, patches)
    commit_series(patches)
    change_second_code(mine, "def double(x):\n    return x * 2  # mine\n")
    signed = trailers(mine)
    with pytest.raises(ConflictError) as excinfo:
        sync(workspace)
    message = str(excinfo.value)
    print(message)
    assert "--fixup" in message and "--autosquash" in message
    assert "compare your version" not in message
    follow(workspace, message)
    assert subjects(mine) == ["[Core] First", UNICODE, "[Core] Third"]
    assert "# mine" in (mine / "mini/util.py").read_text()
    assert "Why, reworded." in message_of(mine, "HEAD~1")
    assert trailers(mine) == signed
    assert len(list(patches.glob("*.patch"))) == 3


# --- Row 5c: subject reworded on one side, code changed on the other -------------


def reword_third(tree: Path) -> None:
    """Reword patch 3's subject in `tree`, its code as it was."""
    edit_series(tree, "sed -i 3s/^pick/edit/")
    git(tree, "commit", "-q", "--amend", "-m",
             f"[Core] Third, reworded\n\nSigned-off-by: {PERSON}")  # fmt: skip
    git(tree, "rebase", "--continue", env={"GIT_EDITOR": "true"})


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


# --- Row 6: uncommitted changes ---------------------------------------------------


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


# --- E2: fixup! commits -------------------------------------------------------------


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


# --- E4: a fork not on its branch ---------------------------------------------------


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


# --- E8: conflict markers in patches/series -----------------------------------------


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


# --- 4a/4b: renumbered and renamed patch files --------------------------------------


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
