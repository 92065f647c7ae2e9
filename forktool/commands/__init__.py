"""The commands, one module each (and the plug-ins' commands); `parser` makes
the command line from them."""

from __future__ import annotations

import argparse

from forktool import checks
from forktool.commands import (
    backups,
    cache,
    env,
    export,
    install,
    lock,
    run,
    setup,
    sync,
    test,
)
from forktool.commands.command import Command

OWN: dict[str, Command] = {
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
    )
}


def commands() -> dict[str, Command]:
    """The workflow's commands, then the plug-ins'."""
    added = [command for plugin in checks.plugins() for command in plugin.COMMANDS]
    return {**OWN, **{command.name: command for command in added}}


def parser(description: str | None) -> argparse.ArgumentParser:
    """`python3 -m forktool`'s parser; `args.subcommand.run` does what is asked."""
    parser = argparse.ArgumentParser(
        prog="python3 -m forktool", description=description
    )
    sub = parser.add_subparsers(dest="command_name", required=True)
    for command in commands().values():
        options = sub.add_parser(
            command.name, help=command.help, description=command.description
        )
        command.options(options)
        options.set_defaults(subcommand=command)
    return parser
