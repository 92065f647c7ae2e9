"""What a command declares: its description, options and function."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass

from forktool.pins import Pins


def no_options(parser: argparse.ArgumentParser) -> None:
    pass


@dataclass(frozen=True)
class Command:
    """A command; its name and one-line help are in forktool.commands."""

    description: str
    """What it does, what it refuses and what it writes: `<name> --help`."""
    run: Callable[[Pins, argparse.Namespace], int]
    """Does it; returns the exit status."""
    options: Callable[[argparse.ArgumentParser], None] = no_options
    locks: bool = True
    """Reads or writes patches/ or build/vllm: runs holding the clone's lock."""
