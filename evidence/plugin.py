"""The PR evidence as a plug-in of the workflow (pyproject.toml's
[tool.forktool] plugins): its checks join the registry, its commands the
command line."""

from __future__ import annotations

from evidence.checks import CHECKS
from evidence.commands import COMMANDS

__all__ = ["CHECKS", "COMMANDS"]
