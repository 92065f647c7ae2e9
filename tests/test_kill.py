"""sync and export killed at every git command they run, and run two at once.

SIGKILL, SIGTERM or SIGHUP (to the process group) at the N-th git command DRIVER
runs; then what a user runs must find nothing lost. FORKTOOL_KILL_POINTS=all kills
at every point, 13 runs per pair (~32 min on 2 cores); =n every n-th (default 32).
"""

import contextlib
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

import fork_fixture as fx
import pytest
from fork_fixture import amend, commit, snapshot

from forktool.layout import REPO
from forktool.process import git

# `python3 -m forktool` on a workspace, under `journal.exclusive`; it imports no
# tests/ module (pytest would slow every run down).
DRIVER = f"""AUTHOR, MESSAGE, GENERATED = {(fx.AUTHOR, fx.MESSAGE, fx.GENERATED)!r}
import hashlib, signal, sys
from pathlib import Path
from forktool import journal, sync
from forktool.export import export
from forktool.pins import Artifact, Pins, cache_dir, fetch
from forktool.process import ForkToolError, report_error
signal.signal(signal.SIGHUP, signal.SIG_DFL)  # a hangup ends it, even under nohup
root, words = Path(sys.argv[1]), sys.argv[2:]
own, patches = root / "build" / "mini", root / "patches"
def run():
    if words[0] == "export":
        return export(own, patches, check="--check" in words)
    sdist = cache_dir() / "downloads" / "mini-0.1.tar.gz"
    pinned = Artifact(sdist.name, hashlib.sha256(sdist.read_bytes()).hexdigest())
    pins = Pins("mini", "0.1", GENERATED, pinned, pinned, AUTHOR, "pip", (), ())
    fetched, force = lambda: fetch(pins, pinned), "--force" in words
    return sync.sync(own, patches, AUTHOR, MESSAGE, fetched, GENERATED, force)
try:
    with journal.exclusive(root / "build" / "forktool.lock", own, " ".join(words)):
        print(run())
except (ForkToolError, OSError) as e:  # as forktool/__main__.py does
    sys.exit(report_error(e))
"""

SIGNALS = (signal.SIGKILL, signal.SIGTERM, signal.SIGHUP)
# Twelve patches: each command runs more than 50 git commands.
SERIES = [(f"mini/part{i:02}.py", f"PART = {i}\n", f"[Core] Add part {i}") for i in range(12)]  # noqa: E501 # fmt: skip
LOCAL = ("mini/local.py", "LOCAL = 1\n", "[Doc] Local work, not exported")
FULL = os.environ.get("FORKTOOL_KILL_POINTS") == "all"
STEP = 1 if FULL else int(os.environ.get("FORKTOOL_KILL_POINTS", "32"))
CHECK = [["sync"], ["export", "--check"]]
BACKUP = "refs/heads/backup/"


class Run(NamedTuple):
    words: list[str]
    rc: int | None
    out: str
    err: str

    def text(self) -> str:
        return f"$ {' '.join(self.words)}  (exit {self.rc})\n{self.out}{self.err}"


def start(repo: Path, *words: str, trace: bool = False) -> subprocess.Popen:
    env = {**os.environ, "TMPDIR": str(repo.parent / "tmp")}
    env |= {"FORKTOOL_TRACE_GIT": "1"} if trace else {}
    return subprocess.Popen(
        [sys.executable, "-c", DRIVER, repo, *words], cwd=REPO, env=env, text=True,
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        start_new_session=True,  # its own process group, as a terminal's job
    )  # fmt: skip


def finish(proc: subprocess.Popen, words) -> Run:
    out, err = proc.communicate()
    return Run(list(words), proc.returncode, out, err)


def git_out(repo: Path, *args: str) -> str:
    return git(repo, *args, check=False).stdout.strip()


class Scenario(NamedTuple):
    """A template workspace, the command killed there and what must hold after."""

    repo: Path
    words: list[str]
    after: list[list[str]]
    expected: dict[str, bytes]
    local: str | None
    points: int


