"""pytest-xdist (`-n 2 --dist load`) against the tool's round-robin shards
(issue 23, item 3), on one group of vLLM's CPU selection.

A: the collected ids dealt in turn to two pytest processes run at once, as
   the tool's `_on_fork` does (evidence/suite.py) (`shards(ids, 2)`), each with the
   runner's arguments (`Runner.arguments`: `-p no:cacheprovider`, the
   `--deselect`s of upstream-tests.toml's excludes, the group's options) and
   `-v -rfE --junitxml=...`, in forktool.upstream.test_env's environment.
B: one pytest over the same ids with `-p xdist -n 2 --dist load`, the same
   environment plus PYTHONPATH=<xdist site> (pytest-xdist and execnet live
   outside the venv; arm A runs without that PYTHONPATH, so xdist is not even
   importable there).

Runs interleave A B A B ..., so both arms see the same background load on
this shared 2-core machine. The outcomes of each run are read from its JUnit
XML (forktool.upstream.parse_junit) and must agree across all runs.

    python3 bench/xdist/compare.py [--group v1-core] [--pairs 3]
        [--site /tmp/xdist-site] [--every N] [--deadline 10:00]

--deadline: no new pair starts when the last pair's time would end past it
(HH:MM, local clock); at least 2 pairs run regardless.
"""

from __future__ import annotations

import argparse
import os
import tomllib
import xml.etree.ElementTree as ET
import datetime as dt
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TREE = ROOT / "build/vllm"
VENV_PY = ROOT / "build/.venv/bin/python"
HF_HOME = ROOT / "build/hf-home"
OUTCOMES = ("passed", "failed", "error", "skipped")

# Self-contained on purpose: the tool's runner module is being renamed and
# split while this runs (forktool/upstream.py -> forktool/pytest_runner.py,
# evidence/matrix.py -> evidence/suite.py). What is copied, as of 71b2896:
# test_env (pytest_runner.test_env), the arguments (Runner.arguments:
# `-p no:cacheprovider`, `--deselect=` per [[exclude]] of
# upstream-tests.toml, then the group's options and the ids), `-v -rfE`
# (Runner.run) and the round-robin deal (suite.shards). Outcomes are read
# from `--junitxml` in both arms (the tool now reads them through its own
# plugin; the cost is the same for both arms).


def test_env() -> dict[str, str]:
    return {
        **os.environ,
        "VLLM_TARGET_DEVICE": "cpu",
        "CUDA_VISIBLE_DEVICES": "",
        "HF_HOME": str(HF_HOME),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
    }


class Runner:
    def __init__(self, excluded: list[str], logs: Path):
        self.excluded = excluded
        self.logs = logs

    def arguments(self, tree: Path, args: tuple[str, ...]) -> list[str]:
        args = tuple(
            a for a in args
            if not a.startswith("tests/") or (tree / a.split("::")[0]).exists()
        )
        deselect = [f"--deselect={test}" for test in self.excluded]
        return ["-p", "no:cacheprovider", *deselect, *args]


def parse_junit(tree: Path, junit: Path) -> dict[str, str]:
    """node id -> outcome; the node id rebuilt from JUnit's dotted classname
    as the tool's parse_junit did."""
    outcomes: dict[str, str] = {}
    for case in ET.parse(junit).iter("testcase"):
        parts = case.get("classname", "").split(".")
        name = case.get("name", "")
        test = f"{'.'.join(parts)}::{name}"
        for i in range(len(parts), 0, -1):
            module = "/".join(parts[:i]) + ".py"
            if (tree / module).exists():
                test = "::".join([module, *parts[i:], name])
                break
        status = "passed"
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                status = {"failure": "failed"}.get(child.tag, child.tag)
                break
        if outcomes.get(test) not in ("failed", "error"):
            outcomes[test] = status
    return outcomes


def python(_venv=None) -> Path:
    return VENV_PY


def shards(ids: list[str], count: int) -> list[list[str]]:
    """The tool's round-robin deal (evidence/suite.py `shards`, formerly in
    evidence/matrix.py), copied: that module moves while others edit it."""
    return [part for i in range(count) if (part := ids[i::count])]


