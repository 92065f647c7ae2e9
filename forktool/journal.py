"""`sync` and `export` as transactions: prepared where nobody looks, then
committed in one step that a journal names.

`sync` applies the series in a staging worktree of the fork (`begin`), a
sparse checkout of the files the patches touch; the fork people see is not
touched. `commit` then writes the journal and moves the base tag, the
branch (with its working tree) and the record. `export` writes its patch
files into a staging folder first; `commit` moves them into patches/
and rewrites the series. A journal is written whole (`os.replace`), so it
is there or not.

`recover` runs first in every command, under the clone's lock
(forktool.process). A journal means a commit was interrupted: it is
finished (rolled forward). Staging without a journal means the command was
stopped before committing: the staging is deleted (rolled back), and the fork
and patches/ are as they were. Whatever signal ended the command, nothing is
left to resolve by hand.
"""

import json
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from forktool import process
from forktool.advice import SYNCED
from forktool.process import BASE_TAG, ForkToolError, git, has_ref
from forktool.series import write_series
from forktool.status import Entry, save_before_export, save_record, write_whole

# The staging worktree checks out only the files the patches touch.
SPARSE = {
    "GIT_CONFIG_COUNT": "2",
    "GIT_CONFIG_KEY_0": "core.sparseCheckout",
    "GIT_CONFIG_VALUE_0": "true",
    "GIT_CONFIG_KEY_1": "core.sparseCheckoutCone",
    "GIT_CONFIG_VALUE_1": "false",
}


def state_path(fork: Path, what: str) -> Path:
    """The fork's `journal`, the sync's staging worktree (`sync`) or the patch
    files `export` writes before it moves them into patches/ (`export`)."""
    return fork.parent / f".{fork.name}.{what}"


@dataclass
class Move:
    """What a sync commits: the fork's branch from `head` to `target`;
    `agreed`: the fork is then the series, patch by patch; `backup`: a branch
    to keep `head` on; `base`: a new base commit for the `base` tag, which
    leaves the paths `exclude` untracked."""

    head: str
    target: str
    entries: list[Entry]
    agreed: bool
    backup: str | None
    base: str | None
    exclude: list[str]


@dataclass
class Export:
    """What an export commits into patches/: the patch files made from the
    fork's commit `head`; `before`: the fingerprints of the series it
    replaces, to tell an undone export."""

    patches: str
    head: str
    write: list[str]
    remove: list[str]
    series: list[str]
    entries: list[Entry]
    before: list[str]


def commit(fork: Path, data: Move | Export) -> None:
    """Write the journal whole, then move the fork to what the staging
    worktree built (`Move`), or the staged patch files into patches/ and
    rewrite the series (`Export`), as one step."""
    kind = "export" if isinstance(data, Export) else "sync"
    text = json.dumps({"kind": kind, **asdict(data)}, indent=1)
    write_whole(state_path(fork, "journal"), text + "\n")
    _finish(fork, data)


def _discard_staging(fork: Path) -> None:
    stage = state_path(fork, "sync")
    if stage.exists():
        removed = git(fork, "worktree", "remove", "--force", str(stage), check=False)
        if removed.returncode:  # half made: git's record goes with the prune
            shutil.rmtree(stage, ignore_errors=True)
            git(fork, "worktree", "prune")
    elif (fork / ".git" / "worktrees").exists():
        git(fork, "worktree", "prune")  # a record whose folder is gone
    shutil.rmtree(state_path(fork, "export"), ignore_errors=True)


def begin(fork: Path, start: str, paths: set[str] | None) -> Path:
    """A staging worktree of `fork` at `start`, with `paths` checked out
    (None: every file)."""
    _discard_staging(fork)
    stage = state_path(fork, "sync")
    git(fork, "worktree", "add", "-q", "--no-checkout", "--detach", str(stage), start)
    gitdir = Path(git(stage, "rev-parse", "--absolute-git-dir").stdout.strip())
    (gitdir / "info").mkdir(exist_ok=True)
    wanted = ["/*"] if paths is None else [f"/{path}" for path in sorted(paths)]
    (gitdir / "info" / "sparse-checkout").write_text("\n".join(wanted) + "\n")
    git(stage, "checkout", "-q", "--detach", start, env=SPARSE)
    return stage


