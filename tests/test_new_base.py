"""A new pinned base: the series ported onto it, a conflicting patch reported
by kind, local work saved before the base moves."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from fork_fixture import (
    AUTHOR,
    BASE_FILES,
    THREE,
    commit,
    commit_series,
    head,
    head_of,
    make_sdist,
    refused,
    series_of,
    subjects,
    sync,
    teammate,
)

import forktool.sync
from forktool.errors import ConflictError, ForkToolError
from forktool.export import export
from forktool.git import git
from forktool.pins import Artifact, fetch


def new_base(workspace, files: dict[str, str]) -> Artifact:
    downloads = Path(os.environ["VLLM_FORK_CACHE"]) / "downloads"
    return make_sdist(downloads / "mini-0.2.tar.gz", files)


def test_issue_3_new_pinned_base_with_a_conflicting_patch(workspace):
    pins, patches, tree = workspace
    series_of(workspace, *THREE)
    old_head = head(tree)
    # vLLM's next release changed util.py under the second patch.
    files = {**BASE_FILES, "mini/util.py": "def double(x):\n    return 2 * x  # new\n"}
    downloads = tree.parent.parent.parent / "cache" / "downloads"
    sdist = make_sdist(downloads / "mini-0.2.tar.gz", files)
    message = refused(lambda: sync(workspace, message="mini 0.2\n", sdist=sdist))
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
