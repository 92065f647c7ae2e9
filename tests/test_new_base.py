"""A new pinned base: the series ported, conflicts named by kind, local work kept."""

import re
import shutil
import subprocess

import fork_fixture as fx
import pytest
from fork_fixture import BASE_FILES, LOCAL, SUBJECTS, THREE, commit, git, head, subjects

from forktool.pins import Artifact
from forktool.process import ConflictError, ForkToolError

NEW = "mini 0.2\n"


def new_base(ws: fx.Workspace, files: dict[str, str]) -> Artifact:
    return fx.make_sdist(ws.downloads() / "mini-0.2.tar.gz", files)


def test_a_new_base_under_a_conflicting_patch_is_ported_by_the_advice(ws):
    ws.series_of(*THREE)
    tree = ws.tree
    commit(tree, *LOCAL)
    with pytest.raises(ForkToolError, match="0004-Core-Local.patch: only in the fork"):
        ws.sync(message=NEW)
    assert subjects(tree) == [*SUBJECTS, "[Core] Local"]
    git(tree, "reset", "-q", "--hard", "HEAD~1")
    old_head = head(tree)
    changed = "def double(x):\n    return 2 * x  # new\n"
    sdist = new_base(ws, {**BASE_FILES, "mini/util.py": changed})
    message = fx.refused(lambda: ws.sync(message=NEW, sdist=sdist))
    assert "The pinned base is now mini 0.2" in message
    stopped = "does not apply: 0002-Core-Second.patch"
    assert f"patch 2 of 3 in the series {stopped}" in message
    assert "conflicting: mini/util.py" in message and fx.clean(tree)
    assert "To stay on mini 0.1 instead: put pins.toml and venv.lock back" in message
    assert git(tree, "log", "-1", "--format=%s", "base").stdout == NEW
    assert subjects(tree) == ["[Core] First"]
    backup = re.search(r"branch (backup/\S+)\.", message)
    assert backup and head(tree, backup.group(1)) == old_head
    ws.sync()  # as the message says, to stay on the old base; then forward again
    base = git(tree, "log", "-1", "--format=%s", "base").stdout.strip()
    assert base == fx.MESSAGE.splitlines()[0] and subjects(tree) == SUBJECTS
    message = fx.refused(lambda: ws.sync(message=NEW, sdist=sdist))
    command = next(line for line in message.splitlines() if " am -3 " in line)
    assert git(tree, *command.split()[3:], check=False).returncode != 0
    (tree / "mini/util.py").write_text("def double(x):\n    return x * 2  # new\n")
    git(tree, "add", "mini/util.py")
    git(tree, "am", "--continue", env={"GIT_EDITOR": "true"})
    assert "applied 1 patches" in (message := ws.sync(message=NEW, sdist=sdist))
    assert "forktool export" in message and subjects(tree) == SUBJECTS
    assert "1 written, 0 removed" in ws.export()
    assert "# new" in (ws.patches / "0002-Core-Second.patch").read_text()
    assert "up to date" in ws.sync(message=NEW, sdist=sdist)


def test_port_report_names_conflict_kinds_and_paths_the_new_base_lacks(ws):
    tree, buildkite = ws.tree, ".buildkite/steps.yaml"
    ws.series_of(*THREE)
    files = {**BASE_FILES, buildkite: "steps:\n- source_file_dependencies:\n"
             "  - mini/\n"}  # fmt: skip
    files.pop("mini/util.py")  # the new release dropped util.py
    sdist = new_base(ws, files)
    with pytest.raises(ConflictError) as excinfo:
        ws.sync(message=NEW, sdist=sdist)
    print(message := str(excinfo.value))
    assert "mini/util.py: missing in the new base" in message
    assert "(modify/delete)" in message
    command = next(line for line in message.splitlines() if " am -3 " in line)
    subprocess.run(command, shell=True)
    git(tree, "rm", "-q", "mini/util.py")
    (tree / "mini/maths.py").write_text("def double(x):\n    return x * 2\n")
    git(tree, "add", "mini/maths.py")
    git(tree, "am", "--continue", env={"GIT_EDITOR": "true"})
    assert "applied 1 patches" in ws.sync(message=NEW, sdist=sdist)
    # A fourth patch still points CI at the file 0.2 lacks.
    ws.export()
    (tree / buildkite).write_text(files[buildkite] + "  - mini/util.py\n")
    git(tree, "add", buildkite)
    git(tree, "commit", "-qm", "[CI] Steps")
    ws.export()
    (selection := ws.patches.parent / "upstream-tests.toml").write_text(
        '[[run]]\nname = "all"\nargs = ["tests/test_util.py", "-k", "x"]\n'
        '[regression]\nargs = ["mini/extra.py"]\nfails_on_base = []\n'
        "[gpu_only]\nargs = []\n"
    )
    shutil.rmtree(tree)
    print(message := ws.sync(message=NEW, sdist=sdist, selection=selection))
    lacking = re.search(r"(\d+) paths named for the fork are not in it", message)
    listed = [line for line in message.splitlines() if "(named by" in line]
    assert lacking and int(lacking.group(1)) == len(listed) == 2
    assert "mini/util.py (named by a Buildkite entry of 0004-CI-Steps.patch)" in message
    assert "tests/test_util.py (named by upstream-tests.toml)" in message
