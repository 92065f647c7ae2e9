"""Print `export` lines, for eval "$(python3 -m forktool env)": this clone's venv,
build/.venv (VIRTUAL_ENV, PATH), with a comment naming the vLLM tree it
imports; VLLM_TARGET_DEVICE=cpu where there is no GPU (no nvidia-smi),
HF_HOME=build/hf-home with the fixtures' configs, HF_HUB_OFFLINE=1. It refuses
nothing and installs nothing (run install). Writes: build/hf-home."""

import argparse

from forktool import hfcache
from forktool.commands.command import Command
from forktool.layout import LAYOUT
from forktool.pins import Pins
from forktool.venv import export_lines, user_env, venv_id, which_vllm


def run(pins: Pins, args: argparse.Namespace) -> int:
    hf_home = hfcache.ensure(LAYOUT.fixtures, LAYOUT.hf_home)
    if not venv_id(LAYOUT.venv):
        print(f"# {LAYOUT.venv} does not exist yet: run `python3 -m forktool install`")
    print(f"# {which_vllm(LAYOUT.venv)}")
    print(export_lines(user_env(LAYOUT.venv, hf_home)))
    return 0


COMMAND = Command(__doc__, run, locks=False)
