"""sync: the series brought into the fork, patch by patch.

forktool.base and forktool.am make and rebuild the fork; `sync` refuses, by where the
fork stands (forktool.standing), whatever would drop work. It applies the
series where nobody looks and moves the fork in one step (forktool.journal),
so a killed sync leaves the fork as it was or as the sync made it. Its
counterpart, forktool.export, writes the fork back to patches/.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parseaddr
from pathlib import Path

from forktool import journal, port
from forktool.advice import SYNCED, linearise, refusal
from forktool.am import apply
from forktool.base import create_base
from forktool.patch_files import fork_patches, touched
from forktool.process import BASE_TAG, ConflictError, ForkToolError, git, subject
from forktool.safety import ensure_safe
from forktool.series import PatchInfo, describe, read_series
from forktool.standing import (
    Entry,
    Refusal,
    Standing,
    State,
    compare,
    load_record,
    save_record,
    undone_export,
)
from forktool.verify import unexportable


def _backup_name(fork: Path) -> str:
    """A new `backup/<time>` branch name for the fork's current commits."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    name, n = f"backup/{stamp}", 1
    while git(fork, "rev-parse", "-q", "--verify", name, check=False).returncode == 0:
        name, n = f"backup/{stamp}-{n}", n + 1
    return name


@dataclass
class Plan:
    """Where a sync applies the series: on `start`, after the patches `kept`
    records (`local`: some hold changes not exported yet)."""

    start: str
    kept: list[Entry]
    local: bool = False
    backup: str | None = None
    """A branch to keep the fork's commits on."""
    base: str | None = None
    """A new base commit."""


def _entries(
    series: list[PatchInfo], kept: list[Entry], have: list[PatchInfo]
) -> list[Entry]:
    """The record: `kept`, then each later patch of the series with the
    fork's version of it, if applied."""
    return kept + [
        Entry(s.subject, s.fingerprint, have[i].fingerprint if i < len(have) else None)
        for i, s in enumerate(series[len(kept) :], len(kept))
    ]


def _apply_series(
    fork: Path,
    paths: list[Path],
    series: list[PatchInfo],
    plan: Plan,
    author: str,
    log: Path,
    generated: tuple[str, ...],
) -> None:
    """Apply the series after its first len(plan.kept) patches in a staging
    worktree, then move the fork there in one step, also when a patch does
    not apply (to the last good commit; the error follows)."""
    m = len(plan.kept)
    head = git(fork, "rev-parse", "HEAD").stdout.strip()
    stage = journal.begin(fork, plan.start, touched(paths[m:]))
    error = None
    try:
        apply(stage, paths[m:], author, log, m + 1, shown=fork, env=journal.SPARSE)
    except ForkToolError as e:
        error = e
    since = plan.base or BASE_TAG
    entries = _entries(series, plan.kept, fork_patches(stage, since))
    target = git(stage, "rev-parse", "HEAD").stdout.strip()
    move = journal.Move(
        head, target, entries, error is None and not plan.local, plan.backup,
        plan.base, list(generated) if plan.base else [],
    )  # fmt: skip
    journal.commit_sync(fork, move)
    if error:
        raise error


def _lacking(fork: Path, paths: list[Path], selection: Path | None) -> str:
    """A note on the paths the series names that the fork lacks, if any."""
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
    made = (fork / ".git").exists()
    recovered = journal.recover(fork) if made else None
    paths = read_series(patches_dir)
    series = [describe(path) for path in paths]

    def run(plan: Plan) -> str:
        """Apply the series as `plan` says; a note on what the fork lacks."""
        _apply_series(fork, paths, series, plan, author, log, generated)
        return _lacking(fork, paths, selection)

    if not made:
        if fork.exists() and any(fork.iterdir()):
            raise ForkToolError(f"{fork} exists but is not a fork tree; move it away")
        _materialise(fork, paths, series, author, log, base_message, sdist, generated)
        lacking = _lacking(fork, paths, selection)
        return f"materialised {fork}: base + {len(paths)} patches{lacking}"

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
        done = _move_base(fork, author, base_message, sdist, generated, run)
    elif undone_export(fork, series, record) and not force:
        raise ForkToolError(_undone(fork, standing))
    else:
        done = _sync_same_base(fork, paths, standing, record, force, run)
    return f"{recovered}\n{done}" if recovered else done


