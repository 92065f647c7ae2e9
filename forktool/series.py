"""The series files in and out: patches/series, the ordered list of patch
files, read and written; each patch file described for the comparison of
fork and series; the fork's commits written as `git format-patch` output;
the paths a series of patch files reads or writes."""

from __future__ import annotations

import hashlib
import re
import tempfile
from dataclasses import dataclass
from email import message_from_bytes, policy
from pathlib import Path

from forktool.process import ISOLATED, SERIES, ForkToolError, git

HEADER = "# Applied in order on the pinned base by `python3 -m forktool sync`.\n"


def read_series(patches: Path) -> list[Path]:
    """The listed patches, in order; orphan or missing files are errors."""
    series = patches / "series"
    on_disk = sorted(p.name for p in patches.glob("*.patch"))
    if not series.exists():
        if on_disk:
            raise ForkToolError(
                f"{series} is missing, and {patches} holds {len(on_disk)} patch "
                f"files: restore it (`git checkout -- {series}`) or write it, "
                "one patch file name a line, in the order to apply them"
            )
        return []
    names = _names(series)
    if twice := sorted({n for n in names if names.count(n) > 1}):
        raise ForkToolError(
            f"{series} lists {', '.join(twice)} more than once: keep one line each"
        )
    if missing := [n for n in names if not (patches / n).is_file()]:
        raise ForkToolError(f"{series} lists missing patch files: {', '.join(missing)}")
    for patch in (patches / n for n in names):
        # Merged as text, a patch no longer applies; the fork is where two
        # versions of a patch are merged.
        line = _conflict_line(patch.read_bytes().decode(errors="replace"))
        if line is not None:
            raise ForkToolError(
                f"{patch} holds an unresolved merge (git's conflict markers, from "
                f"line {line}). Merge a patch in the fork, not as text: take one "
                f"side with `git checkout --ours -- {patch}` (or --theirs), run "
                "`python3 -m forktool sync`, make the other side's change in "
                "build/vllm, `python3 -m forktool export`, then `git add patches/` "
                "and commit the merge."
            )
    if orphans := sorted(set(on_disk) - set(names)):
        raise ForkToolError(
            f"patch files not listed in {series}: {', '.join(orphans)} "
            "(add them to the series or delete them)"
        )
    return [patches / n for n in names]


def _names(series: Path) -> list[str]:
    """The file names `series` lists, refusing what would be misread."""
    data = series.read_bytes()
    if data.startswith(b"\xef\xbb\xbf"):
        raise ForkToolError(
            f"{series} starts with a byte order mark (UTF-8 BOM, invisible in "
            "most editors): save it as UTF-8 without one"
        )
    if b"\r" in data:
        raise ForkToolError(
            f"{series} has CRLF (Windows) line endings: make them LF, e.g. "
            f"`sed -i 's/\\r$//' {series}`"
        )
    if (line := _conflict_line(series.read_text())) is not None:
        raise ForkToolError(
            f"{series} holds an unresolved merge (git's conflict markers, from "
            f"line {line}): resolve it first, keeping each side's patches that "
            "should stay, each once, in the order to apply them, and no marker "
            f"lines; then `git add {series}` and run the command again."
        )
    names = [line.split("#", 1)[0].strip() for line in data.decode().splitlines()]
    for name in filter(None, names):
        if "/" in name or name in (".", ".."):
            raise ForkToolError(
                f"{series} lists {name!r}, which is not a file name in "
                f"{series.parent}: list only the names of its patch files"
            )
    return [name for name in names if name]


CONFLICT_MARKER = re.compile(r"^(<{7}|={7}|>{7}|\|{7})(?: |$)", re.M)


def _conflict_line(text: str) -> int | None:
    """The line of git's first conflict marker in `text`, if it has one."""
    found = CONFLICT_MARKER.search(text)
    return None if found is None else text.count("\n", 0, found.start()) + 1


def series_text(names: list[str]) -> str:
    return HEADER + "".join(f"{n}\n" for n in names)


def write_series(patches: Path, names: list[str]) -> None:
    (patches / "series").write_text(series_text(names))


@dataclass(frozen=True)
class PatchInfo:
    """A patch file as the comparison of fork and series sees it."""

    name: str
    subject: str
    # The header (author, date, message) and `git patch-id --stable`: what a patch is,
    # whatever its number or the blob ids of its parent.
    fingerprint: str
    # The paths its diff names (both sides of a rename).
    files: frozenset[str] = frozenset()


def describe(path: Path, data: bytes | None = None) -> PatchInfo:
    """Describe a `git format-patch` file (from the series or the fork)."""
    data = path.read_bytes() if data is None else data
    patch_id = git(None, "patch-id", "--stable", input=data, binary=True).stdout
    # CRLF line endings (an editor, core.autocrlf) leave the patch what it is;
    # git patch-id ignores them too.
    data = data.replace(b"\r\n", b"\n")
    header = data.split(b"\n---\n", 1)[0]
    patch_id = patch_id.split(b" ", 1)[0]
    digest = hashlib.sha256(header + b"\0" + patch_id).hexdigest()
    files = re.findall(rb"^diff --git a/(.*) b/(.*)$", data[len(header) :], re.M)
    named = frozenset(n.decode(errors="replace") for pair in files for n in pair)
    return PatchInfo(path.name, _subject(header), digest, named)


def _subject(header: bytes) -> str:
    """The Subject: header, unfolded and decoded (format-patch writes a
    non-ASCII subject RFC 2047 encoded), without format-patch's "[PATCH] ":
    the subject as `git log` shows it."""
    subject = message_from_bytes(header, policy=policy.default)["Subject"] or ""
    return str(subject).removeprefix("[PATCH] ").strip()


# No trailing git version; no commit ids (they change whenever the fork is
# rebuilt); "[PATCH]", unnumbered: adding a patch leaves the others unchanged;
# full blob ids (abbreviated ones grow with the repository).
FORMAT_PATCH = [
    "format-patch",
    "--no-signature",
    "--zero-commit",
    "--no-numbered",
    "--full-index",
    "--stat=80",
]


def format_patches(fork: Path, out: Path, *revs: str) -> list[Path]:
    """Write the fork's commits `revs` (those since `base`) as normalised
    patch files."""
    revs = revs or (SERIES,)
    result = git(fork, *FORMAT_PATCH, "-o", str(out), *revs, env=ISOLATED)
    return [Path(line) for line in result.stdout.splitlines()]


def fork_patches(fork: Path, *revs: str) -> list[PatchInfo]:
    with tempfile.TemporaryDirectory() as tmp:
        return [describe(path) for path in format_patches(fork, Path(tmp), *revs)]


PATHS = r"^(?:diff --git a/(.*) b/|(?:rename|copy) (?:from|to) )(.*)$"


def touched(patches: list[Path]) -> set[str] | None:
    """Every path the patches read or write, from their diff headers (pure
    renames, which have no `index` line, included); None when a header quotes
    its paths (git does for unusual names), which are then not parsed."""
    found: set[str] = set()
    for patch in patches:
        text = patch.read_text(errors="replace")
        if re.search(r'^diff --git "', text, re.M):
            return None
        found |= {
            path for pair in re.findall(PATHS, text, re.M) for path in pair if path
        }
    return found
