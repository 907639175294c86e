"""A test run that is SIGKILLed (a CI time-out, `kill -9` of `make unit`) leaves nothing behind.

An inner pytest session starts what the suite's fixtures and helpers start - the session's
embedded broker (a JVM), a `groupscope backend` with a stand-in replica that has a child of
its own, a Streamlit server and Chromium through Playwright - and then waits. It is
SIGKILLed, so no fixture teardown runs: only backend/proc.py's death signal (and, for
Chromium, Playwright's driver noticing its pipe close) can end them. Every one must be gone
within seconds.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psutil

from backend.netutil import wait_until
from backend.proc import abort_if_exited, spawn, terminate
from tests.conftest import stack_processes

REPO = Path(__file__).resolve().parents[2]
READY_ENV = "GROUPSCOPE_KILLED_RUN_READY"  # the inner run writes "ready" to this file

INNER = '''
import os
import sys
import threading
from pathlib import Path

from backend.netutil import wait_until
from tests.dashboard.browser import web_server
from tests.supervisor.conftest import STANDIN, start_backend


def test_start_everything_then_wait_to_be_killed(broker, chromium, tmp_path):
    pids = tmp_path / "child-pids"
    pids.mkdir()
    start_backend(broker.settings, tmp_path / "data", "killed-run", "killed-run",
                  "--replicas", "1", "--no-fleet",
                  replica_command=[sys.executable, str(STANDIN), "--child-pid-dir", str(pids)])
    wait_until(lambda: any(pids.iterdir()), 60, what="the stand-in replica's child")
    env = {"GROUPSCOPE_BOOTSTRAP": broker.settings.bootstrap}
    with web_server(env, tmp_path / "web.log") as url, chromium() as page:
        page.goto(url)
        Path(os.environ["GROUPSCOPE_KILLED_RUN_READY"]).write_text("ready")
        threading.Event().wait()
'''


def _describe(procs: list[psutil.Process]) -> list[str]:
    out = []
    for proc in procs:
        try:
            out.append(f"{proc.pid} {' '.join(proc.cmdline())[:120]}")
        except psutil.Error:
            out.append(f"{proc.pid} (gone)")
    return out


def test_a_sigkilled_test_run_leaves_no_process_behind(stack: str, chromium,
                                                       tmp_path: Path) -> None:
    """`chromium` is requested for its marker: the inner session drives the browser."""
    test_file = tmp_path / "test_inner_killed_run.py"
    test_file.write_text(INNER)
    ready = tmp_path / "ready"
    log_path = tmp_path / "inner.log"
    env = dict(os.environ, **{READY_ENV: str(ready)})
    with open(log_path, "wb") as log:
        inner = spawn([sys.executable, "-m", "pytest", "-q", "-p", "tests.conftest",
                       "-p", "no:cacheprovider", "--basetemp", str(tmp_path / "inner"),
                       str(test_file)],
                      cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
                      stdin=subprocess.DEVNULL, start_new_session=True)

    inner_running = abort_if_exited(
        inner, "the inner run", lambda: ":\n" + log_path.read_text(errors="replace")[-3000:],
        AssertionError)
    try:
        wait_until(ready.exists, 300, interval=0.5, what="the inner run to start everything",
                   abort=inner_running)
        tree = psutil.Process(inner.pid).children(recursive=True)
        started = " ".join(_describe(tree))
        for what in ("java", "backend.cli backend", "standin_member.py", "time.sleep(3600)",
                     "streamlit", "chromium"):
            assert what in started, f"{what} not started: {_describe(tree)}"

        inner.kill()  # no teardown runs
        inner.wait(10)
        try:
            wait_until(lambda: not stack_processes(stack), 15, interval=0.2,
                       what="every process of the killed run to end")
        except TimeoutError:
            raise AssertionError(f"survivors: {_describe(stack_processes(stack))}") from None
        survivors = [p for p in tree if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
        assert survivors == [], _describe(survivors)
    finally:
        terminate(inner, 0)
