"""Issue 22 on the synthetic base: commit messages that `git am` reads back
as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from fork_fixture import (
    PERSON,
    THREE,
    change_second,
    commit,
    commit_message,
    commit_series,
    follow,
    fresh_clone,
    refused,
    reword_second,
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


def message_of(tree: Path, rev: str = "HEAD") -> str:
    return git(tree, "log", "-1", "--format=%B", rev).stdout


TABLE = (
    "[Core] Extra\n\nSummary of the change.\n\n---\n\n| case | ms |\n| a | 1 |\n\n"
    f"Signed-off-by: {PERSON}\n"
)


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


UNICODE = "[Doc] Ångström naïve façade"


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


def test_a_subject_without_its_area_says_how_git_am_keeps_it(workspace):
    _, patches, tree = workspace
    sync(workspace)
    commit(tree, "mini/extra.py", "EXTRA = 1\n", "Contributor tweak")
    message = export(tree, patches)
    assert "plain `git am` loses its `[Area]` tag" in message
    assert "`git am --keep-non-patch` keeps it" in message


def test_a_non_ascii_subject_changed_on_both_sides_gets_the_fixup_advice(workspace):
    _, patches, mine = workspace
    second = ("mini/util.py", "def double(x):\n    return x * 2\n", UNICODE)
    series_of(workspace, THREE[0], second, THREE[2])
    assert "=?UTF-8?q?" in (patches / "0002-Doc-ngstr-m-na-ve-fa-ade.patch").read_text()
    theirs = teammate(workspace)
    reword_second(theirs, f"{UNICODE}\n\nWhy, reworded.\n\nSigned-off-by: {PERSON}")
    export(theirs, patches)
    commit_series(patches)
    change_second(mine, "def double(x):\n    return x * 2  # mine\n")
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
