"""Commit messages: read back as written; misreadings and missing sign-offs named."""

import re
from pathlib import Path
from typing import Any

import fork_fixture as fx
import pytest
from fork_fixture import PERSON, THREE, authored_by, commit_message, git, refused, trees

OTHER = "Con Tributor <con@example.invalid>"
ZOE = "Zoë Ångström <zoe@example.invalid>"


def message_of(tree: Path, rev: str = "HEAD") -> str:
    return git(tree, "log", "-1", "--format=%B", rev).stdout


TABLE = (
    "[Core] Extra\n\nSummary of the change.\n\n---\n\n| case | ms |\n| a | 1 |\n\n"
    f"Signed-off-by: {PERSON}\n"
)
MISREAD = {  # line 3 of a message, what `git am` makes of it
    "dashes": ("\n---\n", "ends the message before it"),
    "a diff's old file": ("\n--- a/mini/x.py\n", "ends the message before it"),
    "a git diff": ("\ndiff --git a/x.py b/x.py\n", "ends the message before it"),
    "a plain diff": ("\ndiff -u a b\n", "ends the message before it"),
    "a CVS diff": ("\nIndex: mini/x.py\n", "ends the message before it"),
    "a mail's first line": (
        "\nFrom 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n",
        "first line of another mail",
    ),
    "a From: header first": ("From: Some One <one@example.invalid>\n", "header"),
    "a Subject: header first": ("subject: Another\n", "mail header"),
    "a [PATCH] line first": ("[PATCH] Another subject\n", "mail header"),
}
KEPT = ["----", " ---", "---  spaced text", "From the docs:", "Index:x"]  # kept as is


def test_a_separator_line_is_reworded_and_non_ascii_round_trips(ws, monkeypatch):
    before = ws.series_of(THREE[0])
    short = commit_message(ws.tree, "mini/extra.py", "EXTRA = 1\n", TABLE)
    named = f"{short} [Core] Extra, line 5 '---': `git am` ends the message"
    for check in (True, False):
        message = refused(lambda c=check: ws.export(check=c))
        assert named in message
        assert f"git -C {ws.tree} rebase -i base   # mark {short} `reword`" in message
    assert ws.snapshot() == before
    reword = f"sed -i 's/^pick {short}/reword {short}/'"
    monkeypatch.setenv("GIT_SEQUENCE_EDITOR", reword)
    monkeypatch.setenv("GIT_EDITOR", "sed -i 's/^---$/ ---/'")
    ws.follow(message)
    fx.commit_series(ws.patches)
    other = ws.clone()
    assert message_of(other) == message_of(ws.tree) and "| a | 1 |" in message_of(other)
    assert f"Signed-off-by: {PERSON}" in message_of(other)
    assert "is what export writes (2 patches)" in ws.export(other, check=True)
    # A non-ASCII author and message round trip.
    subject = "[Doc] Ångström grade naïve façade: document KV cache zeroing "
    subject += "x" * (120 - len(subject))
    body = f"{subject}\n\n说明：零化 🚀 ✓\n\nSigned-off-by: {ZOE}\n"
    commit_message(ws.tree, "DOC.md", "Ångström 🚀\n", body, **authored_by(ZOE))
    ws.publish()
    written = ws.names()[2]
    assert written.isascii() and written.startswith("0003-Doc-ngstr-m-")
    assert "=?UTF-8?q?" in (ws.patches / written).read_text()
    other = ws.clone()
    shown = ["log", "-1", "--format=%an <%ae>%n%B"]
    assert git(other, *shown).stdout == git(ws.tree, *shown).stdout
    assert git(other, *shown).stdout == f"{ZOE}\n{body}\n"
    assert trees(other) == trees(ws.tree)
    assert "is what export writes (3 patches)" in ws.export(other, check=True)


@pytest.mark.parametrize("line", KEPT)
def test_lines_git_am_keeps_are_exported_as_they_are(ws, line):
    ws.series_of(THREE[0])
    body = f"[Core] Extra\n\nAbove.\n{line}\nAfter it.\n\nSigned-off-by: {PERSON}\n"
    commit_message(ws.tree, "mini/extra.py", "EXTRA = 1\n", body)
    assert "2 patches" in ws.export()
    fx.commit_series(ws.patches)
    assert message_of(ws.clone()) == message_of(ws.tree)


