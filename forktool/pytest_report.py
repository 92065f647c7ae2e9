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
from dataclasses import dataclass
from typing import IO, Any

import pytest

TAIL_LINES = 15
"""The last lines of a failure's traceback a report keeps."""


def pytest_addoption(parser: pytest.Parser) -> None:
    text = "write each test's outcome as JSON lines to this file"
    parser.addoption("--forktool-report", help=text)


def pytest_configure(config: pytest.Config) -> None:
    path = config.getoption("forktool_report")
    # Under xdist the workers' reports reach the controller, which writes them.
    if path and not hasattr(config, "workerinput"):
        config.pluginmanager.register(Reporter(open(path, "w")), "forktool_reporter")


@dataclass(eq=False)  # hashable by identity, as pluggy keeps plugins
class Reporter:
    out: IO[str]

    def _write(self, **record: Any) -> None:
        self.out.write(json.dumps(record) + "\n")
        self.out.flush()

    def _report(self, report: pytest.TestReport | pytest.CollectReport) -> None:
        said: dict[str, Any] = {}
        if report.failed:  # the crash message and the report's last lines
            crash = getattr(report.longrepr, "reprcrash", None)
            lines = str(report.longrepr).rstrip().splitlines()
            said["message"] = crash.message if crash is not None else ""
            if not said["message"] and lines:  # an import error's report is text alone
                said["message"] = lines[-1].removeprefix("E").strip()
            said["exception"] = getattr(report, "forktool_exception", "")
            said["tail"] = "\n".join(lines[-TAIL_LINES:])
        elif report.skipped:
            why = report.longrepr
            why = why[2] if isinstance(why, tuple) and len(why) == 3 else why or ""
            xfail = getattr(report, "wasxfail", None)
            skip = str(why).removeprefix("Skipped: ")
            said["message"] = f"xfail: {xfail}" if xfail is not None else skip
        self._write(
            event="report",
            nodeid=report.nodeid,
            when=getattr(report, "when", "collect"),
            outcome=report.outcome,
            duration=getattr(report, "duration", 0.0),
            **said,
        )

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, call: pytest.CallInfo[None]) -> Iterator[None]:
        report = (yield).get_result()  # type: ignore[attr-defined]
        if call.excinfo is not None and report.failed:
            report.forktool_exception = call.excinfo.typename

    def pytest_exception_interact(self, call: Any, report: Any) -> None:
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
        items = [item.nodeid for item in session.items]
        ids = {"ids": items} if session.config.option.collectonly else {}
        self._write(event="collected", count=len(items), **ids)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        self._write(event="finish", exitstatus=int(exitstatus))
        self.out.close()
