"""Command line: python3 -m forktool <command>.

From another folder than the clone's root, run the package by its path:
`python3 path/to/clone/forktool <command>` (from build/vllm: `python3
../../forktool export`). Every path the tool uses is the clone's, wherever
it runs from.
"""

import sys
from contextlib import nullcontext
from pathlib import Path

if not __package__:
    # Run by path: the clone's root, not this folder (whose process.py, venv.py
    # ... would shadow other modules), is where `forktool` is imported from.
    sys.path[0] = str(Path(__file__).resolve().parent.parent)

from forktool import journal  # noqa: E402
from forktool.commands import parser  # noqa: E402
from forktool.layout import LAYOUT  # noqa: E402
from forktool.pins import Pins  # noqa: E402
from forktool.process import ForkToolError, report_error  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if sys.version_info < (3, 11, 4):  # tarfile's extraction filters
        version = ".".join(map(str, sys.version_info[:3]))
        print(f"error: the tool needs Python 3.11.4 or later, not {version}")
        return 1
    args = parser("Command line: python3 -m forktool <command>.", argv).parse_args(argv)
    command = args.subcommand
    lock = journal.exclusive(LAYOUT.clone_lock, LAYOUT.fork, " ".join(argv))
    try:
        with lock if command.locks else nullcontext():
            return command.run(Pins.load(), args)
    except (ForkToolError, OSError) as e:
        return report_error(e)


if __name__ == "__main__":
    sys.exit(main())
