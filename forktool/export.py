"""export: the fork's commits written back to patches/, proven first.

It refuses, by where the fork stands (forktool.standing), whatever would
drop the series' changes or a patch file that exists only on disk, and
writes nothing unless the patches it would write rebuild the fork's HEAD
(forktool.verify). `check` only says whether patches/ is what it would write.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from pathlib import Path

from forktool import journal
from forktool.advice import autosquash, linearise, refusal, reword, warnings
from forktool.patch_files import format_patches
from forktool.process import ConflictError, ForkToolError, git
from forktool.safety import ensure_safe
from forktool.series import HEADER, PatchInfo, describe, read_series
from forktool.standing import Entry, Standing, State, compare, undone_export
from forktool.sync import known_record
from forktool.verify import Commit, misread, prove, series_messages, unexportable

TO_SQUASH = re.compile(r"^(?:fixup|squash|amend)! ")
"""The subjects `git commit --fixup`/`--squash` give: `rebase --autosquash` folds
each such commit into the one it names."""


def _not_committed(patches_dir: Path) -> set[Path] | None:
    """Files under `patches_dir` whose content is not committed in this
    repository, or None when it is not a git checkout."""
    if git(patches_dir, "rev-parse", "--show-toplevel", check=False).returncode:
        return None
    names = git(patches_dir, "ls-files", "-z", "--others", "--modified", "--", ".")
    listed = names.stdout.split("\0")
    if git(patches_dir, "rev-parse", "-q", "--verify", "HEAD", check=False).returncode:
        listed += git(patches_dir, "ls-files", "-z", "--", ".").stdout.split("\0")
    else:
        staged = git(patches_dir, "diff", "--cached", "--relative", "--name-only", "-z")
        listed += staged.stdout.split("\0")
    return {(patches_dir / name).resolve() for name in listed if name}


def _refuse_losing(
    patches_dir: Path,
    overwritten: list[Path],
    removed: list[Path],
    kept: set[str],
    record: list[Entry] | None,
) -> None:
    """Refuse to delete a patch file whose content exists only there, or to
    overwrite one unless it is the fork's last synced or exported version."""
    dirty = _not_committed(patches_dir)
    known = {e.series for e in record or []}
    lost = []
    for path in overwritten + removed:
        if dirty is not None and path.resolve() not in dirty:
            continue
        fingerprint = describe(path).fingerprint
        if fingerprint in kept or (path in overwritten and fingerprint in known):
            continue
        action = "delete" if path in removed else "overwrite"
        lost.append(f"  {path.name} (export would {action} it)")
    if not lost:
        return
    where = (
        f"{patches_dir} is not in a git checkout, so nothing there is committed"
        if dirty is None
        else "they are not committed in this repository"
    )
    raise ForkToolError(
        f"export changed nothing: these patch files exist only on disk ({where}):\n"
        + "\n".join(lost)
        + "\nCommit them first (`git add patches && git commit`), or move them "
        "somewhere safe; then run `python3 -m forktool export` again."
    )


def _why(standing: Standing, name: str) -> str:
    found = [i for i in standing.items if i.fork and i.fork.name == name]
    if found and found[0].kind is State.LOCAL:
        return found[0].change.what
    return "the same change, rewritten (its number, line numbers or blob ids moved)"


def _crlf(new: Path, old: Path) -> str | None:
    """What differs when only the line endings do."""
    if old.exists() and old.read_bytes().replace(b"\r\n", b"\n") == new.read_bytes():
        return (
            "the same bytes with CRLF line endings (git's core.autocrlf or an "
            "editor); export writes LF, and .gitattributes keeps patches/ LF"
        )
    return None


def _refuse_messages(fork: Path, commits: list[Commit], command: str) -> None:
    """Refuse commits that are to be squashed, and messages `git am` would
    read otherwise than they are written."""
    fixups = [c.name for c in commits if TO_SQUASH.match(c.subject)]
    if fixups:
        raise ForkToolError(autosquash(fork, fixups, command))
    found = {c.name: misread(c) for c in commits}
    found = {name: lines for name, lines in found.items() if lines}
    if found:
        raise ForkToolError(reword(fork, found, command))


def _renamed(removed: list[Path], series: list[PatchInfo], have: list[PatchInfo]):
    """Old name -> new name of each patch file that export only renames: the
    same patch (fingerprint) under another number or name."""
    new_name = {h.fingerprint: h.name for h in have}
    old = {s.name: s.fingerprint for s in series}
    found = {}
    for path in removed:
        fingerprint = old.get(path.name) or describe(path).fingerprint
        if fingerprint in new_name:
            found[path.name] = new_name[fingerprint]
    return found


