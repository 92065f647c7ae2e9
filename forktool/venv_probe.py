"""Run by a venv's own Python (standard library only): what is installed in
it, which files two distributions both install with different contents, and
whether the given modules import. Writes JSON; see forktool/prepare.py.

    python venv_probe.py OUT.json MODULE...
"""

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
            skip = (
                path.startswith("..") or ".dist-info/" in path or "__pycache__" in path
            )
            if "/" in path and not skip:
                owners[path][name] = row[1] if len(row) > 1 else ""
    return [
        {"file": path, "distributions": sorted(claims)}
        for path, claims in sorted(owners.items())
        if len(set(claims.values())) > 1
    ]


def try_import(module: str) -> dict[str, object]:
    """`module` imported, or the error and the distributions holding the
    innermost installed file in its traceback."""
    try:
        importlib.import_module(module)
    except BaseException as error:  # SystemExit too: report, never exit
        roots = {Path(sysconfig.get_paths()[k]) for k in ("purelib", "platlib")}
        owners = metadata.packages_distributions()
        frames = reversed(traceback.extract_tb(error.__traceback__))
        found = [
            path.relative_to(root).parts[0].removesuffix(".py")
            for path in (Path(frame.filename) for frame in frames)
            for root in roots
            if path.is_relative_to(root)
        ]
        culprit = owners.get(found[0], [found[0]]) if found else []
        return {"module": module, "error": f"{type(error).__name__}: {error}",
                "distributions": culprit}  # fmt: skip
    return {"module": module, "error": "", "distributions": []}


if __name__ == "__main__":
    installed = {d.metadata["Name"]: d.version for d in metadata.distributions()}
    imports = [try_import(module) for module in sys.argv[2:]]
    report = {"installed": installed, "clashes": clashes(), "imports": imports}
    Path(sys.argv[1]).write_text(json.dumps(report))
