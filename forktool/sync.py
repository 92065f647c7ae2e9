"""sync: the series brought into the fork, patch by patch.

forktool.apply makes and rebuilds the fork; `sync` refuses, by where the
fork stands (forktool.status), whatever would drop work. It applies the
series where nobody looks and moves the fork in one step (forktool.journal),
so a killed sync leaves the fork as it was or as the sync made it. Its
counterpart, forktool.export, writes the fork back to patches/.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from datetime import UTC, datetime
from email.utils import parseaddr
from pathlib import Path

from forktool import journal, process, status
from forktool.advice import linearise, refusal
from forktool.apply import apply, create_base, head_subject, missing
from forktool.process import BASE_TAG, ConflictError, ForkToolError, git, subject
from forktool.safety import ensure_safe
from forktool.series import PatchInfo, describe, fork_patches, read_series, touched
from forktool.status import Comparison, Entry, Record, State, compare
from forktool.verify import unexportable


def _backup_name(fork: Path) -> str:
    """A new `backup/<time>` branch name for the fork's current commits."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    name, n = f"backup/{stamp}", 1
    while process.has_ref(fork, name):
        name, n = f"backup/{stamp}-{n}", n + 1
    return name


def _entries(
    series: list[PatchInfo], kept: list[Entry], have: list[PatchInfo]
) -> list[Entry]:
    """The record: `kept`, then each later patch of the series with the
    fork's version of it, if applied."""
    return kept + [
        Entry(s.subject, s.fingerprint, have[i].fingerprint if i < len(have) else None)
        for i, s in enumerate(series[len(kept) :], len(kept))
    ]


def known_record(fork: Path, have: list[PatchInfo], patches_dir: Path) -> list[Entry]:
    """The fork's record; for a fork made before records existed, the fork's
    patches that this repository ever committed count as synced from it."""
    record = status.load_record(fork)
    if record is not None:
        return record
    committed = committed_fingerprints(patches_dir)
    return [Entry(p.subject, f, f) for p in have if (f := p.fingerprint) in committed]


def committed_fingerprints(patches: Path) -> set[str]:
    """Fingerprints of the patch files in the last 200 commits of patches/."""
    if not process.has_ref(patches, "HEAD"):
        return set()
    blobs = {
        (info.split()[2], name)
        for commit in git(patches, "rev-list", "-200", "HEAD", "--", ".").stdout.split()
        for line in git(patches, "ls-tree", commit, "--", ".").stdout.splitlines()
        for info, name in [line.split("\t", 1)]
        if name.endswith(".patch")
    }
    return {
        describe(
            Path(name), git(patches, "cat-file", "blob", blob, binary=True).stdout
        ).fingerprint
        for blob, name in blobs
    }


def sync(
    fork: Path, patches_dir: Path, author: str, base_message: str,
    sdist: Callable[[], Path], generated: tuple[str, ...] = (), force: bool = False,
    selection: Path | None = None,
) -> str:  # fmt: skip
    """Bring `fork` to base + series without ever dropping work; say what was
    done. `selection` (upstream-tests.toml) names paths the fork must have."""
    made = (fork / ".git").exists()
    recovered = journal.recover(fork) if made else None
    job = _Sync(fork, patches_dir, author, base_message, sdist, generated, selection)
    if not made:
        if fork.exists() and any(fork.iterdir()):
            raise ForkToolError(f"{fork} exists but is not a fork tree; move it away")
        job.materialise()
        return f"materialised {fork}: base + {len(job.paths)} patches{job.lacking()}"
    ensure_safe(fork, "sync")
    merges, empty = unexportable(fork)
    if (merges or empty) and not force:
        raise ForkToolError(linearise(fork, merges, empty, "sync"))
    email = git(fork, "config", "--local", "user.email", check=False).stdout.strip()
    if email and email == parseaddr(author)[1]:
        # Forks made by earlier versions of this tool set its identity in their
        # config, so people's commits and sign-offs carried it.
        for key in ("user.name", "user.email"):
            git(fork, "config", "--local", "--unset-all", key, check=False)
        print(
            f"removed the tool's identity ({author}) from {fork}/.git/config: "
            "your commits there now carry your own git identity"
        )
    have = fork_patches(fork)
    record = known_record(fork, have, patches_dir)
    comparison = compare(have, job.series, record)
    old_base = git(fork, "log", "-1", "--format=%B", BASE_TAG).stdout
    if old_base.strip() != base_message.strip():
        if comparison.of(State.LOCAL, State.BOTH) and not force:
            raise ForkToolError(
                f"The pinned base is now {base_message.splitlines()[0]}, and {fork} "
                f"is still on {subject(fork, BASE_TAG)}; sync rebuilds it on the new "
                "base once nothing in it is unsaved.\n"
                + refusal(fork, comparison, "sync")
            )
        done = job.move_base()
    elif status.undone_export(fork, job.series, record) and not force:
        raise ForkToolError(_undone(fork, comparison))
    else:
        done = job.same_base(comparison, record, force)
    return f"{recovered}\n{done}" if recovered else done