def sh(cmd: str) -> str:
    return subprocess.run(cmd, shell=True, capture_output=True, text=True).stdout.strip()


def say(text: str = "") -> None:
    print(text, flush=True)


def env(site: Path | None) -> dict[str, str]:
    e = test_env()
    e.pop("PYTHONPATH", None)
    if site is not None:
        e["PYTHONPATH"] = str(site)
    return e


def collect(runner: Runner, tree: Path, args: tuple[str, ...], logs: Path) -> list[str]:
    """Runner.collect's ids, without its result cache."""
    cmd = [python(), "-m", "pytest", *runner.arguments(tree, args),
           "--collect-only", "-q"]
    log = logs / "collect.log"
    with log.open("w") as out:
        code = subprocess.run(cmd, cwd=tree, env=env(None), stdout=out, stderr=out).returncode
    if code not in (0, 5):
        sys.exit(f"collection failed ({code}); see {log}")
    lines = log.read_text().splitlines()
    return [t for t in lines if "::" in t and (tree / t.split("::")[0]).is_file()]


def run_a(runner, tree, options, ids, logs: Path, tag: str):
    """Round-robin: two pytest processes side by side, outcomes merged."""
    procs, junits, outs = [], [], []
    start = time.monotonic()
    for i, part in enumerate(shards(ids, 2), 1):
        junit = logs / f"{tag}-{i}.xml"
        out = (logs / f"{tag}-{i}.log").open("w")
        cmd = [python(), "-m", "pytest",
               *runner.arguments(tree, (*options, *part)),
               "-v", "-rfE", f"--junitxml={junit}"]
        procs.append(subprocess.Popen(cmd, cwd=tree, env=env(None), stdout=out, stderr=out))
        junits.append(junit)
        outs.append(out)
    codes = [p.wait() for p in procs]
    seconds = time.monotonic() - start
    for out in outs:
        out.close()
    outcomes: dict[str, str] = {}
    for junit in junits:
        if junit.exists():
            outcomes.update(parse_junit(tree, junit))
    return seconds, outcomes, codes


def run_b(runner, tree, options, ids, logs: Path, tag: str, site: Path):
    """xdist: one pytest, two workers, load-balanced."""
    junit = logs / f"{tag}.xml"
    cmd = [python(), "-m", "pytest",
           *runner.arguments(tree, (*options, *ids)),
           "-v", "-rfE", f"--junitxml={junit}", "-p", "xdist", "-n", "2", "--dist", "load"]
    start = time.monotonic()
    with (logs / f"{tag}.log").open("w") as out:
        code = subprocess.run(cmd, cwd=tree, env=env(site), stdout=out, stderr=out).returncode
    seconds = time.monotonic() - start
    outcomes = parse_junit(tree, junit) if junit.exists() else {}
    return seconds, outcomes, [code]


