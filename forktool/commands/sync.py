"""Materialise build/vllm as the pinned base (commit tagged `base`) plus one commit per
patch of patches/series, or bring an existing fork up to date. It compares the
fork's patches with the series (git patch-id --stable, subjects) and reports, per
patch, which side changed. It updates the fork when only the series changed (a
teammate added, changed or dropped a patch), and rebuilds it with `git am -3` when
pins.toml names another base; the fork's previous commits stay on a backup/<time>
branch. It checks every file a patch touches against the blob ids of the patch's
`index` lines, and refuses a patch that gives others. Once the series applies it
lists the paths the series, upstream-tests.toml and the series' Buildkite entries
name that the fork lacks. It refuses, changing nothing, while a git operation (am,
rebase, cherry-pick, revert, merge, bisect) is stopped in the fork, while the fork
has uncommitted changes or merge or empty commits, while it holds work the series
lacks (run export), and when both sides changed (exit status 3, as when a patch does
not apply). It applies the series in a staging worktree and moves the fork in one
step, holding the clone's lock: killed at any point, the next command finishes or
undoes it. It needs git and the pinned sdist, no venv: it downloads the sdist (uv
names its URL on the index; verified by sha256 before anything is unpacked) unless
the cache holds it. Writes: build/vllm (and, while it runs, build/.vllm.sync,
build/.vllm.journal, build/forktool.lock), build/logs/sync-git-am.log, the sdist and
uv in ${VLLM_FORK_CACHE:-~/.cache/vllm-fork}."""

import argparse

from forktool.commands.command import Command
from forktool.pins import Pins
from forktool.prepare import sync_fork


def run(pins: Pins, args: argparse.Namespace) -> int:
    sync_fork(pins, args.force)
    return 0


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--force",
        action="store_true",
        help="rebuild the fork from the series even though it holds work the "
        "series lacks (its commits are kept on a backup/<time> branch)",
    )


COMMAND = Command(__doc__, run, options)
