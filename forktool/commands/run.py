"""Run a command in the environment `env` prints, in the current directory or the
one -C names, e.g. `python3 -m forktool run -C build/vllm -- pytest
tests/v1/core/test_kv_cache_utils.py -k zeroing`. It names the venv and the
vLLM tree it uses on stderr, and exits with the command's status. Refuses when
the venv is missing (run install). Writes: build/hf-home, and whatever the
command writes."""

import argparse
import sys
from pathlib import Path

from forktool import hfcache
from forktool.commands.command import Command
from forktool.layout import LAYOUT
from forktool.pins import Pins
from forktool.process import ForkToolError
from forktool.venv import run_in, user_env, venv_id, which_vllm


def run(pins: Pins, args: argparse.Namespace) -> int:
    if not Path(args.directory).is_dir():
        raise ForkToolError(f"-C {args.directory}: no such folder")
    if not venv_id(venv := LAYOUT.venv):
        raise ForkToolError(f"{venv} does not exist; run `python3 -m forktool install`")
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        raise ForkToolError("nothing to run: python3 -m forktool run -- <command>")
    hf_home = hfcache.ensure(LAYOUT.fixtures, LAYOUT.hf_home)
    print(f"forktool run: {which_vllm(venv)}", file=sys.stderr, flush=True)
    return run_in(user_env(venv, hf_home), command, args.directory)


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-C", dest="directory", default=".", help="run in this directory"
    )
    parser.add_argument(
        "command",
        nargs=argparse.REMAINDER,
        help="the command and its arguments, after `--` (e.g. `-- pytest -x`)",
    )


COMMAND = Command(__doc__, run, options, locks=False)
