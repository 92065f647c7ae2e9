"""sync and export: the fork and the series brought together, patch by patch.

`sync` brings the series into the fork (forktool.forktree makes and rebuilds
it), `export` writes the fork's commits back to patches/; both refuse, by
where the fork stands (forktool.standing), whatever would drop work.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime
from email.utils import parseaddr
from pathlib import Path

from forktool.errors import ForkToolError
from forktool.forktree import (
    apply,
    create_base,
    ensure_safe,
    fork_patches,
    format_patches,
)
from forktool.git import BASE_TAG, SERIES, git, series_commits
from forktool.series import PatchInfo, describe, read_series, write_series
from forktool.standing import (
    Entry,
    Refusal,
    Standing,
    State,
    compare,
    load_record,
    save_record,
)


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
) -> None:
    """Apply the series after its first len(kept) patches; record what it did."""
    m = len(kept)
    try:
        apply(fork, paths[m:], author, log, first=m + 1)
    finally:
        have = fork_patches(fork)
        save_record(
            fork,
            kept
            + [
                Entry(s.subject, s.fingerprint, have[i].fingerprint)
                if i < len(have)
                else Entry(s.subject, s.fingerprint, None)
                for i, s in enumerate(series[m:], m)
            ],
        )


def _record(fork: Path, have: list[PatchInfo], patches_dir: Path) -> list[Entry]:
    """The fork's record; for a fork made before records existed, the fork's
    patches that this repository ever committed count as synced from it."""
    record = load_record(fork)
    if record is not None:
        return record
    committed = _committed(patches_dir)
    return [
        Entry(p.subject, p.fingerprint, p.fingerprint)
        for p in have
        if p.fingerprint in committed
    ]


def _committed(patches_dir: Path, limit: int = 200) -> set[str]:
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


def _base_subject(fork: Path) -> str:
    return git(fork, "log", "-1", "--format=%s", BASE_TAG).stdout.strip()


def sync(
    fork: Path,
    patches_dir: Path,
    author: str,
    base_message: str,
    sdist: Callable[[], Path],
    generated: tuple[str, ...] = (),
    force: bool = False,
    log: Path | None = None,
) -> str:
    """Bring `fork` to base + series without ever dropping work; say what was done."""
    log = log or fork.parent / "logs" / "sync-git-am.log"
    paths = read_series(patches_dir)
    series = [describe(path) for path in paths]
    if not (fork / ".git").exists():
        if fork.exists() and any(fork.iterdir()):
            raise ForkToolError(f"{fork} exists but is not a fork tree; move it away")
        create_base(sdist(), fork, author, base_message, generated)
        _apply_series(fork, paths, series, [], author, log)
        return f"materialised {fork}: base + {len(paths)} patches"

    ensure_safe(fork, "sync")
    _drop_tool_identity(fork, author)
    have = fork_patches(fork)
    record = _record(fork, have, patches_dir)
    standing = compare(have, series, record)
    old_base = git(fork, "log", "-1", "--format=%B", BASE_TAG).stdout
    if old_base.strip() != base_message.strip():
        if standing.of(State.LOCAL, State.BOTH) and not force:
            raise ForkToolError(
                f"The pinned base is now {base_message.splitlines()[0]}, and {fork} "
                f"is still on {_base_subject(fork)}; sync rebuilds it on the new "
                "base once nothing in it is unsaved.\n"
                + refusal(fork, standing, "sync")
            )
        return _move_base(
            fork, paths, series, author, base_message, sdist, generated, log
        )

    if not standing.changed:
        save_record(
            fork, [_entry(standing, fi, si, record) for fi, si in standing.pairs]
        )
        return f"{fork} is up to date with the series ({len(paths)} patches)"
    if force:
        backup = _backup(fork)
        git(fork, "reset", "-q", "--hard", BASE_TAG)
        _apply_series(fork, paths, series, [], author, log)
        return f"rebuilt {fork} from the series; old commits on branch {backup}"
    m = standing.applied_prefix(len(paths))
    if m is not None:
        kept = [_entry(standing, fi, si, record) for fi, si in standing.pairs]
        report = standing.report(State.BEHIND, State.LOCAL, advice=False)
        _apply_series(fork, paths, series, kept, author, log)
        if standing.of(State.LOCAL):
            report += "\nSave the fork's changes with `python3 -m forktool export`."
        return f"applied {len(paths) - m} patches of the series to {fork}:\n{report}"
    if standing.of(State.LOCAL, State.BOTH):
        raise ForkToolError(refusal(fork, standing, "sync"))
    report = standing.report(State.BEHIND, advice=False)
    backup = _backup(fork)
    git(fork, "reset", "-q", "--hard", BASE_TAG)
    try:
        _apply_series(fork, paths, series, [], author, log)
    except ForkToolError as e:
        raise ForkToolError(
            f"The series changed:\n{report}\nRebuilt {fork} from it; its previous "
            f"commits are on branch {backup}.\n{e}"
        ) from None
    return (
        f"updated {fork} to the series, which changed:\n{report}\n"
        f"The fork's previous commits are on branch {backup}."
    )


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
    paths: list[Path],
    series: list[PatchInfo],
    author: str,
    base_message: str,
    sdist: Callable[[], Path],
    generated: tuple[str, ...],
    log: Path,
) -> str:
    """Rebuild the fork on the pinned base; the old fork stays on a backup branch.

    The new base is made exactly as a fresh clone makes it, then fetched into
    the fork, whose history keeps the old base's blobs for `git am -3`.
    """
    old = _base_subject(fork)
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
        f"The pinned base is now {_base_subject(fork)}: rebuilt {fork} on it; "
        f"`{BASE_TAG}` tags the new base, and the old fork, on {old}, is on "
        f"branch {backup}."
    )
    try:
        _apply_series(fork, paths, series, [], author, log)
    except ForkToolError as e:
        raise ForkToolError(f"{moved}\n{e}") from None
    return f"{moved}\nAll {len(paths)} patches of the series apply."


def refusal(fork: Path, standing: Standing, command: str) -> str:
    """Why `command` changes nothing, and what to run instead (safe to run)."""
    kind = Refusal.of(standing)
    if kind is Refusal.DIVERGED:
        commits = series_commits(fork)
        mine = [
            f"    git -C {fork} cherry-pick {commits[item.fork_at][:12]}  "
            f"# {item.fork.subject}"
            for item in standing.of(State.LOCAL, State.BOTH)
            if item.fork and item.fork_at is not None
        ]
        return (
            f"Both {fork} and the series changed since the last sync or export:\n"
            + standing.report(State.LOCAL, State.BEHIND, State.BOTH)
            + f"\n`{command}` changed nothing: `export` would undo the series' "
            "changes, `sync` would set the fork's aside.\nTo keep both:\n"
            "    python3 -m forktool sync --force   # the series; your commits "
            "stay on a backup/<time> branch\n"
            + "\n".join(mine)
            + ("\n" if mine else "")
            + "    # resolve any conflicts, then: python3 -m forktool export"
        )
    if kind is Refusal.LOCAL_WORK:
        return (
            f"{fork} has work the series lacks:\n{standing.report(State.LOCAL)}\n"
            "Save it with `python3 -m forktool export` (then commit patches/ in "
            "this repository); or `python3 -m forktool sync --force` rebuilds the "
            "fork from the series and keeps its commits on a backup/<time> branch."
        )
    return (
        f"The series has changes {fork} lacks:\n{standing.report(State.BEHIND)}\n"
        f"`{command}` would undo them. Run `python3 -m forktool sync` first: it "
        "brings them in (any commits it replaces stay on a backup/<time> "
        "branch); then commit your work on top and export."
    )


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
        + "\nCommit them first (`git add patches && git commit`), or copy them "
        "somewhere safe; then run `python3 -m forktool export` again."
    )


SUBJECT_STYLE = re.compile(r"^(\[[^\]\s][^\]]*\])+ \S")


def _warnings(fork: Path, names: list[str]) -> list[str]:
    """Commits without a matching sign-off, or with a subject not in vLLM's style."""
    log = git(fork, "log", "--reverse", "--format=%an <%ae>%x00%s%x00%B%x1e", SERIES)
    warnings = []
    for name, record in zip(names, log.stdout.split("\x1e"), strict=False):
        author, subject, body = record.lstrip("\n").split("\0", 2)
        trailers = {line.strip() for line in body.splitlines()}
        if f"Signed-off-by: {author}" not in trailers:
            warnings.append(
                f"warning: {name}: no `Signed-off-by: {author}` (DCO); add it with "
                f"`git -C {fork} rebase --signoff {BASE_TAG}`, then export again"
            )
        if not SUBJECT_STYLE.match(subject):
            warnings.append(
                f"warning: {name}: subject {subject!r} is not in vLLM's "
                f"`[Area] Subject` style; reword it with `git -C {fork} rebase -i "
                f"{BASE_TAG}` (mark it `reword`), then export again"
            )
    return warnings


