"""Resolve every package of the venv (vLLM's runtime dependencies from the pinned
wheel's metadata, pip, the build and test requirements, under pins.toml's
constraints) with `uv pip compile --generate-hashes` for the pinned Python and
platform, and write venv.lock with a digest of the pins it was resolved from;
commit it with pins.toml. `install` (so `setup` and `test`) refuses pins
changed since; `sync` and `export` need no venv and do not check it. Writes:
venv.lock only."""

import argparse

from forktool import venv_lock
from forktool.commands.command import Command
from forktool.pins import Pins


def run(pins: Pins, args: argparse.Namespace) -> int:
    print(venv_lock.write(pins))
    return 0


COMMAND = Command(__doc__, run, locks=False)
