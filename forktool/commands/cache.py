"""List what ${VLLM_FORK_CACHE:-~/.cache/vllm-fork} holds (a relative value is the
clone's: resolved against its root, never the current folder). First what is in
use, each path once under the clones that use it (every clone that ran sync,
install or cache is noted there; those on the same pins share a line), only
what is there; then, with their sizes, what the pins of no clone on this
machine use: downloads, uv builds, and the venvs an older forktool shared,
unless they still hold an existing clone's fork; --remove deletes those. A
clone's own venv, build/.venv, is never touched (`rm -rf build/.venv` removes
it; uv's cache is pruned with `uv cache prune`): it refuses to list or remove
what any clone uses. Writes: the clone's note in the cache; nothing else
without --remove."""

import argparse
import shutil

from forktool.commands.command import Command
from forktool.pins import Pins
from forktool.venv import register_clone, stale, users


def run(pins: Pins, args: argparse.Namespace) -> int:
    register_clone()
    # Each set of clones (those on the same pins) named once, over its paths.
    groups: dict[tuple, list] = {}
    for path, using in users(pins).items():
        groups.setdefault(tuple(using), []).append(path)
    for clones, paths in groups.items():
        print(f"in use by {', '.join(map(str, clones))}:")
        print("".join(f"    {path}\n" for path in paths), end="")
    if not groups:
        print("nothing in the cache is in use")
    old = stale(pins)
    for path in old:
        files = [path] if path.is_file() or path.is_symlink() else path.rglob("*")
        size = sum(p.lstat().st_size for p in files if not p.is_dir())
        print(f"{'removing' if args.remove else 'stale'}  {path}  {size} bytes")
        if args.remove:
            shutil.rmtree(path) if path.is_dir() else path.unlink()
    if not old:
        print("nothing stale")
    elif not args.remove:
        print("remove them with `python3 -m forktool cache --remove`")
    return 0


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--remove", action="store_true", help="delete what is listed")


COMMAND = Command(__doc__, run, options, locks=False)
