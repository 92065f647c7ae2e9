"""A teammate's change to the series (patches/) meets the fork's local work:
appended, dropped, changed or reordered patches, and both sides changed."""

from __future__ import annotations

import subprocess

import pytest
from fork_fixture import (
    PERSON,
    THREE,
    change_second,
    commit,
    commit_series,
    edit_series,
    follow,
    head,
    head_of,
    refusal,
    refused,
    reword_second,
    series_of,
    snapshot,
    subjects,
    sync,
    teammate,
    teammate_changes_second,
    trailers,
)

from forktool.errors import ConflictError, ForkToolError
from forktool.export import export
from forktool.git import git
from forktool.series import read_series


def test_sync_applies_patches_a_teammate_appended(workspace):
    _, patches, mine = workspace
    series_of(workspace, THREE[0])
    theirs = teammate(workspace)
    commit(theirs, *THREE[1])
    export(theirs, patches)
    commit_series(patches)
    message = sync(workspace)
    assert "applied 1 patches" in message and "0002-Core-Second.patch" in message
    assert "only in the series" in message
    assert subjects(mine) == ["[Core] First", "[Core] Second"]
    assert "up to date" in sync(workspace)


def test_issue_2_teammate_drops_a_patch(workspace):
    _, patches, mine = workspace
    series_of(workspace, *THREE)
    theirs = teammate(workspace)
    edit_series(theirs, "sed -i 2d")  # drop [Core] Second
    export(theirs, patches)
    commit_series(patches)  # ... pushed; here: git pull
    pulled = snapshot(patches)
    old_head = head(mine)
    error = refusal(lambda: export(mine, patches))
    assert "0002-Core-Second.patch: dropped from the series" in str(error)
    assert "python3 -m forktool sync" in str(error)
    assert snapshot(patches) == pulled
    message = sync(workspace)  # no --force needed: the fork is only behind
    print(message)
    assert "0002-Core-Second.patch: dropped from the series" in message
    assert subjects(mine) == ["[Core] First", "[Core] Third"]
    backup = message.rsplit("branch ", 1)[1].rstrip(".")
    assert head_of(mine, backup) == old_head
    assert "0 written, 0 removed" in export(mine, patches)
    assert snapshot(patches) == pulled


def test_fork_from_before_records_tells_a_dropped_patch_from_local_work(workspace):
    _, patches, mine = workspace
    series_of(workspace, *THREE)
    theirs = teammate(workspace)
    edit_series(theirs, "sed -i 2d")
    export(theirs, patches)
    commit_series(patches)
    (mine / ".git" / "forktool-synced").unlink()  # made by an earlier version
    commit(mine, "mini/local.py", "LOCAL = 1\n", "[Core] Local")
    message = refused(lambda: sync(workspace))
    # The dropped patch was committed in this repository: not local work.
    assert "0002-Core-Second.patch: dropped from the series" in message
    assert "0004-Core-Local.patch: only in the fork" in message
    assert "cherry-pick" in message and "Second" not in message.split("To keep")[1]


def test_issue_2_teammate_changes_a_patch(workspace):
    _, patches, mine = workspace
    series_of(workspace, *THREE)
    pulled = teammate_changes_second(workspace)
    with pytest.raises(ForkToolError, match="0002-Core-Second.patch: changed in the "):
        export(mine, patches)
    assert snapshot(patches) == pulled
    message = sync(workspace)
    print(message)
    assert "0002-Core-Second.patch: changed in the series" in message
    assert "theirs" in (mine / "mini/util.py").read_text()
    assert subjects(mine) == [c[2] for c in THREE]
    assert "0 written, 0 removed" in export(mine, patches)
    assert snapshot(patches) == pulled


def test_issue_2_my_change_to_a_patch_is_local_work(workspace):
    _, patches, mine = workspace
    series_of(workspace, *THREE)
    change_second(mine, "def double(x):\n    return x + x  # mine\n")
    with pytest.raises(ForkToolError) as excinfo:
        sync(workspace)
    assert "0002-Core-Second.patch: changed in the fork" in str(excinfo.value)
    assert "1 written, 0 removed" in export(mine, patches)
    assert "# mine" in (patches / "0002-Core-Second.patch").read_text()


