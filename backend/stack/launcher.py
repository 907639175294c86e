"""`groupscope up`: the Procfile's processes, each started as soon as what it needs is ready.

NEEDS is the one place the order is written. A process type starts once every type it needs
answers a real request (its readiness probe), so types that need nothing start together: the
broker's and Spark's JVMs warm up side by side instead of one after the other. A type with
a serving probe (Spark) frees what needs it earlier, as soon as it accepts connections; `up`
still reports it ready, and is done starting, only once its real probe passes. The main
thread spawns every child (a child dies with the thread that forked it, see backend/proc.py);
one thread per starting child only probes it and reports to the main thread, which records
each step in `timeline`. The first child that exits or misses its timeout ends the start-up
with one line, and everything started so far is stopped.

Each child runs in its own process group so Ctrl-C reaches only this launcher, which then
stops the children (SIGTERM, then SIGKILL for a group that hangs) within STOP_BUDGET_S, in
the reverse of NEEDS: a process before the processes it needs, so the backend and the
dashboard stop while the broker and Spark still answer (replicas finish their batch and
leave the group), then the broker and Spark, which keep LAST_WAVE_S at least. Every child is
spawned through backend.proc's exec shim, so if this launcher is killed outright the
children die with it, and theirs with them: nothing of the stack is left behind.

Once up, a process that ends on its own still stops the stack (it said why), but one of the
RESTARTABLE types killed by a signal it did not ask for -- a native crash, SIGABRT from an
assertion inside librdkafka when a broker's connection drops under an admin request, or the
OOM killer -- is started again, at most RESTARTS_PER_WINDOW times within RESTART_WINDOW_S:
killing a broker on stage must not end the whole demo. Those types hold no data of their own
(the backend's replicas commit to Kafka and die with it; the dashboard is a view).
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

from backend.contracts.history import ENV_RESTARTED_BY_UP
from backend.engine.server import START_TIMEOUT_S
from backend.kafka.settings import resolve_settings
from backend.netutil import port_open, wait_until
from backend.paths import data_dir
from backend.proc import (
    LAST_WAVE_S,
    STOP_BUDGET_S,
    StopSignals,
    abort_if_exited,
    reap,
    send,
    spawn,
)
from backend.spark.session import check_engine
from backend.stack.config import StackConfig
from backend.stack.procfile import REPO_ROOT, ProcessType, ProcfileError, read_procfile

READY_TIMEOUT = {"broker": 90.0, "spark": START_TIMEOUT_S + 30, "backend": 120.0, "web": 60.0}
# What must be ready before a process type starts; a type not listed needs nothing and starts
# at once. Start and stop order both follow from this table alone.
NEEDS: dict[str, tuple[str, ...]] = {
    # the supervisor creates the topics and its replicas join the group and summarise with
    # Spark from their first batch
    "backend": ("broker", "spark"),
    # the dashboard's observer reads the group from the broker; it finds the supervisor on
    # every poll, so it need not wait for the backend
    "web": ("broker",),
}

Probe = Callable[[], bool]

# Process types started again after a crash (see the module's docstring), how often at most
RESTARTABLE = frozenset({"backend", "web"})
RESTARTS_PER_WINDOW = 3
RESTART_WINDOW_S = 600.0


@dataclass(frozen=True)
class Step:
    """One entry of the launcher's timeline: `name` was `event` at `at` (time.monotonic())."""

    at: float
    name: str
    event: str  # "skipped", "starting", "serving", "ready", "stopping"


@dataclass
class RunningProcess:
    kind: ProcessType
    popen: subprocess.Popen
    started: float = field(default_factory=time.monotonic)


# What a waiter thread reports: the process, "serving" or "ready" (or "exited"), and the
# one-line error that ends the start-up, or None
Report = tuple[RunningProcess, str, str | None]


class _Cancelled(Exception):
    """The start-up was given up (another process failed, or Ctrl-C): stop probing."""


def levels(names: Sequence[str], needs: Mapping[str, Iterable[str]]) -> dict[str, int]:
    """Each type's depth in `needs`: 0 when it needs nothing, else one more than the deepest
    type it needs. A need that is not one of `names`, or a cycle, is a ProcfileError naming
    it."""
    graph = {name: tuple(needs.get(name, ())) for name in names}
    for name, wanted in graph.items():
        for other in wanted:
            if other not in graph:
                raise ProcfileError(f"{name} needs {other}, which is not a Procfile process type")
    try:
        order = list(TopologicalSorter(graph).static_order())
    except CycleError as exc:
        raise ProcfileError(f"process types need each other in a cycle: "
                            f"{' -> '.join(exc.args[1])}") from None
    depth: dict[str, int] = {}
    for name in order:
        depth[name] = 1 + max((depth[n] for n in graph[name]), default=-1)
    return depth


