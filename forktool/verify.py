"""Proof that a patch or a series applies as written, checked by blob ids.

A `git format-patch --full-index` file names, on each file's `index` line,
the blob the file has before and after the patch. `applied` checks a commit
that `git am` just made against them; `prove` applies a whole series onto
the base in a scratch index and compares the tree with the fork's. Both read
a patch as `git am` does (`git mailinfo` splits the message from the diff).
"""

from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from forktool.process import BASE_TAG, ISOLATED, SERIES, git


@dataclass(frozen=True)
class FileChange:
    # The path before the patch; None for a file it creates.
    old: str | None
    # The path after the patch; None for a file it deletes.
    new: str | None
    # The blob id (perhaps abbreviated) before, from the `index` line.
    pre: str | None
    post: str | None


def _blob(text: str) -> str | None:
    return None if set(text) == {"0"} else text


def mailinfo(mail: Path, tmp: Path) -> tuple[Path, dict[str, str], str]:
    """What `git am --keep-non-patch` reads from one mail: the diff, the
    headers (Author, Email, Subject, Date) and the message's body."""
    msg, diff = tmp / "msg", tmp / "diff"
    info = git(None, "mailinfo", "-b", str(msg), str(diff), input=mail.read_bytes(),
               binary=True).stdout.decode(errors="replace")  # fmt: skip
    headers = dict(line.split(": ", 1) for line in info.splitlines() if ": " in line)
    return diff, headers, msg.read_bytes().decode(errors="replace")


def stripspace(text: str) -> str:
    """The cleanup `git am` and `git commit` give a message."""
    return git(None, "stripspace", input=text).stdout


@dataclass(frozen=True)
class Commit:
    """A fork commit as a patch carries it (`sha`: its full id)."""

    sha: str
    short: str
    subject: str
    # `Name <email>`.
    author: str
    # The whole message, subject first, cleaned up as by `stripspace`.
    message: str

    @property
    def name(self) -> str:
        return f"{self.short} {self.subject}"


def series_messages(fork: Path) -> list[Commit]:
    """The fork's commits since `base`, oldest first."""
    line = "--format=%H%x1f%h%x1f%s%x1f%an <%ae>%x1f%B%x1e"
    log = git(fork, "log", "--reverse", "--no-merges", line, SERIES).stdout
    found = []
    for record in log.split("\x1e")[:-1]:
        sha, short, subject, author, message = record.lstrip("\n").split("\x1f", 4)
        found.append(Commit(sha, short, subject, author, stripspace(message)))
    return found


def _mails(patches: list[Path], tmp: Path) -> list[Path] | str:
    """The mails `git am` reads from `patches` (`git mailsplit`, as `git am`
    runs it: CRs before line ends dropped); or why they are not one each."""
    out = tmp / "mails"
    out.mkdir()
    if not patches:
        return []
    git(None, "mailsplit", f"-o{out}", *map(str, patches))
    mails = sorted(out.iterdir())
    if len(mails) == len(patches):
        return mails
    return (
        f"`git am` would read {len(mails)} mails from the {len(patches)} patch "
        "files: a line of a commit message that starts like a mail (`From <id> "
        "<date>`) starts another"
    )


def changes(diff: str) -> list[FileChange]:
    """Each file's paths and `index` blob ids, from a diff's headers."""
    found = []
    for section in re.split(r"^(?=diff --git )", diff, flags=re.M)[1:]:
        header = section.split("\n@@", 1)[0].split("\nGIT binary patch", 1)[0]
        fields = dict(re.findall(r"^(--- |\+\+\+ |index |rename from |rename to "
                                 r"|copy from |copy to |new file|deleted file)(.*)$",
                                 header, re.M))  # fmt: skip
        paths = re.match(r"diff --git a/(.*) b/(.*)", section)
        # Not a diff git wrote with its a/ and b/ prefixes, or no blob ids.
        if paths is None or "index " not in fields:
            continue
        a, b = paths.groups()
        old = fields.get("rename from ", fields.get("copy from ", a))
        new = fields.get("rename to ", fields.get("copy to ", b))
        if fields.get("--- ") == "/dev/null" or "new file" in fields:
            old = None
        if fields.get("+++ ") == "/dev/null" or "deleted file" in fields:
            new = None
        pre, post = fields["index "].split()[0].split("..")
        found.append(FileChange(old, new, _blob(pre), _blob(post)))
    return found


def _blobs(fork: Path, rev: str, paths: set[str]) -> dict[str, str]:
    if not paths:
        return {}
    out = git(fork, "ls-tree", "-z", rev, "--", *sorted(paths)).stdout
    entries = (entry.split("\t", 1) for entry in out.split("\0") if entry)
    return {path: meta.split()[2] for meta, path in entries}  # <mode> <type> <id>


def _same(actual: str | None, named: str | None) -> bool:
    if actual is None or named is None:
        return actual is named
    return actual.startswith(named)


def applied(fork: Path, patch: Path) -> list[str]:
    """The files that the commit `git am` made of `patch` (HEAD) has not as
    its `index` lines name: one line each. A file whose blob before the patch
    was another than the index names (a patch applied by three-way merge on
    another base) is not checked."""
    with tempfile.TemporaryDirectory() as tmp:
        found = changes(mailinfo(patch, Path(tmp))[0].read_text(errors="replace"))
    paths = {p for c in found for p in (c.old, c.new) if p}
    before, after = _blobs(fork, "HEAD~1", paths), _blobs(fork, "HEAD", paths)
    wrong = []
    for change in found:
        if not _same(before.get(change.old) if change.old else None, change.pre):
            continue
        path = change.new or change.old
        got = after.get(change.new) if change.new else None
        if not _same(got, change.post):
            wrong.append(
                f"  {path}: became {got or 'absent'}, its index line says "
                f"{change.post or 'deleted'}"
            )
    return wrong


