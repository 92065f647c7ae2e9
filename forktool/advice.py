"""What `sync` and `export` tell people to run; the tool's tests run each
command as printed and check that no patch is lost, duplicated or re-signed.

Commands are printed one a line, indented, in the order to run them; lines
starting with `#` say what to do by hand. A `git revert` of a patch, the way
vLLM contributors undo a commit, exported keeps both the patch and its revert
in the series: `revert_hints` says how to drop the patch instead.
"""

from __future__ import annotations

import re
from pathlib import Path

from forktool.process import BASE_TAG, git, has_ref, series_commits
from forktool.status import Change, Comparison, State
from forktool.verify import series_messages

# The fork as `sync` or `export` last left it equal to the series: the version of each
# patch that both sides agreed on.
SYNCED = "refs/forktool/synced"

# Run on each commit by `rebase --exec`: signs off only a commit that its runner wrote
# (`commit -s` signs as the committer) and that lacks the author's sign-off; nobody
# else's commit gets the runner's sign-off.
FIX_SIGNOFF = (
    'a="$(git log -1 --format="%an <%ae>")"; if [ "$a" = "$(git var '
    'GIT_COMMITTER_IDENT | sed "s/ [^ ]* [^ ]*\\$//")" ] && ! git log -1 '
    '--format=%B | grep -qxF "Signed-off-by: $a"; then git commit --amend '
    "--no-edit -s; fi"
)


def _agreed(fork: Path, *subjects: str) -> str | None:
    """The commit of the patch with one of `subjects` (tried in order) when
    both sides last agreed."""
    if not has_ref(fork, SYNCED):
        return None
    log = git(fork, "log", "--format=%H %s", f"{BASE_TAG}..{SYNCED}").stdout
    for subject in subjects:
        found = [line[:40] for line in log.splitlines() if line[41:] == subject]
        if len(found) == 1:
            return found[0]
    return None


def _fixup(fork: Path, item, commit: str, steps_back: int) -> list[str]:
    """Commands that add the fork's change to one patch onto the series'
    version of it (HEAD~steps_back once `sync --force` rebuilt the fork)."""
    name = item.series.name
    old = _agreed(fork, item.fork.subject, item.series.subject)
    if old is None:
        return [
            f"    # {name}: compare your version (`git -C {fork} show "
            f"{commit[:12]}`) with the series' and edit it in: `git -C {fork} "
            f"rebase -i {BASE_TAG}`, mark it `edit`"
        ]
    target = "HEAD" if steps_back == 0 else f"HEAD~{steps_back}"
    lines = [f"    # your change to {name}, added to the series' version of it:"]
    if git(fork, "diff", "--quiet", old, commit, check=False).returncode:
        lines += [
            f"    git -C {fork} diff {old[:12]} {commit[:12]} | git -C {fork} "
            "apply --3way",
            f"    git -C {fork} commit -q --fixup={target}",
        ]
    message = git(fork, "log", "-1", "--format=%B", old).stdout
    if message != git(fork, "log", "-1", "--format=%B", commit).stdout:
        lines.append(
            f"    # you changed its message too: reword it as you want it with "
            f"`git -C {fork} rebase -i {BASE_TAG}` (mark it `reword`)"
        )
    return lines


DROP_OR_CHANGE = (
    Change.CHANGED_IN_FORK_DROPPED_FROM_SERIES,
    Change.CHANGED_IN_SERIES_DROPPED_IN_FORK,
)


def _keep_both(fork: Path, comparison: Comparison, drops: bool = False) -> list[str]:
    """After `sync --force`: each changed patch of the fork as a fixup of the
    series' version, each patch only the fork has picked, then the fixups
    squashed: one commit per patch, none twice. A patch dropped on one side
    and changed on the other keeps the change, or with `drops` the drop."""
    commits = series_commits(fork)
    series_len = len([item for item in comparison.items if item.series])
    lines, picks, fixups = [], [], 0
    for item in comparison.of(State.LOCAL, State.BOTH):
        dropped = item.change in DROP_OR_CHANGE
        if dropped and (drops or item.fork is None):
            continue
        if item.fork_at is None or item.fork is None:
            lines.append(
                f"    # {item.line(advice=False).strip()}: redo that with "
                f"`git -C {fork} rebase -i {BASE_TAG}`"
            )
        elif dropped or item.change is Change.ONLY_IN_FORK:
            picks.append(
                f"    git -C {fork} cherry-pick {commits[item.fork_at][:12]}  "
                f"# {item.fork.subject}"
            )
        elif item.series is not None:
            back = series_len - item.number + fixups
            fixup = _fixup(fork, item, commits[item.fork_at], back)
            fixups += sum(" --fixup=" in line for line in fixup)
            lines += fixup
    lines += picks
    if fixups:
        lines.append(f"    git -C {fork} -c sequence.editor=: rebase -q -i "
                     f"--autosquash {BASE_TAG}")  # fmt: skip
    if drops:
        for item in comparison.of(State.BOTH):
            if item.change is Change.CHANGED_IN_SERIES_DROPPED_IN_FORK:
                back = series_len - item.number + len(picks)
                lines.append(
                    f"    git -C {fork} rebase -q --onto HEAD~{back + 1} "
                    f"HEAD~{back}  # drops {item.series.name if item.series else ''}"
                )
    return lines


