"""sync: the series brought into the fork, patch by patch.

forktool.forktree makes and rebuilds the fork; `sync` refuses, by where the
fork stands (forktool.standing), whatever would drop work. Its counterpart,
forktool.export, writes the fork back to patches/.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from datetime import UTC, datetime
from email.utils import parseaddr
from pathlib import Path

from forktool import port
from forktool.advice import SYNCED, linearise, refusal
from forktool.errors import ConflictError, ForkToolError
from forktool.forktree import (
    apply,
    create_base,
    fork_patches,
    recover,
)
from forktool.git import BASE_TAG, git, subject
from forktool.safety import ensure_safe
from forktool.series import PatchInfo, describe, read_series
from forktool.standing import (
    Entry,
    Standing,
    State,
    compare,
    load_record,
    save_record,
)
from forktool.verify import unexportable


def _backup(fork: Path) -> str:
    """Keep the fork's current commits on a new `backup/<time>` branch."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    name, n = f"backup/{stamp}", 1
    while git(fork, "rev-parse", "-q", "--verify", name, check=False).returncode == 0:
        name, n = f"backup/{stamp}-{n}", n + 1
    git(fork, "branch", name)
    return name


def _apply_series(
    fork: Path,
    paths: list[Path],
    series: list[PatchInfo],
    kept: list[Entry],
    author: str,
    log: Path,
    selection: Path | None,
    local: bool,
) -> str:
    """Apply the series after its first len(kept) patches; record what it did
    (`local`: `kept` holds changes not exported yet). Returns a note on the
    paths the series names that the fork lacks, if any."""
    m, done = len(kept), False
    try:
        apply(fork, paths[m:], author, log, first=m + 1)
        done = True
    finally:
        have = fork_patches(fork)
        entries = kept + [
            Entry(s.subject, s.fingerprint, have[i].fingerprint)
            if i < len(have)
            else Entry(s.subject, s.fingerprint, None)
            for i, s in enumerate(series[m:], m)
        ]
        save(fork, entries, agreed=done and not local)
    lacking = port.missing(fork, paths, selection)
    if not lacking:
        return ""
    return (
        f"\n{len(lacking)} paths named for the fork are not in it (port them, or "
        "drop them where they are named):\n" + "\n".join(lacking)
    )


def save(fork: Path, entries: list[Entry], agreed: bool) -> None:
    """Record the series; `agreed`: the fork is the series, patch by patch."""
    save_record(fork, entries)
    if agreed:
        git(fork, "update-ref", SYNCED, "HEAD")


def known_record(fork: Path, have: list[PatchInfo], patches_dir: Path) -> list[Entry]:
    """The fork's record; for a fork made before records existed, the fork's
    patches that this repository ever committed count as synced from it."""
    record = load_record(fork)
    if record is not None:
        return record
    committed = committed_fingerprints(patches_dir)
    return [
        Entry(p.subject, p.fingerprint, p.fingerprint)
        for p in have
        if p.fingerprint in committed
    ]


def committed_fingerprints(patches_dir: Path, limit: int = 200) -> set[str]:
    """Fingerprints of the patch files in the last `limit` commits of patches/."""
    if git(patches_dir, "rev-parse", "-q", "--verify", "HEAD", check=False).returncode:
        return set()
    commits = git(patches_dir, "rev-list", f"-{limit}", "HEAD", "--", ".").stdout
    blobs = set()
    for commit in commits.split():
        tree = git(patches_dir, "ls-tree", commit, "--", ".").stdout
        for line in tree.splitlines():
            info, name = line.split("\t", 1)
            if name.endswith(".patch"):
                blobs.add((info.split()[2], name))
    found = set()
    for blob, name in blobs:
        data = git(patches_dir, "cat-file", "blob", blob, binary=True).stdout
        found.add(describe(Path(name), data).fingerprint)
    return found


def _drop_tool_identity(fork: Path, author: str) -> None:
    """Forks made by earlier versions of this tool set its identity in their
    config, so people's commits and sign-offs carried it; remove it."""
    email = git(fork, "config", "--local", "user.email", check=False).stdout.strip()
    if email and email == parseaddr(author)[1]:
        for key in ("user.name", "user.email"):
            git(fork, "config", "--local", "--unset-all", key, check=False)
        print(
            f"removed the tool's identity ({author}) from {fork}/.git/config: "
            "your commits there now carry your own git identity"
        )


