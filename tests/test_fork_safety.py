"""Issue 18 on the synthetic base: every sync and export verified, and every
command the tool prints followed literally (`follow`), checking that no
patch is lost, none duplicated and nobody else's sign-off changed."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_fork import (
    AUTHOR,
    BASE_FILES,
    PERSON,
    THREE,
    commit,
    commit_series,
    edit_series,
    make_sdist,
    series_of,
    snapshot,
    subjects,
    sync,
    teammate,
)

import forktool.sync
from forktool import backups, journal, pins
from forktool.check_runs import all_checks
from forktool.errors import ConflictError, ForkToolError
from forktool.export import export
from forktool.git import git
from forktool.layout import REPO
from forktool.pins import Artifact, Pins, fetch, sha256_of
from forktool.tool_checks import EXPORT_CHECK


def follow(workspace, message: str) -> None:
    """Run every command line `message` prints, as printed: git in a shell
    with the person's own git config, the tool's commands on `workspace`."""
    _, patches, tree = workspace
    for line in message.splitlines():
        line = line.strip()
        if line.startswith("python3 -m forktool "):
            words = line.split("#")[0].split()[3:]
            if words[0] == "sync":
                sync(workspace, force="--force" in words)
            elif words == ["export"]:
                export(tree, patches)
            else:
                raise AssertionError(f"unknown advice: {line}")
        elif line.startswith("git "):
            subprocess.run(line, shell=True, check=True)


def trailers(tree: Path) -> dict[str, list[str]]:
    """Subject -> its Signed-off-by lines, for each patch of the fork."""
    log = git(tree, "log", "--format=%s%x00%B%x1e", "base..").stdout
    found = {}
    for record in filter(str.strip, log.split("\x1e")):
        subject, body = record.strip("\n").split("\0")
        found[subject] = re.findall(r"^Signed-off-by: .*$", body, re.M)
    return found


def fresh_clone(workspace, name: str = "fresh") -> Path:
    """Another clone's fork, built from patches/ alone."""
    other = workspace[2].parent.parent / name / "mini"
    shutil.rmtree(other, ignore_errors=True)
    sync(workspace, tree=other)
    return other


# --- 1. A patch applied in part is refused -----------------------------------

TRIPLE = "def double(x):\n    return 2 * x\n\n\ndef triple(x):\n    return 3 * x\n"


def test_a_patch_whose_hunk_header_counts_too_few_lines_is_refused(workspace):
    _, patches, tree = workspace
    series_of(workspace, THREE[0], ("mini/util.py", TRIPLE, "[Core] Triple"))
    bad = patches / "0002-Core-Triple.patch"
    bad.write_text(bad.read_text().replace("@@ -1,2 +1,6 @@", "@@ -1,2 +1,4 @@"))
    commit_series(patches)
    shutil.rmtree(tree)
    with pytest.raises(ForkToolError) as excinfo:
        sync(workspace)
    message = str(excinfo.value)
    print(message)
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
    with pytest.raises(ForkToolError) as excinfo:
        export(tree, patches)
    print(excinfo.value)
    assert "do not rebuild" in str(excinfo.value)
    assert "mini/util.py" in str(excinfo.value)
    assert snapshot(patches) == before


# --- 2. Merge commits and empty commits: refused, and the advice works --------


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
        with pytest.raises(ForkToolError) as excinfo:
            command()
        message = str(excinfo.value)
        print(message)
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
    with pytest.raises(ForkToolError) as excinfo:
        export(tree, patches)
    message = str(excinfo.value)
    print(message)
    assert "empty " in message and "[Core] Nothing" in message
    follow(workspace, message)
    assert subjects(tree) == ["[Core] First", "[Core] Third"]
    assert [p.name for p in sorted(patches.glob("*.patch"))] == [
        "0001-Core-First.patch",
        "0002-Core-Third.patch",
    ]
    assert all(p.stat().st_size for p in patches.glob("*.patch"))


# --- export --check -----------------------------------------------------------


