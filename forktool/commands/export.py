"""`export`: build/vllm's commits written back to patches/."""

from __future__ import annotations

import argparse

from forktool import fork
from forktool.commands.command import Command
from forktool.layout import LAYOUT
from forktool.pins import Pins


def run(pins: Pins, args: argparse.Namespace) -> int:
    print(fork.export(LAYOUT.fork, LAYOUT.patches))
    return 0


COMMAND = Command(
    "export",
    "write build/vllm's commits back to patches/",
    "Write build/vllm's commits since `base` to patches/ as normalised "
    "`git format-patch` files and rewrite patches/series; exporting an "
    "unchanged fork changes nothing. It warns about commits without a "
    "Signed-off-by: matching their author and subjects not in vLLM's "
    "`[Area] Subject` style. It refuses, changing nothing, while a git "
    "operation is stopped in the fork, while the fork has uncommitted "
    "changes, when the series has changes the fork lacks (run sync), and "
    "when it would delete a patch file, or overwrite one it did not write, "
    "that is not committed in this repository. Needs no venv and downloads "
    "nothing. Writes: patches/ only.",
    run,
)
