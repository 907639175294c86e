"""The suite's time per directory, printed at the end of every run (CI's log included).

Where a run's minutes go is what decides which tests to shorten or move to the second lane
(tests/lanes.py); pytest's `--durations` names single tests, this sums setup, call and
teardown of every test by the directory of its file.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import PurePosixPath

import pytest

_SECONDS: defaultdict[str, float] = defaultdict(float)
_TESTS: defaultdict[str, int] = defaultdict(int)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    directory = str(PurePosixPath(report.nodeid.split("::", 1)[0]).parent)
    _SECONDS[directory] += report.duration
    if report.when == "call":
        _TESTS[directory] += 1


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _SECONDS:
        return
    terminalreporter.section("seconds per directory")
    for directory, seconds in sorted(_SECONDS.items(), key=lambda kv: -kv[1]):
        terminalreporter.write_line(f"{seconds:8.1f} s  {_TESTS[directory]:4d} tests  "
                                    f"{directory}")
    terminalreporter.write_line(f"{sum(_SECONDS.values()):8.1f} s  in all")
