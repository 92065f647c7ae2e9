"""export: the fork's commits written back to patches/, proven first.

It refuses, by where the fork stands (forktool.status), whatever would
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
from forktool.process import ConflictError, ForkToolError, git, has_ref
from forktool.safety import ensure_safe
from forktool.series import describe, format_patches, read_series, series_text
from forktool.status import Comparison, Entry, Record, State, compare, undone_export
from forktool.sync import known_record
from forktool.verify import Commit, misread, prove, series_messages, unexportable

# The subjects `git commit --fixup`/`--squash` give: `rebase --autosquash`
# folds each such commit into the one it names.
TO_SQUASH = re.compile(r"^(?:fixup|squash|amend)! ")


def _refuse_losing(
    patches_dir: Path,
    written: list[Path],
    removed: list[Path],
    kept: set[str],
    record: Record,
) -> None:
    """Refuse to delete a patch file whose content exists only there, or to
    overwrite one unless it is the fork's last synced or exported version."""
    dirty: set[Path] | None = None  # not committed; None: not a git checkout
    at = patches_dir
    if not git(at, "rev-parse", "--show-toplevel", check=False).returncode:
        listed = git(at, "ls-files", "-z", "--others", "--modified", "--", ".").stdout
        staged = ["diff", "--cached", "--relative", "--name-only", "-z"]
        if not has_ref(at, "HEAD"):  # no commit yet: every file is staged
            staged = ["ls-files", "-z", "--", "."]
        listed += "\0" + git(at, *staged).stdout
        dirty = {(at / name).resolve() for name in listed.split("\0") if name}
    known = {e.series for e in record or []}
    actions = [(at / p.name, "overwrite") for p in written if (at / p.name).exists()]
    lost = [
        f"  {path.name} (export would {action} it)"
        for path, action in actions + [(p, "delete") for p in removed]
        if dirty is None or path.resolve() in dirty
        if (fingerprint := describe(path).fingerprint) not in kept
        and not (action == "overwrite" and fingerprint in known)
    ]
    if lost:
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


CRLF = (
    "the same bytes with CRLF line endings (git's core.autocrlf or an editor); "
    "export writes LF, and .gitattributes keeps patches/ LF"
)
REWRITTEN = "the same change, rewritten (its number, line numbers or blob ids moved)"


def _changes(
    comparison: Comparison,
    written: list[Path],
    removed: list[Path],
    renamed: dict,
    names: list[str],
    patches_dir: Path,
) -> list[str]:
    """One line for each patch file export writes, renames or removes (`renamed`:
    old name -> new name of each only renamed), and for the series file if
    export rewrites it."""
    local = {i.fork.name: i.change.what for i in comparison.of(State.LOCAL) if i.fork}
    lines = []
    for p in written:
        if p.name in renamed.values():
            continue
        before = patches_dir / p.name
        crlf = before.exists() and before.read_bytes().replace(b"\r\n", b"\n")
        why = CRLF if crlf == p.read_bytes() else local.get(p.name, REWRITTEN)
        lines.append(f"  {p.name}: {why}")
    changed = {
        i.series.name: i.fork.name for i in comparison.items if i.fork if i.series
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
    if (patches_dir / "series").read_bytes() != series_text(names).encode():
        same = [p.name for p in read_series(patches_dir)] == names
        rewritten = "the same list, rewritten (its comments, blank lines or spaces)"
        lines.append(
            f"  series: {rewritten if same else 'patches added, removed or reordered'}"
        )
    return lines


def _exportable(fork: Path, command: str) -> tuple[str | None, list[Commit]]:
    """The fork recovered from a killed command and refused unless its
    commits can be exported (no merge or empty commit, none to be squashed,
    no message `git am` would misread): what the recovery did, and the commits."""
    if not (fork / ".git").exists():
        raise ForkToolError(f"{fork} is not a fork tree; run `sync` first")
    recovered = journal.recover(fork)
    ensure_safe(fork, "export")
    merges, empty = unexportable(fork)
    if merges or empty:
        raise ForkToolError(linearise(fork, merges, empty, "export"))
    commits = series_messages(fork)
    if fixups := [c.name for c in commits if TO_SQUASH.match(c.subject)]:
        raise ForkToolError(autosquash(fork, fixups, command))
    if found := {c.name: lines for c in commits if (lines := misread(c))}:
        raise ForkToolError(reword(fork, found, command))
    return recovered, commits


def export(fork: Path, patches_dir: Path, check: bool = False) -> str:
    """Write the fork's commits back to patches/ and rewrite the series; with
    `check`, write nothing and fail unless patches/ is what it would write."""
    command = "export --check" if check else "export"
    recovered, commits = _exportable(fork, command)
    patches_dir.mkdir(exist_ok=True)
    series = [describe(path) for path in read_series(patches_dir)]
    head = git(fork, "rev-parse", "HEAD").stdout.strip()
    with tempfile.TemporaryDirectory() as tmp:
        new = format_patches(fork, Path(tmp))
        have = [describe(path) for path in new]
        record = known_record(fork, have, patches_dir)
        if undone_export(fork, series, record):  # written again: agreed before
            record = [Entry(s.subject, s.fingerprint, s.fingerprint) for s in series]
        comparison = compare(have, series, record)
        if comparison.of(State.BEHIND, State.BOTH):
            error = ConflictError if comparison.of(State.BOTH) else ForkToolError
            raise error(refusal(fork, comparison, command))
        names = [p.name for p in new]
        written = [
            p
            for p in new
            if not (old := patches_dir / p.name).exists()
            or old.read_bytes() != p.read_bytes()
        ]
        removed = [p for p in patches_dir.glob("*.patch") if p.name not in names]
        if why := prove(fork, new, commits):
            raise ForkToolError(
                f"{command} changed nothing: the patches it would write do not "
                f"rebuild {fork}: {why}"
            )
        # The same patch (fingerprint) under another number or name.
        kept = {h.fingerprint: h.name for h in have}
        was = {s.name: s.fingerprint for s in series}
        renamed = {
            path.name: kept[fingerprint]
            for path in removed
            if (fingerprint := was.get(path.name) or describe(path).fingerprint) in kept
        }
        lines = _changes(comparison, written, removed, renamed, names, patches_dir)
        if check and lines:
            raise ForkToolError(
                f"{patches_dir} is not what export would write ({len(lines)} "
                "differ):\n" + "\n".join(lines) + "\nRun `python3 -m forktool "
                "export` and commit patches/."
            )
        if check:
            return f"{patches_dir} is what export writes ({len(names)} patches)"
        _refuse_losing(patches_dir, written, removed, set(kept), record)
        staged = journal.stage_export(fork)
        for path in written:
            shutil.copyfile(path, staged / path.name)
    entries = [Entry(h.subject, h.fingerprint, h.fingerprint) for h in have]
    done = journal.Export(
        str(patches_dir), head, [p.name for p in written],
        [p.name for p in removed], names, entries, [s.fingerprint for s in series],
    )  # fmt: skip
    journal.commit(fork, done)
    said = f"exported {len(names)} patches to {patches_dir} "
    said += f"({len(written)} written, {len(removed)} removed)"
    text = "\n".join([said, *lines, *warnings(fork, names)])
    return f"{recovered}\n{text}" if recovered else text
