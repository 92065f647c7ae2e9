"""patches/series: the ordered list of patch files."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from email.errors import HeaderParseError
from email.header import decode_header, make_header
from pathlib import Path

from forktool.errors import ForkToolError
from forktool.git import git

HEADER = "# Applied in order on the pinned base by `python3 -m forktool sync`.\n"


def read_series(patches: Path) -> list[Path]:
    """The listed patches, in order; orphan or missing files are errors."""
    series = patches / "series"
    names = []
    if series.exists():
        _refuse_merge_conflict(series)
        for line in series.read_text().splitlines():
            line = line.split("#", 1)[0].strip()
            if line:
                names.append(line)
    if len(set(names)) != len(names):
        raise ForkToolError(f"{series} lists a patch more than once")
    missing = [n for n in names if not (patches / n).is_file()]
    if missing:
        raise ForkToolError(f"{series} lists missing patch files: {', '.join(missing)}")
    on_disk = {p.name for p in patches.glob("*.patch")}
    orphans = sorted(on_disk - set(names))
    if orphans:
        raise ForkToolError(
            f"patch files not listed in {series}: {', '.join(orphans)} "
            "(add them to the series or delete them)"
        )
    return [patches / n for n in names]


CONFLICT_MARKER = re.compile(r"^(<{7}|={7}|>{7}|\|{7})(?: |$)", re.M)


def _refuse_merge_conflict(series: Path) -> None:
    """A merge of patches/ that git left unresolved: both sides' lists, with
    git's conflict markers, are in the file."""
    text = series.read_text()
    markers = [m.start() for m in CONFLICT_MARKER.finditer(text)]
    if not markers:
        return
    line = text.count("\n", 0, markers[0]) + 1
    raise ForkToolError(
        f"{series} holds an unresolved merge (git's conflict markers, from line "
        f"{line}): resolve it first, keeping each side's patches that should stay, "
        "each once, in the order to apply them, and no marker lines; then "
        f"`git add {series}` and run the command again."
    )


def write_series(patches: Path, names: list[str]) -> None:
    (patches / "series").write_text(HEADER + "".join(f"{n}\n" for n in names))


@dataclass(frozen=True)
class PatchInfo:
    """A patch file as the comparison of fork and series sees it."""

    name: str
    subject: str
    fingerprint: str
    """The header (author, date, message) and `git patch-id --stable`: what
    a patch is, whatever its number or the blob ids of its parent."""
    files: frozenset[str] = frozenset()
    """The paths its diff names (both sides of a rename)."""


def describe(path: Path, data: bytes | None = None) -> PatchInfo:
    """Describe a `git format-patch` file (from the series or the fork)."""
    data = path.read_bytes() if data is None else data
    header = data.split(b"\n---\n", 1)[0]
    patch_id = git(None, "patch-id", "--stable", input=data, binary=True).stdout
    patch_id = patch_id.split(b" ", 1)[0]
    digest = hashlib.sha256(header + b"\0" + patch_id).hexdigest()
    subject = _subject(header.decode(errors="replace"))
    files = re.findall(rb"^diff --git a/(.*) b/(.*)$", data[len(header) :], re.M)
    named = frozenset(n.decode(errors="replace") for pair in files for n in pair)
    return PatchInfo(path.name, subject, digest, named)


def _subject(header: str) -> str:
    """The Subject: header, unfolded and decoded (format-patch writes a
    non-ASCII subject RFC 2047 encoded), without format-patch's "[PATCH] ":
    the subject as `git log` shows it."""
    match = re.search(r"^Subject: (.*(?:\n[ \t].*)*)", header, re.M)
    subject = re.sub(r"\n[ \t]", " ", match.group(1)) if match else ""
    if "=?" in subject:
        try:
            subject = str(make_header(decode_header(subject)))
        except (LookupError, ValueError, HeaderParseError):
            pass  # not RFC 2047 after all: the text as written
    return subject.removeprefix("[PATCH] ").strip()