def prove(fork: Path, patches: list[Path], commits: list[Commit]) -> str | None:
    """Why `patches` applied in order on `base`, as `git am` reads them, do
    not give HEAD's tree or `commits`' authors and messages; None when they
    do. Applied in a scratch index: no checkout, nothing else touched."""
    with tempfile.TemporaryDirectory() as tmp:
        env = {**ISOLATED, "GIT_INDEX_FILE": str(Path(tmp, "index"))}
        git(fork, "read-tree", BASE_TAG, env=env)
        mails = _mails(patches, Path(tmp))
        if isinstance(mails, str):
            return mails
        for number, (patch, mail) in enumerate(zip(patches, mails, strict=True), 1):
            diff, headers, body = mailinfo(mail, Path(tmp))
            if number <= len(commits):
                message = stripspace(f"{headers.get('Subject', '')}\n\n{body}")
                if other := _other_message(commits[number - 1], headers, message):
                    return f"patch {number}, {patch.name}: {other}"
            result = git(fork, "apply", "--cached", str(diff), env=env, check=False)
            if result.returncode:
                return (
                    f"patch {number}, {patch.name}, does not apply on the base and "
                    f"the patches before it:\n{result.stderr.strip()}"
                )
        tree = git(fork, "write-tree", env=env).stdout.strip()
    head = git(fork, "rev-parse", "HEAD^{tree}").stdout.strip()
    if tree == head:
        return None
    differ = git(fork, "diff-tree", "-r", "--name-only", tree, head).stdout.split()
    return (
        "the patches applied on the base give another tree than the fork's HEAD; "
        f"these files differ: {', '.join(differ)}"
    )


# What `git mailinfo` (so `git am`) takes for the end of a message: a diff's
# first line, or a `---` separator line (its `patchbreak`).
PATCHBREAK = re.compile(r"^(?:diff -|Index: |---(?: [^ \t\r\v\f]|[ \t\r\v\f]*$))")
# What it reads as a header at the start of a message body.
INBODY_HEADER = re.compile(r"^(?:(?i:from|subject|date):|\[PATCH\][ \t])")


def mbox_from(line: str) -> bool:
    """Whether `git mailsplit` (so `git am`) takes `line` for the `From `
    line that starts a mail (its `is_from_line`: a time and a year in it)."""
    full = line + "\n"
    if len(full) < 20 or not line.startswith("From "):
        return False
    colon = full.rfind(":", 4, len(full) - 2)
    digits = [colon - 4, colon - 2, colon - 1, colon + 1, colon + 2]
    if colon < 5 or not all(full[i].isdigit() for i in digits):
        return False
    year = re.match(r"\s*[-+]?\d+", full[colon + 3 :])
    return year is not None and int(year.group()) > 90


def misread(commit: Commit) -> list[str]:
    """The lines of `commit`'s message that `git am` would read otherwise than
    as message lines, each with what it would do, numbered from the subject."""
    lines = commit.message.splitlines()
    first_blank = lines.index("") if "" in lines else len(lines)
    found = []
    if first_blank > 1:
        found.append(
            f"line 2 {lines[1]!r}: the subject is {first_blank} lines, and `git am` "
            "joins them into one (put a blank line after the first)"
        )
    for number, line in enumerate(lines[first_blank + 1 :], first_blank + 2):
        head = number == first_blank + 2
        if PATCHBREAK.match(line):
            what = "ends the message before it and reads the rest as the diff"
        elif mbox_from(line) or head and line[:6] == ">From " and mbox_from(line[1:]):
            what = "takes it for the first line of another mail"
        elif head and INBODY_HEADER.match(line):
            what = "reads it as a mail header (author, date or subject) and drops it"
        else:
            continue
        found.append(f"line {number} {line!r}: `git am` {what}")
    return found


def _other_message(commit: Commit, headers: dict[str, str], message: str) -> str:
    """How the commit `git am` makes of a patch differs from `commit`, if it does."""
    author = f"{headers.get('Author', '')} <{headers.get('Email', '')}>"
    if author != commit.author:
        return f"`git am` would make {author} the author of {commit.name}"
    if message == commit.message:
        return ""
    theirs, ours = message.splitlines(), commit.message.splitlines()
    pairs = enumerate(zip(theirs, ours, strict=False))
    at = next((i for i, (a, b) in pairs if a != b), min(len(theirs), len(ours)))
    line = ours[at] if at < len(ours) else "(its end)"
    return (
        f"`git am` would commit another message than {commit.name}'s, from its "
        f"line {at + 1} on: {line!r} (the patch file reads otherwise there)"
    )


def unexportable(fork: Path) -> tuple[list[str], list[str]]:
    """The fork's merge commits and empty commits, as `<id> <subject>` lines:
    a series holds neither (a merge's resolution would be in no patch, an
    empty commit makes an empty patch file)."""
    line = "--format=%h %s"
    merges = git(fork, "log", "--merges", line, SERIES).stdout.splitlines()
    log = git(fork, "log", "--no-merges", "--name-only", f"{line}%x00", SERIES)
    entries = re.split(r"\n(?=[0-9a-f]+ .*\0)", log.stdout.strip())
    parts = [entry.partition("\0") for entry in entries if entry]
    return merges, [subject for subject, _, files in parts if not files.strip()]
