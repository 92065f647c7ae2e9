"""An offline Hugging Face hub cache laid out from the repository's fixtures.

fixtures/hf/<org>/<model>/ holds the files the upstream tests read for that
model id (config.json and the like, never weights). huggingface_hub, with
HF_HUB_OFFLINE=1, resolves them through refs/main to a snapshot directory.
"""

import hashlib
import shutil
from pathlib import Path


def lay_out(fixtures: Path, hf_home: Path) -> list[str]:
    """Rebuild `hf_home` from `fixtures`; return the model ids it serves."""
    shutil.rmtree(hf_home / "hub", ignore_errors=True)
    ids = sorted(
        f"{d.parent.name}/{d.name}" for d in fixtures.glob("*/*") if d.is_dir()
    )
    for model_id in ids:
        repo = hf_home / "hub" / f"models--{model_id.replace('/', '--')}"
        # A stable stand-in for the commit id of the model's repository.
        rev = hashlib.sha1(model_id.encode()).hexdigest()
        shutil.copytree(fixtures / model_id, repo / "snapshots" / rev)
        (repo / "refs").mkdir()
        (repo / "refs" / "main").write_text(rev)
    return ids


def ensure(fixtures: Path, hf_home: Path) -> Path:
    """`hf_home`, laid out unless it is (`setup` and `test` refresh it; a run
    in progress may be reading it)."""
    if not (hf_home / "hub").exists():
        lay_out(fixtures, hf_home)
    return hf_home
