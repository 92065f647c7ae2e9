"""Keep Hypothesis' storage (its cache of source constants) under build/."""

from pathlib import Path

from hypothesis.configuration import set_hypothesis_home_dir

set_hypothesis_home_dir(Path(__file__).resolve().parents[1] / "build" / "hypothesis")
