"""Keep Hypothesis' storage (its cache of source constants) under build/."""

from hypothesis.configuration import set_hypothesis_home_dir

from forktool.layout import LAYOUT

set_hypothesis_home_dir(LAYOUT.hypothesis)
