"""A Spark standalone cluster on this machine: one master and N workers from pyspark's jars.

What `groupscope spark --workers N` runs behind the Spark Connect server, so that every query
a replica sends runs in executor JVMs the workers launch, not in the driver: the same
arrangement as a real cluster, on loopback. The master and each worker are children started
through `backend/proc.py` (they die with this process); each worker starts its executor as
its own child, which Spark ends when the worker or the driver goes (its WorkerWatcher and
driver connection), and `stop()` makes sure of.

Every port is on 127.0.0.1: the master's RPC port and web UI on free ports chosen here, the
workers' ports and UIs on ports the OS picks. Spark's habit of trying the next port when one
is taken is off (`spark.port.maxRetries=0`): a master that quietly moved to another port
would leave its workers knocking at the wrong one.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from backend.engine.home import EngineStartError, spark_home
from backend.netutil import ensure_port_free, free_port, wait_until
from backend.proc import ServiceProcess, reap, send

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
# One executor per worker, one core each: on the 2-core machine the demo targets, two workers
# give the cluster two task slots -- the machine's cores -- and a batch's tasks land on
# different executors. Executor heap: Spark refuses one under 450 MiB (1.5 x its 300 MiB
# reserve), as it does the driver's; 480m is the driver's size too. Not pre-touched: an
# executor's RSS stays near what it uses (bench/README.md, "Spark on a cluster"), and the
# worker offers exactly this much memory, so it launches exactly one executor.
EXECUTOR_MEMORY = "480m"
EXECUTOR_CORES = 1
# The master and the workers only keep a registry and launch processes: a small heap, the
# serial collector and the C1 compiler alone shrink each JVM's RSS (bench/README.md, "Spark on
# a cluster") and start no GC or compiler threads to compete for two cores.
DAEMON_MEMORY = "96m"
DAEMON_JAVA_OPTS = ("-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:CICompilerCount=1 "
                    "-Dspark.port.maxRetries=0")
# What a worker logs each time its registration cannot reach the master; it would retry for
# minutes, so the first one ends the start-up instead.
UNREACHABLE = "Failed to connect to master"
STATUS_TIMEOUT_S = 2.0


@dataclass
class StandaloneCluster:
    """A master and `workers` workers; `start()` returns once the master lists every one of
    them ALIVE. Ports left as None are chosen free at construction."""

    work_dir: Path
    workers: int
    master_port: int | None = None
    master_ui_port: int | None = None
    executor_memory: str = EXECUTOR_MEMORY
    _master: ServiceProcess = field(init=False, repr=False)
    _workers: list[ServiceProcess] = field(init=False, repr=False)
    _reported: set[int] = field(init=False, repr=False, default_factory=set)
    # where each worker's log stood when it was spawned: logs are appended to across runs,
    # and an earlier run's complaints are not this one's
    _log_starts: dict[int, int] = field(init=False, repr=False, default_factory=dict)
    # seconds from start() until the master was ALIVE and every worker registered
    timings: dict[str, float] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        if self.workers < 1:
            raise ValueError(f"a standalone cluster needs at least one worker, not {self.workers}")
        self.work_dir = Path(self.work_dir)
        self.master_port = self.master_port or free_port()
        self.master_ui_port = self.master_ui_port or free_port()
        self._master = ServiceProcess("Spark master", (self.log_file("master"),),
                                      EngineStartError)
        self._workers = [ServiceProcess(f"Spark worker {i}", (self.log_file(f"worker-{i}"),),
                                        EngineStartError) for i in range(1, self.workers + 1)]

    # ---- where things are --------------------------------------------------------------

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.master_port}"

    @property
    def master_ui(self) -> str:
        return f"http://127.0.0.1:{self.master_ui_port}"

    @property
    def executor_shape(self) -> str:
        return f"one executor each of {EXECUTOR_CORES} core and {self.executor_memory}"

    def log_file(self, name: str) -> Path:
        return self.work_dir / f"{name}.log"

    def driver_confs(self) -> dict[str, str]:
        """What the driver (the Spark Connect server) needs to run on this cluster."""
        return {
            "spark.executor.memory": self.executor_memory,
            "spark.executor.cores": str(EXECUTOR_CORES),
            "spark.cores.max": str(self.workers * EXECUTOR_CORES),
            # the driver finishes starting only once every executor has registered (or 30 s
            # have passed), so its first query already spreads over all of them
            "spark.scheduler.minRegisteredResourcesRatio": "1.0",
            # an executor logs two INFO lines a task (megabytes an hour at a demo's pace) into
            # its worker's directory: rolled at 16 MiB, two old files kept
            "spark.executor.logs.rolling.strategy": "size",
            "spark.executor.logs.rolling.maxSize": str(16 * 1024 * 1024),
            "spark.executor.logs.rolling.maxRetainedFiles": "2",
        }

    # ---- commands ------------------------------------------------------------------------

    def _env(self) -> dict[str, str]:
        env = dict(os.environ, SPARK_HOME=str(spark_home()), SPARK_LOCAL_IP="127.0.0.1",
                   SPARK_DAEMON_MEMORY=DAEMON_MEMORY, SPARK_DAEMON_JAVA_OPTS=DAEMON_JAVA_OPTS,
                   # executors' scratch space (shuffle, spills): in the data directory
                   SPARK_LOCAL_DIRS=str(self.work_dir / "tmp"))
        # neither a client setting nor a room's token belongs to the cluster's processes
        for key in ("SPARK_REMOTE", "SPARK_CONNECT_AUTHENTICATE_TOKEN"):
            env.pop(key, None)
        return env

    def master_command(self) -> list[str]:
        return [str(spark_home() / "bin" / "spark-class"), MASTER_CLASS,
                "--host", "127.0.0.1", "--port", str(self.master_port),
                "--webui-port", str(self.master_ui_port)]

    def worker_command(self, index: int, master_url: str) -> list[str]:
        return [str(spark_home() / "bin" / "spark-class"), WORKER_CLASS,
                "--host", "127.0.0.1", "--port", "0", "--webui-port", "0",
                "--cores", str(EXECUTOR_CORES), "--memory", self.executor_memory,
                "--work-dir", str(self.work_dir / f"worker-{index}"), master_url]

    # ---- start ---------------------------------------------------------------------------

    def start(self, timeout: float = 90.0,
              beside: Callable[[], object] | None = None) -> StandaloneCluster:
        """The master, then every worker at once and `beside` with them (the driver, which
        needs only the master: its JVM starts while the workers register); returns once
        the master lists every worker ALIVE. On any failure everything started here is
        stopped and the error is one line naming the process and its log."""
        ensure_port_free("127.0.0.1", self.master_port or 0, "Spark master")
        ensure_port_free("127.0.0.1", self.master_ui_port or 0, "Spark master's web UI")
        self.work_dir.mkdir(parents=True, exist_ok=True)
        t0 = time.monotonic()
        deadline = t0 + timeout
        try:
            self._master.spawn(self.master_command(), self.log_file("master"),
                               cwd=self.work_dir, env=self._env())
            self._wait(lambda: self.status().get("status") == "ALIVE", deadline,
                       f"the Spark master on port {self.master_port}")
            self.timings["master"] = time.monotonic() - t0
            for i in range(1, self.workers + 1):
                self.start_worker(i, self.master_url)
            if beside is not None:
                beside()
            self._wait(lambda: self.alive_workers() >= self.workers, deadline,
                       f"{self.workers} Spark worker(s) to register with {self.master_url}")
            self.timings["workers"] = time.monotonic() - t0
        except BaseException:
            self.stop()
            raise
        return self

    def start_worker(self, index: int, master_url: str) -> None:
        """Spawn worker `index` (1-based) pointed at `master_url`; not waited for."""
        (self.work_dir / f"worker-{index}").mkdir(parents=True, exist_ok=True)
        log = self.log_file(f"worker-{index}")
        self._log_starts[index] = log.stat().st_size if log.exists() else 0
        self._workers[index - 1].spawn(self.worker_command(index, master_url),
                                       self.log_file(f"worker-{index}"), cwd=self.work_dir,
                                       env=self._env())

    def _wait(self, probe: Any, deadline: float, what: str) -> None:
        try:
            wait_until(probe, max(0.0, deadline - time.monotonic()), 0.2, what=what,
                       abort=self.check)
        except TimeoutError:
            raise EngineStartError(f"timed out waiting for {what} (logs in {self.work_dir})"
                                   ) from None

    def check(self) -> None:
        """Raise EngineStartError (one line) if the master or a started worker has exited
        or a worker cannot reach the master: the abort of every wait on this cluster."""
        master = self._master.popen
        if master is not None and master.poll() is not None:
            raise EngineStartError(f"the Spark master exited with code {master.returncode} "
                                   f"(log {self.log_file('master')})")
        for i, worker in enumerate(self._workers, start=1):
            if worker.popen is None:
                continue
            if worker.popen.poll() is not None:
                raise EngineStartError(f"Spark worker {i} exited with code "
                                       f"{worker.popen.returncode} "
                                       f"(log {self.log_file(f'worker-{i}')})")
            reason = unreachable_reason(self.log_file(f"worker-{i}"), self._log_starts.get(i, 0))
            if reason is not None:
                raise EngineStartError(f"Spark worker {i} cannot reach the master ({reason}); "
                                       f"its log: {self.log_file(f'worker-{i}')}")

    # ---- state ---------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        """The master's own JSON status (`/json/` on its web UI): its state and workers."""
        with urllib.request.urlopen(f"{self.master_ui}/json/", timeout=STATUS_TIMEOUT_S) as r:
            return dict(json.loads(r.read()))

    def alive_workers(self) -> int:
        return sum(w.get("state") == "ALIVE" for w in self.status().get("workers", ()))

    def master_running(self) -> bool:
        return self._master.running()

    def newly_exited_workers(self) -> list[tuple[int, int]]:
        """(worker, exit code) of workers that exited since the last call: a running cluster
        carries on without them (Spark moves their tasks), but someone should hear of it."""
        found = []
        for i, worker in enumerate(self._workers, start=1):
            if i in self._reported or worker.popen is None or worker.popen.poll() is None:
                continue
            self._reported.add(i)
            found.append((i, worker.popen.returncode))
        return found

    def processes(self) -> list[subprocess.Popen[Any]]:
        """The master's and the workers' processes still held (not their executors)."""
        held = [self._master.popen, *(w.popen for w in self._workers)]
        return [p for p in held if p is not None]

    # ---- stop ----------------------------------------------------------------------------

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM to the workers and the master together (a worker ends its executor
        first), SIGKILL to whatever is left at `timeout`, executors included."""
        import psutil

        procs = self.processes()
        executors: list[psutil.Process] = []
        for proc in procs:
            with contextlib.suppress(psutil.Error):
                executors += psutil.Process(proc.pid).children(recursive=True)
        self._master.popen = None
        for worker in self._workers:
            worker.popen = None
        deadline = time.monotonic() + timeout
        for proc in procs:
            send(proc, signal.SIGTERM)
        for proc in procs:
            reap(proc, deadline - time.monotonic())
        _gone, alive = psutil.wait_procs(executors, timeout=max(0.0, deadline - time.monotonic()))
        for proc in alive:
            with contextlib.suppress(psutil.Error):
                proc.kill()
        psutil.wait_procs(alive, timeout=2.0)


def unreachable_reason(log: Path, start: int = 0) -> str | None:
    """Why a worker's log, from byte `start` on, says it cannot reach its master
    ("Connection refused"), or None when it says no such thing."""
    try:
        with open(log, "rb") as f:
            f.seek(start)
            text = f.read().decode(errors="replace")
    except OSError:
        return None
    at = text.find(UNREACHABLE)
    if at < 0:
        return None
    causes = [line for line in text[at:].splitlines() if line.startswith("Caused by:")]
    if not causes:
        return "no connection"
    return causes[-1].rsplit(": ", 1)[-1].strip() or "no connection"
