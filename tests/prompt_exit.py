"""A finished run exits at once: nothing after the verdict may hold CI.

Once pytest has printed its summary, interpreter exit still joins every non-daemon thread a
test left behind and runs every library's exit handlers, and some of those talk to services
the session has already stopped (the Spark Connect client asks the engine to clean up after
each client left open, retrying for minutes by default). A hang there happens after the last
test's timeout, so pytest-timeout cannot see it, and the run looks finished while it never
ends. So the last unconfigure hook flushes the output, names what was left running, and ends
the process with the run's own exit status. Children die with it (backend/proc.py).
"""

from __future__ import annotations

import os
import sys
import threading

import pytest

_SESSION = pytest.StashKey[pytest.Session]()


def pytest_sessionstart(session: pytest.Session) -> None:
    session.config.stash[_SESSION] = session


def left_running() -> list[str]:
    """Names of the non-daemon threads besides the main one: what exit would wait for."""
    return [t.name for t in threading.enumerate()
            if t is not threading.main_thread() and not t.daemon and t.is_alive()]


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    session = config.stash.get(_SESSION, None)
    if session is None:  # --collect-only errors, --help: nothing ran
        return
    threads = left_running()
    if threads:
        sys.stderr.write(f"tests: {len(threads)} thread(s) still running at exit, not waited "
                         f"for: {', '.join(sorted(threads)[:10])}\n")
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(int(session.exitstatus))
