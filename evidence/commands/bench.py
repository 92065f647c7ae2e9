"""Time vLLM's real Scheduler (schedule() + update_from_output()) on planner-made KV
cache configs, the base's code and the fork's in processes of their own, interleaved,
with an A/A pair for the noise floor; print the table and write
build/results/bench.json (bench-quick.json with --quick). Needs the fork and a venv
made from venv.lock (setup); refuses sizes the workers cannot hold. Writes:
build/results/, build/trees/bench-base."""

from __future__ import annotations

import argparse
import functools

from evidence import bench
from evidence.checks import BENCH, BENCH_QUICK
from evidence.worktrees import measured_run
from forktool.commands.command import Command
from forktool.pins import Pins
from forktool.process import ForkToolError


def run(pins: Pins, args: argparse.Namespace) -> int:
    """Refuses first the options the workers' KV cache and request limit
    cannot hold; --quick's result is kept apart from the full run's."""
    sizes, repeats, steps, check = tuple(args.sizes), args.repeats, args.steps, BENCH
    command = f"{BENCH.command} --sizes {' '.join(map(str, sizes))}"
    command += f" --repeats {repeats} --steps {steps}"
    if args.quick:
        sizes, repeats, steps, check, command = (256,), 3, 10, BENCH_QUICK, ""
    if repeats < 1 or steps < 1 or repeats * steps > bench.MAX_STEPS:
        raise ForkToolError(
            f"--repeats {repeats} --steps {steps}: each at least 1, together at "
            f"most {bench.MAX_STEPS} measured steps per case"
        )
    if not all(1 <= n <= bench.MAX_REQUESTS for n in sizes):
        raise ForkToolError(f"--sizes: each from 1 to {bench.MAX_REQUESTS} requests")
    measure = functools.partial(bench.measure, sizes, repeats, steps)
    return 0 if measured_run("bench", check, pins, measure, command) else 1


def options(parser: argparse.ArgumentParser) -> None:
    quick = "256 requests only, 3x10 steps"
    parser.add_argument("--quick", action="store_true", help=quick)
    sizes = " ".join(map(str, bench.SIZES))
    parser.add_argument(
        "--sizes",
        type=int,
        nargs="+",
        default=list(bench.SIZES),
        metavar="N",
        help=f"the numbers of requests, one case each (default: {sizes})",
    )
    turns = "measurements per case, the fork and base processes taking turns"
    parser.add_argument("--repeats", type=int, default=5, help=f"{turns} (default: 5)")
    median = "scheduler steps in each measurement, which is their median time"
    parser.add_argument("--steps", type=int, default=20, help=f"{median} (default: 20)")


COMMAND = Command(__doc__, run, options)
