"""Command line: python3 -m forktool <command>.

From another folder than the clone's root, run the package by its path:
`python3 path/to/clone/forktool <command>` (from build/vllm: `python3
../../forktool export`). Every path the tool uses is the clone's, wherever
it runs from.
"""

from __future__ import annotations

import sys
from pathlib import Path

if not __package__:
    # Run by path: the clone's root, not this folder (whose git.py, venv.py
    # ... would shadow other modules), is where `forktool` is imported from.
    sys.path[0] = str(Path(__file__).resolve().parent.parent)

from forktool import journal  # noqa: E402
from forktool.commands import parser  # noqa: E402
from forktool.errors import ForkToolError  # noqa: E402
from forktool.layout import LAYOUT  # noqa: E402
from forktool.pins import Pins  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parser("Command line: python3 -m forktool <command>.", argv).parse_args(argv)
    command = args.subcommand
    try:
        if not command.locks:
            return command.run(Pins.load(), args)
        with journal.exclusive(LAYOUT.clone_lock, LAYOUT.fork, " ".join(argv)):
            return command.run(Pins.load(), args)
    except ForkToolError as e:
        print(f"error: {e}", file=sys.stderr)
        return e.status


if __name__ == "__main__":
    sys.exit(main())
