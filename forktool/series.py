"""patches/series: the ordered list of patch files."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from forktool.errors import ForkToolError
from forktool.git import git

HEADER = "# Applied in order on the pinned base by `python3 -m forktool sync`.\n"


def read_series(patches: Path) -> list[Path]:
    """The listed patches, in order; orphan or missing files are errors."""
    series = patches / "series"
    names = []
    if series.exists():
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


def describe(path: Path, data: bytes | None = None) -> PatchInfo:
    """Describe a `git format-patch` file (from the series or the fork)."""
    data = path.read_bytes() if data is None else data
    header = data.split(b"\n---\n", 1)[0]
    patch_id = git(None, "patch-id", "--stable", input=data, binary=True).stdout
    patch_id = patch_id.split(b" ", 1)[0]
    digest = hashlib.sha256(header + b"\0" + patch_id).hexdigest()
    return PatchInfo(path.name, _subject(header.decode(errors="replace")), digest)


def _subject(header: str) -> str:
    """The Subject: header, unfolded, without format-patch's "[PATCH] "."""
    match = re.search(r"^Subject: (.*(?:\n[ \t].*)*)", header, re.M)
    subject = re.sub(r"\n[ \t]", " ", match.group(1)) if match else ""
    return subject.removeprefix("[PATCH] ").strip()