def problems(repo: Path, scenario: Scenario) -> list[str]:
    """What does not hold in `repo` once the commands ran."""
    found, own, build = [], repo / "build" / "mini", repo / "build"
    if snapshot(repo / "patches") != scenario.expected:
        status = git_out(repo, "status", "--porcelain", "--", "patches")
        found.append("patches/ is not the expected series: " + status)
    left = [p.name for p in build.iterdir() if p.name.startswith((".mini.", "tmp"))]
    left += [p.name for p in build.iterdir() if p.name.endswith(".unpack")]
    left += [f"worktree {p.name}" for p in (own / ".git" / "worktrees").glob("*")]
    if left:
        found.append(f"left behind in build/: {left}")
    if not (own / ".git").exists():
        return [*found, "no fork"]
    if status := git_out(own, "status", "--porcelain"):
        found.append("fork not clean: " + status)
    branch = git_out(own, "symbolic-ref", "-q", "HEAD")
    if branch != "refs/heads/main":
        found.append(f"fork's HEAD is {branch or 'detached'}, not main")
    return found + on_no_branch(own, scenario.local, ("refs/heads/main", BACKUP))


def on_no_branch(own: Path, local: str | None, branches=("refs/",)) -> list[str]:
    """The fork's own commit `local`, if it is on none of `branches`."""
    if local is None:
        return []
    refs = git_out(own, "for-each-ref", "--contains", local, "--format=%(refname)")
    if any(ref.startswith(branches) for ref in refs.split()):
        return []
    return [f"local commit {local[:12]} on no branch: {refs.split()}"]


def after(repo: Path, commands: list[list[str]], runs: list[Run]) -> list[str]:
    """Run what a user runs after the interruption; what went wrong."""
    ran = [finish(start(repo, *words), words) for words in commands]
    runs += ran
    return [f"`{' '.join(r.words)}` exited {r.rc}" for r in ran if r.rc] + [
        f"traceback in `{' '.join(r.words)}`" for r in runs if "Traceback" in r.err
    ]


def copy(template: Path, to: Path) -> Path:
    (to / "tmp").mkdir(parents=True)
    shutil.copytree(template, to / "repo", symlinks=True)
    return to / "repo"


def build(kind: str, workspace) -> Scenario:
    """The template workspace of `kind`."""
    _, patches, own = workspace
    repo, local = patches.parent, None
    workspace.series_of(*SERIES)
    if kind == "first sync":
        shutil.rmtree(repo / "build")
    elif kind == "sync (rebuild)":
        # A teammate changed the first patch and added one; the fork is behind.
        theirs = workspace.clone("teammate")
        amend(theirs, 1, SERIES[0][0], "PART = 'changed'\n")
        commit(theirs, "mini/theirs.py", "THEIRS = 1\n", "[Core] A teammate's patch")
        workspace.publish(theirs)
        shutil.rmtree(theirs.parent)
    else:  # a commit of the fork's own, which must survive
        commit(own, *LOCAL)
        local = git_out(own, "rev-parse", "HEAD")
    words = kind.split() if kind in ("export", "sync --force") else ["sync"]
    # The command run through: how many git commands it runs, patches/ after.
    reference = copy(repo, repo.parent / "reference")
    run = finish(start(reference, *words, trace=True), words)
    assert run.rc == 0, run.text()
    points = sum(line.startswith("+ ") for line in run.err.splitlines())
    expected, runs = snapshot(reference / "patches"), [run]
    if kind != "export":
        assert expected == snapshot(patches)
    then = ([words] if local else []) + CHECK
    scenario = Scenario(repo, words, then, expected, local, points)
    found = after(reference, then, runs) + problems(reference, scenario)
    assert found == [], "\n".join(r.text() for r in runs)
    return scenario


def failure(head: str, found: list[str], runs: list[Run]) -> str:
    return "\n  ".join([f"{head}:", *found]) + "\n" + "\n".join(r.text() for r in runs)


