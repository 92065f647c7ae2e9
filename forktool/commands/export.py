"""Write build/vllm's commits since `base` to patches/ as normalised `git format-patch`
files and rewrite patches/series; exporting an unchanged fork changes nothing.
Before writing it applies the patches it would write onto `base` in a scratch index
and checks that they give the fork's HEAD tree. It warns about commits without a
Signed-off-by: matching their author, subjects not in vLLM's `[Area] Subject` style,
and two patches with one subject. It refuses, changing nothing, while a git
operation is stopped in the fork, while the fork has uncommitted changes or holds
merge or empty commits, when the series has changes the fork lacks (run sync; exit
status 3 when both sides changed), when the patches would not rebuild the fork, and
when it would delete a patch file, or overwrite one it did not write, that is not
committed in this repository. --check writes nothing and exits 1, naming them, when
files in patches/ differ from what export would write. Needs no venv and downloads
nothing. Writes: patches/ only."""

import argparse

from forktool.commands.command import Command
from forktool.export import export
from forktool.layout import LAYOUT
from forktool.pins import Pins


def run(pins: Pins, args: argparse.Namespace) -> int:
    print(export(LAYOUT.fork, LAYOUT.patches, check=args.check))
    return 0


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1, naming the files, unless patches/ is what "
        "export would write",
    )


COMMAND = Command(__doc__, run, options)
