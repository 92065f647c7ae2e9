"""A teammate's change to patches/ meets local work: sync and the advice keep both."""

import re
import subprocess
from pathlib import Path

import fork_fixture as fx
import pytest

from forktool import backups
from forktool.process import ConflictError

UNICODE = "[Doc] Ångström naïve façade"
REWORDED = ["[Core] First", "[Core] Second", "[Core] Third, reworded"]


def teammate_changed(ws, exported, change) -> tuple[Path, dict[str, bytes]]:
    """`exported`, then a teammate's `change`, published: their fork, patches/."""
    ws.series_of(*exported)
    change(theirs := ws.clone("teammate"))
    return theirs, ws.publish(theirs)


def append_two(tree: Path) -> None:
    for change in fx.THREE[1:]:
        fx.commit(tree, *change)


TEAMMATE = {  # the series, the teammate's change, the patches it changes, after
    "appended": (fx.THREE[:1], append_two,
                 ["0002-Core-Second.patch", "0003-Core-Third.patch"],
                 "only in the series", fx.SUBJECTS),
    "dropped": (fx.THREE, lambda tree: fx.edit_series(tree, "sed -i 2d"),
                ["0002-Core-Second.patch"], "dropped from the series",
                ["[Core] First", "[Core] Third"]),
    "changed": (fx.THREE, lambda tree: fx.change_second(tree, fx.THEIRS),
                ["0002-Core-Second.patch"], "changed in the series", fx.SUBJECTS),
    "reworded": (fx.THREE, fx.reword_third, ["0003-Core-Third-reworded.patch"],
                 "changed in the series", REWORDED),
}  # fmt: skip


@pytest.mark.parametrize("change", TEAMMATE)
def test_sync_brings_in_a_teammates_change_and_export_refuses_to_undo_it(ws, change):
    exported, make, changed, said, after = TEAMMATE[change]
    theirs, pulled = teammate_changed(ws, exported, make)
    old_head = fx.head(ws.tree)
    message = fx.refused(ws.export)
    listed = [line for line in message.splitlines() if line.startswith("  ")]
    expected = [f"  {c}: {said}" for c in changed]
    assert [line.split(" (")[0] for line in listed] == expected
    assert "Run `python3 -m forktool sync` first" in message and ws.snapshot() == pulled
    message = ws.sync()  # no --force needed: the fork is only behind
    listed = [line for line in message.splitlines() if line.startswith("  ")]
    assert re.findall(r"\S+\.patch", message) == changed  # one name for each
    backup = re.search(r"on branch (backup/\S+)\.$", message)
    if change == "appended":
        assert message.startswith(f"applied {len(changed)} patches") and not backup
        assert listed == [f"  {c}: applied; it was {said}" for c in changed]
    else:
        assert backup and fx.head(ws.tree, backup.group(1)) == old_head
        assert listed == expected
    assert "up to date" in ws.sync()
    assert fx.subjects(ws.tree) == after and fx.trees(ws.tree) == fx.trees(theirs)
    message = ws.export()
    assert "(0 written, 0 removed)" in message and len(message.splitlines()) == 1
    assert ws.snapshot() == pulled
    pruned = backups.report(ws.tree, True, ws.patches)
    gone = "has no" if change == "appended" else "deleted 1"
    assert f"{gone} backup branches" in pruned and "kept" not in pruned
    assert backups.backups(ws.tree, ws.patches) == []


def test_a_fork_from_before_records_tells_a_dropped_patch_from_local_work(ws):
    teammate_changed(ws, fx.THREE, lambda tree: fx.edit_series(tree, "sed -i 2d"))
    (ws.tree / ".git" / "forktool-synced").unlink()  # made by an earlier version
    fx.commit(ws.tree, *fx.LOCAL)
    message = fx.refused(ws.sync)
    assert "0002-Core-Second.patch: dropped from the series" in message
    assert "0004-Core-Local.patch: only in the fork" in message
    assert "cherry-pick" in message and "Second" not in message.split("To keep")[1]


