"""`env`: the shell lines for the fork's environment."""

from __future__ import annotations

import argparse

from forktool import hfcache
from forktool.commands.command import Command
from forktool.layout import LAYOUT
from forktool.pins import Pins
from forktool.venv import COMPLETE, export_lines, user_env, venv_dir


def run(pins: Pins, args: argparse.Namespace) -> int:
    venv = venv_dir(pins)
    hf_home = hfcache.ensure(LAYOUT.fixtures, LAYOUT.hf_home)
    if not (venv / COMPLETE).exists():
        print(f"# {venv} does not exist yet: run `python3 -m forktool install`")
    print(export_lines(user_env(venv, hf_home)))
    return 0


COMMAND = Command(
    "env",
    "print the shell lines for the fork's environment",
    'Print `export` lines, for eval "$(python3 -m forktool env)": the cached '
    "venv (VIRTUAL_ENV, PATH), VLLM_TARGET_DEVICE=cpu where there is no GPU "
    "(no nvidia-smi), HF_HOME=build/hf-home with the fixtures' configs, "
    "HF_HUB_OFFLINE=1. It refuses nothing and installs nothing (run install). "
    "Writes: build/hf-home.",
    run,
)
