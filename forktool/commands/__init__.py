"""The command line: each command's module and one-line help. A command's
module is imported only when it runs or its --help is asked, so `python3 -m
forktool --help` imports none of them."""

import argparse
import importlib
from collections.abc import Sequence
from typing import Any

from forktool.commands.command import Command

COMMANDS = {
    "sync": "materialise build/vllm: base + series, or bring it up to date",
    "export": "write build/vllm's commits back to patches/",
    "backups": "list (or --prune) the backup/<time> branches sync and sync --force "
    "leave",
    "lock": "resolve venv.lock from pins.toml",
    "install": "make build/.venv exactly venv.lock, install the fork, self-check it",
    "setup": "sync, install, show the fork, run the regression matrix",
    "test": "everything setup does, plus every check CI runs",
    "env": "print the shell lines for the fork's environment",
    "run": "run a command in the fork's environment",
    "cache": "list (and remove) downloads and uv builds no clone uses",
    "pr": "write build/pr/: PR description, series, apply-to-vllm.sh",
    "bench": "scheduler cost per step, fork against base (CPU)",
    "mutate": "mutation testing of the lines the series adds under vllm/",
    "e2e": "the GPU end-to-end test, on the series and without its resolution (2 GPUs)",
}
# Each command's one-line help; its module is forktool.commands.<name>, or
# evidence.commands.<name> for the PR evidence's.
EVIDENCE = ("pr", "bench", "mutate", "e2e")


def command(name: str) -> Command:
    """The command `name`, its module imported."""
    package = "evidence" if name in EVIDENCE else "forktool"
    return importlib.import_module(f"{package}.commands.{name}").COMMAND


class _Strict(argparse.ArgumentParser):
    """A command's parser: what it does not know is an error that shows the
    command's usage, not the top level's. Options are never abbreviated
    (`sync --f` is no `--force`); usage errors exit 2, argparse's."""

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: Any = None
    ) -> tuple[argparse.Namespace, list[str]]:
        parsed, extra = super().parse_known_args(args, namespace)
        if extra:
            self.error(f"unrecognized arguments: {' '.join(extra)}")
        return parsed, extra


def parser(description: str | None, argv: list[str]) -> argparse.ArgumentParser:
    """`python3 -m forktool`'s parser for `argv`; `args.subcommand.run` does
    what is asked. Only the command `argv` names is imported, for its options."""
    parser = argparse.ArgumentParser(
        "python3 -m forktool", description=description, allow_abbrev=False
    )
    sub = parser.add_subparsers(
        dest="command_name", metavar="<command>", required=True, parser_class=_Strict
    )
    chosen = next((arg for arg in argv if not arg.startswith("-")), None)
    for name, help in COMMANDS.items():
        named = command(name) if name == chosen else None
        about = named.description if named else None
        options = sub.add_parser(name, help=help, description=about, allow_abbrev=False)
        if named:
            named.options(options)
            options.set_defaults(subcommand=named)
    return parser
