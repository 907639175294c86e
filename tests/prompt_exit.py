"""A finished run exits soon: nothing after the verdict may hold CI.

Once pytest has printed its summary, interpreter exit still joins every non-daemon thread a
test left behind and runs every library's exit handlers, and some of those talk to services
the session has already stopped (the Spark Connect client asks the engine to clean up after
each client left open, retrying for minutes by default). A hang there comes after the last
test's timeout, so pytest-timeout cannot see it, and the run looks finished but never ends.

So the last unconfigure hook names any thread still running and starts a daemon watchdog:
exit proceeds as usual (pytest's own cleanups and exit handlers run), and if it has not
happened within GRACE_S the watchdog ends the process with the run's own exit status.
Children die with it (backend/proc.py).
"""

from __future__ import annotations

import os
import sys
import threading
import time

import pytest

GRACE_S = float(os.environ.get("GROUPSCOPE_EXIT_GRACE_S", 60))
_SESSION = pytest.StashKey[pytest.Session]()


def pytest_sessionstart(session: pytest.Session) -> None:
    session.config.stash[_SESSION] = session


def left_running() -> list[str]:
    """Names of the non-daemon threads besides the main one: what exit will wait for."""
    return [t.name for t in threading.enumerate()
            if t is not threading.main_thread() and not t.daemon and t.is_alive()]


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    session = config.stash.get(_SESSION, None)
    if session is None:  # --help, a usage error: nothing ran
        return
    status = int(session.exitstatus)
    threads = left_running()
    if threads:
        sys.stderr.write(f"tests: {len(threads)} thread(s) still running at exit: "
                         f"{', '.join(sorted(threads)[:10])}\n")

    def cut_off() -> None:
        time.sleep(GRACE_S)
        sys.stderr.write(f"tests: not exited {GRACE_S:.0f} s after the run ended (a thread "
                         f"or an exit handler holds it): ending with the run's status\n")
        sys.stderr.flush()
        sys.stdout.flush()
        os._exit(status)

    threading.Thread(target=cut_off, name="prompt-exit", daemon=True).start()
