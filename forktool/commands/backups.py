"""List the backup/<time> branches in build/vllm, each with the time sync made it
(UTC, its name's), its number of commits and those whose change the fork's HEAD
lacks (by git patch-id), each marked as local work saved nowhere else or as a
version committed in patches/ (one a teammate's change to that patch replaced:
git history keeps it). --prune deletes the backups whose commits are all in the
fork or in the git history of patches/ (the last 200 commits) and keeps the
others, which hold work nowhere else: it refuses to delete those. Writes:
branches of build/vllm only."""

import argparse

from forktool import backups
from forktool.commands.command import Command
from forktool.layout import LAYOUT
from forktool.pins import Pins
from forktool.process import ForkToolError


def run(pins: Pins, args: argparse.Namespace) -> int:
    if not (LAYOUT.fork / ".git").exists():
        raise ForkToolError(f"{LAYOUT.fork} is not a fork tree; run `sync` first")
    print(backups.report(LAYOUT.fork, args.prune, LAYOUT.patches))
    return 0


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--prune",
        action="store_true",
        help="delete the backups whose patches are all in the fork or in the git "
        "history of patches/",
    )


COMMAND = Command(__doc__, run, options)