FAKE_DIFF = (
    "Example:\n---\ndiff --git a/mini/util.py b/mini/util.py\n--- a/mini/util.py\n"
    "+++ b/mini/util.py\n@@ -1 +1 @@\n-def double(x):\n+def triple(x):\n"
)
REFUSED = {  # the message above its sign-off, what export's refusal says
    "a subject of two lines": ("[Core] Extra over\ntwo lines\n",
        ["{short} [Core] Extra over two lines, line 2 'two lines'"]),
    "a subject git am would strip": ("Re: [Core] Extra\n\nWhy.\n",
        ["do not rebuild", "patch 2, 0002-Re-Core-Extra.patch",
         "another message than {short} Re: [Core] Extra's"]),
    "a message holding a diff": (f"[Core] Extra\n\n{FAKE_DIFF}",
        ["do not rebuild", "mini/util.py"]),
}  # fmt: skip
REFUSED |= {  # each line of MISREAD as line 3 of a message
    case: (f"[Core] Extra\n\n{line}\nAfter it.\n",
           [f"{{short}} [Core] Extra, line 3 {line.strip(chr(10))!r}: `git am`", what])
    for case, (line, what) in MISREAD.items()
}  # fmt: skip


@pytest.mark.parametrize("case", REFUSED)
def test_a_message_git_am_would_misread_is_named_not_exported(ws, monkeypatch, case):
    before = ws.series_of(THREE[0])
    text, said = REFUSED[case]
    body = f"{text}\nSigned-off-by: {PERSON}\n"
    short = commit_message(ws.tree, "mini/extra.py", "EXTRA = 1\n", body)
    message = refused(ws.export)
    assert all(s.format(short=short) in message for s in said), message
    assert ws.snapshot() == before
    # Without the line check, the proof (`git am` of each patch) refuses it too.
    monkeypatch.setattr("forktool.export.misread", lambda commit: [])
    message = refused(ws.export)
    assert "do not rebuild" in message
    assert re.search(r"another message|author|mails from|does not apply", message)


# the series, commits (path, subject, author if unsigned), warned, rebased onto
SIGN_OFF: dict[str, Any] = {
    "my commit with no area": (
        [], [("README", "fix readme", PERSON), (*THREE[0][::2], None)],
        [f"warning: 0001-fix-readme.patch: no `Signed-off-by: {PERSON}` (DCO)\n",
         "0001-fix-readme.patch: subject 'fix readme' is not in",
         "plain `git am` loses its `[Area]` tag", "`git am --keep-non-patch` keeps it"],
        "base"),
    "my commit among signed ones": (
        THREE[:2], [("README", "[Doc] Readme", PERSON), (*THREE[2][::2], None)],
        ["0003-Doc-Readme.patch: no `Signed-off-by"], "HEAD~2"),
    "a contributor's commit": (
        THREE[:1], [("mini/theirs.py", "[Core] Theirs", OTHER),
                    ("mini/mine.py", "[Core] Mine", PERSON)],
        [f"no `Signed-off-by: {OTHER}` (DCO): {OTHER} wrote it", "Ask them for it"],
        "HEAD~1"),
}  # fmt: skip


@pytest.mark.parametrize("case", SIGN_OFF)
def test_the_sign_off_advice_signs_only_my_commits_that_lack_it(ws, case):
    exported, added, warned, onto = SIGN_OFF[case]
    ws.series_of(*exported)
    for path, subject, author in added:
        env = authored_by(author or PERSON)
        sign = "" if author else f"\n\nSigned-off-by: {PERSON}"
        commit_message(ws.tree, path, "X = 1\n", f"{subject}{sign}\n", **env)
    before = fx.trailers(ws.tree)
    message = ws.export()
    assert all(said in message for said in warned)
    written = zip(ws.names()[len(exported) :], added, strict=True)
    unsigned = [name for name, (_, _, author) in written if author]
    warnings = [line for line in message.splitlines() if line.startswith("warning:")]
    assert all(any(n in line for n in unsigned) for line in warnings)
    assert sum("no `Signed-off-by" in line for line in warnings) == len(unsigned)
    rebase = f"git -C {ws.tree} rebase -q {onto} --exec"
    assert message.splitlines()[-1].strip().startswith(rebase)
    ws.follow(message)
    mine = [subject for _, subject, author in added if author == PERSON]
    signed = [f"Signed-off-by: {PERSON}"]
    expected = {s: signed if s in mine else t for s, t in before.items()}
    assert fx.trailers(ws.tree) == expected
    message = ws.export()  # only their commit lacks it: whom to ask
    assert "rebase -q" not in message
    assert ("Signed-off-by" in message) == (case == "a contributor's commit")
    assert f"{OTHER} wrote it" in message or case != "a contributor's commit"
    assert len(list(ws.patches.glob("*.patch"))) == len(exported) + len(added)
