"""The commands, one module each; `parser` makes the command line from them."""

from __future__ import annotations

import argparse

from forktool.commands import (
    backups,
    bench,
    cache,
    env,
    export,
    install,
    lock,
    mutate,
    pr,
    run,
    setup,
    sync,
    test,
)
from forktool.commands.command import Command

COMMANDS: dict[str, Command] = {
    module.COMMAND.name: module.COMMAND
    for module in (
        sync,
        export,
        backups,
        lock,
        install,
        setup,
        test,
        env,
        run,
        cache,
        pr,
        bench,
        mutate,
    )
}


def parser(description: str | None) -> argparse.ArgumentParser:
    """`python3 -m forktool`'s parser; `args.subcommand.run` does what is asked."""
    parser = argparse.ArgumentParser(
        prog="python3 -m forktool", description=description
    )
    sub = parser.add_subparsers(dest="command_name", required=True)
    for command in COMMANDS.values():
        options = sub.add_parser(
            command.name, help=command.help, description=command.description
        )
        command.options(options)
        options.set_defaults(subcommand=command)
    return parser
