"""Where a clone keeps what the tool reads and writes; `build/` is git-ignored."""

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


class Layout:
    """The paths of the clone at `root`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        # Committed.
        self.pins = root / "pins.toml"
        self.lock = root / "venv.lock"  # every package of the venv, from the pins
        self.patches = root / "patches"
        self.selection = root / "upstream-tests.toml"
        self.fixtures = root / "fixtures" / "hf"
        # The fork tests upstream would not take (and bench's worker).
        self.fork_tests = root / "fork_tests"
        # Mutants of the series' added lines no test can kill, with reasons.
        self.equivalents = root / "mutants-equivalent.toml"
        self.prose = root / "pr" / "description.toml"
        # build/, git-ignored.
        self.build = build = root / "build"
        self.fork = build / "vllm"
        # Held by every command that reads or writes patches/ or the fork.
        self.clone_lock = build / "forktool.lock"
        self.venv = build / ".venv"
        self.trees = build / "trees"  # tool-owned worktrees of the fork
        self.base_tree = self.trees / "base"  # the pristine base, checked out
        self.logs = build / "logs"
        self.results = build / "results"
        self.hf_home = build / "hf-home"
        # The bytecode the tool's test processes write (PYTHONPYCACHEPREFIX).
        self.pycache = build / "pycache"
        self.kit = build / "pr"  # the PR kit `pr` writes
        self.hypothesis = build / "hypothesis"


LAYOUT = Layout(REPO)
