"""`bench`: the scheduler's cost per step, the fork against the base."""

from __future__ import annotations

import argparse

from evidence import bench, checks
from forktool.commands.command import Command
from forktool.pins import Pins


def run(pins: Pins, args: argparse.Namespace) -> int:
    if args.quick:  # kept apart from the full run's results
        quick = checks.BENCH_QUICK
        return 0 if bench.run(pins, (256,), 3, 10, quick, quick.command) else 1
    sizes = tuple(args.sizes)
    command = f"{checks.BENCH.command} --sizes {' '.join(map(str, sizes))}"
    command += f" --repeats {args.repeats} --steps {args.steps}"
    ok = bench.run(pins, sizes, args.repeats, args.steps, checks.BENCH, command)
    return 0 if ok else 1


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--quick", action="store_true", help="256 requests only, 3x10 steps"
    )
    parser.add_argument(
        "--sizes",
        type=int,
        nargs="+",
        default=list(bench.SIZES),
        metavar="N",
        help="the numbers of requests, one case each (default: "
        f"{' '.join(map(str, bench.SIZES))})",
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=5,
        help="measurements per case, the fork and base processes taking turns "
        "(default: 5)",
    )
    parser.add_argument(
        "--steps",
        type=int,
        default=20,
        help="scheduler steps in each measurement, which is their median time "
        "(default: 20)",
    )


COMMAND = Command(
    "Time vLLM's real Scheduler (schedule() + update_from_output()) "
    "on planner-made KV cache configs, the base's code and the fork's in "
    "processes of their own, interleaved, with an A/A pair for the noise "
    "floor; print the table and write build/results/bench.json "
    "(bench-quick.json with --quick). Needs the venv and the fork (setup); "
    "refuses sizes the workers cannot hold. Writes: build/results/, "
    "build/trees/bench-base.",
    run,
    options,
)
