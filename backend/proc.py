"""Child processes, done one way everywhere: backend/, the tests and the benchmarks.

The rules, and why:

* **Spawn through `spawn()`** (or run `dies_with_parent(argv)` yourself). The child first
  runs a tiny exec shim that asks Linux for SIGKILL when its parent dies
  (PR_SET_PDEATHSIG), checks the parent is still there, and execs the real command. So a
  parent that dies without cleaning up - SIGKILLed, OOM-killed, crashed, a pytest run killed
  mid-test - takes its children with it: no broker, JVM, replica or Streamlit server is
  left behind. Each level does the same for its own children, so whole trees go.
* **No Python between fork and exec.** A `preexec_fn` runs Python in the child of a
  threaded parent (librdkafka, the HTTP server, the fleet simulator), where a lock another
  thread held at fork time is held forever; the shim runs only after exec, in a fresh
  interpreter.
* **The death signal follows the forking thread, not the process.** Linux sends it when the
  *thread* that called fork exits. Spawn from the main thread or from one long-lived thread
  (the supervisor's spawner); a child spawned from a short-lived thread (an HTTP request,
  a pool worker) would be killed as soon as that thread ends (once the shim has run: a
  thread that ends before that hands the child on - a race, not a way out).
* **Stopping is bounded.** A long-running command waits for SIGINT/SIGTERM/SIGHUP with
  `StopSignals`, whose watchdog ends the process `HARD_STOP_S` after the first signal
  however stuck its shutdown is (a flush to a broker that is gone, a join on a wedged
  thread), so every command exits within `STOP_WITHIN_S` of SIGTERM; orderly shutdowns
  budget `STOP_BUDGET_S` so the watchdog is only ever a last resort.
* Not Linux: there is no prctl, the shim only execs; each parent's own shutdown still stops
  its children.
"""

from __future__ import annotations

import contextlib
import errno
import math
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType
from typing import Any

from backend.netutil import wait_until

STOP_WITHIN_S = 10.0  # the promise: SIGTERM to exit, whatever the dependencies are doing
HARD_STOP_S = 9.0  # the watchdog fires here
STOP_BUDGET_S = 8.0  # what an orderly shutdown may take, children's grace included
LAST_WAVE_S = 2.5  # of that, what `groupscope up` keeps for the broker and Spark, stopped last
AFTER_KILL_S = 10.0  # how long a SIGKILLed child may take to be gone
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

# argv: [shim, parent pid, command...]. Exit 70: the parent died before the death signal was
# set (it would never come); 127: the command cannot be run, as in a shell.
_SHIM = (
    "import ctypes,os,signal,sys\n"
    "try:\n"
    " ctypes.CDLL(None,use_errno=True).prctl(1,int(signal.SIGKILL),0,0,0)\n"
    "except (AttributeError,OSError):\n"
    " pass\n"
    "os.getppid()==int(sys.argv[1]) or os._exit(70)\n"
    "try:\n"
    " os.execvp(sys.argv[2],sys.argv[2:])\n"
    "except OSError as e:\n"
    " sys.stderr.write(f'cannot run {sys.argv[2]}: {e}\\n')\n"
    " os._exit(127)\n"
)


def dies_with_parent(argv: Sequence[str]) -> list[str]:
    """`argv` wrapped in the exec shim: SIGKILLed when this process (strictly, the thread that
    spawns it) dies. The pid stays the command's: the shim execs in place."""
    return [sys.executable, "-I", "-S", "-c", _SHIM, str(os.getpid()), *map(str, argv)]


def spawn(argv: Sequence[str], **popen_args: Any) -> subprocess.Popen[Any]:
    """`subprocess.Popen(argv, **popen_args)` whose child dies with this process.

    A command that is not on PATH fails here, as with Popen, not later in the child.
    Call from the main thread or a long-lived one (see the module docstring). Audit hooks
    get a `backend.proc.spawn` event with the real command: Popen's own event only shows
    the shim's interpreter.
    """
    sys.audit("backend.proc.spawn", [str(a) for a in argv])
    program = str(argv[0])
    if os.sep not in program:
        env = popen_args.get("env") or os.environ
        if shutil.which(program, path=env.get("PATH", os.defpath)) is None:
            raise FileNotFoundError(errno.ENOENT, f"{program} not found on PATH", program)
    return subprocess.Popen(dies_with_parent(argv), **popen_args)


