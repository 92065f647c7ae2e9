"""pytest-xdist (`-n 2 --dist load`) against the tool's round-robin deal
(issue 23, item 3), on one run of vLLM's CPU selection, in one process.

A: the collected ids dealt in turn to two pytest processes run at once, as
   `test` runs the selection on the fork (evidence/cpu_selection.py `shards`).
B: one pytest over the same ids with `-p xdist -n 2 --dist load`, with
   PYTHONPATH=<site> (pytest-xdist and execnet are installed there, outside
   the locked venv; arm A runs without it, so xdist is not importable there).

Both arms run as the tool's runner runs them (evidence/vllm_tests.py's
arguments, forktool/pytest_runner.py's environment and report plugin, whose
JSON lines give each test's outcome, under xdist written by the controller;
`-v -rfE`), never from its result cache. Runs interleave A B A B ..., so both
arms see the same background load. The outcomes must agree across all runs.

    python3 bench/xdist/compare.py [--run v1-core] [--pairs 3] [--every N]
        [--site /tmp/xdist-site] [--deadline HH:MM]

Install the site with `build/.venv/bin/python -m pip install --target
/tmp/xdist-site pytest-xdist`. --every N keeps every Nth collected id (a
spread-out sample). --deadline: no pair after the second starts when the
last pair's time would end past it (local clock).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from evidence.cpu_selection import options, shards  # noqa: E402
from evidence.vllm_tests import Runner, vllm_runner  # noqa: E402
from forktool import hfcache  # noqa: E402
from forktool.layout import LAYOUT  # noqa: E402
from forktool.process import git  # noqa: E402
from forktool.pytest_runner import Result, run_pytest, test_env  # noqa: E402
from forktool.selection import Selection  # noqa: E402
from forktool.venv import python  # noqa: E402


def session(
    runner: Runner, args: tuple[str, ...], label: str, site: Path | None
) -> Result:
    """One pytest over `args` in the fork, as Runner.run runs it, uncached."""
    tree = LAYOUT.fork
    cmd = [str(python(runner.venv)), "-m", "pytest", *runner.arguments(tree, args)]
    env = test_env(runner.hf_home)
    env.pop("PYTHONPATH", None)
    if site is not None:
        env["PYTHONPATH"] = str(site)
    log = runner.logs / "xdist-bench" / f"{label}.log"
    return run_pytest([*cmd, "-v", "-rfE"], tree, env, log, label).result()


def round_robin(
    runner: Runner, opts: tuple[str, ...], ids: list[str], tag: str
) -> Result:
    """Arm A: two processes side by side, their outcomes merged."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        running = [
            pool.submit(session, runner, (*opts, *part), f"{tag}-{i}", None)
            for i, part in enumerate(shards(ids, 2), 1)
        ]
        merged = Result()
        for run in running:
            merged.update(run.result())
    return merged


def xdist(
    runner: Runner, opts: tuple[str, ...], ids: list[str], tag: str, site: Path
) -> Result:
    """Arm B: one process, two xdist workers, load-balanced."""
    xdist_args = ("-p", "xdist", "-n", "2", "--dist", "load")
    return session(runner, (*opts, *ids, *xdist_args), tag, site)


def pairs(
    runner: Runner, opts: tuple[str, ...], ids: list[str], args: argparse.Namespace
) -> tuple[list[float], list[float], dict[str, dict[str, str]]]:
    """The interleaved runs: each arm's seconds, and every run's outcomes."""
    deadline = None
    if args.deadline:
        h, m = map(int, args.deadline.split(":"))
        deadline = dt.datetime.combine(dt.date.today(), dt.time(h, m))
        if deadline < dt.datetime.now():  # past midnight
            deadline += dt.timedelta(days=1)
    times: dict[str, list[float]] = {"A": [], "B": []}
    seen: dict[str, dict[str, str]] = {}
    last = 0.0
    for i in range(1, args.pairs + 1):
        late = deadline and dt.datetime.now() + dt.timedelta(seconds=last) > deadline
        if i > 2 and late:
            print(f"pair {i} not run: the last took {last:.0f} s, past the deadline")
            break
        began = time.monotonic()
        for arm in ("A", "B"):
            load = Path("/proc/loadavg").read_text().split()[0]
            start = time.monotonic()
            if arm == "A":
                result = round_robin(runner, opts, ids, f"A{i}")
            else:
                result = xdist(runner, opts, ids, f"B{i}", args.site)
            times[arm].append(time.monotonic() - start)
            seen[f"{arm}{i}"] = result.outcomes
            print(
                f"RUN {arm}{i}: {times[arm][-1]:7.1f} s  load1 at start {load}  "
                f"{result.counted()}",
                flush=True,
            )
        last = time.monotonic() - began
    return times["A"], times["B"], seen


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--run", default="v1-core")
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--every", type=int, default=1)
    ap.add_argument("--site", type=Path, default=Path("/tmp/xdist-site"))
    ap.add_argument("--deadline", default=None)
    args = ap.parse_args()

    hfcache.lay_out(LAYOUT.fixtures, LAYOUT.hf_home)
    selection = Selection.load(LAYOUT.selection)
    runner = vllm_runner(LAYOUT.venv, selection)
    run_args = selection.runs[args.run]
    head = git(LAYOUT.fork, "rev-parse", "--short", "HEAD")
    print(f"date: {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC")
    print(f"host: {os.cpu_count()} cores; fork {LAYOUT.fork} at {head.stdout.strip()}")
    print(f"run {args.run}: {' '.join(run_args)}; xdist from {args.site}")
    ids = runner.collect(LAYOUT.fork, run_args, f"{args.run}-collect")[:: args.every]
    print(f"{len(ids)} tests (every {args.every}th collected)", flush=True)

    a, b, seen = pairs(runner, options(run_args), ids, args)
    ratios = [tb / ta for ta, tb in zip(a, b, strict=True)]
    print(f"A (round-robin) s: {', '.join(f'{t:.1f}' for t in a)}")
    print(f"B (xdist load)  s: {', '.join(f'{t:.1f}' for t in b)}")
    print("B/A per pair: " + ", ".join(f"{r:.3f}" for r in ratios))
    print(
        f"B/A min {min(ratios):.3f}  median {statistics.median(ratios):.3f}  "
        f"max {max(ratios):.3f}  (n={len(ratios)} pairs)"
    )
    first = next(iter(seen.values()))
    agree = all(o == first for o in seen.values())
    print(
        f"outcomes identical per test across all runs: {agree}; "
        f"every id reported: {set(first) == set(ids)}"
    )


if __name__ == "__main__":
    main()
