"""sync and export killed at every git command they run, and run two at once.

tests/kill_driver.py runs a command on a synthetic workspace as the CLI runs
it. With FORKTOOL_TRACE_GIT=1 the tool prints each git command before it
runs it; the kill test sends SIGKILL, SIGTERM or SIGHUP (to the process
group, as a closed terminal does) at the N-th one, then runs the commands a
user would (the interrupted one again, `sync`, `export --check`) and checks
that nothing was lost and nothing is left to resolve by hand.

FORKTOOL_KILL_POINTS=all kills at every point (at least 50 per command and
signal) and runs the concurrency test 13 times per pair: 1392 kills and 52
pairs, ~32 min on 2 cores. FORKTOOL_KILL_POINTS=n kills at every n-th point;
the default is a sample, every 32nd point, and 2 runs per pair.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import fork_fixture
import kill_driver
import pytest
from fork_fixture import (
    amend,
    commit,
    commit_series,
    export,
    series_of,
    snapshot,
    teammate,
)

from forktool.process import git

DRIVER = Path(kill_driver.__file__)
SIGNALS = (signal.SIGKILL, signal.SIGTERM, signal.SIGHUP)
# Twelve patches: each command runs more than 50 git commands.
SERIES = [
    (f"mini/part{i:02}.py", f"PART = {i}\n", f"[Core] Add part {i}") for i in range(12)
]
LOCAL = ("mini/local.py", "LOCAL = 1\n", "[Doc] Local work, not exported")
LOCK_BUSY = "is working in this clone"


def full() -> bool:
    return os.environ.get("FORKTOOL_KILL_POINTS") == "all"


def step() -> int:
    value = os.environ.get("FORKTOOL_KILL_POINTS", "32")
    return 1 if value == "all" else int(value)


@dataclass
class Run:
    words: list[str]
    rc: int | None
    out: str
    err: str

    def text(self) -> str:
        return f"$ {' '.join(self.words)}  (exit {self.rc})\n{self.out}{self.err}"


def drive(repo: Path, *words: str, trace: bool = False) -> Run:
    proc = start(repo, *words, trace=trace)
    out, err = proc.communicate()
    return Run(list(words), proc.returncode, out, err)


def start(repo: Path, *words: str, trace: bool = False) -> subprocess.Popen:
    env = {**os.environ, "TMPDIR": str(repo.parent / "tmp")}
    env |= {"FORKTOOL_TRACE_GIT": "1"} if trace else {}
    return subprocess.Popen(
        [sys.executable, DRIVER, repo, *words],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,  # its own process group, as a terminal's job
    )


def kill_at(repo: Path, words: list[str], sig: signal.Signals, n: int):
    """Run `words`, send `sig` as the n-th git command is printed; whether
    the signal ended it, the command it was sent at, and the run."""
    proc = start(repo, *words, trace=True)
    assert proc.stderr
    seen, at, lines = 0, "", []
    for line in proc.stderr:
        lines.append(line)
        if line.startswith("+ "):
            seen += 1
            if seen == n:
                at = line.strip()
                with contextlib.suppress(ProcessLookupError):
                    if sig == signal.SIGHUP:
                        os.killpg(proc.pid, sig)
                    else:
                        os.kill(proc.pid, sig)
    out = proc.stdout.read() if proc.stdout else ""
    proc.wait()
    return proc.returncode == -sig, at, Run(words, proc.returncode, out, "".join(lines))


def git_out(repo: Path, *args: str) -> str:
    return git(repo, *args, check=False).stdout.strip()


@dataclass
class Scenario:
    """A template workspace, the command killed there, what a user runs
    after, and what must hold then."""

    repo: Path
    words: list[str]
    after: list[list[str]]
    expected: dict[str, bytes] = field(default_factory=dict)
    """patches/ once the command and `after` ran."""
    local: str | None = None
    """A commit of the fork's own that must stay on main or a backup/ branch."""
    points: int = 0
    """How many git commands the command runs."""