def run(argv: Sequence[str], timeout: float | None = None, capture_output: bool = False,
        **popen_args: Any) -> subprocess.CompletedProcess[Any]:
    """`subprocess.run` (no `check`) whose child dies with this process: spawned, waited for,
    SIGKILLed at `timeout` (then subprocess.TimeoutExpired, as subprocess.run does).

    Whatever ends the wait (the timeout, Ctrl-C, a test's own timeout) kills the child, and
    what follows is bounded: a grandchild that kept the output pipes open cannot hold the
    caller after the child is gone."""
    if capture_output:
        popen_args.update(stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc = spawn(argv, **popen_args)
    try:
        out, err = proc.communicate(timeout=timeout)
    except BaseException:
        proc.kill()
        raise
    finally:
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(AFTER_KILL_S)
    return subprocess.CompletedProcess(list(argv), proc.returncode, out, err)


def abort_if_exited(proc: subprocess.Popen[Any], what: str,
                    detail: Callable[[], str] = lambda: "",
                    error: type[Exception] = RuntimeError) -> Callable[[], None]:
    """An `abort` for wait_until while waiting on `proc`: once it has exited, raise `error`
    ("<what> exited with code N<detail()>"; detail is read only then, e.g. a log tail), so
    a dead child fails the wait at once with the reason instead of timing out."""

    def check() -> None:
        if proc.poll() is not None:
            raise error(f"{what} exited with code {proc.returncode}{detail()}")

    return check


def send(proc: subprocess.Popen[Any], sig: int, group: bool = False) -> None:
    """`sig` to `proc` (to its process group with `group`) unless it is already gone."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if group:
            os.killpg(proc.pid, sig)
        elif proc.poll() is None:
            proc.send_signal(sig)


def reap(proc: subprocess.Popen[Any], grace: float, group: bool = False) -> int:
    """Wait up to `grace` s for `proc` to exit, then SIGKILL it; returns its exit code.

    With `group` (a child spawned with start_new_session), whatever is left of its process
    group - grandchildren that outlived it - is SIGKILLed as well.
    """
    try:
        proc.wait(max(0.0, grace))
    except subprocess.TimeoutExpired:
        send(proc, signal.SIGKILL, group=False)
    if group:
        send(proc, signal.SIGKILL, group=True)
    return proc.wait()


def seconds_since_start() -> float:
    """Seconds since this process started, to 10 ms: its start-up as a user waits for it.

    Read from /proc rather than psutil's create_time, which adds whole seconds of the boot
    time to the start tick and so can be off by up to a second."""
    with open("/proc/self/stat", "rb") as stat:
        fields = stat.read().rsplit(b")", 1)[1].split()
    started = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # starttime, ticks after boot
    return time.clock_gettime(time.CLOCK_BOOTTIME) - started


def process_args(proc: Any) -> list[str]:
    """A psutil.Process's arguments as `ps` shows them.

    A process that retitled itself (a warm standby replica once it knows which replica it
    is, through setproctitle) has one string padded with NULs in /proc/PID/cmdline, which
    psutil returns as that string plus empty ones: split on whitespace, as `ps` would show
    it."""
    args = [a for a in proc.cmdline() if a]
    return args[0].split() if len(args) == 1 and " " in args[0] else args


def terminate(proc: subprocess.Popen[Any], grace: float, group: bool = False) -> int:
    """SIGTERM (to the process group with `group`), SIGKILL after `grace` s; the exit code."""
    if proc.poll() is None:
        send(proc, signal.SIGTERM, group)
    return reap(proc, grace, group)


class StopSignals:
    """The one way a long-running command waits for SIGINT / SIGTERM / SIGHUP.

    Use as a context manager in the main thread. The handler takes no lock (a handler that
    sets a threading.Event can deadlock on the Event's own lock if the main thread was
    inside that Event when the signal came): it records the signal, calls `on_stop` once
    (which may raise, e.g. KeyboardInterrupt, to break out of a blocking start-up) and wakes
    the watchdog through a pipe. The watchdog thread then ends the process `hard_stop_after`
    s later if it is still alive, children included (they die with it); SIGALRM's default
    action backs it up where no Python thread can run any more (interpreter shutdown, a C
    call holding the GIL). Later signals are noted but change nothing: a second Ctrl-C does
    not cut a flush short, the watchdog bounds it anyway.
    """

    def __init__(self, on_stop: Callable[[], object] | None = None,
                 hard_stop_after: float | None = HARD_STOP_S,
                 signals: Sequence[int] = STOP_SIGNALS) -> None:
        self.on_stop = on_stop
        self.hard_stop_after = hard_stop_after
        self.signals = tuple(signals)
        self.received: int | None = None
        self._old: dict[int, Any] = {}
        self._pipe: tuple[int, int] | None = None

    @property
    def stopping(self) -> bool:
        return self.received is not None

    def __enter__(self) -> StopSignals:
        if self.hard_stop_after is not None:
            self._pipe = os.pipe()
            threading.Thread(target=self._watchdog, args=(self._pipe[0],), daemon=True,
                             name="stop-watchdog").start()
        self._old = {s: signal.signal(s, self._handle) for s in self.signals}
        return self

    def __exit__(self, *exc: object) -> None:
        for s, handler in self._old.items():
            signal.signal(s, handler)
        if self._pipe is not None and self.received is None:
            os.write(self._pipe[1], b"x")  # no signal came: the watchdog retires
            os.close(self._pipe[1])
        # once one came, the watchdog stays armed: the rest of the exit may hang too

    def wait(self, alive: Callable[[], bool] | None = None, interval: float = 0.2) -> bool:
        """Block until a stop signal (True) or until `alive()` turns false (False)."""
        while self.received is None:
            if alive is not None and not alive():
                return False
            time.sleep(interval)
        return True

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.received is not None:
            return
        self.received = signum
        if self._pipe is not None:
            with contextlib.suppress(OSError):
                os.write(self._pipe[1], b"s")
            signal.signal(signal.SIGALRM, signal.SIG_DFL)
            signal.alarm(math.ceil(self.hard_stop_after or 0) + 2)
        if self.on_stop is not None:
            self.on_stop()

    def _watchdog(self, read_fd: int) -> None:
        if os.read(read_fd, 1) != b"s" or self.hard_stop_after is None:
            os.close(read_fd)
            return
        time.sleep(self.hard_stop_after)
        name = signal.Signals(self.received or signal.SIGTERM).name
        os.write(2, f"groupscope: still running {self.hard_stop_after:.0f}s after {name}; "
                    f"exiting now\n".encode())
        os._exit(1)


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
        self.popen: subprocess.Popen[Any] | None = None

    def spawn(self, cmd: list[str], output: Path, **popen_args: Any) -> subprocess.Popen[Any]:
        with open(output, "ab") as out:
            self.popen = spawn(cmd, stdout=out, stderr=subprocess.STDOUT,
                               stdin=subprocess.DEVNULL, **popen_args)
        return self.popen

    def running(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def wait_ready(self, probe: Callable[[], bool], timeout: float, where: str,
                   interval: float = 0.2, also: Callable[[], object] | None = None,
                   give_up: bool = True) -> bool:
        """Poll `probe` (a real request, never a sleep) until it passes or the child dies.

        `also` is a further abort, run before every try: it raises to give up at once when
        something this child needs has failed (the processes a Spark driver runs on).
        `give_up=False` leaves a child that is slow to answer running and returns False: a
        restart whose wait was only for the caller's answer, not a start-up to undo."""
        assert self.popen is not None, "spawn first"
        exited = abort_if_exited(
            self.popen, self.what,
            lambda: f" during start-up; last lines of its log:\n{self.tail()}", self.error)

        def abort() -> None:
            exited()
            if also is not None:
                also()

        try:
            wait_until(probe, timeout, interval, what=f"{self.what} on {where}", abort=abort)
            return True
        except TimeoutError:
            if not give_up:
                return False
            self.stop()
            raise self.error(
                f"{self.what} did not become ready on {where} within {timeout:.0f}s; "
                f"last lines of its log:\n{self.tail()}"
            ) from None

    def tail(self, lines: int = 20) -> str:
        for path in self.log_files:
            if path.exists():
                text = path.read_text(errors="replace").splitlines()[-lines:]
                if text:
                    return "\n".join(text)
        return "(no log)"

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM (a clean shutdown), SIGKILL if it hangs. Returns the exit code."""
        proc, self.popen = self.popen, None
        return None if proc is None else terminate(proc, timeout)

    def run_until_signal(self, stop: Callable[[], object]) -> int:
        """Foreground mode (`groupscope broker|spark`): block until a stop signal (exit 0) or
        the child's death (exit 1), then `stop()`, which must fit in STOP_BUDGET_S."""
        with StopSignals() as signals:
            died = not signals.wait(alive=self.running)
            stop()
        return 1 if died else 0
