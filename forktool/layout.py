"""Where a clone keeps what the tool reads and writes; `build/` is git-ignored."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Layout:
    root: Path

    # --- committed -------------------------------------------------------
    @property
    def pins(self) -> Path:
        return self.root / "pins.toml"

    @property
    def lock(self) -> Path:
        """venv.lock: every package of the venv, resolved from the pins."""
        return self.root / "venv.lock"

    @property
    def patches(self) -> Path:
        return self.root / "patches"

    @property
    def selection(self) -> Path:
        return self.root / "upstream-tests.toml"

    @property
    def fixtures(self) -> Path:
        return self.root / "fixtures" / "hf"

    @property
    def fork_tests(self) -> Path:
        """The fork tests that upstream would not take (and bench's worker)."""
        return self.root / "fork_tests"

    @property
    def equivalents(self) -> Path:
        """Mutants of the series' added lines no test can kill, with reasons."""
        return self.root / "mutants-equivalent.toml"

    @property
    def prose(self) -> Path:
        return self.root / "pr" / "description.toml"

    @property
    def review(self) -> Path:
        return self.root / "REVIEW.md"

    # --- build/ ----------------------------------------------------------
    @property
    def build(self) -> Path:
        return self.root / "build"

    @property
    def fork(self) -> Path:
        return self.build / "vllm"

    @property
    def clone_lock(self) -> Path:
        """Held by every command that reads or writes patches/ or the fork."""
        return self.build / "forktool.lock"

    @property
    def venv(self) -> Path:
        return self.build / ".venv"

    @property
    def trees(self) -> Path:
        """Tool-owned worktrees of the fork."""
        return self.build / "trees"

    @property
    def base_tree(self) -> Path:
        """The pristine base, checked out."""
        return self.trees / "base"

    @property
    def logs(self) -> Path:
        return self.build / "logs"

    @property
    def results(self) -> Path:
        return self.build / "results"

    @property
    def hf_home(self) -> Path:
        return self.build / "hf-home"

    @property
    def pycache(self) -> Path:
        """The bytecode the tool's test processes write (PYTHONPYCACHEPREFIX)."""
        return self.build / "pycache"

    @property
    def kit(self) -> Path:
        """The PR kit `pr` writes."""
        return self.build / "pr"

    @property
    def hypothesis(self) -> Path:
        return self.build / "hypothesis"


LAYOUT = Layout(REPO)
