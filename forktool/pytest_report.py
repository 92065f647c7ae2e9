"""A pytest plugin writing what a run did as JSON lines, for the tool's runner.

Loaded with `-p forktool.pytest_report --forktool-report=PATH` (the
repository's root on PYTHONPATH), in whichever tree pytest runs. Standard
library and pytest only: it runs in the fork's venv, in the fork's tree.

Each line is one JSON object:
  {"event": "collected", "count": N}  (with "ids": [...] under --collect-only)
  {"event": "report", "nodeid": ..., "when": "collect"|"setup"|"call"|"teardown",
   "outcome": "passed"|"failed"|"skipped", "duration": s,
   "message": ..., "exception": ..., "tail": ...}  (message and the rest for
   failures; message alone, the reason, for skips)
  {"event": "finish", "exitstatus": N}
Node ids are pytest's own (`nodeid`). A collection error is a report with
`when` "collect". Each line is flushed as written, so a reader can follow.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import IO, Any

import pytest

OPTION = "--forktool-report"
TAIL_LINES = 15
"""The last lines of a failure's traceback a report keeps."""

_EXCEPTION = pytest.StashKey[str]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        OPTION,
        dest="forktool_report",
        default=None,
        help="write each test's outcome as JSON lines to this file",
    )


def pytest_configure(config: pytest.Config) -> None:
    path = config.getoption("forktool_report")
    # Under xdist the workers' reports reach the controller, which writes them.
    if path and not hasattr(config, "workerinput"):
        config.pluginmanager.register(Reporter(open(path, "w")), "forktool_reporter")


def _crash(longrepr: Any) -> tuple[str, str]:
    """The crash message and the last lines of a failure's report."""
    text = str(longrepr)
    crash = getattr(longrepr, "reprcrash", None)
    message = crash.message if crash is not None else ""
    lines = text.rstrip().splitlines()
    if not message and lines:  # an import error's report is text alone
        message = lines[-1].removeprefix("E").strip()
    return message, "\n".join(lines[-TAIL_LINES:])


class Reporter:
    def __init__(self, out: IO[str]) -> None:
        self.out = out

    def _write(self, **record: Any) -> None:
        self.out.write(json.dumps(record) + "\n")
        self.out.flush()

    def _report(self, report: pytest.TestReport | pytest.CollectReport) -> None:
        when = getattr(report, "when", "collect")
        record: dict[str, Any] = {
            "nodeid": report.nodeid,
            "when": when,
            "outcome": report.outcome,
            "duration": getattr(report, "duration", 0.0),
        }
        if report.failed:
            message, tail = _crash(report.longrepr)
            exception = getattr(report, "forktool_exception", "")
            record.update(message=message, exception=exception, tail=tail)
        elif report.skipped:
            why = report.longrepr
            why = why[2] if isinstance(why, tuple) and len(why) == 3 else why or ""
            xfail = getattr(report, "wasxfail", None)
            record["message"] = (
                f"xfail: {xfail}"
                if xfail is not None
                else str(why).removeprefix("Skipped: ")
            )
        self._write(event="report", **record)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Iterator[None]:
        outcome = yield
        report = outcome.get_result()  # type: ignore[attr-defined]
        if call.excinfo is not None and report.failed:
            report.forktool_exception = call.excinfo.typename

    def pytest_exception_interact(
        self,
        node: pytest.Item | pytest.Collector,
        call: pytest.CallInfo[Any],
        report: pytest.TestReport | pytest.CollectReport,
    ) -> None:
        """A collection error's exception: the one pytest wraps (an import
        error's), else its own; reported after this hook."""
        if isinstance(report, pytest.CollectReport) and call.excinfo is not None:
            error = call.excinfo.value
            report.forktool_exception = type(error.__cause__ or error).__name__  # type: ignore[attr-defined]

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self._report(report)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self._report(report)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        record: dict[str, Any] = {"count": len(session.items)}
        if session.config.option.collectonly:
            record["ids"] = [item.nodeid for item in session.items]
        self._write(event="collected", **record)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        self._write(event="finish", exitstatus=int(exitstatus))
        self.out.close()
