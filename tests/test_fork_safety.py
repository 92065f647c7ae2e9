"""Work only the fork holds is refused, kept, and saved by the advice as printed."""

import re
import shutil
import subprocess

import fork_fixture as fx
import pytest
from fork_fixture import MINE, THREE, commit, commit_series, git, head, refusal, refused


@pytest.mark.parametrize("path", ["mini/util.py", "NOTES.txt"])
def test_uncommitted_changes_are_refused_and_the_advised_stash_keeps_them(ws, path):
    ws.series_of(THREE[0])
    (ws.tree / path).write_text("mine\n")
    message = refused(ws.sync)
    assert "uncommitted changes" in message and (ws.tree / path).read_text() == "mine\n"
    assert (advised := re.search(r"`(git -C \S+ stash -u)`", message)), message
    subprocess.run(advised.group(1), shell=True, check=True)  # -u: untracked too
    assert "up to date" in ws.sync()
    git(ws.tree, "stash", "pop")
    assert (ws.tree / path).read_text() == "mine\n"


LOCAL_WORK = {  # work in the fork, how sync names it, what export says it saves
    "a new commit": (
        lambda tree: commit(tree, *fx.LOCAL), "0004-Core-Local.patch: only in the fork",
        "(1 written, 0 removed)\n  0004-Core-Local.patch: only in the fork\n"
        "  series: patches added, removed or reordered"),
    "a changed patch": (
        lambda tree: fx.change_second(tree, MINE),
        "0002-Core-Second.patch: changed in the fork",
        "(1 written, 0 removed)\n  0002-Core-Second.patch: changed in the fork"),
    "a reordered series": (
        lambda tree: fx.edit_series(tree, "sed -i -n '1h;1!p;${g;p}'"),  # first last
        "(order): reordered in the fork",
        "0001-Core-First.patch -> 0003-Core-First.patch: renumbered"),
    "a reworded subject": (
        fx.reword_third, "0003-Core-Third.patch: changed in the fork",
        "0003-Core-Third-reworded.patch: changed in the fork\n  0003-Core-Third.patch"
        " -> 0003-Core-Third-reworded.patch: its subject changed"),
}  # fmt: skip


@pytest.mark.parametrize("work", LOCAL_WORK)
def test_sync_refuses_local_work_and_export_saves_it(ws, work):
    ws.series_of(*THREE)
    make, named, saved = LOCAL_WORK[work]
    make(ws.tree)
    mine = head(ws.tree)
    error = refusal(ws.sync)
    assert error.status == 1  # a refusal, not a conflict to resolve
    assert f"{ws.tree} has work the series lacks:\n  {named}" in str(error)
    assert "Save it with `python3 -m forktool export`" in str(error)
    assert head(ws.tree) == mine
    message = ws.export()
    assert saved in message and "removed from the series" not in message
    commit_series(ws.patches)
    assert "up to date" in ws.sync() and fx.trees(ws.clone()) == fx.trees(ws.tree)


STOPPED = {  # the operation, what the refusal calls it, its finish, its abort
    "rebase -i": ("a rebase", "rebase --continue", "rebase --abort"),
    "cherry-pick": ("a `git cherry-pick`", "cherry-pick --continue",
                    "cherry-pick --abort"),
    "merge": ("a merge", "commit", "merge --abort"),
    "am": ("a `git am`", "am --continue", "am --abort"),
    "revert": ("a `git revert`", "revert --continue", "revert --abort"),
    "rebase": ("a rebase", "rebase --continue", "rebase --abort"),
    "bisect": ("a `git bisect`", "bisect reset", "bisect reset"),
}  # fmt: skip


