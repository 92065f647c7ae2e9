"""Make this clone's venv, build/.venv, exactly venv.lock (`uv pip sync`, files
hard-linked from uv's cache), unless it already is; install build/vllm into it,
editable, with VLLM_USE_PRECOMPILED=1; then check it: no file installed by two
distributions with different contents, every package as the lock pins it, and
the imports the checks need succeed. It refuses pins changed without re-locking
and a download whose sha256 differs from pins.toml (nothing is unpacked), and
fails naming the file, distributions or package at fault. Writes: build/.venv,
build/pycache, build outputs in build/vllm (ignored by git), the wheel, uv and
a note of this clone in ${VLLM_FORK_CACHE:-~/.cache/vllm-fork}, uv's cache."""

import argparse

from forktool.commands.command import Command
from forktool.layout import LAYOUT
from forktool.pins import Pins
from forktool.prepare import install, self_checked
from forktool.process import ForkToolError


def run(pins: Pins, args: argparse.Namespace) -> int:
    if not self_checked(install(pins)):
        raise ForkToolError(f"{LAYOUT.venv} failed its self-check (above)")
    return 0


COMMAND = Command(__doc__, run)