def stage_export(fork: Path) -> Path:
    """An empty folder for the patch files an export writes."""
    _discard_staging(fork)
    folder = state_path(fork, "export")
    folder.mkdir(parents=True)
    return folder


def save(fork: Path, entries: list[Entry], agreed: bool) -> None:
    """Record the series; `agreed`: the fork is the series, patch by patch."""
    save_record(fork, entries)
    if agreed:
        git(fork, "update-ref", SYNCED, "HEAD")


def _finish(fork: Path, data: Move | Export) -> None:
    if isinstance(data, Export):
        patches, staged = Path(data.patches), state_path(fork, "export")
        for name in data.write:
            if (staged / name).exists():
                shutil.move(staged / name, patches / name)
        for name in data.remove:
            (patches / name).unlink(missing_ok=True)
        write_series(patches, data.series)
        save_record(fork, data.entries)
        save_before_export(fork, data.before if data.write or data.remove else [])
        git(fork, "update-ref", SYNCED, data.head)
        shutil.rmtree(staged, ignore_errors=True)
    else:
        if data.backup and not has_ref(fork, data.backup):
            git(fork, "branch", data.backup, data.head)
        if data.base:
            git(fork, "tag", "-f", BASE_TAG, data.base)
            exclude = fork / ".git" / "info" / "exclude"
            exclude.write_text("".join(f"/{path}\n" for path in data.exclude))
        git(fork, "reset", "-q", "--hard", data.target)
        save(fork, data.entries, data.agreed)
        _discard_staging(fork)
    state_path(fork, "journal").unlink()


def _drop_git_locks(fork: Path) -> None:
    """Remove the lock files a killed git command of the interrupted commit
    left in the fork (`index.lock`, `<ref>.lock`), which would make git refuse
    to finish it. The journal says that commit was the last thing to touch
    the fork's index and refs, and the clone's lock that no other command of
    the tool runs now."""
    gitdir = fork / ".git"
    for name in ("index.lock", "HEAD.lock", "packed-refs.lock"):
        (gitdir / name).unlink(missing_ok=True)
    for lock in (gitdir / "refs").rglob("*.lock"):
        lock.unlink()


def recover(fork: Path) -> str | None:
    """Finish an interrupted commit, or delete an interrupted command's
    staging; say what was done, if anything."""
    path = state_path(fork, "journal")
    if path.exists():
        _drop_git_locks(fork)
        data = json.loads(path.read_text())
        data["entries"] = [Entry(**e) for e in data["entries"]]
        if data.pop("kind") == "export":
            _finish(fork, Export(**data))
            return f"finished an interrupted export into {data['patches']}"
        move = Move(**data)
        head = git(fork, "rev-parse", "HEAD").stdout.strip()
        if head not in (move.head, move.target):
            raise ForkToolError(
                f"A sync was interrupted while it moved {fork} from "
                f"{move.head[:12]} to {move.target[:12]}, and the fork "
                f"is now at {head[:12]}, so nothing was changed. Keep "
                f"what you want: `git -C {fork} branch keep "
                f"{move.target[:12]}` keeps the sync's result; then "
                f"delete {path} and run the command "
                "again."
            )
        _finish(fork, move)
        return f"finished an interrupted sync: {fork} is at the series it applied"
    if state_path(fork, "sync").exists() or state_path(fork, "export").exists():
        _discard_staging(fork)
        return f"undid an interrupted command: {fork} and patches/ are as before it"
    return None


@contextmanager
def exclusive(lock: Path, fork: Path, command: str) -> Iterator[None]:
    """Hold the clone's lock; first finish or undo what an interrupted
    command left in `fork` and beside it."""
    with process.hold(lock, command):
        if (fork / ".git").exists() and (said := recover(fork)):
            print(said, file=sys.stderr)
        yield
