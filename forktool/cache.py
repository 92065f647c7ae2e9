"""The cache directory: downloads, uv, venvs and results shared by the
clones on this machine (VLLM_FORK_CACHE)."""

from __future__ import annotations

import functools
import os
from pathlib import Path

from forktool.layout import LAYOUT
from forktool.process import git


def cache_dir() -> Path:
    """Where downloads and virtualenvs live: outside the clone, shared by clones.

    A relative VLLM_FORK_CACHE is the clone's, like every path the tool uses:
    it is resolved against the clone's root, never the current folder (run
    from build/vllm it would write into the fork). Resolving rather than
    refusing keeps `VLLM_FORK_CACHE=cache` working from any folder. A cache
    inside the clone holds a `.gitignore` of `*`, so git status ignores it.
    """
    root = os.environ.get("VLLM_FORK_CACHE") or Path.home() / ".cache" / "vllm-fork"
    path = LAYOUT.root / Path(root).expanduser()  # an absolute one stays
    if path.resolve().is_relative_to(LAYOUT.root.resolve()):
        _ignore_in_git(path)
    return path


@functools.cache
def _ignore_in_git(cache: Path) -> None:
    """A `.gitignore` of `*` in `cache`, as venvs have, unless git tracks
    files there (a cache pointed at patches/ must not hide them)."""
    ignore = cache / ".gitignore"
    if ignore.exists():
        return
    tracked = git(LAYOUT.root, "ls-files", "--", str(cache), check=False)
    if tracked.returncode == 0 and not tracked.stdout.strip():
        cache.mkdir(parents=True, exist_ok=True)
        ignore.write_text("# forktool's cache (VLLM_FORK_CACHE)\n*\n")
