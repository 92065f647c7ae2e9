"""patches/series: the ordered list of patch files."""

from __future__ import annotations

from pathlib import Path

from forktool.errors import ForkToolError

HEADER = "# Applied in order on the pinned base by `python3 -m forktool sync`.\n"


def read_series(patches: Path) -> list[Path]:
    """The listed patches, in order; orphan or missing files are errors."""
    series = patches / "series"
    names = []
    if series.exists():
        for line in series.read_text().splitlines():
            line = line.split("#", 1)[0].strip()
            if line:
                names.append(line)
    if len(set(names)) != len(names):
        raise ForkToolError(f"{series} lists a patch more than once")
    missing = [n for n in names if not (patches / n).is_file()]
    if missing:
        raise ForkToolError(f"{series} lists missing patch files: {', '.join(missing)}")
    on_disk = {p.name for p in patches.glob("*.patch")}
    orphans = sorted(on_disk - set(names))
    if orphans:
        raise ForkToolError(
            f"patch files not listed in {series}: {', '.join(orphans)} "
            "(add them to the series or delete them)"
        )
    return [patches / n for n in names]


def write_series(patches: Path, names: list[str]) -> None:
    (patches / "series").write_text(HEADER + "".join(f"{n}\n" for n in names))