def sync(
    fork: Path,
    patches_dir: Path,
    author: str,
    base_message: str,
    sdist: Callable[[], Path],
    generated: tuple[str, ...] = (),
    force: bool = False,
    log: Path | None = None,
    selection: Path | None = None,
) -> str:
    """Bring `fork` to base + series without ever dropping work; say what was
    done. `selection` (upstream-tests.toml) names paths the fork must have."""
    log = log or fork.parent / "logs" / "sync-git-am.log"
    paths = read_series(patches_dir)
    series = [describe(path) for path in paths]
    apply_from = lambda kept, local=False: _apply_series(  # noqa: E731
        fork, paths, series, kept, author, log, selection, local
    )
    if not (fork / ".git").exists():
        if fork.exists() and any(fork.iterdir()):
            raise ForkToolError(f"{fork} exists but is not a fork tree; move it away")
        create_base(sdist(), fork, author, base_message, generated)
        lacking = apply_from([])
        return f"materialised {fork}: base + {len(paths)} patches{lacking}"

    recovered = recover(fork)
    ensure_safe(fork, "sync")
    merges, empty = unexportable(fork)
    if (merges or empty) and not force:
        raise ForkToolError(linearise(fork, merges, empty, "sync"))
    _drop_tool_identity(fork, author)
    have = fork_patches(fork)
    record = known_record(fork, have, patches_dir)
    standing = compare(have, series, record)
    old_base = git(fork, "log", "-1", "--format=%B", BASE_TAG).stdout
    if old_base.strip() != base_message.strip():
        if standing.of(State.LOCAL, State.BOTH) and not force:
            raise ForkToolError(
                f"The pinned base is now {base_message.splitlines()[0]}, and {fork} "
                f"is still on {subject(fork, BASE_TAG)}; sync rebuilds it on the new "
                "base once nothing in it is unsaved.\n"
                + refusal(fork, standing, "sync", len(paths))
            )
        return _move_base(fork, author, base_message, sdist, generated, apply_from)

    done = _sync_same_base(fork, paths, standing, record, force, apply_from)
    return f"{recovered}\n{done}" if recovered else done


def _sync_same_base(fork, paths, standing, record, force, apply_from) -> str:
    """sync on the pinned base: apply what the series added, or rebuild."""
    if not standing.changed:
        entries = [_entry(standing, fi, si, record) for fi, si in standing.pairs]
        save(fork, entries, agreed=True)
        return f"{fork} is up to date with the series ({len(paths)} patches)"
    if force:
        backup = _backup(fork)
        git(fork, "reset", "-q", "--hard", BASE_TAG)
        lacking = apply_from([])
        return (
            f"rebuilt {fork} from the series; old commits on branch {backup}{lacking}"
        )
    m = standing.applied_prefix(len(paths))
    if m is not None:
        kept = [_entry(standing, fi, si, record) for fi, si in standing.pairs]
        local = standing.of(State.LOCAL)
        lacking = apply_from(kept, bool(local))
        text = f"applied {len(paths) - m} patches of the series to {fork}:"
        text += "".join(
            f"\n  {p.name}: applied; it was {_why(standing, p.name)}" for p in paths[m:]
        )
        if local:
            text += f"\nkept {len(local)} changes of the fork, not exported yet:\n"
            text += "\n".join(i.line(advice=False) for i in local)
            text += "\nSave them with `python3 -m forktool export`."
        return text + lacking
    if standing.of(State.LOCAL, State.BOTH):
        raise ConflictError(refusal(fork, standing, "sync", len(paths)))
    report = standing.report(State.BEHIND, advice=False)
    backup = _backup(fork)
    git(fork, "reset", "-q", "--hard", BASE_TAG)
    try:
        lacking = apply_from([])
    except ForkToolError as e:
        raise type(e)(
            f"The series changed:\n{report}\nRebuilt {fork} from it; its previous "
            f"commits are on branch {backup}.\n{e}"
        ) from None
    return (
        f"updated {fork} to the series, which changed:\n{report}\n"
        f"The fork's previous commits are on branch {backup}.{lacking}"
    )


def _why(standing: Standing, name: str) -> str:
    """What `standing` says of the series patch `name`."""
    found = [i for i in standing.items if i.series and i.series.name == name]
    return found[0].change.what if found else "not applied yet"


def _entry(standing: Standing, fi: int, si: int, record: list[Entry] | None) -> Entry:
    """The record of a patch both sides have: as it is now if it is the same,
    else as it was recorded, so that a change in the fork stays local work."""
    item = next(i for i in standing.items if i.series and i.fork and i.fork_at == fi)
    assert item.series and item.fork
    if item.kind is State.SAME:
        return Entry(
            item.series.subject, item.series.fingerprint, item.fork.fingerprint
        )
    old = [e for e in record or [] if e.series == item.series.fingerprint]
    return old[0] if old else Entry(item.series.subject, item.series.fingerprint, None)


def _move_base(
    fork: Path,
    author: str,
    base_message: str,
    sdist: Callable[[], Path],
    generated: tuple[str, ...],
    apply_from: Callable[[list[Entry]], str],
) -> str:
    """Rebuild the fork on the pinned base; the old fork stays on a backup branch.

    The new base is made exactly as a fresh clone makes it, then fetched into
    the fork, whose history keeps the old base's blobs for `git am -3`.
    """
    old = subject(fork, BASE_TAG)
    staging = fork.with_name(f".{fork.name}.new-base")
    shutil.rmtree(staging, ignore_errors=True)
    try:
        create_base(sdist(), staging, author, base_message, generated)
        git(fork, "fetch", "-q", "--no-tags", str(staging.resolve()), "HEAD")
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    backup = _backup(fork)
    new_base = git(fork, "rev-parse", "FETCH_HEAD").stdout.strip()
    git(fork, "tag", "-f", BASE_TAG, new_base)
    git(fork, "reset", "-q", "--hard", new_base)
    exclude = fork / ".git" / "info" / "exclude"
    exclude.write_text("".join(f"/{path}\n" for path in generated))
    moved = (
        f"The pinned base is now {subject(fork, BASE_TAG)}: rebuilt {fork} on it; "
        f"`{BASE_TAG}` tags the new base, and the old fork, on {old}, is on "
        f"branch {backup}."
    )
    try:
        lacking = apply_from([])
    except ForkToolError as e:
        raise type(e)(f"{moved}\n{e}") from None
    return f"{moved}\nAll patches of the series apply.{lacking}"
