"""Run one command on a synthetic workspace as `python3 -m forktool` runs it.

    python tests/kill_driver.py <workspace-root> sync|export [--force|--check]

<workspace-root> is tests/fork_fixture.py's `workspace` repository: patches/
there, the fork at build/mini, the clone's lock at build/forktool.lock. The
sdist is the cache's (VLLM_FORK_CACHE), pinned as `make_pins` pins it. The
command runs under `journal.exclusive`, and a ForkToolError prints
`error: ...` and exits with its status, as forktool/__main__.py does; any
other exception is a traceback. tests/test_kill.py kills it.
"""

from __future__ import annotations

import hashlib
import signal
import sys
from pathlib import Path

if __name__ == "__main__":  # run by path: import forktool from the clone
    sys.path[0] = str(Path(__file__).resolve().parent.parent)

from forktool import journal, sync  # noqa: E402
from forktool.export import export  # noqa: E402
from forktool.pins import (  # noqa: E402
    Artifact,
    Pins,
    cache_dir,  # noqa: E402
    fetch,
)
from forktool.process import ForkToolError  # noqa: E402

# tests/fork_fixture.py's (not imported: pytest would slow every run down).
AUTHOR = "Test Project <test-project@noreply.invalid>"
MESSAGE = "mini 0.1\n"
GENERATED = ("PKG-INFO",)


def pins() -> Pins:
    sdist = cache_dir() / "downloads" / "mini-0.1.tar.gz"
    artifact = Artifact(sdist.name, hashlib.sha256(sdist.read_bytes()).hexdigest())
    return Pins("mini", "0.1", GENERATED, artifact, artifact, AUTHOR, "pip", (), ())


def run(root: Path, words: list[str]) -> str:
    own, patches = root / "build" / "mini", root / "patches"
    if words[0] == "export":
        return export(own, patches, check="--check" in words)
    sdist = pins().sdist
    fetched = lambda: fetch(pins(), sdist)  # noqa: E731
    return sync.sync(
        own, patches, AUTHOR, MESSAGE, fetched, GENERATED, "--force" in words
    )


def main(root: Path, words: list[str]) -> int:
    lock, own = root / "build" / "forktool.lock", root / "build" / "mini"
    try:
        with journal.exclusive(lock, own, " ".join(words)):
            print(run(root, words))
        return 0
    except ForkToolError as e:
        print(f"error: {e}", file=sys.stderr)
        return e.status


if __name__ == "__main__":
    # As from a terminal: a hangup ends the command, even when the tests run
    # under `nohup` (or a CI agent) that ignores SIGHUP for its children.
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    sys.exit(main(Path(sys.argv[1]), sys.argv[2:]))
