"""The patch-queue workflow against a tiny synthetic base: no vLLM, no network."""

from __future__ import annotations

import hashlib
import io
import re
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

import forktool.sync
from forktool.errors import ForkToolError
from forktool.export import export
from forktool.git import git
from forktool.pins import Artifact, Pins, fetch
from forktool.series import read_series

AUTHOR = "Test Project <test-project@noreply.invalid>"
PERSON = "Dev Person <dev@example.invalid>"
MESSAGE = "mini 0.1\n"
GENERATED = ("PKG-INFO",)


def make_sdist(path: Path, files: dict[str, str]) -> Artifact:
    """An sdist-like tarball with one top-level directory, owned by uid 1000."""
    with tarfile.open(path, "w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"mini-0.1/{name}")
            info.size, info.uid, info.uname = len(data), 1000, "builder"
            tar.addfile(info, io.BytesIO(data))
    return Artifact(path.name, hashlib.sha256(path.read_bytes()).hexdigest())


def make_pins(sdist: Artifact) -> Pins:
    return Pins("mini", "0.1", GENERATED, sdist, sdist, AUTHOR, "pip", (), ())


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    """This repository (a git checkout holding patches/), a cache holding a
    verified sdist, and a fork path; git knows the person as PERSON."""
    monkeypatch.setenv("VLLM_FORK_CACHE", str(tmp_path / "cache"))
    gitconfig = tmp_path / "gitconfig"
    name, email = PERSON[: PERSON.index(" <")], PERSON[PERSON.index("<") + 1 : -1]
    gitconfig.write_text(f"[user]\n\tname = {name}\n\temail = {email}\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(gitconfig))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    downloads = tmp_path / "cache" / "downloads"
    downloads.mkdir(parents=True)
    pins = make_pins(make_sdist(downloads / "mini-0.1.tar.gz", BASE_FILES))
    repo = tmp_path / "repo"
    patches = repo / "patches"
    patches.mkdir(parents=True)
    (patches / "series").write_text("# empty\n")
    git(repo, "init", "-q")
    commit_series(patches)
    return pins, patches, repo / "build" / "mini"


BASE_FILES = {
    ".gitignore": "*.so\n*_hip*\n",
    "PKG-INFO": "Name: mini\n",
    "mini/rocm_hip.py": "# ignored by .gitignore, shipped anyway\n",
    "mini/__init__.py": "VALUE = 1\n",
    "mini/util.py": "def double(x):\n    return 2 * x\n",
}


def sync(workspace, force=False, tree=None, message=MESSAGE, sdist=None) -> str:
    pins, patches, own = workspace
    return forktool.sync.sync(
        tree or own,
        patches,
        AUTHOR,
        message,
        lambda: fetch(pins, sdist or pins.sdist),
        GENERATED,
        force,
    )


def commit(tree: Path, path: str, text: str, subject: str) -> None:
    (tree / path).parent.mkdir(parents=True, exist_ok=True)
    (tree / path).write_text(text)
    git(tree, "add", path)
    git(tree, "commit", "-qm", f"{subject}\n\nSigned-off-by: {PERSON}")


def commit_series(patches: Path) -> None:
    """`git add patches && git commit` in this repository."""
    git(patches, "add", "-A", ".")
    git(patches, "commit", "-q", "--allow-empty", "-m", "Series")


def head(tree: Path) -> str:
    return git(tree, "rev-parse", "HEAD").stdout.strip()


def subjects(tree: Path) -> list[str]:
    return git(tree, "log", "--reverse", "--format=%s", "base..").stdout.split("\n")[
        :-1
    ]


def snapshot(patches: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(patches.iterdir())}


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


def series_of(workspace, *changes: tuple[str, str, str]) -> Path:
    """Sync the fork, commit `changes` (path, text, subject), export, commit."""
    _, patches, tree = workspace
    sync(workspace)
    for change in changes:
        commit(tree, *change)
    export(tree, patches)
    commit_series(patches)
    return tree


THREE = [
    ("mini/__init__.py", "VALUE = 2\n", "[Core] First"),
    ("mini/util.py", "def double(x):\n    return x * 2\n", "[Core] Second"),
    ("mini/extra.py", "EXTRA = 1\n", "[Core] Third"),
]


def teammate(workspace) -> Path:
    """A second clone's fork of the same series (after `git pull`)."""
    other = workspace[2].parent.parent / "teammate" / "mini"
    sync(workspace, tree=other)
    return other


def edit_series(tree: Path, script: str) -> None:
    """`git rebase -i base` with `script` (sed) as the editor of the todo list."""
    git(tree, "rebase", "-q", "-i", "base", env={"GIT_SEQUENCE_EDITOR": script})


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


def test_issue_1_rebase_in_progress_is_refused_and_nothing_is_lost(workspace):
    _, patches, tree = workspace
    series_of(workspace, *THREE)
    exported = snapshot(patches)
    # Stop an interactive rebase at the second patch, as `edit` does.
    edit_series(tree, "sed -i 2s/^pick/edit/")
    assert (tree / ".git" / "rebase-merge").exists()
    for command in (export, lambda tree, _: sync(workspace)):
        with pytest.raises(ForkToolError) as excinfo:
            command(tree, patches)
        message = str(excinfo.value)
        print(message)
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


def test_issue_2_teammate_drops_a_patch(workspace):
    _, patches, mine = workspace
    series_of(workspace, *THREE)
    theirs = teammate(workspace)
    edit_series(theirs, "sed -i 2d")  # drop [Core] Second
    export(theirs, patches)
    commit_series(patches)  # ... pushed; here: git pull
    pulled = snapshot(patches)
    old_head = head(mine)
    with pytest.raises(ForkToolError) as excinfo:
        export(mine, patches)
    print(excinfo.value)
    assert "0002-Core-Second.patch: dropped from the series" in str(excinfo.value)
    assert "python3 -m forktool sync" in str(excinfo.value)
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
    with pytest.raises(ForkToolError) as excinfo:
        sync(workspace)
    message = str(excinfo.value)
    print(message)
    # The dropped patch was committed in this repository: not local work.
    assert "0002-Core-Second.patch: dropped from the series" in message
    assert "0004-Core-Local.patch: only in the fork" in message
    assert "cherry-pick" in message and "Second" not in message.split("To keep")[1]


def head_of(tree: Path, ref: str) -> str:
    return git(tree, "rev-parse", ref).stdout.strip()


def change_second(tree: Path, body: str) -> None:
    """Amend the second of THREE's patches in place (rebase -i, `edit`)."""
    edit_series(tree, "sed -i 2s/^pick/edit/")
    (tree / "mini/util.py").write_text(body)
    git(tree, "commit", "-q", "--amend", "--no-edit", "-a")
    git(tree, "rebase", "--continue", env={"GIT_EDITOR": "true"})


def teammate_changes_second(workspace) -> dict[str, bytes]:
    """A teammate amends THREE's second patch and commits the series; return
    patches/ as pulled."""
    patches = workspace[1]
    theirs = teammate(workspace)
    change_second(theirs, "def double(x):\n    return x + x  # theirs\n")
    export(theirs, patches)
    commit_series(patches)
    return snapshot(patches)


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
        with pytest.raises(ForkToolError) as excinfo:
            command()
        message = str(excinfo.value)
        print(message)
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
    with pytest.raises(ForkToolError) as excinfo:
        sync(workspace)
    message = str(excinfo.value)
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
    with pytest.raises(ForkToolError) as excinfo:
        sync(workspace)
    message = str(excinfo.value)
    print(message)
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


def test_issue_3_new_pinned_base_with_a_conflicting_patch(workspace):
    pins, patches, tree = workspace
    series_of(workspace, *THREE)
    old_head = head(tree)
    # vLLM's next release changed util.py under the second patch.
    files = {**BASE_FILES, "mini/util.py": "def double(x):\n    return 2 * x  # new\n"}
    downloads = tree.parent.parent.parent / "cache" / "downloads"
    sdist = make_sdist(downloads / "mini-0.2.tar.gz", files)
    with pytest.raises(ForkToolError) as excinfo:
        sync(workspace, message="mini 0.2\n", sdist=sdist)
    message = str(excinfo.value)
    print(message)
    assert "The pinned base is now mini 0.2" in message
    assert (
        "patch 2 of 3 in the series does not apply: 0002-Core-Second.patch" in message
    )
    assert "conflicting: mini/util.py" in message
    assert git(tree, "status", "--porcelain").stdout == ""
    assert git(tree, "log", "-1", "--format=%s", "base").stdout == "mini 0.2\n"
    assert subjects(tree) == ["[Core] First"]
    named = re.search(r"branch (backup/\S+)\.", message)
    assert named, message
    backup = named.group(1)
    assert head_of(tree, backup) == old_head
    # Follow the advice: port the patch, sync applies the rest, export.
    command = next(line for line in message.splitlines() if " am -3 " in line)
    assert git(tree, *command.split()[3:], check=False).returncode != 0
    (tree / "mini/util.py").write_text("def double(x):\n    return x * 2  # new\n")
    git(tree, "add", "mini/util.py")
    git(tree, "am", "--continue", env={"GIT_EDITOR": "true"})
    message = sync(workspace, message="mini 0.2\n", sdist=sdist)
    assert "applied 1 patches" in message and "forktool export" in message
    assert subjects(tree) == [c[2] for c in THREE]
    assert "1 written, 0 removed" in export(tree, patches)
    assert "# new" in (patches / "0002-Core-Second.patch").read_text()
    assert "up to date" in sync(workspace, message="mini 0.2\n", sdist=sdist)


def test_issue_3_local_work_is_saved_before_the_base_moves(workspace):
    _, patches, tree = workspace
    series_of(workspace, THREE[0])
    commit(tree, *THREE[2])
    with pytest.raises(ForkToolError, match="0002-Core-Third.patch: only in the fork"):
        sync(workspace, message="mini 0.2\n")
    assert subjects(tree) == ["[Core] First", "[Core] Third"]


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