FORCE = (
    "    python3 -m forktool sync --force   # the series; your commits stay on a "
    "backup/<time> branch"
)
THEN = "    # resolve any conflicts git reports, then:\n    python3 -m forktool export"


def _diverged(fork: Path, comparison: Comparison, command: str) -> str:
    """Both sides changed: the commands that keep both, and where a patch was
    dropped on one side and changed on the other, those that keep the drop."""
    keep = "\n".join([FORCE, *_keep_both(fork, comparison), THEN])
    text = (
        f"Both {fork} and the series changed since the last sync or export:\n"
        + comparison.report(State.LOCAL, State.BEHIND, State.BOTH)
        + f"\n`{command}` changed nothing: `export` would undo the series' "
        "changes, `sync` would set the fork's aside.\nTo keep both, one "
        "commit per patch"
    )
    dropped = [
        p.name
        for i in comparison.items
        if i.change in DROP_OR_CHANGE and (p := i.series or i.fork)
    ]
    if not dropped:
        return f"{text}:\n{keep}"
    names = ", ".join(dropped)
    drops = "\n".join([FORCE, *_keep_both(fork, comparison, True), THEN])
    return (
        f"{text}, keeping the changed version of {names}:\n{keep}\n"
        f"Or the same, keeping the drop of {names}:\n{drops}"
    )


def refusal(fork: Path, comparison: Comparison, command: str) -> str:
    """Why `command` changes nothing, and what to run instead (safe to run)."""
    if comparison.diverged:
        return _diverged(fork, comparison, command)
    if comparison.of(State.LOCAL):
        return (
            f"{fork} has work the series lacks:\n{comparison.report(State.LOCAL)}\n"
            "Save it with `python3 -m forktool export` (then commit patches/ in "
            "this repository); or `python3 -m forktool sync --force` rebuilds the "
            "fork from the series and keeps its commits on a backup/<time> branch."
        )
    return (
        f"The series has changes {fork} lacks:\n{comparison.report(State.BEHIND)}\n"
        f"`{command}` would undo them. Run `python3 -m forktool sync` first: it "
        "brings them in (any commits it replaces stay on a backup/<time> "
        "branch); then commit your work on top and export."
    )


def _redo(
    command: str, said: str, found: list[str], how: str, fix: str, *after: str
) -> str:
    """`command` refused for each of `found`; the fix, then `command` again."""
    again = f"    python3 -m forktool {command}"
    return "\n".join(
        [f"{command} changed nothing: {said}", *found, how, fix, again, *after]
    )


def linearise(fork: Path, merges: list[str], empty: list[str], command: str) -> str:
    """Why the fork cannot be a series while it holds merges or empty commits."""
    found = [f"  merge {m}: its resolution would be in no patch" for m in merges]
    found += [f"  empty {e}: it would be an empty patch file" for e in empty]
    keep = "" if not empty else " --no-keep-empty --force-rebase"
    return _redo(
        command,
        f"{fork} holds commits no patch can hold:",
        found,
        "Make the fork one commit per patch (merged commits replayed one by one, "
        "empty ones dropped):",
        f"    git -C {fork} rebase{keep} {BASE_TAG}\n    # if it stops on a conflict: "
        f"resolve it, `git -C {fork} add` the files, `git -C {fork} rebase --continue`",
    )


def reword(fork: Path, misread: dict[str, list[str]], command: str) -> str:
    """Why `command` refuses commit messages that `git am` would read otherwise
    than they are written (`misread`: commit -> its lines), and how to fix them."""
    shorts = ", ".join(commit.split()[0] for commit in misread)
    return _redo(
        command,
        f"the patches it would write do not rebuild {fork}: `git am` would read "
        "these commit messages otherwise than they are written, so every other "
        "clone would get other commits:",
        [f"  {commit}, {line}" for commit, found in misread.items() for line in found],
        "Indent each such line by a space (`git am` then keeps it as written), or "
        "rewrite it:",
        f"    git -C {fork} rebase -i {BASE_TAG}   # mark {shorts} `reword`",
    )