@pytest.mark.parametrize("operation", STOPPED)
def test_a_git_operation_in_progress_is_refused_and_nothing_is_lost(ws, operation):
    exported = ws.series_of(*THREE)
    what, finish, abort = STOPPED[operation]
    if operation == "rebase -i":
        fx.edit_series(ws.tree, "sed -i 2s/^pick/edit/")  # stops at patch 2
    else:  # each stops at a conflict with a side branch; bisect at its first step
        git(ws.tree, "checkout", "-q", "-b", "side", "base")
        commit(ws.tree, "mini/util.py", "def double(x):\n    return x + x\n", "[A] B")
        git(ws.tree, "checkout", "-q", "main")
        side = git(ws.tree, "format-patch", "-1", "side", "-o", "../am").stdout.strip()
        args = {"am": ["am", side], "revert": ["revert", "--no-edit", "side"],
                "rebase": ["rebase", "--apply", "side"],  # git's other backend
                "bisect": ["bisect", "start", "HEAD", "base"]}  # fmt: skip
        stop = args.get(operation, [operation, "side"])
        stopped = git(ws.tree, *stop, check=False).returncode
        assert (stopped == 0) == (operation == "bisect")
    for command in (ws.export, ws.sync):
        message = refused(command)
        assert f"{ws.tree} is in the middle of {what}; `" in message
        assert f"then `git -C {ws.tree} {finish}`" in message
        assert f"where it started: `git -C {ws.tree} {abort}`" in message
    assert ws.snapshot() == exported
    git(ws.tree, *(finish if operation == "rebase -i" else abort).split())
    assert "0 written, 0 removed" in ws.export() and ws.snapshot() == exported


OFF_BRANCH = {  # how the fork left main, whether it commits there, the refusal
    "a detached HEAD": (["HEAD~1"], False, "a detached HEAD ("),
    "a commit on a detached HEAD": (["HEAD~1"], True, "a detached HEAD ("),
    "a branch": (["-b", "feature"], True, "branch feature,"),
}


@pytest.mark.parametrize("where", OFF_BRANCH)
def test_a_fork_off_its_branch_is_named_and_the_advice_keeps_its_commits(ws, where):
    before = ws.series_of(*THREE)
    checkout, commits, named = OFF_BRANCH[where]
    git(ws.tree, "checkout", "-q", *checkout)
    if commits:
        commit(ws.tree, "mini/feature.py", "F = 1\n", "[Core] Feature")
    at = head(ws.tree)
    kept = "feature" if where == "a branch" else f"kept-{at[:12]}"
    branched = where == "a commit on a detached HEAD"  # advised to keep it
    for command in (ws.sync, ws.export):
        message = refused(command)
        assert f"{ws.tree} is on {named}" in message
        assert "not on its branch `main`" in message
        assert f"git -C {ws.tree} checkout main" in message
        assert (f"branch {kept} {at[:12]}" in message) == branched
    assert ws.snapshot() == before and head(ws.tree) == at
    ws.follow(message)
    assert fx.subjects(ws.tree) == fx.SUBJECTS
    assert "is what export writes (3 patches)" in ws.export(check=True)
    if commits:
        assert head(ws.tree, kept) == at


def test_a_merge_commit_is_refused_and_the_advice_linearises_it(ws):
    before = ws.series_of(*THREE[:2])
    git(ws.tree, "checkout", "-q", "-b", "side", "HEAD~1")
    commit(ws.tree, "mini/util.py", "def double(x):\n    return x + x\n", "[Core] Side")
    git(ws.tree, "checkout", "-q", "main")
    assert git(ws.tree, "merge", "-q", "side", check=False).returncode
    resolved = "def double(x):\n    return x * 2  # resolved\n"
    (ws.tree / "mini/util.py").write_text(resolved)
    git(ws.tree, "commit", "-qam", "Merge side")
    for command in (ws.export, ws.sync):
        message = refused(command)
        assert "merge " in message and "its resolution would be in no patch" in message
    assert ws.snapshot() == before
    line = next(x for x in message.splitlines() if " rebase base" in x)
    assert subprocess.run(line, shell=True).returncode != 0
    (ws.tree / "mini/util.py").write_text(resolved)
    git(ws.tree, "add", "mini/util.py")
    git(ws.tree, "rebase", "--continue", env={"GIT_EDITOR": "true"})
    assert "3 patches" in ws.export()
    commit_series(ws.patches)
    other = ws.clone()
    assert (other / "mini/util.py").read_text() == resolved
    assert fx.subjects(other) == ["[Core] First", "[Core] Second", "[Core] Side"]


def empty_commit(ws):
    git(ws.tree, "commit", "-q", "--allow-empty", "-m",
        f"[Core] Nothing\n\nSigned-off-by: {fx.PERSON}")  # fmt: skip
    commit(ws.tree, *THREE[2])


def fixup_commit(ws):
    (ws.tree / "mini/__init__.py").write_text("VALUE = 3\n")
    git(ws.tree, "commit", "-q", "-a", "--fixup=HEAD~1")


def reordered_series_and_local_work(ws):
    fx.swap_second_and_third(ws.patches)
    commit(ws.tree, *fx.LOCAL)


