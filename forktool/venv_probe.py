"""Run by a venv's own Python (standard library only): what is installed in
it, which files two distributions both install with different contents, and
whether the given modules import. Writes JSON; see forktool/venv_check.py.

    python venv_probe.py OUT.json MODULE...
"""

from __future__ import annotations

import collections
import csv
import importlib
import importlib.metadata as metadata
import json
import sys
import sysconfig
import traceback
from pathlib import Path


def clashes() -> list[dict[str, object]]:
    """Files inside packages that two distributions' RECORDs both claim with
    different hashes: whichever was written last is in the venv."""
    owners: dict[str, dict[str, str]] = collections.defaultdict(dict)
    for dist in metadata.distributions():
        name = dist.metadata["Name"]  # parsed anew on every access
        for row in csv.reader((dist.read_text("RECORD") or "").splitlines()):
            path = row[0] if row else ""
            if "/" not in path or path.startswith("..") or ".dist-info/" in path:
                continue
            if "__pycache__" not in path:
                owners[path][name] = row[1] if len(row) > 1 else ""
    return [
        {"file": path, "distributions": sorted(claims)}
        for path, claims in sorted(owners.items())
        if len(set(claims.values())) > 1
    ]


def culprit(error: BaseException) -> list[str]:
    """The distributions holding the innermost installed file in the traceback."""
    roots = {Path(sysconfig.get_paths()[k]) for k in ("purelib", "platlib")}
    owners = metadata.packages_distributions()
    for frame in reversed(traceback.extract_tb(error.__traceback__)):
        path = Path(frame.filename)
        for root in roots:
            if path.is_relative_to(root):
                top = path.relative_to(root).parts[0].removesuffix(".py")
                return owners.get(top, [top])
    return []


def try_import(module: str) -> dict[str, object]:
    try:
        importlib.import_module(module)
    except BaseException as error:  # SystemExit too: report, never exit
        return {
            "module": module,
            "error": f"{type(error).__name__}: {error}",
            "distributions": culprit(error),
        }
    return {"module": module, "error": "", "distributions": []}


def main(out: str, modules: list[str]) -> None:
    installed = {d.metadata["Name"]: d.version for d in metadata.distributions()}
    imports = [try_import(module) for module in modules]
    report = {"installed": installed, "clashes": clashes(), "imports": imports}
    Path(out).write_text(json.dumps(report))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