def kill_one(scenario: Scenario, sig: signal.Signals, n: int, kills: Path):
    """`sig` at the n-th git command: whether it ended the command, what went wrong."""
    repo = copy(scenario.repo, where := kills / f"{sig.name}-{n}")
    proc = start(repo, *scenario.words, trace=True)
    assert proc.stderr and proc.stdout
    seen, at, lines = 0, "", []
    for line in proc.stderr:
        lines.append(line)
        if line.startswith("+ "):
            seen += 1
            if seen == n:
                at = line.strip()
                with contextlib.suppress(ProcessLookupError):
                    kill = os.killpg if sig == signal.SIGHUP else os.kill
                    kill(proc.pid, sig)
    out = proc.stdout.read()
    proc.wait()
    runs = [Run(scenario.words, proc.returncode, out, "".join(lines))]
    fired = proc.returncode == -sig
    if found := after(repo, scenario.after, runs) + problems(repo, scenario):
        head = f"{sig.name} at git command {n} ({at}) in {where}"
        return fired, failure(head, found, runs)
    shutil.rmtree(where)
    return fired, None


@pytest.mark.parametrize("kind", ["sync --force", "sync (rebuild)", "export", "first sync"])  # noqa: E501 # fmt: skip
def test_killed_at_any_git_command_nothing_is_lost(kind, workspace, tmp_path):
    scenario = build(kind, workspace)
    assert scenario.points >= 50, f"{kind} runs only {scenario.points} git commands"
    jobs = [
        (sig, n)
        for i, sig in enumerate(SIGNALS)
        for n in range(1 + i * STEP // len(SIGNALS), scenario.points + 1, STEP)
    ]
    started, kills = time.monotonic(), tmp_path / "kills"
    with ThreadPoolExecutor(os.cpu_count() or 2) as pool:
        done = list(pool.map(lambda j: kill_one(scenario, j[0], j[1], kills), jobs))
    fired = {sig.name: 0 for sig in SIGNALS}
    for (sig, _), (hit, _) in zip(jobs, done, strict=True):
        fired[sig.name] += hit
    failures = [why for _, why in done if why]
    print(f"\n{kind}: {scenario.points} git commands; kill points fired {fired} "
          f"of {len(jobs)} tried; {len(failures)} failed; "
          f"{time.monotonic() - started:.0f} s")  # fmt: skip
    assert not failures, f"{len(failures)} failed; first:\n" + "\n\n".join(failures[:3])
    assert min(fired.values()) >= (50 if FULL else 1), fired


@pytest.mark.parametrize(
    "kind, first, second",
    [("sync --force", ["sync", "--force"], ["export"]),
     ("sync --force", ["sync", "--force"], ["sync", "--force"]),
     ("first sync", ["sync"], ["sync"]),
     ("export", ["export"], ["export"])],
)  # fmt: skip
def test_two_commands_at_once(kind, first, second, workspace, tmp_path):
    scenario = build(kind, workspace)
    before = snapshot(scenario.repo / "patches")
    runs_per_pair = 13 if FULL else 2
    started, failures, refused = time.monotonic(), [], 0
    for i in range(runs_per_pair):
        where = tmp_path / "runs" / str(i)
        repo = copy(scenario.repo, where)
        one = start(repo, *first)
        time.sleep(random.uniform(0, 0.5))
        two = start(repo, *second)
        runs = [finish(one, first), finish(two, second)]
        found = []
        for run in runs:
            if run.rc == 1 and "is working in this clone" in run.err:
                refused += 1
            elif run.rc != 0:
                found.append(f"`{' '.join(run.words)}` exited {run.rc}")
        found += after(repo, CHECK, runs)
        # No patch file of before lacking or changed; the series starts as it did.
        now = snapshot(repo / "patches")
        gone = [n for n, data in before.items() if n != "series" and now.get(n) != data]
        found += [f"lost {n}" for n in gone]
        old, new = (
            [line for line in s.decode().splitlines() if line[:1] != "#"]
            for s in (before["series"], now.get("series", b""))
        )
        found += [f"lost series: {new}"] if new[: len(old)] != old else []
        found += on_no_branch(repo / "build" / "mini", scenario.local)
        if found:
            failures.append(failure(f"run {i} in {where}", found, runs))
        else:
            shutil.rmtree(where)
    print(f"\n{' & '.join(' '.join(w) for w in (first, second))}: {runs_per_pair} "
          f"runs, {refused} refused by the lock, {len(failures)} failed; "
          f"{time.monotonic() - started:.0f} s")  # fmt: skip
    assert not failures, f"{len(failures)} failed; first:\n" + "\n\n".join(failures[:3])
