"""The series as export writes it and people edit it, round trips and hand edits."""

import os
import random

import fork_fixture as fx
import pytest
from fork_fixture import THREE, commit, commit_series, git, refused, subjects, trees

from forktool.checks import all_checks
from forktool.layout import REPO
from forktool.tool_checks import EXPORT_CHECK

SERIES_TEXTS = {  # what `series` holds -> what the refusal says
    "a patch file not listed": ("", "not listed in", "0001-Core-First.patch (add"),
    "a missing patch file": ("0001-Core-First.patch\n0002-gone.patch\n",
                             "lists missing patch files: 0002-gone.patch"),
    "outside patches/": ("../README.md\n",
                         "lists '../README.md', which is not a file name in"),
    "absolute path": ("/tmp/x.patch\n", "lists '/tmp/x.patch', which is not"),
    "listed twice": ("0001-Core-First.patch\n" * 2,
                     "lists 0001-Core-First.patch more than once"),
    "CRLF": ("0001-Core-First.patch\r\n", "has CRLF (Windows) line endings"),
    "BOM": ("\ufeff0001-Core-First.patch\n", "starts with a byte order mark"),
}  # fmt: skip


@pytest.mark.parametrize("case", SERIES_TEXTS)
def test_a_series_that_would_be_misread_is_refused_in_words(ws, case):
    ws.series_of(THREE[0])
    text, *said = SERIES_TEXTS[case]
    (ws.patches / "series").write_bytes(text.encode())
    for command in (ws.sync, lambda: ws.export(check=True)):
        message = refused(command)
        assert all(s in message for s in said), message


def test_crlf_and_a_series_written_otherwise_merged_or_missing_are_named(ws, tmp_path):
    """CRLF named, LF kept by autocrlf clones; a series rewritten, merged or missing."""
    ws.series_of(THREE[0])
    patch = ws.patches / "0001-Core-First.patch"
    lf = patch.read_bytes()
    patch.write_bytes(lf.replace(b"\n", b"\r\n"))
    said = refused(lambda: ws.export(check=True))
    assert "0001-Core-First.patch: the same bytes with CRLF line endings" in said
    ws.export()
    assert patch.read_bytes() == lf
    repo = ws.patches.parent
    (repo / ".gitattributes").write_bytes((REPO / ".gitattributes").read_bytes())
    git(repo, "add", ".gitattributes")
    commit_series(ws.patches)
    clone = tmp_path / "crlf-clone"
    git(None, "-c", "core.autocrlf=true", "clone", "-q", str(repo), str(clone))
    assert (clone / "patches" / patch.name).read_bytes() == lf
    cloned = (clone / "patches" / "series").read_bytes()
    assert cloned == (ws.patches / "series").read_bytes() and b"\r" not in cloned
    series = ws.patches / "series"
    written = series.read_bytes()
    series.write_bytes(written.replace(b".patch\n", b".patch  \n\n"))
    said = "  series: the same list, rewritten (its comments, blank lines or spaces)"
    assert said in refused(lambda: ws.export(check=True))
    assert said in ws.export() and series.read_bytes() == written
    merge = "<<<<<<< HEAD\n0003-a.patch\n=======\n0003-b.patch\n>>>>>>> d3f6317\n"
    series.write_bytes(written + merge.encode())
    message = refused(ws.sync)
    assert "holds an unresolved merge" in message and "missing" not in message
    assert f"`git add {series}`" in message
    series.unlink()
    said = refused(ws.sync)
    assert f"{series} is missing, and" in said
    assert "holds 1 patch files: restore it (`git checkout -- " in said


def test_every_kind_of_change_round_trips_byte_exact(ws):
    ws.series_of(THREE[0])
    rng = random.Random(22)
    blobs = {
        "mini/logo.png": b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR" + rng.randbytes(300),
        "mini/data.npy": rng.randbytes(2048),
        "mini/nul.bin": b"text\0with\0NULs\n" * 8,
        "mini/run.sh": b"#!/bin/sh\necho run\n",
    }
    for path, data in blobs.items():
        (ws.tree / path).write_bytes(data)
    for path in ("mini/run.sh", "mini/__init__.py"):
        (ws.tree / path).chmod(0o755)
    git(ws.tree, "rm", "-q", "mini/rocm_hip.py")
    (ws.tree / "mini/tools").mkdir()
    git(ws.tree, "mv", "mini/util.py", "mini/tools/util.py")
    git(ws.tree, "add", "-A")
    git(ws.tree, "commit", "-qsm", "[Core] Every kind of change")
    assert "2 patches" in ws.export()
    text = (ws.patches / "0002-Core-Every-kind-of-change.patch").read_text()
    assert text.count("GIT binary patch") == 3 and "new file mode 100755" in text
    assert "deleted file mode 100644" in text
    assert "rename from mini/util.py\nrename to mini/tools/util.py" in text
    assert "old mode 100644\nnew mode 100755" in text
    commit_series(ws.patches)
    other = ws.clone()
    assert trees(other) == trees(ws.tree)
    for path, data in blobs.items():
        assert (other / path).read_bytes() == data
    for path in ("mini/run.sh", "mini/__init__.py"):
        assert os.access(other / path, os.X_OK), path
    assert not os.access(other / "mini/tools/util.py", os.X_OK)
    assert not (other / "mini/rocm_hip.py").exists()
    assert not (other / "mini/util.py").exists()
    assert "is what export writes (2 patches)" in ws.export(other, check=True)


