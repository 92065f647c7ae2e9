"""A pytest plugin loaded into every CPU run of vLLM's tests (vllm_tests.py's
Runner): after each test, the process runs on the CPUs it was given when the
session started.

On a CPU platform, vLLM's NIXL connector worker pins the thread that makes
it to the last core of each NUMA node (`os.sched_setaffinity`, in
vllm/distributed/kv_transfer/kv_connector/v1/nixl/base_worker.py) and
nothing undoes it: every later test of the process ran on that one core, so
the processes a selection is dealt to all ran on the same core. Standard
library and pytest only, like forktool/pytest_report.py.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

_given: set[int] = set()


def pytest_sessionstart(session: pytest.Session) -> None:
    _given.update(os.sched_getaffinity(0))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    yield
    if os.sched_getaffinity(0) != _given:
        os.sched_setaffinity(0, _given)