def test_issue_2_both_sides_changed_a_patch(workspace):
    _, patches, mine = workspace
    series_of(workspace, *THREE)
    pulled = teammate_changes_second(workspace)
    change_second(mine, "def double(x):\n    return x + x  # mine\n")
    my_head = head(mine)
    for command in (lambda: sync(workspace), lambda: export(mine, patches)):
        message = refused(command)
        assert "0002-Core-Second.patch: changed on both sides" in message
        assert "sync --force" in message and "--fixup=HEAD~1" in message
    assert head(mine) == my_head and snapshot(patches) == pulled


def test_local_work_and_a_teammate_change_both_survive_the_advice(workspace):
    _, patches, mine = workspace
    series_of(workspace, *THREE[:2])
    theirs = teammate(workspace)
    change_second(theirs, "def double(x):\n    return x + x  # theirs\n")
    export(theirs, patches)
    commit_series(patches)
    commit(mine, *THREE[2])
    message = refused(lambda: sync(workspace))
    assert "0003-Core-Third.patch: only in the fork" in message
    assert "0002-Core-Second.patch: changed in the series" in message
    # Follow the advice line by line.
    sync(workspace, force=True)
    pick = next(line for line in message.splitlines() if "cherry-pick" in line)
    git(mine, *pick.split("#")[0].split()[3:])
    assert "1 written, 0 removed" in export(mine, patches)
    assert subjects(mine) == [c[2] for c in THREE]
    assert "theirs" in (patches / "0002-Core-Second.patch").read_text()


def test_reordering_in_the_fork_is_local_work(workspace):
    _, patches, mine = workspace
    series_of(workspace, *THREE)
    edit_series(mine, "sed -i -n '1h;1!p;${g;p}'")  # first patch last
    with pytest.raises(ForkToolError, match="reordered in the fork"):
        sync(workspace)
    export(mine, patches)
    assert [p.name for p in read_series(patches)][-1] == "0003-Core-First.patch"


def test_both_sides_changed_one_patch_the_advice_keeps_both_in_it(workspace):
    _, patches, mine = workspace
    series_of(workspace, *THREE)
    theirs = teammate(workspace)
    reworded = f"[Core] Second\n\nWhy it exists, reworded.\n\nSigned-off-by: {PERSON}"
    reword_second(theirs, reworded)
    export(theirs, patches)
    commit_series(patches)
    mine_code = "def double(x):\n    return x * 2  # mine\n"
    change_second(mine, mine_code)
    commit(mine, "mini/local.py", "LOCAL = 1\n", "[Core] Local")
    signed = trailers(mine)
    with pytest.raises(ConflictError) as excinfo:
        sync(workspace)
    message = str(excinfo.value)
    print(message)
    assert excinfo.value.status == 3
    assert "0002-Core-Second.patch: changed on both sides" in message
    assert "--fixup" in message and "--autosquash" in message
    follow(workspace, message)
    assert subjects(mine) == ["[Core] First", "[Core] Second", "[Core] Third",
                              "[Core] Local"]  # fmt: skip
    second = (patches / "0002-Core-Second.patch").read_text()
    assert "Why it exists, reworded." in second and "# mine" in second
    assert (mine / "mini/util.py").read_text() == mine_code
    assert trailers(mine) == signed
    assert "0 written, 0 removed" in export(mine, patches)


def test_both_sides_changed_the_same_line_the_advice_stops_at_the_conflict(
    workspace,
):
    _, patches, mine = workspace
    series_of(workspace, *THREE)
    theirs = teammate(workspace)
    change_second(theirs, "def double(x):\n    return x + x  # theirs\n")
    export(theirs, patches)
    commit_series(patches)
    change_second(mine, "def double(x):\n    return x + x  # mine\n")
    with pytest.raises(ConflictError) as excinfo:
        export(mine, patches)
    message = str(excinfo.value)
    with pytest.raises(subprocess.CalledProcessError):
        follow(workspace, message)  # `git apply --3way` reports the conflict
    assert "<<<<<<<" in (mine / "mini/util.py").read_text()
    (mine / "mini/util.py").write_text("def double(x):\n    return x + x  # both\n")
    rest = message.split("apply --3way\n", 1)[1]
    git(mine, "add", "mini/util.py")
    follow(workspace, rest)
    assert subjects(mine) == [c[2] for c in THREE]
    assert "# both" in (patches / "0002-Core-Second.patch").read_text()
