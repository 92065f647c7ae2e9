"""A pytest plugin for evidence.ci_impact: under `--collect-only`, writes
each collected item's node id and the names pytest's `-k` matches it by, as
one JSON object.

Loaded with `-p evidence.ci_keywords --ci-keywords=PATH` beside the runner's
report plugin (the repository's root on PYTHONPATH). Standard library and
pytest only: it runs in the fork's venv, in the fork's tree.
"""

from __future__ import annotations

import json

import pytest
from _pytest.mark import KeywordMatcher


def pytest_addoption(parser: pytest.Parser) -> None:
    what = "write each collected item's -k keywords as JSON to this file"
    parser.addoption("--ci-keywords", dest="ci_keywords", default=None, help=what)


def pytest_collection_finish(session: pytest.Session) -> None:
    if path := session.config.getoption("ci_keywords"):
        items = {
            item.nodeid: sorted(KeywordMatcher.from_item(item)._names)
            for item in session.items
        }
        with open(path, "w") as f:
            json.dump(items, f)
