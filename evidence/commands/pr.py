"""Render the upstream PR kit from the results `setup` and `test` wrote to
build/results/: description.md (vLLM's PR template, checked with vLLM's markdownlint
settings), series/ (format-patch with a cover letter), apply-to-vllm.sh (git am -3 of
each patch on a new branch at any ref) and preimages.pack (the blobs it merges from).
It refuses, writing nothing, when a result is missing or was measured on another tree
than the fork's HEAD or with other content of an input its check reads (forktool/,
evidence/, fork_tests/, fuzz/, fixtures/, upstream-tests.toml, mutants-equivalent.toml,
venv.lock, precommit.lock, pyproject.toml), naming it and the command that refreshes
it, and when programs it runs (git; Node.js and npm for markdownlint) are missing.
Writes: build/pr/ only; never patches/."""

from __future__ import annotations

import argparse

from evidence import precommit
from evidence.pr.lint import markdownlint
from evidence.pr.make import make_kit
from forktool import prerequisites
from forktool.commands.command import Command
from forktool.layout import LAYOUT
from forktool.pins import Pins
from forktool.selection import Selection


def run(pins: Pins, args: argparse.Namespace) -> int:
    prerequisites.require("pr", [prerequisites.GIT, *precommit.NEEDS])
    tests = Selection.load(LAYOUT.selection).regression
    print(make_kit(LAYOUT.fork, LAYOUT.results, LAYOUT.kit, LAYOUT.prose,
                   pins.version, pins.author, args.signoff, args.allow_partial,
                   markdownlint, tests))  # fmt: skip
    return 0


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--signoff",
        metavar='"NAME <EMAIL>"',
        help="re-sign the kit's series (never patches/) for this submitter, with "
        "the AI-attribution trailer",
    )
    parser.add_argument(
        "--allow-partial",
        action="store_true",
        help='render without missing or stale results, marked "not measured"',
    )


COMMAND = Command(__doc__, run, options)