def test_export_check_names_stale_patches_and_writes_nothing(workspace):
    _, patches, tree = workspace
    series_of(workspace, *THREE)
    assert "is what export writes (3 patches)" in export(tree, patches, check=True)
    stale = patches / "0002-Core-Second.patch"
    stale.write_text(stale.read_text().replace("@@ -1,2 +1,2 @@", "@@ -3,2 +3,2 @@"))
    before = snapshot(patches)
    assert "up to date" in sync(workspace)  # git patch-id ignores line numbers
    with pytest.raises(ForkToolError) as excinfo:
        export(tree, patches, check=True)
    print(excinfo.value)
    assert "(1 differ)" in str(excinfo.value)
    assert "0002-Core-Second.patch: the same change, rewritten" in str(excinfo.value)
    assert snapshot(patches) == before
    assert EXPORT_CHECK in all_checks() and EXPORT_CHECK.gates_test


# --- 5. The user's git config does not change the tool's commits -------------


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


# --- 3. Advice followed literally ----------------------------------------------


def reword_second(tree: Path, body: str) -> None:
    """`git rebase -i`, `reword` of THREE's second patch: a new message."""
    edit_series(tree, "sed -i 2s/^pick/edit/")
    git(tree, "commit", "-q", "--amend", "-m", body)
    git(tree, "rebase", "--continue", env={"GIT_EDITOR": "true"})


def change_second_code(tree: Path, text: str) -> None:
    edit_series(tree, "sed -i 2s/^pick/edit/")
    (tree / "mini/util.py").write_text(text)
    git(tree, "commit", "-q", "--amend", "--no-edit", "-a")
    git(tree, "rebase", "--continue", env={"GIT_EDITOR": "true"})


def test_both_sides_changed_one_patch_the_advice_keeps_both_in_it(workspace):
    _, patches, mine = workspace
    series_of(workspace, *THREE)
    theirs = teammate(workspace)
    reworded = f"[Core] Second\n\nWhy it exists, reworded.\n\nSigned-off-by: {PERSON}"
    reword_second(theirs, reworded)
    export(theirs, patches)
    commit_series(patches)
    mine_code = "def double(x):\n    return x * 2  # mine\n"
    change_second_code(mine, mine_code)
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
    change_second_code(theirs, "def double(x):\n    return x + x  # theirs\n")
    export(theirs, patches)
    commit_series(patches)
    change_second_code(mine, "def double(x):\n    return x + x  # mine\n")
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


def backed_up(tree: Path) -> str:
    """The subjects on the fork's backup branches."""
    return git(tree, "log", "--format=%s", "--branches=backup/").stdout


def _interrupt_third_am(monkeypatch):
    """Ctrl-C inside the am of the third patch, after it began its file."""
    real = git

    def interrupted(repo, *args, **kwargs):
        if args[:1] == ("am",) and args[-1].endswith("0003-Core-Third.patch"):
            (repo / "mini/extra.py").write_text("EXTRA =")
            real(repo, *args, check=False)  # stops: the file is in the way
            raise KeyboardInterrupt
        return real(repo, *args, **kwargs)

    monkeypatch.setattr("forktool.am.git", interrupted)
    return lambda: monkeypatch.setattr("forktool.am.git", real)


