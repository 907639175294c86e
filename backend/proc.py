"""Child-process hygiene shared by every launcher: children never outlive their parent."""

from __future__ import annotations

import ctypes
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

_PR_SET_PDEATHSIG = 1


def die_with_parent(sig: int = signal.SIGTERM):
    """A `preexec_fn` asking Linux to signal the child when the spawning thread exits.

    Covers the case no handler can: the parent being SIGKILLed. Spawn from a long-lived
    thread (the main thread), because the signal follows the thread, not the process.
    """

    def _preexec() -> None:
        try:
            libc = ctypes.CDLL("libc.so.6", use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, sig, 0, 0, 0)
        except OSError:
            pass  # not Linux: the parent's own cleanup still applies

    return _preexec


class ServiceStartError(RuntimeError):
    """A long-running child (broker, Spark) exited or did not become ready."""


class ServiceProcess:
    """One long-running child with a log file: spawn, wait on a real probe, stop.

    Shared by the embedded broker and the Spark Connect server, so both report start-up
    failures the same way (exit code or time-out, plus the last lines of their log).
    """

    def __init__(self, what: str, log_files: tuple[Path, ...],
                 error: type[ServiceStartError] = ServiceStartError) -> None:
        self.what = what
        self.log_files = log_files
        self.error = error
        self.popen: subprocess.Popen | None = None

    def spawn(self, cmd: list[str], output: Path, **popen_args: object) -> subprocess.Popen:
        with open(output, "ab") as out:
            self.popen = subprocess.Popen(
                cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                preexec_fn=die_with_parent(), **popen_args,
            )
        return self.popen

    def wait_ready(self, probe: Callable[[], bool], timeout: float, where: str,
                   interval: float = 0.2) -> None:
        """Poll `probe` (a real request, never a sleep) until it passes or the child dies."""
        deadline = time.monotonic() + timeout
        while True:
            if self.popen is not None and self.popen.poll() is not None:
                raise self.error(
                    f"{self.what} exited with code {self.popen.returncode} during start-up; "
                    f"last lines of its log:\n{self.tail()}"
                )
            try:
                if probe():
                    return
            except Exception:
                pass  # not up yet
            if time.monotonic() >= deadline:
                self.stop()
                raise self.error(
                    f"{self.what} did not become ready on {where} within {timeout:.0f}s; "
                    f"last lines of its log:\n{self.tail()}"
                )
            time.sleep(interval)

    def tail(self, lines: int = 20) -> str:
        for path in self.log_files:
            if path.exists():
                text = path.read_text(errors="replace").splitlines()[-lines:]
                if text:
                    return "\n".join(text)
        return "(no log)"

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM (a clean shutdown), SIGKILL if it hangs. Returns the exit code."""
        proc = self.popen
        if proc is None:
            return None
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.popen = None
        return proc.returncode

    def run_until_signal(self, stop: Callable[[], object]) -> int:
        """Foreground mode: block until SIGINT/SIGTERM (exit 0) or the child dies (exit 1)."""
        stopping = threading.Event()
        old = {s: signal.signal(s, lambda *_: stopping.set())
               for s in (signal.SIGINT, signal.SIGTERM)}
        proc = self.popen
        try:
            while not stopping.wait(0.2) and proc is not None and proc.poll() is None:
                pass
            died = not stopping.is_set()
            stop()
            return 1 if died else 0
        finally:
            for s, h in old.items():
                signal.signal(s, h)
