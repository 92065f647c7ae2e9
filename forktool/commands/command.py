"""What a command declares: its help, its options and its function."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass

from forktool.pins import Pins


def no_options(parser: argparse.ArgumentParser) -> None:
    pass


@dataclass(frozen=True)
class Command:
    name: str
    help: str
    """One line, for `python3 -m forktool --help`."""
    description: str
    """What it does, what it refuses and what it writes: `<name> --help`."""
    run: Callable[[Pins, argparse.Namespace], int]
    """Does it; returns the exit status."""
    options: Callable[[argparse.ArgumentParser], None] = no_options
    locks: bool = True
    """Reads or writes patches/ or build/vllm: runs holding the clone's lock."""