def _materialise(
    fork: Path,
    paths: list[Path],
    series: list[PatchInfo],
    author: str,
    log: Path,
    base_message: str,
    sdist: Callable[[], Path],
    generated: tuple[str, ...],
) -> None:
    """Make the fork beside it, then rename it into place: a killed first
    sync leaves no fork, and the next one starts again."""
    partial = fork.with_name(f".{fork.name}.partial")
    shutil.rmtree(partial, ignore_errors=True)
    create_base(sdist(), partial, author, base_message, generated)
    error = None
    try:
        apply(partial, paths, author, log, shown=fork)
    except ForkToolError as e:
        error = e
    save(partial, _entries(series, [], fork_patches(partial)), agreed=error is None)
    os.replace(partial, fork)
    if error:
        raise error


def _undone(fork: Path, standing: Standing) -> str:
    """Why sync refuses a series put back to what the last export replaced."""
    commit = git(fork, "log", "-1", "--format=%h %s", "HEAD").stdout.strip()
    return (
        f"patches/ is back to what your last export replaced (`git checkout`, "
        f"`git stash` or `git reset` of patches/ after it?), so it lacks what "
        f"{fork} has, up to {commit}:\n"
        + "\n".join(
            f"  {patch.name}: as build/vllm has it, not as patches/ has it"
            for item in standing.of(State.BEHIND, State.LOCAL, State.BOTH)
            if (patch := item.fork or item.series)
        )
        + "\nsync changed nothing. Write them into patches/ again (then commit "
        "patches/):\n    python3 -m forktool export\nor take patches/ as it is, "
        "your commits kept on a backup/<time> branch:\n"
        "    python3 -m forktool sync --force"
    )


def _sync_same_base(fork, paths, standing, record, force, run) -> str:
    """sync on the pinned base: apply what the series added, or rebuild."""
    if not standing.changed:
        entries = [_entry(standing, fi, si, record) for fi, si in standing.pairs]
        save(fork, entries, agreed=True)
        return f"{fork} is up to date with the series ({len(paths)} patches)"
    if force:
        backup = _backup_name(fork)
        lacking = run(Plan(BASE_TAG, [], backup=backup))
        return (
            f"rebuilt {fork} from the series; old commits on branch {backup}{lacking}"
        )
    m = standing.applied_prefix(len(paths))
    if m is not None:
        kept = [_entry(standing, fi, si, record) for fi, si in standing.pairs]
        local = standing.of(State.LOCAL)
        lacking = run(Plan("HEAD", kept, local=bool(local)))
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
        diverged = Refusal.of(standing) is Refusal.DIVERGED
        error = ConflictError if diverged else ForkToolError
        raise error(refusal(fork, standing, "sync", len(paths)))
    report = standing.report(State.BEHIND, advice=False)
    backup = _backup_name(fork)
    try:
        lacking = run(Plan(BASE_TAG, [], backup=backup))
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
    run: Callable[[Plan], str],
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
    new_base = git(fork, "rev-parse", "FETCH_HEAD").stdout.strip()
    backup = _backup_name(fork)
    moved = (
        f"The pinned base is now {subject(fork, new_base)}: rebuilt {fork} on it; "
        f"`{BASE_TAG}` tags the new base, and the old fork, on {old}, is on "
        f"branch {backup}."
    )
    try:
        lacking = run(Plan(new_base, [], backup=backup, base=new_base))
    except ForkToolError as e:
        raise type(e)(f"{moved}\n{e}") from None
    return f"{moved}\nAll patches of the series apply.{lacking}"
