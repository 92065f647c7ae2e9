"""The tool's own refusals and errors: a wrong sdist, malformed pins, a patch
git cannot parse, exit statuses; run by path, backups, traced git."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from fork_fixture import (
    AUTHOR,
    THREE,
    commit,
    commit_series,
    edit_series,
    refusal,
    series_of,
    sync,
    teammate,
)

from forktool import backups, pins
from forktool.errors import ConflictError, ForkToolError
from forktool.export import export
from forktool.layout import REPO
from forktool.pins import Artifact, Pins, fetch, sha256_of


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


def test_a_patch_git_cannot_parse_names_the_line_git_names(workspace):
    _, patches, tree = workspace
    series_of(workspace, *THREE[:2])
    bad = patches / "0002-Core-Second.patch"
    text = bad.read_text().replace(
        "-    return 2 * x", "<<<<<<< ours\n-    return 2 * x\n=======\n>>>>>>> theirs"
    )
    bad.write_text(text)
    shutil.rmtree(tree)
    error = refusal(lambda: sync(workspace))
    message = str(error)
    assert not isinstance(error, ConflictError)
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
    from forktool import commands
    from forktool.__main__ import main
    from forktool.commands import Command

    def failing(error):
        def run(pins, args):
            raise error("stopped")

        # No lock: `test` holds this clone's while it runs these tests.
        return Command("sync", "h", "d", run, locks=False)

    for error, status in ((ConflictError, 3), (ForkToolError, 1)):
        monkeypatch.setattr(commands, "command", lambda name, e=error: failing(e))
        assert main(["sync"]) == status
