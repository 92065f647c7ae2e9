"""The PR evidence's commands, one module each."""

from __future__ import annotations

from evidence.commands import bench, e2e, mutate, pr

COMMANDS = (pr.COMMAND, bench.COMMAND, mutate.COMMAND, e2e.COMMAND)
