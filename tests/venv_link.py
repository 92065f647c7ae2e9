"""A venv of this interpreter for tests that run pytest through the runner."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path


def link_venv(venv: Path) -> Path:
    """`venv` as this interpreter's venv: bin/python a link to it and, where
    it runs in a venv (build/.venv), that venv's pyvenv.cfg and lib/, without
    which the link would run the base interpreter, which lacks the venv's
    packages."""
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(sys.executable)
    if sys.prefix != sys.base_prefix:
        shutil.copy(Path(sys.prefix, "pyvenv.cfg"), venv)
        (venv / "lib").symlink_to(Path(sys.prefix, "lib"))
    return venv