def stop_waves(names: Sequence[str], needs: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """`names` (in start order) grouped into stop waves: deepest first, so every process is
    stopped before any process it needs; within a wave the reverse of `names`."""
    depth = levels(names, needs)
    return [[n for n in reversed(names) if depth[n] == level]
            for level in sorted(set(depth.values()), reverse=True)]


class StackLauncher:
    def __init__(self, config: StackConfig | None = None, out=None, *,
                 procfile: Path | None = None,
                 needs: Mapping[str, Iterable[str]] | None = None,
                 probes: Mapping[str, Probe] | None = None,
                 serving: Mapping[str, Probe] | None = None,
                 restartable: Iterable[str] = RESTARTABLE) -> None:
        """`procfile`, `needs`, `probes` (readiness per type, over the built-in ones),
        `serving` (early probes, see _serving_probe; instead of the built-in ones) and
        `restartable` default to the stack's own; tests run the scheduling with small
        processes."""
        self.config = config or StackConfig.from_env()
        self.out = out or sys.stdout
        self.procfile = procfile
        self.needs = NEEDS if needs is None else needs
        self.probes = dict(probes or {})
        self.serving = None if serving is None else dict(serving)
        self.restartable = frozenset(restartable)
        self._restarts: dict[str, list[float]] = {}
        self.running: list[RunningProcess] = []
        self.timeline: list[Step] = []
        self._signals = StopSignals(on_stop=self._interrupt_start_up)
        self._starting = True
        self._spawning = False  # between fork and `running`: a Ctrl-C must wait (start)
        self._interrupted = False
        self._cancel = threading.Event()
        self._say_lock = threading.Lock()

    # ---- readiness probes: real requests, never sleeps -------------------------------

    def _probe(self, name: str) -> Probe:
        if name in self.probes:
            return self.probes[name]
        if name == "broker":  # every node registered (the bootstrap is read per probe:
            # a cluster's other nodes are on ports its process picks and writes down)
            brokers = 1 if self.config.external_kafka else self.config.brokers
            return lambda: resolve_settings().check_reachable(timeout=2.0) >= brokers
        if name == "spark":  # a real query; the warm-up is the replicas' own
            return lambda: bool(check_engine(self.config.spark_remote))
        if name == "backend":
            return self._backend_ready
        if name == "web":
            url = f"http://127.0.0.1:{self.config.web_port}/_stcore/health"
            return lambda: _http_text(url) == "ok"
        return lambda: True

    def _serving_probe(self, name: str) -> Probe | None:
        """When what needs `name` may start, if sooner than its readiness probe; None for a
        type whose dependents wait for that.

        Spark: its gRPC port opens once its Spark session is up, and each replica's warm-up
        is a real first query it retries until answered. Making the backend wait for `up`'s
        own query too put a fresh engine's first-query cost (seconds on 2 cores: bench/README.md,
        "A faster start") on the start's critical path, and then the replicas paid most of it
        again in their sessions."""
        if self.serving is not None:
            return self.serving.get(name)
        if name == "spark":  # ours, on loopback whatever else it listens on
            port = self.config.spark_port
            return lambda: port_open("127.0.0.1", port)
        return None

    def _backend_ready(self) -> bool:
        info = data_dir() / "control.json"
        if not info.exists():
            return False
        url = json.loads(info.read_text())["url"]
        return _http_text(f"{url}/health", timeout=2.0) is not None

    def skipped(self, name: str) -> str | None:
        if name == "broker" and self.config.external_kafka:
            return f"external cluster {resolve_settings().describe()}"
        if name == "spark" and self.config.external_spark:
            return f"SPARK_REMOTE={self.config.spark_remote}"
        return None

    # ---- lifecycle -------------------------------------------------------------------

    def say(self, text: str) -> None:
        with self._say_lock:  # one write per line: relay threads print too
            self.out.write(f"{text}\n")
            self.out.flush()

    def _step(self, name: str, event: str, text: str) -> None:
        """Record a step of the timeline (main thread only) and show it."""
        self.timeline.append(Step(time.monotonic(), name, event))
        self.say(f"{name:>8} | {text}")

    def start(self, kind: ProcessType, again: bool = False) -> RunningProcess:
        """`again`: started after a crash, which the process is told (ENV_RESTARTED_BY_UP)."""
        # children run from the repository; they must still share this launcher's data dir
        env = dict(os.environ, PYTHONUNBUFFERED="1", GROUPSCOPE_DATA=str(data_dir().resolve()))
        if again:
            env[ENV_RESTARTED_BY_UP] = "1"
        env["PATH"] = f"{os.path.dirname(sys.executable)}{os.pathsep}{env.get('PATH', '')}"
        # A Ctrl-C raised between the fork and `running.append` would leave a child that
        # stop_all never sees: the handler only notes it here, and it is raised once the
        # child is on the list.
        self._spawning = True
        try:
            popen = spawn(
                ["/bin/sh", "-c", f"exec {kind.command}"],
                cwd=REPO_ROOT,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            proc = RunningProcess(kind, popen)
            self.running.append(proc)
        finally:
            self._spawning = False
        threading.Thread(target=self._relay, args=(proc,), daemon=True).start()
        if self._interrupted:
            raise KeyboardInterrupt
        return proc

    def _relay(self, proc: RunningProcess) -> None:
        assert proc.popen.stdout is not None
        for raw in proc.popen.stdout:
            line = raw.decode(errors="replace").rstrip()
            self.say(f"{proc.kind.name:>8} | {line}")

    def _await_ready(self, proc: RunningProcess, probes: Sequence[tuple[str, Probe]],
                     results: queue.Queue[Report]) -> None:
        """A waiter thread: each (event, probe) in turn until it passes, reporting (proc,
        event, None) for each, or (proc, event, error) and no more. All of them share the
        type's READY_TIMEOUT."""
        name = proc.kind.name
        timeout = READY_TIMEOUT.get(name, 60.0)
        deadline = time.monotonic() + timeout
        exited = abort_if_exited(proc.popen, name, lambda: " while starting")

        def abort() -> None:
            if self._cancel.is_set():
                raise _Cancelled
            exited()

        for event, probe in probes:
            try:
                wait_until(probe, max(0.0, deadline - time.monotonic()), interval=0.5,
                           what=name, abort=abort)
            except _Cancelled:
                return
            except TimeoutError:
                results.put((proc, event, f"{name} not ready within {timeout:.0f}s"))
                return
            except Exception as exc:  # the child exited (abort_if_exited's one line)
                results.put((proc, event, str(exc)))
                return
            results.put((proc, event, None))

    def start_all(self) -> None:
        """Start every Procfile type as soon as all it needs is ready; return when all are.

        Raises RuntimeError (one line) when a child exits or misses its timeout,
        ProcfileError for NEEDS that do not fit the Procfile; the caller stops what runs
        (stop_all)."""
        kinds = {kind.name: kind for kind in read_procfile(self.procfile)}
        names = list(kinds)
        levels(names, self.needs)  # an unknown need or a cycle fails before anything starts
        sorter = TopologicalSorter({n: tuple(self.needs.get(n, ())) for n in names})
        sorter.prepare()
        for name in names:
            if wanted := tuple(self.needs.get(name, ())):
                said = [f"{w} accepts connections" if self._serving_probe(w) else f"{w} is ready"
                        for w in wanted]
                self.say(f"{name:>8} | starts once {' and '.join(said)}")
        results: queue.Queue[Report] = queue.Queue()
        not_ready: set[str] = set()  # started, its readiness probe not passed yet
        serving: set[str] = set()  # what needs these has been started already
        while True:
            # everything whose needs are met starts now, together (skipped types count as
            # ready at once, which may free more)
            while startable := sorted(sorter.get_ready(), key=names.index):
                for name in startable:
                    reason = self.skipped(name)
                    if reason:
                        self._step(name, "skipped", f"skipped: {reason}")
                        sorter.done(name)
                        continue
                    kind = kinds[name]
                    early = self._serving_probe(name)
                    probes = [*([("serving", early)] if early else []),
                              ("ready", self._probe(name))]
                    self._step(name, "starting", f"starting: {kind.command}")
                    proc = self.start(kind)
                    not_ready.add(name)
                    threading.Thread(target=self._await_ready, args=(proc, probes, results),
                                     daemon=True, name=f"ready-{name}").start()
            if not sorter.is_active() and not not_ready:
                return
            proc, event, error = self._next_report(results)
            if error is not None:
                raise RuntimeError(error)
            name = proc.kind.name
            took = time.monotonic() - proc.started
            if event == "serving":
                self._step(name, "serving", f"accepting connections after {took:.1f}s: what "
                                            f"needs it starts now")
                serving.add(name)
                sorter.done(name)
                continue
            self._step(name, "ready", f"ready in {took:.1f}s")
            not_ready.discard(name)
            if name not in serving:
                sorter.done(name)

    def _next_report(self, results: queue.Queue[Report]) -> Report:
        """The next waiter's report, in short waits so a Ctrl-C is handled at once. A child
        that has exited meanwhile is a report too, whichever it is: its own waiter may be
        stuck inside a probe that does not return (something else answering on its port)."""
        while True:
            gone = self._first_exited()
            if gone is not None:
                return gone, "exited", (f"{gone.kind.name} exited with code "
                                        f"{gone.popen.returncode} while starting")
            try:
                return results.get(timeout=0.5)
            except queue.Empty:
                continue

    def _interrupt_start_up(self) -> None:
        """Ctrl-C while probes run (a fresh engine's first query takes seconds): stop
        waiting at once."""
        if self._starting:
            self._interrupted = True
            if not self._spawning:
                raise KeyboardInterrupt

    def stop_all(self, budget: float = STOP_BUDGET_S) -> None:
        """Waves within `budget`, in the reverse of NEEDS (stop_waves): every process before
        the ones it needs; the last wave (the broker and Spark) keeps LAST_WAVE_S for itself,
        each earlier one ends LAST_WAVE_S before the next. A process group still there at its
        wave's end is SIGKILLed."""
        self._cancel.set()  # waiter threads stop probing
        deadline = time.monotonic() + budget
        names = [p.kind.name for p in self.running]
        by_name = {p.kind.name: p for p in self.running}
        needs = {n: [m for m in self.needs.get(n, ()) if m in by_name] for n in names}
        waves = [[by_name[n] for n in wave] for wave in stop_waves(names, needs)]
        for index, wave in enumerate(waves):
            ends = deadline - LAST_WAVE_S * (len(waves) - 1 - index)
            for proc in wave:
                if proc.popen.poll() is None:
                    self._step(proc.kind.name, "stopping", "stopping")
                    send(proc.popen, signal.SIGTERM, group=True)
            for proc in wave:
                try:
                    proc.popen.wait(max(0.0, ends - time.monotonic()))
                except subprocess.TimeoutExpired:
                    self.say(f"{proc.kind.name:>8} | still running; killing it")
                # whatever is left in the group (grandchildren included) goes now
                reap(proc.popen, 0.0, group=True)
        self.running.clear()

    def _restart(self, gone: RunningProcess) -> bool:
        """Start `gone` again if it may be (module docstring) and wait until it is ready;
        False when it may not, or does not come back: the caller stops the stack."""
        name, code = gone.kind.name, gone.popen.returncode
        if code is None or code >= 0 or name not in self.restartable:
            return False
        now = time.monotonic()
        recent = [t for t in self._restarts.get(name, []) if now - t < RESTART_WINDOW_S]
        if len(recent) >= RESTARTS_PER_WINDOW:
            self.say(f"{name:>8} | crashed {len(recent) + 1} times in "
                     f"{RESTART_WINDOW_S / 60:.0f} min; not starting it again")
            return False
        self._restarts[name] = [*recent, now]
        reap(gone.popen, 0.0, group=True)  # whatever it left in its group goes too
        self.running.remove(gone)
        self.say(f"{name:>8} | killed by {_signal_name(-code)}; starting it again "
                 f"({len(recent) + 1} of {RESTARTS_PER_WINDOW} in "
                 f"{RESTART_WINDOW_S / 60:.0f} min)")
        self._step(name, "starting", f"starting: {gone.kind.command}")
        proc = self.start(gone.kind, again=True)
        self._starting = True  # a Ctrl-C now interrupts the wait
        try:
            wait_until(self._probe(name), READY_TIMEOUT.get(name, 60.0), interval=0.5,
                       what=name, abort=abort_if_exited(proc.popen, name,
                                                        lambda: " while restarting"))
        except (TimeoutError, RuntimeError) as exc:
            self.say(f"{name:>8} | {exc}")
            return False
        finally:
            self._starting = False
        self._step(name, "ready", f"ready again in {time.monotonic() - proc.started:.1f}s")
        return True

    def _first_exited(self) -> RunningProcess | None:
        return next((p for p in self.running if p.popen.poll() is not None), None)

    def run(self) -> int:
        started = time.monotonic()
        with self._signals as signals:
            try:
                self.start_all()
                self._starting = False
                self.say(f"\ngroupscope is up in {time.monotonic() - started:.0f}s: open "
                         f"{self.config.dashboard_url}  (Ctrl-C stops everything)\n")
                while True:
                    if signals.wait(alive=lambda: self._first_exited() is None,
                                    interval=0.5):
                        return 0
                    gone = self._first_exited()
                    assert gone is not None
                    if not self._restart(gone):
                        self.say(f"{gone.kind.name} exited with code "
                                 f"{gone.popen.returncode}; stopping the stack")
                        return 1
            except KeyboardInterrupt:
                return 130
            except (RuntimeError, ProcfileError) as exc:
                self.say(f"groupscope up: {exc}")
                return 1
            finally:
                self._starting = False
                self.stop_all()
                self.say("groupscope stopped")


def _http_text(url: str, timeout: float = 1.0) -> str | None:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.read().decode().strip()
    except Exception:
        return None


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