def problems(repo: Path, scenario: Scenario) -> list[str]:
    """What does not hold in `repo` once the commands ran."""
    found = []
    own, build = repo / "build" / "mini", repo / "build"
    if snapshot(repo / "patches") != scenario.expected:
        found.append(
            "patches/ is not the expected series: "
            + git_out(repo, "status", "--porcelain", "--", "patches")
        )
    left = [
        p.name
        for p in build.iterdir()
        if p.name.startswith((".mini.", "tmp")) or p.name.endswith(".unpack")
    ]
    worktrees = own / ".git" / "worktrees"
    left += [f"worktree {p.name}" for p in worktrees.glob("*")]
    if left:
        found.append(f"left behind in build/: {left}")
    if not (own / ".git").exists():
        return [*found, "no fork"]
    if git_out(own, "status", "--porcelain"):
        found.append("fork not clean: " + git_out(own, "status", "--porcelain"))
    branch = git_out(own, "symbolic-ref", "-q", "HEAD")
    if branch != "refs/heads/main":
        found.append(f"fork's HEAD is {branch or 'detached'}, not main")
    if scenario.local:
        refs = git_out(
            own, "for-each-ref", "--contains", scenario.local, "--format=%(refname)"
        ).split()
        kept = [
            r for r in refs if r.startswith(("refs/heads/main", "refs/heads/backup/"))
        ]
        if not kept:
            found.append(f"local commit {scenario.local[:12]} on no branch: {refs}")
    return found


def after(repo: Path, commands: list[list[str]], runs: list[Run]) -> list[str]:
    """Run what a user runs after the interruption; what went wrong."""
    ran = [drive(repo, *words) for words in commands]
    runs += ran
    return [f"`{' '.join(r.words)}` exited {r.rc}" for r in ran if r.rc] + [
        f"traceback in `{' '.join(r.words)}`" for r in runs if "Traceback" in r.err
    ]


def recover(repo: Path, scenario: Scenario, runs: list[Run]) -> list[str]:
    return after(repo, scenario.after, runs) + problems(repo, scenario)


def copy(template: Path, to: Path) -> Path:
    to.mkdir(parents=True)
    (to / "tmp").mkdir()
    shutil.copytree(template, to / "repo", symlinks=True)
    return to / "repo"


def build(kind: str, workspace) -> Scenario:
    """The template workspace of `kind`."""
    _, patches, own = workspace
    repo = patches.parent
    series_of(workspace, *SERIES)
    local = None
    if kind == "first sync":
        shutil.rmtree(repo / "build")
    elif kind == "sync (rebuild)":
        # A teammate changed the first patch and added one; the fork is behind.
        theirs = teammate(workspace)
        amend(theirs, 1, SERIES[0][0], "PART = 'changed'\n")
        commit(theirs, "mini/theirs.py", "THEIRS = 1\n", "[Core] A teammate's patch")
        export(theirs, patches)
        commit_series(patches)
        shutil.rmtree(theirs.parent)
    else:  # a commit of the fork's own, which must survive
        commit(own, *LOCAL)
        local = git_out(own, "rev-parse", "HEAD")
    named = {"export": ["export"], "sync --force": ["sync", "--force"]}
    words = named.get(kind, ["sync"])
    after = [words] if local else []
    after += [["sync"], ["export", "--check"]]
    scenario = Scenario(repo, words, after, local=local)
    # The command run through, uninterrupted: how many git commands it runs,
    # and patches/ after it.
    reference = copy(repo, repo.parent / "reference")
    run = drive(reference, *scenario.words, trace=True)
    assert run.rc == 0, run.text()
    scenario.points = sum(line.startswith("+ ") for line in run.err.splitlines())
    scenario.expected = snapshot(reference / "patches")
    if kind != "export":
        assert scenario.expected == snapshot(patches)
    runs = [run]
    assert recover(reference, scenario, runs) == [], "\n".join(r.text() for r in runs)
    return scenario


KINDS = ["sync --force", "sync (rebuild)", "export", "first sync"]


def failure(head: str, found: list[str], runs: list[Run]) -> str:
    return (
        f"{head}:\n  " + "\n  ".join(found) + "\n" + "\n".join(r.text() for r in runs)
    )


def kill_one(scenario: Scenario, sig: signal.Signals, n: int, kills: Path):
    """Kill the command at the n-th git command in a copy of the template;
    whether the signal ended it, and what went wrong."""
    where = kills / f"{sig.name}-{n}"
    repo = copy(scenario.repo, where)
    fired, at, killed = kill_at(repo, scenario.words, sig, n)
    runs = [killed]
    found = recover(repo, scenario, runs)
    if not found:
        shutil.rmtree(where)
        return fired, None
    return fired, failure(
        f"{sig.name} at git command {n} ({at}) in {where}", found, runs
    )


