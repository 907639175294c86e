"""The embedded Spark Connect server, started from the jars inside the pyspark package."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from backend import classdata as base
from backend.classdata import jvm_options
from backend.engine.home import EngineStartError, spark_home
from backend.engine.standalone import StandaloneCluster
from backend.errors import one_line
from backend.netutil import ensure_port_free, free_port, port_open
from backend.proc import STOP_BUDGET_S, ServiceProcess, StopSignals
from backend.spark.executors import ExecutorInfo, executors_at
from backend.spark.session import DEFAULT_PORT, check_engine

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
# how long a start may take: a two-worker cluster beside a three-node broker on a loaded 2-core
# laptop took 105 s to accept connections, and its executors were not all registered at 120 s
START_TIMEOUT_S = 240.0
# The engine's heap (-Xms = -Xmx, pre-touched: see command()), so its RSS is this plus what a
# JVM running Spark keeps outside the heap (classes, compiled code, GC tables, thread stacks,
# gRPC's buffers). This size keeps the engine under the demo's 1 GB target with three
# replicas, where 1g made it far larger, and its live heap stayed well below it under the
# tests' heavier load (four sessions summarising 20 000-row batches at once): see
# bench/README.md, "The Spark engine's memory". Spark refuses a heap under 450 MiB (1.5 x its
# 300 MiB reserve). `groupscope up` and `groupscope spark` take GROUPSCOPE_SPARK_MEMORY.
DEFAULT_DRIVER_MEMORY = "480m"
# the class-data archive the engine's JVM maps (backend/classdata.py)
ARCHIVE_NAME = "spark"
# The client compiler alone. With C2 as well, a fresh engine spent most of its CPU compiling:
# every query runs a long tail of Spark's planning code that turns hot a little later, and a
# backlog of a million messages ended before C2's faster code paid for its compiling. The
# price: C1's code is slower per call, so once C2 would have settled (minutes into a demo at
# rest) each caught-up query costs more (bench/README.md, "The engine's JIT: the client
# compiler alone").
#
# With it the JVM takes itself for a small client and shrinks its code cache from
# 240 MiB to 48 MiB. Spark compiles a class for every query plan, and a session engine that ran
# the whole chaos suite filled those 48 MiB and died: "Out of space in CodeCache for adapters"
# is a VirtualMachineError, not a warning. The space is reserved, not committed: the engine's
# RSS grows only by the code it really keeps.
DRIVER_JIT = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=128m"


def class_archive_path() -> Path | None:
    """Where the class-data archive for this Java and this environment's pyspark lives (None:
    no java or no pyspark). Decided here, beside the jars it is only valid for, and
    re-exported by classdata.py, which starts engines of its own to build it: an engine
    needs nothing of that module."""
    try:
        return base.archive_path(ARCHIVE_NAME, metadata.version("pyspark"),
                                 spark_home() / "jars")
    except (metadata.PackageNotFoundError, RuntimeError):
        return None


def cached_class_archive() -> Path | None:
    """The archive an engine starts on, if it has been built."""
    return base.cached(class_archive_path())


@dataclass
class SparkConnectServer:
    """Few shuffle partitions, tuned for small per-batch aggregations; `local[*]`, or with
    `workers` the driver of a standalone cluster it starts first (backend/engine/
    standalone.py), so every query runs on executors in the workers' JVMs. Either way the
    driver's web UI listens on loopback, for its REST API: backend/spark/executors.py lists
    the executors from it."""

    work_dir: Path
    port: int = DEFAULT_PORT
    host: str = "127.0.0.1"
    driver_memory: str = DEFAULT_DRIVER_MEMORY
    shuffle_partitions: int = 2
    token: str | None = field(default=None, repr=False)  # required of every client when set
    workers: int = 0  # 0: local[*]; N: a standalone master and N workers
    ui_port: int | None = None  # the driver's web UI; None: a free port
    # the class-data archive its JVM maps (built by backend/engine/classdata.py): by default
    # the one built for this Java and pyspark, if any; `record_classes` writes one at exit
    class_archive: Path | None = field(default_factory=cached_class_archive)
    record_classes: Path | None = None
    _service: ServiceProcess = field(init=False, repr=False)
    _cluster: StandaloneCluster | None = field(init=False, repr=False, default=None)
    ready_s: float | None = field(init=False, default=None)  # how long start() took

    def __post_init__(self) -> None:
        self._service = ServiceProcess("Spark Connect server", (self.log_file,),
                                       EngineStartError)
        self.ui_port = self.ui_port or free_port()
        if self.workers:
            self._cluster = StandaloneCluster(Path(self.work_dir), self.workers)

    @property
    def remote(self) -> str:
        """Where local clients reach it (loopback when it listens on every interface)."""
        host = "127.0.0.1" if self.host == "0.0.0.0" else self.host
        return f"sc://{host}:{self.port}"

    @property
    def log_file(self) -> Path:
        return Path(self.work_dir) / "spark.log"

    @property
    def ui_url(self) -> str:
        """The driver's web UI (and its REST API), always on loopback."""
        return f"http://127.0.0.1:{self.ui_port}"

    @property
    def master(self) -> str:
        return self._cluster.master_url if self._cluster is not None else "local[*]"

    @property
    def cluster(self) -> StandaloneCluster | None:
        """The standalone master and workers behind the driver, if it has any."""
        return self._cluster

    def command(self) -> list[str]:
        confs = {
            # the UI serves the REST API that lists executors; SPARK_LOCAL_IP (start()) binds
            # it to loopback whatever address gRPC listens on, and nobody kills jobs from it
            "spark.ui.enabled": "true",
            "spark.ui.port": str(self.ui_port),
            "spark.ui.killEnabled": "false",
            # a taken port is an error, not a quiet move to the next one nobody knows of
            "spark.port.maxRetries": "0",
            "spark.sql.shuffle.partitions": str(self.shuffle_partitions),
            "spark.connect.grpc.binding.port": str(self.port),
            "spark.connect.grpc.binding.address": self.host,
            # the driver's own RPC stays on loopback whatever address gRPC listens on
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.sql.execution.arrow.pyspark.enabled": "true",
            "spark.local.dir": str(Path(self.work_dir) / "tmp"),
            "spark.sql.warehouse.dir": str(Path(self.work_dir) / "warehouse"),
            # the whole heap up front, touched once: RSS is flat from the start instead of
            # creeping toward -Xmx over the first hour (what a soak would call a leak)
            "spark.driver.extraJavaOptions": " ".join([
                f"-Dderby.system.home={self.work_dir}",
                # lz4-java's native library, unpacked there and left behind by a killed JVM
                f"-Djava.io.tmpdir={Path(self.work_dir) / 'tmp'}", f"-Xms{self.driver_memory}",
                "-XX:+AlwaysPreTouch", DRIVER_JIT,
                *jvm_options(self.class_archive, self.record_classes)]),
            # every batch is a new local relation, so a cached plan is never reused, yet the
            # cache (16 plans a session) holds each one's rows: with four replicas' sessions
            # of 20 000-row batches it alone filled a 512m heap (OutOfMemoryError)
            "spark.connect.session.planCache.enabled": "false",
            # AQE runs each query's result stage on a pool that starts a new thread for every
            # query until it holds 1024 (idle ones end after 60 s): at the demo's query rate
            # that piled up idle threads (see bench/README.md, "The Spark engine's memory");
            # 64 still lets every replica (MAX_REPLICAS) have a query running
            "spark.sql.resultQueryStage.maxThreadThreshold": "64",
            # a replica that was SIGKILLed never closes its session; free it after 3 minutes
            # instead of Spark's default hour
            "spark.connect.session.manager.defaultSessionTimeout": "3min",
        }
        if self._cluster is not None:
            confs.update(self._cluster.driver_confs())
        cmd = [
            str(spark_home() / "bin" / "spark-submit"),
            "--class", SERVER_CLASS,
            "--master", self.master,
            "--name", "groupscope-engine",
            "--driver-memory", self.driver_memory,
        ]
        for key, value in confs.items():
            cmd += ["--conf", f"{key}={value}"]
        return cmd

    def start(self, timeout: float = START_TIMEOUT_S, warm_up: bool = True,
              query: bool = True) -> SparkConnectServer:
        """With workers: the master and workers first, then the driver on them; whatever
        fails, nothing started is left running. Ports are checked before anything starts."""
        t0 = time.monotonic()
        try:
            self.launch(timeout)
            self.wait_ready(max(1.0, timeout - (time.monotonic() - t0)), warm_up, query)
        except BaseException:
            self.stop(STOP_BUDGET_S)
            raise
        self.ready_s = time.monotonic() - t0
        return self

    def launch(self, timeout: float = START_TIMEOUT_S) -> None:
        """Start's first half: check the ports and spawn (a cluster's master and workers
        first), without waiting for the driver to answer; whoever needs it waits (`make
        test`'s runner launches one for every lane, each lane waits for it). Call from a
        thread that outlives the engine: a child of backend.proc dies with its thread."""
        ensure_port_free(self.host, self.port, "Spark Connect server")
        ensure_port_free("127.0.0.1", self.ui_port or 0, "Spark driver's web UI")
        (Path(self.work_dir) / "tmp").mkdir(parents=True, exist_ok=True)
        env = dict(os.environ, SPARK_HOME=str(spark_home()), SPARK_LOCAL_IP="127.0.0.1")
        env.pop("SPARK_REMOTE", None)  # the server itself must not try to be a client
        env.pop("SPARK_CONNECT_AUTHENTICATE_TOKEN", None)
        if self.token:  # read by the server; an environment variable, not a visible argument
            env["SPARK_CONNECT_AUTHENTICATE_TOKEN"] = self.token

        def spawn_driver() -> None:
            self._service.spawn(self.command(), self.log_file, cwd=self.work_dir, env=env)

        if self._cluster is not None:
            self._cluster.start(timeout, beside=spawn_driver)
        else:
            spawn_driver()

    @property
    def process(self) -> subprocess.Popen | None:
        return self._service.popen

    def wait_ready(self, timeout: float, warm_up: bool = True, query: bool = True) -> None:
        """Ready means a real query answers; warming up moves a fresh engine's first-query cost
        (seconds: see bench/README.md, "A faster start: Spark's class-data archive, Spark
        serving, the first replica alone") here, before any replica joins a group. Without
        `query`, ready means gRPC listens (the server opens it once its Spark session is
        up): see run_foreground. On a cluster, also every worker's executor registered with
        the driver, and a master or worker that dies meanwhile ends the wait at once."""
        def answers() -> bool:
            return bool(check_engine(self.remote, warm_up=warm_up, timeout=10.0,
                                     token=self.token))

        def listens() -> bool:
            return port_open("127.0.0.1" if self.host == "0.0.0.0" else self.host, self.port)

        probe = answers if query else listens
        cluster = self._cluster
        if cluster is None:
            self._service.wait_ready(probe, timeout, f"port {self.port}", interval=0.5)
            return

        def on_cluster() -> bool:
            return probe() and len(self.executors(alive_only=True)) >= cluster.workers

        self._service.wait_ready(on_cluster, timeout, f"port {self.port} with "
                                 f"{cluster.workers} executor(s)", interval=0.5,
                                 also=cluster.check)

    def executors(self, alive_only: bool = False) -> list[ExecutorInfo]:
        """This engine's executors through Spark's REST API, the driver excluded."""
        return [e for e in executors_at(self.ui_url)
                if not e.is_driver and (e.active or not alive_only)]

    def stop(self, timeout: float = 30.0) -> int | None:
        """The driver first (its executors end with it), then the workers and the master,
        each within what is left of `timeout`."""
        deadline = time.monotonic() + timeout
        cluster_share = 0.0 if self._cluster is None else min(3.0, timeout / 3)
        code = self._service.stop(max(0.5, timeout - cluster_share))
        if self._cluster is not None:
            self._cluster.stop(max(1.0, deadline - time.monotonic()))
        return code

    def running(self) -> bool:
        """The driver runs, and on a cluster so does the master (workers may come and go)."""
        return self._service.running() and (self._cluster is None
                                            or self._cluster.master_running())

    def run_foreground(self) -> int:
        """`groupscope spark`, under `up` or honcho: waits only until gRPC listens (and, on a
        cluster, every executor registered). The real query and the warm-up are the
        launcher's readiness probe (or the first client's); made here too they would load
        the Connect client into this process, which then only waits for a signal (memory for
        nothing: see bench/README.md, "The Spark engine's memory"), and run the warm-up twice
        at once beside `up`'s.

        A stop signal during start-up ends it cleanly; a start-up that fails is one line
        (exit 1). Once up, a worker that dies is reported and the rest carries on, as a
        cluster does; the driver or the master dying ends the command (exit 1)."""
        starting = True

        def interrupt() -> None:
            if starting:  # out of a start-up that may take half a minute; start() cleans up
                raise KeyboardInterrupt

        with StopSignals(on_stop=interrupt) as signals:
            try:
                self.start(query=False)
            except KeyboardInterrupt:
                return 0
            except EngineStartError as exc:
                sys.stderr.write(f"groupscope spark: {one_line(exc)}\n")
                return 1
            starting = False
            sys.stderr.write(self.describe() + "\n")

            def alive() -> bool:
                if self._cluster is not None:
                    for worker, code in self._cluster.newly_exited_workers():
                        sys.stderr.write(f"Spark worker {worker} exited with code {code}; "
                                         f"Spark carries on with the other executors\n")
                return self.running()

            died = not signals.wait(alive=alive)
            self.stop(STOP_BUDGET_S)
        return 1 if died else 0

    def describe(self) -> str:
        """One line on what runs where and how long it took to start, for the log of
        `groupscope spark`."""
        where = f"Spark Connect listening at {self.remote}"
        took = f"ready in {self.ready_s or 0:.1f} s"
        if self._cluster is not None:
            where += (f", the driver of {self._cluster.master_url} with "
                      f"{self._cluster.workers} worker(s), {self._cluster.executor_shape}")
            took += "".join(f", {what} {s:.1f} s" for what, s in self._cluster.timings.items())
        return f"{where}; UI {self.ui_url}; {took} (log {self.log_file})"

    def __enter__(self) -> SparkConnectServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
