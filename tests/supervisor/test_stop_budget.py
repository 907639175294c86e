"""SIGTERM ends a command within STOP_WITHIN_S even when the broker it talks to is already gone.

A private broker (the test kills it) serves `groupscope backend` - the fleet simulator on, one
stand-in replica - and `groupscope produce`. Once both have delivered, the broker is
SIGKILLed and both keep queueing messages that can never be acknowledged; then each gets
SIGTERM. Unbounded, the simulator's flush alone waited 15 s, and a replica's graceful stop
its grace period on top (a backend was seen running 16 s after SIGTERM).
"""

from __future__ import annotations

import contextlib
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

from backend.netutil import wait_until
from backend.proc import STOP_WITHIN_S, abort_if_exited, spawn, terminate
from tests.supervisor.conftest import REPO, start_backend, stop_backend

QUEUED = re.compile(r"(\d+) delivered .* queued (\d+)")


class Producer:
    """`groupscope produce` with its progress lines collected (delivered, queued)."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.proc = spawn([sys.executable, "-m", "backend.cli", "produce", "--bootstrap",
                           bootstrap, "--topic", topic, "--rate", "300"], cwd=REPO,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines: list[str] = []
        self.progress: list[tuple[int, int]] = []
        threading.Thread(target=self._read, daemon=True).start()
        self.running = abort_if_exited(self.proc, "produce",
                                       lambda: " early:\n" + "".join(self.lines[-20:]),
                                       AssertionError)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)
            if m := QUEUED.search(line):
                self.progress.append((int(m[1]), int(m[2])))


def _sigterm_to_exit(procs: dict[str, subprocess.Popen]) -> dict[str, float]:
    """SIGTERM to all at once; seconds until each exited (waits past the budget, to say by
    how much it was missed)."""
    t0 = time.monotonic()
    for proc in procs.values():
        proc.terminate()
    took = {}
    for name, proc in procs.items():
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(STOP_WITHIN_S + 20)
        took[name] = round(time.monotonic() - t0, 1)
    return took


def test_backend_and_produce_stop_within_the_budget_after_the_broker_died(
        broker_factory, standin_command, tmp_path: Path, unique: str) -> None:
    node = broker_factory(tmp_path / "broker")
    node.start()
    backend = start_backend(node.settings, tmp_path / "data", f"g-{unique}", f"t-{unique}",
                            "--replicas", "1", "--rate", "300",
                            replica_command=standin_command)
    producer = Producer(node.settings.bootstrap, f"p-{unique}")
    try:
        wait_until(lambda: backend.status().fleet.delivered > 0
                   and backend.status().replicas[0].member, 90,
                   what="the backend's simulator delivering and its replica in the group")
        wait_until(lambda: producer.progress and producer.progress[-1][0] > 0, 60,
                   what="produce delivering", abort=producer.running)

        assert node.process is not None
        node.process.kill()  # gone without a goodbye: nothing will be acknowledged any more
        node.process.wait(10)
        wait_until(lambda: backend.status().fleet.queued > 0, 30,
                   what="the backend's simulator queueing for the dead broker")
        seen = len(producer.progress)
        wait_until(lambda: len(producer.progress) > seen and producer.progress[-1][1] > 0, 30,
                   what="produce queueing for the dead broker", abort=producer.running)

        took = _sigterm_to_exit({"backend": backend.proc, "produce": producer.proc})
        print(f"SIGTERM to exit with the broker gone: {took}")
        slow = {k: v for k, v in took.items() if v > STOP_WITHIN_S}
        assert not slow, (f"still running {STOP_WITHIN_S:.0f} s after SIGTERM: {slow}\n"
                          f"{backend.log_tail()}\n" + "".join(producer.lines[-10:]))
    finally:
        terminate(producer.proc, 5)
        stop_backend(backend)