@pytest.mark.parametrize("kind", KINDS)
def test_killed_at_any_git_command_nothing_is_lost(kind, workspace, tmp_path):
    scenario = build(kind, workspace)
    assert scenario.points >= 50, f"{kind} runs only {scenario.points} git commands"
    every = step()
    jobs = [
        (sig, n)
        for i, sig in enumerate(SIGNALS)
        for n in range(1 + i * every // len(SIGNALS), scenario.points + 1, every)
    ]
    started = time.monotonic()
    with ThreadPoolExecutor(os.cpu_count() or 2) as pool:
        kill = lambda job: kill_one(scenario, job[0], job[1], tmp_path / "kills")  # noqa: E731
        done = list(pool.map(kill, jobs))
    fired = {sig.name: 0 for sig in SIGNALS}
    for (sig, _), (hit, _) in zip(jobs, done, strict=True):
        fired[sig.name] += hit
    failures = [why for _, why in done if why]
    print(
        f"\n{kind}: {scenario.points} git commands; kill points fired {fired} "
        f"of {len(jobs)} tried; {len(failures)} failed; "
        f"{time.monotonic() - started:.0f} s"
    )
    assert not failures, f"{len(failures)} failed; first:\n" + "\n\n".join(failures[:3])
    least = 50 if full() else 1
    assert min(fired.values()) >= least, fired


PAIRS = {
    "sync-force+export": ("sync --force", ["sync", "--force"], ["export"]),
    "sync-force+sync-force": ("sync --force", ["sync", "--force"], ["sync", "--force"]),
    "first-sync+first-sync": ("first sync", ["sync"], ["sync"]),
    "export+export": ("export", ["export"], ["export"]),
}


def lost(before: dict[str, bytes], after: dict[str, bytes]) -> list[str]:
    """The patch files of `before` that `after` lacks or changed, and a series
    that no longer starts with the old one."""
    gone = [n for n, data in before.items() if n != "series" and after.get(n) != data]
    old = [line for line in before["series"].decode().splitlines() if line[:1] != "#"]
    new = [line for line in after.get("series", b"").decode().splitlines()]
    new = [line for line in new if line[:1] != "#"]
    if new[: len(old)] != old:
        gone.append(f"series: {new}")
    return gone


@pytest.mark.parametrize("pair", PAIRS)
def test_two_commands_at_once(pair, workspace, tmp_path):
    kind, first, second = PAIRS[pair]
    scenario = build(kind, workspace)
    before = snapshot(scenario.repo / "patches")
    runs_per_pair = 13 if full() else 2
    started, failures, refused = time.monotonic(), [], 0
    for i in range(runs_per_pair):
        where = tmp_path / "runs" / str(i)
        repo = copy(scenario.repo, where)
        one = start(repo, *first)
        time.sleep(random.uniform(0, 0.5))
        two = start(repo, *second)
        runs = []
        for words, proc in ((first, one), (second, two)):
            out, err = proc.communicate()
            runs.append(Run(words, proc.returncode, out, err))
        found = []
        for run in runs:
            if run.rc == 1 and LOCK_BUSY in run.err:
                refused += 1
            elif run.rc != 0:
                found.append(f"`{' '.join(run.words)}` exited {run.rc}")
        found += after(repo, [["sync"], ["export", "--check"]], runs)
        found += [f"lost {name}" for name in lost(before, snapshot(repo / "patches"))]
        own = repo / "build" / "mini"
        if scenario.local:
            refs = git_out(own, "for-each-ref", "--contains", scenario.local)
            if not refs:
                found.append(f"local commit {scenario.local[:12]} on no branch")
        if found:
            failures.append(failure(f"run {i} in {where}", found, runs))
        else:
            shutil.rmtree(where)
    print(
        f"\n{' & '.join(' '.join(w) for w in (first, second))}: {runs_per_pair} runs, "
        f"{refused} refused by the lock, {len(failures)} failed; "
        f"{time.monotonic() - started:.0f} s"
    )
    assert not failures, f"{len(failures)} failed; first:\n" + "\n\n".join(failures[:3])


def test_the_driver_pins_what_the_workspace_pins():
    assert kill_driver.AUTHOR == fork_fixture.AUTHOR
    assert kill_driver.MESSAGE == fork_fixture.MESSAGE
    assert kill_driver.GENERATED == fork_fixture.GENERATED