def _undone(fork: Path, comparison: Comparison) -> str:
    """Why sync refuses a series put back to what the last export replaced."""
    return (
        f"patches/ is back to what your last export replaced (`git checkout`, "
        f"`git stash` or `git reset` of patches/ after it?), so it lacks what "
        f"{fork} has, up to {head_subject(fork)}:\n"
        + "\n".join(
            f"  {patch.name}: as build/vllm has it, not as patches/ has it"
            for item in comparison.of(State.BEHIND, State.LOCAL, State.BOTH)
            if (patch := item.fork or item.series)
        )
        + "\nsync changed nothing. Write them into patches/ again (then commit "
        "patches/):\n    python3 -m forktool export\nor take patches/ as it is, "
        "your commits kept on a backup/<time> branch:\n"
        "    python3 -m forktool sync --force"
    )


class _Sync:
    """One sync: the series in `patches_dir` applied onto the fork's base or a
    new one."""

    def __init__(
        self, fork: Path, patches_dir: Path, author: str, base_message: str,
        sdist: Callable[[], Path], generated: tuple[str, ...], selection: Path | None,
    ) -> None:  # fmt: skip
        self.fork, self.author, self.sdist = fork, author, sdist
        self.base_message, self.generated = base_message, generated
        self.paths, self.selection = read_series(patches_dir), selection
        self.series = [describe(path) for path in self.paths]

    def lacking(self) -> str:
        """A note on the paths the series names that the fork lacks, if any."""
        lacking = missing(self.fork, self.paths, self.selection)
        if not lacking:
            return ""
        return (
            f"\n{len(lacking)} paths named for the fork are not in it (port them, "
            "or drop them where they are named):\n" + "\n".join(lacking)
        )

    def base(self, where: Path) -> None:
        """Make the pinned base at `where`, as a fresh clone makes it."""
        shutil.rmtree(where, ignore_errors=True)
        create_base(self.sdist(), where, self.author, self.base_message, self.generated)

    def materialise(self) -> None:
        """Make the fork beside it, then rename it into place: a killed first
        sync leaves no fork, and the next one starts again."""
        partial = self.fork.with_name(f".{self.fork.name}.partial")
        self.base(partial)
        error = None
        try:
            apply(partial, self.paths, self.author, self.fork)
        except ForkToolError as e:
            error = e
        entries = _entries(self.series, [], fork_patches(partial))
        journal.save(partial, entries, agreed=error is None)
        os.replace(partial, self.fork)
        if error:
            raise error

    def run(
        self, start: str, kept: list[Entry] | None = None, local: bool = False,
        backup: str | None = None, base: str | None = None,
    ) -> str:  # fmt: skip
        """Apply the series after its first len(kept) patches on `start` in a
        staging worktree, then move the fork there in one step, also when a
        patch does not apply (to the last good commit; the error follows).
        `backup`: a branch to keep the fork's commits on; `base`: a new base
        commit. Say what the fork then lacks."""
        fork, kept = self.fork, kept or []
        m = len(kept)
        head = git(fork, "rev-parse", "HEAD").stdout.strip()
        stage = journal.begin(fork, start, touched(self.paths[m:]))
        error = None
        try:
            apply(stage, self.paths[m:], self.author, fork, m + 1, journal.SPARSE)
        except ForkToolError as e:
            error = e
        have = fork_patches(stage, f"{base or BASE_TAG}..HEAD")
        entries = _entries(self.series, kept, have)
        target = git(stage, "rev-parse", "HEAD").stdout.strip()
        move = journal.Move(
            head, target, entries, error is None and not local, backup, base,
            list(self.generated) if base else [],
        )  # fmt: skip
        journal.commit(fork, move)
        if error:
            raise error
        return self.lacking()

    def same_base(self, comparison: Comparison, record: Record, force: bool) -> str:
        """sync on the pinned base: apply what the series added, or rebuild."""
        fork, paths, run = self.fork, self.paths, self.run
        if not comparison.of(State.LOCAL, State.BEHIND, State.BOTH):
            journal.save(fork, _kept(comparison, record), agreed=True)
            return f"{fork} is up to date with the series ({len(paths)} patches)"
        if force:
            backup = _backup_name(fork)
            lacking = run(BASE_TAG, backup=backup)
            done = f"rebuilt {fork} from the series; old commits on branch {backup}"
            return done + lacking
        if (m := comparison.applied_prefix()) is not None:
            local = comparison.of(State.LOCAL)
            lacking = run("HEAD", _kept(comparison, record), local=bool(local))
            text = f"applied {len(paths) - m} patches of the series to {fork}:"
            was = {i.series.name: i.change.what for i in comparison.items if i.series}
            text += "".join(
                f"\n  {p.name}: applied; it was {was.get(p.name, 'not applied yet')}"
                for p in paths[m:]
            )
            if local:
                text += f"\nkept {len(local)} changes of the fork, not exported yet:\n"
                text += "\n".join(i.line(advice=False) for i in local)
                text += "\nSave them with `python3 -m forktool export`."
            return text + lacking
        if comparison.of(State.LOCAL, State.BOTH):
            error = ConflictError if comparison.diverged else ForkToolError
            raise error(refusal(fork, comparison, "sync"))
        report = comparison.report(State.BEHIND, advice=False)
        backup = _backup_name(fork)
        try:
            lacking = run(BASE_TAG, backup=backup)
        except ForkToolError as e:
            raise type(e)(
                f"The series changed:\n{report}\nRebuilt {fork} from it; its previous "
                f"commits are on branch {backup}.\n{e}"
            ) from None
        return (
            f"updated {fork} to the series, which changed:\n{report}\n"
            f"The fork's previous commits are on branch {backup}.{lacking}"
        )

    def move_base(self) -> str:
        """Rebuild the fork on the pinned base; the old fork stays on a backup
        branch. The new base is fetched into the fork, whose history keeps
        the old base's blobs for `git am -3`."""
        fork = self.fork
        old = subject(fork, BASE_TAG)
        staging = fork.with_name(f".{fork.name}.new-base")
        try:
            self.base(staging)
            git(fork, "fetch", "-q", "--no-tags", str(staging.resolve()), "HEAD")
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        new_base = git(fork, "rev-parse", "FETCH_HEAD").stdout.strip()
        backup = _backup_name(fork)
        moved = (
            f"The pinned base is now {subject(fork, new_base)}: rebuilt {fork} on "
            f"it; `{BASE_TAG}` tags the new base, and the old fork, on {old}, is "
            f"on branch {backup}."
        )
        try:
            lacking = self.run(new_base, backup=backup, base=new_base)
        except ForkToolError as e:
            back = (
                f"To stay on {old} instead: put pins.toml and venv.lock back as "
                "they were, then run `python3 -m forktool sync`."
            )
            raise type(e)(f"{moved}\n{e}\n{back}") from None
        return f"{moved}\nAll patches of the series apply.{lacking}"


def _kept(comparison: Comparison, record: Record) -> list[Entry]:
    """The record of the patches both sides have, in the fork's order: as they
    are now where the same, else as recorded, so that a change in the fork
    stays local work."""
    entries = []
    for fi, _ in comparison.pairs:
        item = next(i for i in comparison.items if i.fork_at == fi)
        assert item.series and item.fork
        s = item.series
        old = [e for e in record or [] if e.series == s.fingerprint]
        if item.change.state is State.SAME:
            entries.append(Entry(s.subject, s.fingerprint, item.fork.fingerprint))
        else:
            entries.append(old[0] if old else Entry(s.subject, s.fingerprint, None))
    return entries