def test_a_patch_split_in_two_round_trips(ws):
    ws.sync()
    commit(ws.tree, *THREE[0])
    (ws.tree / "mini/util.py").write_text("def double(x):\n    return x * 2\n")
    git(ws.tree, "add", "mini")
    commit(ws.tree, "tests/test_util.py", "assert True\n", "[Core] Code and its test")
    commit(ws.tree, *THREE[2])
    ws.publish()
    old = ws.clone("teammate")  # a clone with the fork of before the split
    fx.edit_series(ws.tree, "sed -i 2s/^pick/edit/")
    git(ws.tree, "reset", "-q", "HEAD^")
    git(ws.tree, "add", "mini")
    git(ws.tree, "commit", "-qsm", "[Core] Code")
    git(ws.tree, "add", "tests")
    git(ws.tree, "commit", "-qsm", "[Test] Its test")
    git(ws.tree, "rebase", "--continue", env={"GIT_EDITOR": "true"})
    message = ws.export()
    assert "exported 4 patches" in message
    assert "0002-Core-Code-and-its-test.patch: removed from the series" in message
    assert "0003-Core-Third.patch -> 0004-Core-Third.patch: renumbered" in message
    commit_series(ws.patches)
    names = "0001-Core-First 0002-Core-Code 0003-Test-Its-test 0004-Core-Third".split()
    assert ws.names() == [f"{name}.patch" for name in names]
    other = ws.clone()
    assert trees(other) == trees(ws.tree) and len(trees(ws.tree)) == 5
    assert subjects(other) == subjects(ws.tree)
    message = ws.sync(tree=old)  # the teammate pulls
    assert "0002-Core-Code-and-its-test.patch: dropped from the series" in message
    assert "0003-Test-Its-test.patch: only in the series" in message
    assert trees(old) == trees(ws.tree)


def test_a_hand_reordered_series_is_synced_and_renumbered(ws):
    ws.series_of(*THREE)
    old_head = fx.head(ws.tree)
    fx.swap_second_and_third(ws.patches)
    message = ws.sync()
    assert "reordered in the series" in message
    assert subjects(ws.tree) == ["[Core] First", "[Core] Third", "[Core] Second"]
    assert fx.head(ws.tree, message.rsplit("branch ", 1)[1].rstrip(".")) == old_head
    refused(lambda: ws.export(check=True))  # the numbers are stale
    message = ws.export()
    assert "0003-Core-Third.patch -> 0002-Core-Third.patch: renumbered" in message
    assert "removed from the series" not in message
    assert "is what export writes (3 patches)" in ws.export(check=True)


def test_a_hand_renamed_patch_is_named_and_a_dropped_one_renumbers_the_rest(ws):
    ws.series_of(*THREE)
    git(ws.patches, "mv", "0002-Core-Second.patch", "0002-second.patch")
    series = ws.patches / "series"
    series.write_text(series.read_text().replace("0002-Core-Second", "0002-second"))
    commit_series(ws.patches)
    assert "up to date" in ws.sync()
    message = refused(lambda: ws.export(check=True))
    assert "0002-second.patch -> 0002-Core-Second.patch: renamed" in message
    assert "removed from the series" not in message
    ws.publish()
    fx.edit_series(ws.tree, "sed -i 1s/^pick/drop/")
    message = ws.export()
    assert "0002-Core-Second.patch -> 0001-Core-Second.patch: renumbered" in message
    assert "0003-Core-Third.patch -> 0002-Core-Third.patch: renumbered" in message
    assert "0001-Core-First.patch: removed from the series" in message
    assert message.count("removed from the series") == 1


def test_hand_edited_message_and_stale_lines_are_named_and_a_twin_is_warned(ws):
    ws.series_of(*THREE)
    second = ws.patches / "0002-Core-Second.patch"
    signed = f"Signed-off-by: {fx.PERSON}"
    reviewed = f"Reviewed-by: Re Viewer <re@example.invalid>\n{signed}"
    second.write_text(second.read_text().replace(signed, reviewed, 1))
    edited = ws.snapshot()
    message = refused(lambda: ws.export(check=True))
    assert "0002-Core-Second.patch: changed in the series" in message
    assert ws.snapshot() == edited
    message = ws.sync()
    assert "0002-Core-Second.patch: changed in the series" in message
    assert reviewed in git(ws.tree, "log", "-1", "--format=%B", "HEAD~1").stdout
    assert "is what export writes (3 patches)" in ws.export(check=True)
    assert ws.snapshot() == edited
    # Stale line numbers: export --check names them, writes nothing.
    second.write_text(second.read_text().replace("@@ -1,2 +1,2 @@", "@@ -3,2 +3,2 @@"))
    before = ws.snapshot()
    assert "up to date" in ws.sync()  # git patch-id ignores line numbers
    message = refused(lambda: ws.export(check=True))
    assert "(1 differ)" in message
    assert "0002-Core-Second.patch: the same change, rewritten" in message
    assert ws.snapshot() == before
    assert EXPORT_CHECK in all_checks() and EXPORT_CHECK.gates_test
    commit(ws.tree, "mini/util.py", "def double(x):\n    return x * 2  # again\n",
           "[Core] Second")  # fmt: skip
    said = "0002-Core-Second.patch and 0004-Core-Second.patch have one subject"
    assert said in ws.export()
