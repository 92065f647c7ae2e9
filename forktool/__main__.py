"""Command line: python3 -m forktool <command>."""

from __future__ import annotations

import argparse
import sys

from forktool import fork
from forktool.errors import ForkToolError
from forktool.pins import REPO, Pins, fetch
from forktool.venv import ensure_venv, install_fork, python

FORK = REPO / "build" / "vllm"
PATCHES = REPO / "patches"


def _sdist(pins: Pins):
    # pip needs vLLM's build requirements (torch) to read the sdist's metadata.
    return fetch(pins, pins.sdist, python(ensure_venv(pins)))


def cmd_sync(pins: Pins, args: argparse.Namespace) -> None:
    message = (
        f"{pins.project} {pins.version}\n\n"
        f"The pristine {pins.sdist.filename}, sha256 {pins.sdist.sha256}.\n"
    )
    print(
        fork.sync(
            FORK,
            PATCHES,
            pins.author,
            message,
            lambda: _sdist(pins),
            pins.generated,
            args.force,
        )
    )


def cmd_export(pins: Pins, args: argparse.Namespace) -> None:
    print(fork.export(FORK, PATCHES))


def cmd_install(pins: Pins, args: argparse.Namespace) -> None:
    install_fork(pins, ensure_venv(pins), FORK)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m forktool", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sync = sub.add_parser("sync", help="materialise build/vllm: base + series")
    sync.add_argument(
        "--force",
        action="store_true",
        help="rebuild a fork whose commits differ from the series (kept on a "
        "backup branch)",
    )
    sync.set_defaults(run=cmd_sync)
    sub.add_parser("export", help="write build/vllm's commits to patches/").set_defaults(
        run=cmd_export
    )
    sub.add_parser(
        "install", help="create the cached venv and install the fork into it"
    ).set_defaults(run=cmd_install)
    args = parser.parse_args(argv)
    try:
        args.run(Pins.load(), args)
    except ForkToolError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
