"""Command line: python3 -m forktool <command>.

From another folder than the clone's root, run the package by its path:
`python3 path/to/clone/forktool <command>` (from build/vllm: `python3
../../forktool export`). Every path the tool uses is the clone's, wherever
it runs from.
"""

import errno
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
from forktool.process import ConflictError, ForkToolError  # noqa: E402


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
    except ForkToolError as e:
        # A conflict is work to finish by hand, not a failure of the command.
        word = "stopped" if isinstance(e, ConflictError) else "error"
        print(f"{word}: {e}", file=sys.stderr)
        return e.status
    except OSError as e:
        # The tool's own writes (build/, its lock, the cache, an unpack): one
        # line naming the path and the cause, never a traceback.
        print(f"error: {os_error(e)}", file=sys.stderr)
        return 1


AGAIN = "then run the command again"
TO_DO = {
    errno.EROFS: "the file system is read-only: make it writable, or move the "
    "clone (VLLM_FORK_CACHE moves the cache) to one that is",
    **dict.fromkeys((errno.EACCES, errno.EPERM), "no permission: give yourself "
                    "write permission there"),
    errno.ENOSPC: f"free some space on that disk, {AGAIN}",
    errno.EDQUOT: f"your disk quota is used up: free some space, {AGAIN}",
    errno.EFBIG: f"a file size limit (ulimit -f) stopped it: raise it, {AGAIN}",
    errno.EEXIST: "something that is not a folder, a file or a dangling symbolic "
    "link, is where a folder must be: remove it or point it at a folder",
    errno.ENOTDIR: "a file is where a folder must be: remove or move it",
}  # fmt: skip


def os_error(e: OSError) -> str:
    """`<path>: <cause> (<what to do>)` for a failed read or write."""
    paths = " -> ".join(str(p) for p in (e.filename, e.filename2) if p is not None)
    to_do = TO_DO.get(e.errno or 0, f"fix that, {AGAIN}")
    return f"{paths}{': ' if paths else ''}{e.strerror or e} ({to_do})"


if __name__ == "__main__":
    sys.exit(main())