def teammates_change_and_local_work(ws):
    fx.teammate_changes_second(ws)
    commit(ws.tree, *THREE[2])


ADVISED = {  # the series, what is done, the command refusing it, its exit status and
    # what it names, the fork after, a patch and what it keeps
    "an empty commit": (THREE[:1], empty_commit, "export", 1, ["empty ",
        "[Core] Nothing"], ["First", "Third"], ("0002-Core-Third.patch", "EXTRA = 1")),
    "a fixup commit": (THREE[:2], fixup_commit, "export", 1, ["fixup! [Core] First",
        "--autosquash"], ["First", "Second"], ("0001-Core-First.patch", "VALUE = 3")),
    "local work and a hand-reordered series": (
        THREE, reordered_series_and_local_work, "sync", 3,
        ["0004-Core-Local.patch: only in the fork", "(order): reordered in the series"],
        ["First", "Third", "Second", "Local"], ("0004-Core-Local.patch", "LOCAL = 1")),
    "local work and a teammate's change": (
        THREE[:2], teammates_change_and_local_work, "sync", 3,
        ["0003-Core-Third.patch: only in the fork",
         "0002-Core-Second.patch: changed in the series"],
        ["First", "Second", "Third"], ("0002-Core-Second.patch", "# theirs")),
}  # fmt: skip


@pytest.mark.parametrize("case", ADVISED)
def test_a_refused_fork_is_mended_by_the_advice_and_keeps_every_change(ws, case):
    exported, make, command, status, said, after, (name, kept) = ADVISED[case]
    ws.series_of(*exported)
    make(ws)
    before = ws.snapshot()
    error = refusal(getattr(ws, command))
    assert error.status == status and all(s in str(error) for s in said), error
    assert ws.snapshot() == before
    ws.follow(str(error))
    assert fx.subjects(ws.tree) == [f"[Core] {s}" for s in after]
    assert ws.names() == [f"{i:04}-Core-{s}.patch" for i, s in enumerate(after, 1)]
    assert all((ws.patches / n).stat().st_size for n in ws.names())
    assert kept in (ws.patches / name).read_text()
    assert f"is what export writes ({len(after)} patches)" in ws.export(check=True)


@pytest.mark.parametrize(
    "where, why",
    [("uncommitted", "not committed in this repository"),
     ("outside git", "is not in a git checkout, so nothing there is committed")],
)  # fmt: skip
def test_export_refuses_to_delete_a_patch_file_git_could_not_give_back(ws, where, why):
    ws.sync()
    for change in THREE:
        commit(ws.tree, *change)
    ws.export()  # not committed in this repository yet
    if where == "outside git":
        shutil.rmtree(ws.patches.parent / ".git")
    exported = ws.snapshot()
    git(ws.tree, "reset", "-q", "--hard", "HEAD~1")  # drop the third patch
    message = refused(ws.export)
    assert "0003-Core-Third.patch (export would delete it)" in message
    assert why in message and ws.snapshot() == exported
    if where == "uncommitted":
        commit_series(ws.patches)  # now the file is in this repository's history
        assert "1 removed" in ws.export()
        assert not (ws.patches / "0003-Core-Third.patch").exists()


@pytest.mark.parametrize("way", ["export again", "take patches/"])
@pytest.mark.parametrize("undo", [("checkout", "--", "."), ("stash",)])
def test_an_undone_export_is_named_and_each_way_on_loses_nothing(ws, undo, way):
    committed = ws.series_of(*THREE)
    fx.change_second(ws.tree, MINE)
    mine = head(ws.tree)
    ws.export()
    exported = ws.snapshot()
    git(ws.patches, *undo)
    assert ws.snapshot() == committed
    said = refused(ws.sync)
    assert said.startswith("patches/ is back to what your last export replaced")
    assert f"up to {mine[:7]}" in said and "0002-Core-Second.patch" in said
    assert head(ws.tree) == mine and ws.snapshot() == committed
    export, force = said.split("\nor take patches/ as it is")
    ws.follow(export if way == "export again" else force)
    if way == "export again":
        assert ws.snapshot() == exported and head(ws.tree) == mine
    else:
        assert ws.snapshot() == committed
        assert (ws.tree / "mini/util.py").read_text() != MINE
        kept = [b for b in git(ws.tree, "branch").stdout.split() if "backup/" in b]
        assert [head(ws.tree, b) for b in kept] == [mine]
    assert "up to date" in ws.sync()
