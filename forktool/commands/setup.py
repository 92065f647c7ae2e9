"""sync, then install (with the venv's self-check), then show vLLM's version and
tree, start `vllm serve --help` and run the series' regression matrix. Refuses
what sync and install refuse, and, naming them, when programs it runs are
missing (README, Two commands). Writes what sync and install write, and
build/trees, build/logs, build/hf-home, build/pycache, build/results."""

import argparse
import time

from forktool import prerequisites
from forktool.checks import SETUP, all_checks, run_checks
from forktool.commands.command import Command
from forktool.pins import Pins
from forktool.prepare import prepare


def run(pins: Pins, args: argparse.Namespace) -> int:
    checks = [check for check in all_checks() if check.in_setup]
    prerequisites.require("setup", prerequisites.for_setup(pins))
    start = time.monotonic()
    return run_checks(prepare(pins), checks, SETUP, time.monotonic() - start)


COMMAND = Command(__doc__, run)