def counts(outcomes: dict[str, str]) -> str:
    values = list(outcomes.values())
    return ", ".join(f"{values.count(o)} {o}" for o in OUTCOMES if values.count(o)) or "nothing"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--group", default="v1-core")
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--site", type=Path, default=Path("/tmp/xdist-site"))
    ap.add_argument("--every", type=int, default=1,
                    help="keep every Nth collected id (a spread-out sample of the group)")
    ap.add_argument("--deadline", default=None, help="HH:MM; no pair starts that would end past it")
    opts = ap.parse_args()

    with (ROOT / "upstream-tests.toml").open("rb") as f:
        data = tomllib.load(f)
    args = tuple(next(r["args"] for r in data["run"] if r["name"] == opts.group))
    excluded = [e["test"] for e in data.get("exclude", [])]
    tree = TREE
    runner = Runner(excluded, Path(tempfile.mkdtemp(prefix="xdist-bench-")))
    logs = runner.logs
    options = tuple(a for a in args if not a.startswith("tests/"))

    say(f"date: {sh('date -u')}")
    say(f"host: {sh('nproc')} cores; fork {tree} at {sh(f'git -C {tree} rev-parse --short HEAD')}")
    pkgs = sh(f"{python()} -m pip list 2>/dev/null | grep -E '^(pytest|pytest-asyncio) '")
    say("venv: " + "; ".join(" ".join(l.split()) for l in pkgs.splitlines()))
    xd = sh(f"PYTHONPATH={opts.site} {python()} -c "
            "'import xdist, execnet; print(\"pytest-xdist\", xdist.__version__, \"execnet\", execnet.__version__)'")
    say(f"xdist site {opts.site}: {xd}")
    say(f"group {opts.group}: {' '.join(args)}; excluded: {len(excluded)}")
    say(f"env: test_env (VLLM_TARGET_DEVICE=cpu CUDA_VISIBLE_DEVICES='' HF_HOME={HF_HOME} "
        f"HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 OMP_NUM_THREADS={env(None)['OMP_NUM_THREADS']}); "
        f"logs {logs}")
    say(f"uptime before: {sh('uptime')}")

    start = time.monotonic()
    ids = collect(runner, tree, args, logs)
    say(f"collected {len(ids)} tests in {time.monotonic() - start:.0f} s")
    if opts.every > 1:
        ids = ids[::opts.every]
        say(f"--every {opts.every}: {len(ids)} of them, every {opts.every}th in collection order")
    say()

    deadline = None
    if opts.deadline:
        h, m = map(int, opts.deadline.split(":"))
        deadline = dt.datetime.now().replace(hour=h, minute=m, second=0, microsecond=0)

    a_times, b_times, seen = [], [], {}
    last_pair = 0.0
    for i in range(1, opts.pairs + 1):
        if i > 2 and deadline and dt.datetime.now() + dt.timedelta(seconds=last_pair) > deadline:
            say(f"pair {i} skipped: the last pair took {last_pair:.0f} s, past the deadline {opts.deadline}")
            break
        pair_start = time.monotonic()
        for arm in ("A", "B"):
            load = sh("cat /proc/loadavg").split()[0]
            if arm == "A":
                seconds, outcomes, codes = run_a(runner, tree, options, ids, logs, f"A{i}")
                a_times.append(seconds)
            else:
                seconds, outcomes, codes = run_b(runner, tree, options, ids, logs, f"B{i}", opts.site)
                b_times.append(seconds)
            name = "round-robin 2 procs" if arm == "A" else "xdist -n 2 load   "
            say(f"run {arm}{i} {name}: {seconds:7.1f} s  exit {codes}  load1 at start {load}  "
                f"{counts(outcomes)}")
            seen[f"{arm}{i}"] = outcomes
        last_pair = time.monotonic() - pair_start

    say()
    say(f"uptime after: {sh('uptime')}")
    ratios = [b / a for a, b in zip(a_times, b_times)]
    say("A (round-robin) s: " + ", ".join(f"{t:.1f}" for t in a_times)
        + f"  median {statistics.median(a_times):.1f}")
    say("B (xdist load)  s: " + ", ".join(f"{t:.1f}" for t in b_times)
        + f"  median {statistics.median(b_times):.1f}")
    say("B/A per pair: " + ", ".join(f"{r:.3f}" for r in ratios))
    say(f"B/A min {min(ratios):.3f}  median {statistics.median(ratios):.3f}  max {max(ratios):.3f}"
        f"  (n={len(ratios)} pairs)")

    first = next(iter(seen.values()))
    agree = all(o == first for o in seen.values())
    same_counts = all(counts(o) == counts(first) for o in seen.values())
    say(f"outcomes: {counts(first)}; identical per test across all runs: {agree}; "
        f"same counts: {same_counts}; every collected id reported: {set(first) == set(ids)}")
    if not agree:
        for tag, o in seen.items():
            diff = sorted(t for t in set(o) | set(first) if o.get(t) != first.get(t))
            if diff:
                say(f"  {tag} differs from the first run on {len(diff)}: {diff[:5]}")


if __name__ == "__main__":
    main()
