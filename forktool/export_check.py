"""`export --check` as a check of `test`: patches/ is what export would write."""

from __future__ import annotations

from forktool.errors import ForkToolError
from forktool.export import export
from forktool.layout import LAYOUT
from forktool.results import Measured


def measure() -> Measured:
    """Run `export --check`; print and record what it says."""
    try:
        said, ok = export(LAYOUT.fork, LAYOUT.patches, check=True), True
    except ForkToolError as e:
        said, ok = str(e), False
    print(said)
    shown = "python3 -m forktool export --check"
    return Measured(ok, excerpts={"output": f"$ {shown}\n{said}"})
