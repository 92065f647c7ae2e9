"""`cache`: the venvs and downloads of other pins, listed (and removed)."""

from __future__ import annotations

import argparse
import shutil

from forktool.commands.command import Command
from forktool.layout import LAYOUT
from forktool.pins import Pins
from forktool.venv import size, stale, venv_dir


def run(pins: Pins, args: argparse.Namespace) -> int:
    old = stale(pins)
    print(f"in use by {LAYOUT.pins}: {venv_dir(pins)}")
    for path in old:
        print(f"{'removing' if args.remove else 'stale'}  {path}  {size(path)} bytes")
        if args.remove:
            shutil.rmtree(path) if path.is_dir() else path.unlink()
    if not old:
        print("nothing stale")
    elif not args.remove:
        print("remove them with `python3 -m forktool cache --remove`")
    return 0


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--remove", action="store_true", help="delete what is listed")


COMMAND = Command(
    "cache",
    "list (and remove) venvs and downloads of other pins",
    "List the venvs and downloads in ${VLLM_FORK_CACHE:-~/.cache/vllm-fork} "
    "that this clone's pins.toml does not use (old pins), with their sizes; "
    "--remove deletes them. A clone or branch on other pins downloads and "
    "builds again what it needs. It refuses to list or remove what this "
    "clone's pins use. Writes: nothing without --remove.",
    run,
    options,
)