def test_a_sync_stopped_in_git_am_leaves_the_fork_as_it_was(workspace, monkeypatch):
    _, patches, tree = workspace
    series_of(workspace, *THREE)
    commit(tree, "LOCAL.md", "x\n", "[Doc] Local")
    before = git(tree, "rev-parse", "HEAD").stdout
    restore = _interrupt_third_am(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        sync(workspace, force=True)
    restore()
    assert git(tree, "rev-parse", "HEAD").stdout == before
    assert git(tree, "status", "--porcelain").stdout == ""
    message = sync(workspace, force=True)
    print(message)
    assert message.startswith("undid an interrupted command")
    assert subjects(tree) == [c[2] for c in THREE]
    assert "[Doc] Local" in git(tree, "log", "--format=%s", "--branches=backup/").stdout
    assert not list(tree.parent.glob(".mini.*"))


def test_a_sync_killed_while_it_moves_the_fork_is_finished(workspace, monkeypatch):
    """Killed in the final `git reset --hard`, which leaves git's index.lock:
    the next command finishes the move, with nothing to remove by hand."""
    _, patches, tree = workspace
    series_of(workspace, *THREE)
    commit(tree, "LOCAL.md", "x\n", "[Doc] Local")

    def killed(fork_tree, move):
        (fork_tree / ".git" / "index.lock").write_text("")
        raise KeyboardInterrupt

    monkeypatch.setattr(journal, "_finish_sync", killed)
    with pytest.raises(KeyboardInterrupt):
        sync(workspace, force=True)
    monkeypatch.undo()
    assert journal.journal_path(tree).exists()
    message = sync(workspace)
    assert message.startswith("finished an interrupted sync"), message
    assert subjects(tree) == [c[2] for c in THREE]
    assert not (tree / ".git" / "index.lock").exists()
    assert git(tree, "status", "--porcelain").stdout == ""
    assert "[Doc] Local" in git(tree, "log", "--format=%s", "--branches=backup/").stdout


def test_an_export_finished_later_marks_what_it_exported(workspace, monkeypatch):
    """Killed after its journal, then a commit in the fork: the next command
    finishes the export, and the later commit stays local work."""
    _, patches, tree = workspace
    series_of(workspace, *THREE)
    commit(tree, "FOUR.md", "4\n", "[Doc] Four")
    exported = git(tree, "rev-parse", "HEAD").stdout.strip()

    def killed(fork_tree, done):
        raise KeyboardInterrupt

    monkeypatch.setattr(journal, "_finish_export", killed)
    with pytest.raises(KeyboardInterrupt):
        export(tree, patches)
    monkeypatch.undo()
    commit(tree, "FIVE.md", "5\n", "[Doc] Five")
    with pytest.raises(ForkToolError, match="Five.patch: only in the fork"):
        sync(workspace)
    assert (patches / "0004-Doc-Four.patch").exists()
    synced = git(tree, "rev-parse", "refs/forktool/synced").stdout.strip()
    assert synced == exported


def test_a_rebuild_applies_a_pure_rename(workspace):
    """A rename without a content change has no `index` line; the staging
    worktree must still check out the file it moves."""
    _, patches, tree = workspace
    sync(workspace)
    git(tree, "mv", "mini/util.py", "mini/helpers.py")
    git(tree, "commit", "-qm", f"[Misc] Rename\n\nSigned-off-by: {PERSON}")
    export(tree, patches)
    commit(tree, "LOCAL.md", "x\n", "[Doc] Local")
    assert "rebuilt" in sync(workspace, force=True)
    assert (tree / "mini" / "helpers.py").exists()
    assert not (tree / "mini" / "util.py").exists()


def test_a_first_sync_stopped_in_git_am_leaves_no_fork(workspace, monkeypatch):
    _, patches, tree = workspace
    series_of(workspace, *THREE)
    shutil.rmtree(tree)
    restore = _interrupt_third_am(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        sync(workspace)
    restore()
    assert not tree.exists()
    assert "materialised" in sync(workspace)
    assert subjects(tree) == [c[2] for c in THREE]
    assert [p.name for p in tree.parent.iterdir()] == ["mini"]


# --- sha256: which side is wrong ---------------------------------------------


def test_sha256_mismatch_says_which_side_is_wrong(workspace, monkeypatch):
    good, patches, tree = workspace
    file = Path(os.environ["VLLM_FORK_CACHE"]) / "downloads" / "mini-0.1.tar.gz"
    typo = Artifact(good.sdist.filename, "1" * 64)
    wheel = Artifact("mini-0.1-py3-none-any.whl", "2" * 64)
    bad = Pins("mini", "0.1", (), typo, wheel, AUTHOR, "pip", (), ())
    published: dict[str, str | None] = {"index": sha256_of(file)}
    monkeypatch.setattr(pins, "index_sha256", lambda p, name: published["index"])
    with pytest.raises(ForkToolError) as excinfo:
        fetch(bad, typo)
    said = str(excinfo.value)
    print(said)
    assert "pins.toml is wrong" in said and sha256_of(file) in said
    assert "delete" not in said.lower() and file.exists()
    # The pin is the wheel's: a slip in pins.toml, whatever the index says.
    slip = Pins("mini", "0.1", (), Artifact(typo.filename, "2" * 64), wheel,
                AUTHOR, "pip", (), ())  # fmt: skip
    with pytest.raises(ForkToolError, match="the sha256 of mini-0.1-py3"):
        fetch(slip, slip.sdist)
    # The index agrees with the pin: the file is damaged, delete it.
    published["index"] = typo.sha256
    with pytest.raises(ForkToolError, match=f"damaged.*Delete {file}"):
        fetch(bad, typo)
    published["index"] = None
    with pytest.raises(ForkToolError, match="cannot be told"):
        fetch(bad, typo)
    assert file.exists()


# --- 4. The port report -------------------------------------------------------


def new_base(workspace, files: dict[str, str]) -> Artifact:
    downloads = Path(os.environ["VLLM_FORK_CACHE"]) / "downloads"
    return make_sdist(downloads / "mini-0.2.tar.gz", files)


def test_port_report_names_conflict_kinds_and_paths_the_new_base_lacks(workspace):
    _, patches, tree = workspace
    series_of(workspace, *THREE)
    buildkite = ".buildkite/steps.yaml"
    files = {**BASE_FILES, buildkite: "steps:\n- source_file_dependencies:\n"
             "  - mini/\n"}  # fmt: skip
    files.pop("mini/util.py")  # the new release dropped util.py
    sdist = new_base(workspace, files)
    with pytest.raises(ConflictError) as excinfo:
        sync(workspace, message="mini 0.2\n", sdist=sdist)
    message = str(excinfo.value)
    print(message)
    assert "mini/util.py: missing in the new base" in message
    assert "(modify/delete)" in message
    # Port it: the patch's change moves into a new file of the release.
    command = next(line for line in message.splitlines() if " am -3 " in line)
    subprocess.run(command, shell=True)
    git(tree, "rm", "-q", "mini/util.py")
    (tree / "mini/maths.py").write_text("def double(x):\n    return x * 2\n")
    git(tree, "add", "mini/maths.py")
    git(tree, "am", "--continue", env={"GIT_EDITOR": "true"})
    assert "applied 1 patches" in sync(workspace, message="mini 0.2\n", sdist=sdist)
    # A fourth patch still points CI at the file 0.2 lacks.
    export(tree, patches)
    (tree / buildkite).write_text(files[buildkite] + "  - mini/util.py\n")
    git(tree, "add", buildkite)
    git(tree, "commit", "-qm", "[CI] Steps")
    export(tree, patches)
    selection = patches.parent / "upstream-tests.toml"
    selection.write_text(
        '[[run]]\nname = "all"\nargs = ["tests/test_util.py", "-k", "x"]\n'
        '[regression]\nargs = ["mini/extra.py"]\nfails_on_base = []\n'
        "[gpu_only]\nargs = []\n"
    )
    shutil.rmtree(tree)
    pins_, _, _ = workspace
    message = forktool.sync.sync(tree, patches, AUTHOR, "mini 0.2\n",
                        lambda: fetch(pins_, sdist), ("PKG-INFO",),
                        selection=selection)  # fmt: skip
    print(message)
    lacking = re.search(r"(\d+) paths named for the fork are not in it", message)
    listed = [line for line in message.splitlines() if "(named by" in line]
    assert lacking and int(lacking.group(1)) == len(listed) == 2
    assert "mini/util.py (named by a Buildkite entry of 0004-CI-Steps.patch)" in (
        message
    )
    assert "tests/test_util.py (named by upstream-tests.toml)" in message


def test_sync_lists_exactly_the_patches_it_applied(workspace):
    _, patches, mine = workspace
    series_of(workspace, THREE[0])
    theirs = teammate(workspace)
    for change in THREE[1:]:
        commit(theirs, *change)
    export(theirs, patches)
    commit_series(patches)
    message = sync(workspace)
    print(message)
    applied = re.search(r"applied (\d+) patches", message)
    assert applied, message
    count = int(applied.group(1))
    listed = [line for line in message.splitlines() if line.startswith("  ")]
    assert count == len(listed) == 2
    message = export(mine, patches)
    assert "0 written" in message and len(message.splitlines()) == 1


# --- 6. Errors a user can act on ----------------------------------------------


def test_a_patch_git_cannot_parse_names_the_line_git_names(workspace):
    _, patches, tree = workspace
    series_of(workspace, *THREE[:2])
    bad = patches / "0002-Core-Second.patch"
    text = bad.read_text().replace(
        "-    return 2 * x", "<<<<<<< ours\n-    return 2 * x\n=======\n>>>>>>> theirs"
    )
    bad.write_text(text)
    shutil.rmtree(tree)
    with pytest.raises(ForkToolError) as excinfo:
        sync(workspace)
    message = str(excinfo.value)
    print(message)
    assert not isinstance(excinfo.value, ConflictError)
    corrupt = re.search(r"corrupt patch at line (\d+)", message)
    assert corrupt, message
    line = int(corrupt.group(1))
    assert text.splitlines()[line - 1].startswith(("<<<<<<<", "=======", ">>>>>>>"))
    assert "cannot be read by git: 0002-Core-Second.patch" in message


def test_an_empty_patch_file_is_named(workspace):
    _, patches, tree = workspace
    series_of(workspace, *THREE[:2])
    (patches / "0002-Core-Second.patch").write_text("")
    shutil.rmtree(tree)
    with pytest.raises(ForkToolError, match="cannot tell its format \\(0 bytes\\)"):
        sync(workspace)


def test_malformed_pins_name_the_missing_field(tmp_path):
    text = (REPO / "pins.toml").read_text()
    broken = tmp_path / "pins.toml"
    broken.write_text(text.replace('author = "', 'authors = "'))
    with pytest.raises(ForkToolError, match="lacks `fork.author`"):
        Pins.load(broken)
    broken.write_text("[base\n")
    with pytest.raises(ForkToolError, match="cannot read"):
        Pins.load(broken)


def test_the_tool_runs_by_its_path_from_any_folder(tmp_path):
    for args in (["--help"], ["run", "-C", str(tmp_path / "nope"), "--", "true"]):
        run = subprocess.run(
            [sys.executable, str(REPO / "forktool"), *args],
            cwd=tmp_path,
            capture_output=True,
            text=True,
        )
        print(run.stdout, run.stderr)
        assert "Traceback" not in run.stderr
    assert run.returncode == 1 and "no such folder" in run.stderr


def test_backups_are_listed_and_pruned_without_losing_a_patch(workspace):
    _, patches, tree = workspace
    series_of(workspace, *THREE[:2])
    commit(tree, "mini/local.py", "LOCAL = 1\n", "[Core] Local")
    sync(workspace, force=True)  # [Core] Local is on this backup only
    theirs = teammate(workspace)
    edit_series(theirs, "sed -i -n '1h;1!p;${g;p}'")  # first patch last
    export(theirs, patches)
    commit_series(patches)
    sync(workspace)  # backs up the old order: every patch is in the fork
    listed = backups.report(tree, prune=False)
    print(listed)
    assert "2 backup branches" in listed and "      [Core] Local" in listed
    assert "deletes the 1 whose patches are all in the fork" in listed
    pruned = backups.report(tree, prune=True)
    print(pruned)
    assert "deleted 1 backup branches" in pruned and "kept 1" in pruned
    (left,) = backups.backups(tree)
    assert left.lacking == ["[Core] Local"]


def test_git_commands_are_traced(workspace, monkeypatch, capsys):
    monkeypatch.setenv("FORKTOOL_TRACE_GIT", "1")
    sync(workspace)
    traced = capsys.readouterr().err
    assert "+ " in traced and " am " not in traced
    assert "commit.gpgSign=false" in traced and "init -q --template=" in traced


def test_a_conflict_exits_with_status_3_other_errors_with_1(monkeypatch):
    from forktool.__main__ import main
    from forktool.commands import OWN, Command

    def failing(error):
        def run(pins, args):
            raise error("stopped")

        # No lock: `test` holds this clone's while it runs these tests.
        return Command("sync", "h", "d", run, locks=False)

    for error, status in ((ConflictError, 3), (ForkToolError, 1)):
        monkeypatch.setitem(OWN, "sync", failing(error))
        assert main(["sync"]) == status