BOTH = {  # the series, their change, mine (patch, file, code), their text, after
    "the same line, resolved by hand": (
        fx.THREE, lambda tree: fx.change_second(tree, fx.THEIRS),
        (2, "mini/util.py", fx.MINE), "[Core] Second", fx.SUBJECTS),
    "their message, my code and local work": (
        fx.THREE, lambda tree: fx.amend(tree, 2, None, "[Core] Second\n\nWhy it "
                                        "exists, reworded.\n\nSigned-off-by: "
                                        f"{fx.PERSON}"),
        (2, "mini/util.py", "def double(x):\n    return x * 2  # mine\n"),
        "Why it exists, reworded.", [*fx.SUBJECTS, "[Core] Local"]),
    "their subject, my code": (
        fx.THREE, fx.reword_third, (3, "mini/extra.py", "EXTRA = 2\n"),
        "[Core] Third, reworded", REWORDED),
    "their non-ASCII subject, my code": (
        [fx.THREE[0], (*fx.THREE[1][:2], UNICODE), fx.THREE[2]],
        lambda tree: fx.amend(tree, 2, None, f"{UNICODE}\n\nWhy, reworded.\n\n"
                           f"Signed-off-by: {fx.PERSON}"),
        (2, "mini/util.py", "def double(x):\n    return x * 2  # mine\n"),
        "Why, reworded.", ["[Core] First", UNICODE, "[Core] Third"]),
}  # fmt: skip


@pytest.mark.parametrize("case", BOTH)
def test_both_sides_changed_one_patch_and_the_advice_keeps_both_in_it(ws, case):
    exported, change, (n, path, code), their_text, after = BOTH[case]
    _, pulled = teammate_changed(ws, exported, change)
    fx.amend(ws.tree, n, path, code)
    if "[Core] Local" in after:
        fx.commit(ws.tree, *fx.LOCAL)
    signed, my_head = list(fx.trailers(ws.tree).values()), fx.head(ws.tree)
    name = ws.names()[n - 1]
    for command in (ws.sync, ws.export):
        error = fx.refusal(command)
        message = str(error)
        assert isinstance(error, ConflictError) and error.status == 3
        assert f"{name}: changed on both sides" in message
        assert "--fixup" in message and "--autosquash" in message
        assert "compare your version" not in message
        assert ("cherry-pick" in message) == ("[Core] Local" in after)
        if case == "the same line, resolved by hand":
            assert "sync --force" in message and "--fixup=HEAD~1" in message
    assert fx.head(ws.tree) == my_head and ws.snapshot() == pulled
    if case == "the same line, resolved by hand":
        with pytest.raises(subprocess.CalledProcessError):
            ws.follow(message)  # `git apply --3way` reports the conflict
        assert "<<<<<<<" in (ws.tree / path).read_text()
        code = "def double(x):\n    return x + x  # both\n"
        (ws.tree / path).write_text(code)
        fx.git(ws.tree, "add", path)
        message = message.split("apply --3way\n", 1)[1]
    ws.follow(message)
    assert fx.subjects(ws.tree) == after and (ws.tree / path).read_text() == code
    text = (ws.patches / name).read_text()
    assert f"+{code.splitlines()[-1]}" in text and their_text in text
    assert their_text in fx.git(ws.tree, "log", "--format=%B", "base..").stdout
    assert list(fx.trailers(ws.tree).values()) == signed
    assert "0 written, 0 removed" in ws.export()
    assert len(list(ws.patches.glob("*.patch"))) == len(after)


@pytest.mark.parametrize("keep", ["change", "drop"])
@pytest.mark.parametrize("where", ["dropped from the series", "dropped in the fork"])
def test_a_patch_dropped_on_one_side_and_changed_on_the_other(ws, where, keep):
    """Both named, exit 3; the advice keeps the change or the drop, as chosen."""
    in_series = where == "dropped from the series"
    code = fx.MINE if in_series else fx.THEIRS  # the changed version's
    dropped = lambda tree: fx.edit_series(tree, "sed -i 2d")  # noqa: E731
    changed = lambda tree: fx.change_second(tree, code)  # noqa: E731
    _, pulled = teammate_changed(ws, fx.THREE, dropped if in_series else changed)
    (changed if in_series else dropped)(ws.tree)  # not exported
    other = "fork" if in_series else "series"
    said = f"0002-Core-Second.patch: changed in the {other}, {where}"
    for command in (ws.sync, ws.export):
        error = fx.refusal(command)
        assert isinstance(error, ConflictError) and f"  {said}\n" in str(error)
        assert ws.snapshot() == pulled
    change, drop = str(fx.refusal(ws.sync)).split("\nOr the same, keeping the drop of ")
    change = change.split("keeping the changed version of ")[1]
    ws.follow(change if keep == "change" else drop)
    kept = ["[Core] First", "[Core] Third"]
    if keep == "change":
        kept.insert(1 if where == "dropped in the fork" else 2, "[Core] Second")
    assert fx.subjects(ws.tree) == kept
    assert ws.names() == [f"{i:04}-Core-{s[7:]}.patch" for i, s in enumerate(kept, 1)]
    if keep == "change":
        assert (ws.tree / "mini/util.py").read_text() == code
    assert "up to date" in ws.sync()