def _changes(
    standing: Standing, written, removed, renamed, patches_dir: Path
) -> list[str]:
    """One line for each patch file export writes, renames or removes."""
    lines = [
        f"  {p.name}: {_crlf(p, patches_dir / p.name) or _why(standing, p.name)}"
        for p in written
        if p.name not in renamed.values()
    ]
    changed = {
        i.series.name: i.fork.name for i in standing.items if i.series and i.fork
    }
    for path in removed:
        new = renamed.get(path.name)
        if new is None and path.name in changed:
            lines.append(f"  {path.name} -> {changed[path.name]}: its subject changed")
        elif new is None:
            lines.append(f"  {path.name}: removed from the series")
        elif new.split("-", 1)[-1] == path.name.split("-", 1)[-1]:
            lines.append(f"  {path.name} -> {new}: renumbered")
        else:
            lines.append(
                f"  {path.name} -> {new}: renamed (export names each patch file "
                "after its number and subject)"
            )
    return lines


def _series_change(patches_dir: Path, names: list[str]) -> list[str]:
    """The line for a series file export rewrites, if it does."""
    series_file = (patches_dir / "series").read_bytes()
    if series_file == (HEADER + "".join(f"{n}\n" for n in names)).encode():
        return []
    listed = [p.name for p in read_series(patches_dir)]
    if listed != names:
        return ["  series: another list or order"]
    return ["  series: the same list, rewritten (its comments, blank lines or spaces)"]


def _check(patches_dir: Path, names: list[str], lines: list[str]) -> str:
    """`export --check`: fail unless patches/ is what export would write."""
    if lines:
        raise ForkToolError(
            f"{patches_dir} is not what export would write ({len(lines)} "
            "differ):\n" + "\n".join(lines) + "\nRun `python3 -m forktool "
            "export` and commit patches/."
        )
    return f"{patches_dir} is what export writes ({len(names)} patches)"


def _exportable(fork: Path, command: str) -> tuple[str | None, list[Commit]]:
    """The fork recovered from a killed command and refused unless its
    commits can be exported: what the recovery did, and the commits."""
    if not (fork / ".git").exists():
        raise ForkToolError(f"{fork} is not a fork tree; run `sync` first")
    recovered = journal.recover(fork)
    ensure_safe(fork, "export")
    merges, empty = unexportable(fork)
    if merges or empty:
        raise ForkToolError(linearise(fork, merges, empty, "export"))
    commits = series_messages(fork)
    _refuse_messages(fork, commits, command)
    return recovered, commits


def _differs(new: Path, old: Path) -> bool:
    """Whether writing `new` over `old` changes patches/."""
    return not old.exists() or old.read_bytes() != new.read_bytes()


def export(fork: Path, patches_dir: Path, check: bool = False) -> str:
    """Write the fork's commits back to patches/ and rewrite the series; with
    `check`, write nothing and fail unless patches/ is what it would write."""
    command = "export --check" if check else "export"
    recovered, commits = _exportable(fork, command)
    patches_dir.mkdir(exist_ok=True)
    listed = read_series(patches_dir)
    series = [describe(path) for path in listed]
    head = git(fork, "rev-parse", "HEAD").stdout.strip()
    with tempfile.TemporaryDirectory() as tmp:
        new = format_patches(fork, Path(tmp))
        have = [describe(path) for path in new]
        record = known_record(fork, have, patches_dir)
        if undone_export(fork, series, record):  # written again: agreed before
            record = [Entry(s.subject, s.fingerprint, s.fingerprint) for s in series]
        standing = compare(have, series, record)
        if standing.of(State.BEHIND, State.BOTH):
            error = ConflictError if standing.of(State.BOTH) else ForkToolError
            raise error(refusal(fork, standing, command, len(series)))
        names = [p.name for p in new]
        written = [p for p in new if _differs(p, patches_dir / p.name)]
        removed = [p for p in patches_dir.glob("*.patch") if p.name not in names]
        why = prove(fork, new, commits)
        if why:
            raise ForkToolError(
                f"{command} changed nothing: the patches it would write do not "
                f"rebuild {fork}: {why}"
            )
        renamed = _renamed(removed, series, have)
        lines = _changes(standing, written, removed, renamed, patches_dir)
        lines += _series_change(patches_dir, names)
        if check:
            return _check(patches_dir, names, lines)
        overwritten = [patches_dir / p.name for p in written]
        overwritten = [p for p in overwritten if p.exists()]
        kept = {h.fingerprint for h in have}
        _refuse_losing(patches_dir, overwritten, removed, kept, record)
        staged = journal.stage_export(fork)
        for path in written:
            shutil.copyfile(path, staged / path.name)
    entries = [Entry(h.subject, h.fingerprint, h.fingerprint) for h in have]
    done = journal.Export(
        str(patches_dir), head, [p.name for p in written],
        [p.name for p in removed], names, entries, [s.fingerprint for s in series],
    )  # fmt: skip
    journal.commit_export(fork, done)
    return "\n".join(
        [
            *([recovered] if recovered else []),
            f"exported {len(names)} patches to {patches_dir} "
            f"({len(written)} written, {len(removed)} removed)",
            *lines,
            *warnings(fork, names),
        ]
    )
