"""The command line of the evidence modules run by path, which take one
vLLM tree: `python -m evidence.ci_impact` and `evidence.precommit_install`."""

import argparse
from collections.abc import Callable
from pathlib import Path

from forktool.layout import LAYOUT
from forktool.process import ForkToolError, report_error


def main(
    prog: str, doc: str | None, argv: list[str], work: Callable[[Path], str]
) -> int:
    """Print what `work` says of the tree `argv` names (default: the fork);
    `--help` prints `doc`. A refusal is printed as the tool prints it, with
    its exit status; a usage error (a tree that is not a folder) exits 2."""
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(prog, description=doc, formatter_class=raw)
    said = "a vLLM tree (default: build/vllm)"
    parser.add_argument("tree", nargs="?", type=Path, default=LAYOUT.fork, help=said)
    tree = parser.parse_args(argv).tree
    if not tree.is_dir():
        parser.error(f"{tree} is not a folder")
    try:
        print(work(tree))
    except (ForkToolError, OSError) as e:
        return report_error(e)
    return 0