def autosquash(fork: Path, fixups: list[str], command: str) -> str:
    """Why `command` refuses `fixup!`/`squash!`/`amend!` commits, and the
    rebase that squashes each into the commit it names."""
    return _redo(
        command,
        f"{fork} holds commits made to be squashed into others; each would become "
        "a patch of its own:",
        [f"  {commit}" for commit in fixups],
        "Squash each into the commit it names (a `squash!` one opens your editor "
        "to join the two messages):",
        f"    git -C {fork} -c sequence.editor=: rebase -q -i --autosquash {BASE_TAG}",
        f"If one stays, the commit it names is not in the fork: reword or drop it "
        f"with `git -C {fork} rebase -i {BASE_TAG}`.",
    )


SUBJECT_STYLE = re.compile(r"^(\[[^\]\s][^\]]*\])+ \S")


def warnings(fork: Path, names: list[str]) -> list[str]:
    """Commits without their author's sign-off, subjects not in vLLM's style,
    and two patches with one subject."""
    found: list[str] = []
    unsigned: list[int] = []
    seen: dict[str, str] = {}
    # Whoever runs the tool, as `git commit -s` in the fork signs off.
    ident = git(fork, "var", "GIT_COMMITTER_IDENT", check=False)
    me = None if ident.returncode else ident.stdout.rsplit(" ", 2)[0]
    for i, (name, commit) in enumerate(zip(names, series_messages(fork), strict=False)):
        author, subject = commit.author, commit.subject
        trailers = {line.strip() for line in commit.message.splitlines()}
        if f"Signed-off-by: {author}" not in trailers:
            found.append(_unsigned(fork, name, author, me))
            if author == me:
                unsigned.append(i)
        if not SUBJECT_STYLE.match(subject):
            found.append(
                f"warning: {name}: subject {subject!r} is not in vLLM's "
                f"`[Area] Subject` style; reword it with `git -C {fork} rebase -i "
                f"{BASE_TAG}` (mark it `reword`), then export again. (A patch "
                "applied with plain `git am` loses its `[Area]` tag; `git am "
                "--keep-non-patch` keeps it.)"
            )
        if subject in seen:
            found.append(
                f"warning: {seen[subject]} and {name} have one subject, {subject!r}: "
                "is one a copy of the other? Squash them with `git -C "
                f"{fork} rebase -i {BASE_TAG}` (mark the later one `fixup`)"
            )
        seen.setdefault(subject, name)
    found += revert_hints(fork, names)
    if unsigned:
        start = f"HEAD~{len(names) - unsigned[0]}" if unsigned[0] else BASE_TAG
        found.append(
            f"Sign off your commits that lack it ({me}; the others stay as they "
            "are), then export again:\n"
            f"    git -C {fork} rebase -q {start} --exec '{FIX_SIGNOFF}'"
        )
    return found


def _unsigned(fork: Path, name: str, author: str, me: str | None) -> str:
    """The warning for a commit that lacks its author's sign-off."""
    warning = f"warning: {name}: no `Signed-off-by: {author}` (DCO)"
    if author == me:
        return warning
    return (
        f"{warning}: {author} wrote it, so only they can sign it off. Ask them "
        "for it (their `Signed-off-by:` line), then add it as the last line of "
        f"its message with `git -C {fork} rebase -i {BASE_TAG}` (mark it "
        "`reword`) and export again; never add your own in their name."
    )


REVERTS = re.compile(r"^This reverts commit ([0-9a-f]{7,40})\b", re.MULTILINE)


def revert_hints(fork: Path, names: list[str]) -> list[str]:
    """A warning for each commit of the series (patch files `names`) that
    reverts an earlier one: how to drop that patch instead."""
    commits = series_messages(fork)
    found = []
    for i, commit in enumerate(commits[: len(names)]):
        if not commit.subject.startswith('Revert "'):
            continue
        said = REVERTS.search(commit.message)
        at = next(
            (j for j in range(i) if said and commits[j].sha.startswith(said[1])), None
        )
        if at is None:  # "This reverts commit" gone or stale (a rebase changed
            # the ids): the quoted subject.
            quoted = commit.subject.removeprefix('Revert "').removesuffix('"')
            at = max(
                (j for j in range(i) if commits[j].subject == quoted), default=None
            )
        if at is not None:
            n = at + 1
            found.append(
                f"warning: {names[i]}: reverts patch {n} ({names[at]}): to drop "
                f"patch {n}, `git -C {fork} rebase -i {BASE_TAG}` and delete its "
                "line and this revert's (a revert keeps both in the series)"
            )
    return found
