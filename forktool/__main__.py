"""Command line: python3 -m forktool <command>."""

from __future__ import annotations

import sys

from forktool.commands import parser
from forktool.errors import ForkToolError
from forktool.pins import Pins


def main(argv: list[str] | None = None) -> int:
    args = parser(__doc__).parse_args(argv)
    try:
        return args.subcommand.run(Pins.load(), args)
    except ForkToolError as e:
        print(f"error: {e}", file=sys.stderr)
        return e.status


if __name__ == "__main__":
    sys.exit(main())
