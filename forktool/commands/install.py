"""`install`: the venv, and the fork installed into it."""

from __future__ import annotations

import argparse
from pathlib import Path

from forktool.commands.command import Command
from forktool.layout import LAYOUT
from forktool.pins import Pins
from forktool.venv import ensure_venv, install_fork


def install(pins: Pins) -> Path:
    venv = ensure_venv(pins)
    print(f"venv: {venv}")
    install_fork(pins, venv, LAYOUT.fork)
    return venv


def run(pins: Pins, args: argparse.Namespace) -> int:
    install(pins)
    return 0


COMMAND = Command(
    "install",
    "create the cached venv, install the fork into it",
    "Create the venv for these pins (vLLM's dependencies from the pinned "
    "wheel) unless it is cached, and install build/vllm into it, editable, "
    "with VLLM_USE_PRECOMPILED=1. The venv is shared by every clone with the "
    "same pins: installing points it at this clone's build/vllm and says "
    "which clone it pointed at before. It refuses a download whose sha256 "
    "differs from pins.toml (nothing is unpacked). Writes: the venv and "
    "downloads under "
    "${VLLM_FORK_CACHE:-~/.cache/vllm-fork}, build outputs in build/vllm "
    "(ignored by git).",
    run,
)
