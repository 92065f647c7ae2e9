"""What a command declares: its description, options and function."""

import argparse
from collections.abc import Callable
from dataclasses import dataclass

from forktool.pins import Pins


@dataclass(frozen=True)
class Command:
    """A command; its name and one-line help are in forktool.commands.
    `description`: what it does, refuses and writes (`<name> --help`); `run`
    does it and returns the exit status; `locks`: it reads or writes patches/
    or build/vllm, so runs holding the clone's lock."""

    description: str | None  # a command module's docstring: None under python -OO
    run: Callable[[Pins, argparse.Namespace], int]
    options: Callable[[argparse.ArgumentParser], None] = lambda parser: None
    locks: bool = True
