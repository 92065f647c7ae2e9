"""`cache`: what no clone's pins use, listed (and removed)."""

from __future__ import annotations

import argparse
import shutil

from forktool.commands.command import Command
from forktool.pins import Pins
from forktool.venv import in_use, register_clone, size, stale


def run(pins: Pins, args: argparse.Namespace) -> int:
    register_clone()
    for repo, paths in in_use(pins).items():
        print(f"in use by {repo}: {', '.join(map(str, paths)) or 'nothing'}")
    old = stale(pins)
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
    "list (and remove) downloads and uv builds no clone uses",
    "List what ${VLLM_FORK_CACHE:-~/.cache/vllm-fork} holds that the pins of no "
    "clone on this machine use (every clone that ran sync, install or cache is "
    "noted there), with their sizes: downloads, uv builds, and the venvs an "
    "older forktool shared, unless they still hold an existing clone's fork; "
    "--remove deletes them. A clone's own venv, build/.venv, is never touched "
    "(`rm -rf build/.venv` removes it; uv's cache is pruned with `uv cache "
    "prune`): it refuses to list or remove what any clone uses. Writes: "
    "nothing without --remove.",
    run,
    options,
)