def export(fork: Path, patches_dir: Path) -> str:
    """Write the fork's commits back to patches/ and rewrite the series."""
    if not (fork / ".git").exists():
        raise ForkToolError(f"{fork} is not a fork tree; run `sync` first")
    ensure_safe(fork, "export")
    patches_dir.mkdir(exist_ok=True)
    series = [describe(path) for path in read_series(patches_dir)]
    with tempfile.TemporaryDirectory() as tmp:
        new = format_patches(fork, Path(tmp))
        have = [describe(path) for path in new]
        record = _record(fork, have, patches_dir)
        standing = compare(have, series, record)
        if standing.of(State.BEHIND, State.BOTH):
            raise ForkToolError(refusal(fork, standing, "export"))
        names = [p.name for p in new]
        written = [
            p
            for p in new
            if not (patches_dir / p.name).exists()
            or (patches_dir / p.name).read_bytes() != p.read_bytes()
        ]
        removed = [p for p in patches_dir.glob("*.patch") if p.name not in names]
        overwritten = [patches_dir / p.name for p in written]
        overwritten = [p for p in overwritten if p.exists()]
        kept = {h.fingerprint for h in have}
        _refuse_losing(patches_dir, overwritten, removed, kept, record)
        for path in written:
            shutil.copyfile(path, patches_dir / path.name)
    for path in removed:
        path.unlink()
    write_series(patches_dir, names)
    save_record(fork, [Entry(h.subject, h.fingerprint, h.fingerprint) for h in have])
    return "\n".join(
        [
            f"exported {len(names)} patches to {patches_dir} "
            f"({len(written)} written, {len(removed)} removed)",
            *(
                ["saved:", standing.report(State.LOCAL, advice=False)]
                if standing.of(State.LOCAL)
                else []
            ),
            *_warnings(fork, names),
        ]
    )
