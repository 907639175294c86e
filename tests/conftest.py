"""Shared fixtures: one real embedded broker and one real Spark Connect server per test run.

Both listen on free ports and are stopped at session end, even when tests fail. Under `make
test` the lanes share one Spark engine, which the runner starts and stops (tests/lanes.py):
an engine at rest keeps a tenth of a core busy, and its sessions are each client's own. Whatever
starts a JVM, a browser or the whole stack is a fixture here, so tests/markers.py can mark
the tests that need it (`broker`, `spark`, `browser`, `stack`) from their fixtures alone.
"""

from __future__ import annotations

import contextlib
import os
import signal
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import psutil
import pytest

from backend.broker.embedded import EmbeddedBroker
from backend.broker.nodes import EmbeddedCluster
from backend.engine.server import SparkConnectServer
from backend.kafka.settings import KafkaSettings
from backend.netutil import free_port, wait_until
from backend.spark.session import check_engine

pytest_plugins = ["tests.markers", "tests.timing", "tests.prompt_exit"]

ARTIFACTS = Path(os.environ.get("GROUPSCOPE_TEST_ARTIFACTS", "test-artifacts")).resolve()
STACK_ENV = "GROUPSCOPE_STACK_TEST"
SPARK_CLUSTER_ENV = "GROUPSCOPE_SPARK_CLUSTER_TEST"


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    node = EmbeddedBroker(tmp_path_factory.mktemp("broker"), port=free_port())
    node.start()
    _SESSION_SERVICES["broker"] = node
    try:
        yield node
    finally:
        _SESSION_SERVICES.pop("broker", None)
        node.stop()


@pytest.fixture(scope="session")
def kafka(broker: EmbeddedBroker) -> KafkaSettings:
    return broker.settings


@pytest.fixture(scope="session")
def kafka_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    """A three-node KRaft cluster (a controller quorum of three, topics with three copies)
    for the tests of brokers failing; started once, stopped after the last test that uses it
    (`pytest_runtest_teardown`) or at session end."""
    cluster = EmbeddedCluster(tmp_path_factory.mktemp("cluster3"), brokers=3, heap="384m")
    cluster.start()
    _CLUSTER_USERS.cluster = cluster
    try:
        yield cluster
    finally:
        cluster.stop()


class _ClusterUsers:
    """Where the session's three-node cluster is, and the last test that needs it."""

    cluster: EmbeddedCluster | None = None
    last: str | None = None


_CLUSTER_USERS = _ClusterUsers()


_DATA_DIR: list[Path] = []


def pytest_configure(config: pytest.Config) -> None:
    """A data directory of the run's own for whatever a test starts without naming one (an
    exporter keeps its memory there), never the checkout's `.groupscope`."""
    if not os.environ.get("GROUPSCOPE_DATA"):
        import tempfile

        _DATA_DIR.append(Path(tempfile.mkdtemp(prefix="groupscope-test-data-")))
        os.environ["GROUPSCOPE_DATA"] = str(_DATA_DIR[0])


def pytest_unconfigure(config: pytest.Config) -> None:
    import shutil

    for path in _DATA_DIR:
        shutil.rmtree(path, ignore_errors=True)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The modules that use the three-node cluster run one after another, where the first of
    them stood: its three JVMs idle at 5-10 % of a core each, so spread from a tenth of the run
    to nine tenths they cost minutes of a 2-core machine. Whole modules move, so a module's
    own fixtures still come up once."""
    users = {item.module for item in items if "kafka_cluster" in item.fixturenames}
    if not users:
        return
    first = next(i for i, item in enumerate(items) if item.module in users)
    moved = [item for item in items if item.module in users]
    items[first:] = moved + [item for item in items[first:] if item.module not in users]
    _CLUSTER_USERS.last = next(item.nodeid for item in reversed(items)
                               if "kafka_cluster" in item.fixturenames)


# the session's broker and Spark engine once started: what every later test relies on
_SESSION_SERVICES: dict[str, EmbeddedBroker | SparkConnectServer] = {}


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A session broker or engine that died (OOM-killed, crashed) ends the run here, with the
    reason, rather than letting every later test that needs it wait out its timeout."""
    for what, service in _SESSION_SERVICES.items():
        proc = service.process
        if proc is not None and proc.poll() is not None:
            pytest.exit(f"the session's {what} exited with code {proc.returncode} before "
                        f"{item.nodeid} (its log: {service.log_file})", returncode=1)
    for pid in _SHARED_ENGINE_PID:
        if _engine_gone(pid):
            pytest.exit(f"the lanes' Spark engine (pid {pid}) exited before {item.nodeid}",
                        returncode=1)


def pytest_runtest_teardown(item: pytest.Item) -> None:
    """After the last test that uses it, the three-node cluster stops (its fixture's own
    stop at session end then finds nothing running)."""
    if item.nodeid == _CLUSTER_USERS.last and _CLUSTER_USERS.cluster is not None:
        _CLUSTER_USERS.cluster.stop()
        _CLUSTER_USERS.cluster = None


BROKER_LOG_TAIL = 2 << 20  # bytes of the session broker's log kept for a failed test


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Any:
    """A failed test leaves why in the artifacts as it fails (failed-<test>-<when>.txt), and,
    when it used the session's broker, the tail of that broker's log: the broker outlives
    the test, but its data folder is deleted with pytest's temporary folders a few runs
    later, and a coordinator's or controller's side of a failure is only ever written
    there."""
    report = yield
    if report.failed:
        # why it failed, at once: a lane aborted at its deadline never prints its summary
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        (ARTIFACTS / f"failed-{item.name[:80]}-{report.when}.txt").write_text(
            f"{item.nodeid} ({report.when})\n{report.longreprtext}\n")
    node = getattr(item, "funcargs", {}).get("broker")
    if report.failed and isinstance(node, EmbeddedBroker) and node.log_file.exists():
        with node.log_file.open("rb") as log:
            log.seek(max(0, node.log_file.stat().st_size - BROKER_LOG_TAIL))
            tail = log.read()
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        (ARTIFACTS / f"broker-{item.name[:80]}-{report.when}.log").write_bytes(tail)
    return report


@pytest.fixture
def cluster3(kafka_cluster: EmbeddedCluster) -> EmbeddedCluster:
    """The session's three-node cluster with all three nodes running: a node an earlier test
    left down (it failed before restarting it) is started again first."""
    for node in kafka_cluster.infos():
        if not node.alive:
            kafka_cluster.start_node(node.id)
    return kafka_cluster


# the engine `make test`'s runner started for every lane: "<port> <UI port> <pid> <work dir>"
SHARED_SPARK_ENV = "GROUPSCOPE_TEST_SPARK"
SHARED_SPARK_WAIT_S = 240.0  # it starts beside the lanes' brokers, on a machine they load


def _shared_engine(described: str) -> SparkConnectServer:
    """The runner's engine, once it answers a query (the first lane to ask warms it up)."""
    port, ui_port, pid, work = described.split(" ", 3)
    server = SparkConnectServer(Path(work), port=int(port), ui_port=int(ui_port))
    _SHARED_ENGINE_PID.append(int(pid))

    def gone() -> None:
        if _engine_gone(int(pid)):
            raise RuntimeError(f"the lanes' Spark engine exited (its log: {server.log_file})")

    wait_until(lambda: check_engine(server.remote, warm_up=True, timeout=10.0),
               SHARED_SPARK_WAIT_S, interval=1.0, what="the lanes' Spark engine", abort=gone)
    return server


def engine_pid(server: SparkConnectServer) -> int:
    """The JVM of the session's engine: the test run's own, or the lanes' shared one."""
    if server.process is not None:
        return server.process.pid
    assert _SHARED_ENGINE_PID, "the session's engine has no process"
    return _SHARED_ENGINE_PID[0]


def _engine_gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


_SHARED_ENGINE_PID: list[int] = []


@pytest.fixture(scope="session")
def spark_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkConnectServer]:
    shared = os.environ.get(SHARED_SPARK_ENV)
    if shared:
        yield _shared_engine(shared)
        return
    server = SparkConnectServer(tmp_path_factory.mktemp("spark"), port=free_port())
    server.start()
    _SESSION_SERVICES["Spark engine"] = server
    try:
        yield server
    finally:
        _SESSION_SERVICES.pop("Spark engine", None)
        server.stop()


@pytest.fixture(scope="session")
def spark_remote(spark_engine: SparkConnectServer) -> str:
    return spark_engine.remote


@pytest.fixture(scope="module")
def reader(kafka: KafkaSettings) -> Iterator[Any]:
    """A Java Admin reader (backend.kafka.javaadmin) on the session's broker, one per module: a
    test's own view of the cluster, independent of what the code under test reads."""
    from backend.kafka.javaadmin.reader import KafkaReader

    r = KafkaReader(kafka, client_id="groupscope-tests")
    try:
        yield r
    finally:
        r.close()


@pytest.fixture
def unique() -> str:
    """A short unique suffix for topic and group names, so tests never share state."""
    return uuid.uuid4().hex[:8]


@pytest.fixture(scope="session")
def artifacts_dir() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS


@pytest.fixture
def broker_factory() -> Iterator[Callable[..., EmbeddedBroker]]:
    """Private brokers, unstarted, each on a free port, for a test that kills or restarts one
    (the session's broker must outlive it). Teardown stops any that still runs."""
    made: list[EmbeddedBroker] = []

    def make(data_dir: Path, **kw: Any) -> EmbeddedBroker:
        node = EmbeddedBroker(data_dir, port=free_port(), **kw)
        made.append(node)
        return node

    try:
        yield make
    finally:
        for node in made:
            node.stop()


@pytest.fixture
def spark_factory() -> Iterator[Callable[..., SparkConnectServer]]:
    """Private Spark Connect servers, unstarted, for a test that stops one or replaces it on
    the same port (pass `port`). Teardown stops any that still runs."""
    made: list[SparkConnectServer] = []

    def make(work_dir: Path, port: int | None = None, **kw: Any) -> SparkConnectServer:
        server = SparkConnectServer(work_dir, port=port or free_port(), **kw)
        made.append(server)
        return server

    try:
        yield make
    finally:
        for server in made:
            server.stop()


class SparkClusters:
    """What `spark_cluster_factory` hands a test: Spark standalone clusters, by API or by
    command, every process of them (executors included) tagged with `token` in its
    environment, so the test can prove none is left and teardown can end any that is."""

    def __init__(self, token: str) -> None:
        self.token = token
        self.servers: list[SparkConnectServer] = []
        self.commands: list[Any] = []

    def server(self, work_dir: Path, workers: int = 2, **kw: Any) -> SparkConnectServer:
        """A Connect server as the driver of `workers` workers, unstarted, on free ports."""
        server = SparkConnectServer(work_dir, port=kw.pop("port", None) or free_port(),
                                    workers=workers, **kw)
        self.servers.append(server)
        return server

    def command(self, *args: str, data_dir: Path, **env: str) -> Any:
        """`groupscope spark ARGS` in a session of its own (a Ctrl-C reaches its whole
        process group, as a terminal's does), output captured in text mode."""
        import subprocess
        import sys

        from backend.proc import spawn

        full_env = dict(os.environ, GROUPSCOPE_DATA=str(data_dir), **env)
        full_env.pop("SPARK_REMOTE", None)
        proc = spawn([sys.executable, "-m", "backend.cli", "spark", *args], env=full_env,
                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                     stdin=subprocess.DEVNULL, text=True, start_new_session=True)
        self.commands.append(proc)
        return proc

    def alive(self) -> list[Any]:
        """Processes of this test's clusters still running."""
        return processes_with(SPARK_CLUSTER_ENV, self.token)


@pytest.fixture
def spark_cluster_factory(monkeypatch: pytest.MonkeyPatch) -> Iterator[SparkClusters]:
    """Spark standalone clusters (a master, workers, their executors and the Connect server
    as driver) for a test of their own: started by API or as `groupscope spark --workers N`.
    Teardown stops every server and SIGKILLs whatever of them is still alive."""
    token = uuid.uuid4().hex
    monkeypatch.setenv(SPARK_CLUSTER_ENV, token)
    clusters = SparkClusters(token)
    try:
        yield clusters
    finally:
        for server in clusters.servers:
            server.stop(10.0)
        for proc in clusters.commands:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        for proc in clusters.alive():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(proc.pid, signal.SIGKILL)


@pytest.fixture(scope="session")
def chromium() -> Callable[..., AbstractContextManager[Any]]:
    """`chromium()` opens a headless Chromium page (tests/dashboard/browser.py). Asked for as
    a fixture rather than imported, so collection sees that the test drives a browser; of the
    session's scope (it holds nothing) so a module's fixture can share one page."""
    from tests.dashboard.browser import chromium_page

    return chromium_page


def stack_processes(token: str) -> list[Any]:
    """Live processes (not this one, not zombies) whose environment holds STACK_ENV=token:
    what a `stack` test started and has not ended yet."""
    return processes_with(STACK_ENV, token)


def processes_with(key: str, token: str) -> list[Any]:
    """Live processes (not this one, not zombies) whose environment holds key=token: every
    descendant of a tagged process inherits it, even one reparented after its parent died."""
    import psutil

    found = []
    for proc in psutil.process_iter():
        if proc.pid == os.getpid():
            continue
        try:
            if proc.environ().get(key) == token and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except psutil.Error:
            continue
    return found


@pytest.fixture
def stack(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """For a test that runs the whole stack in processes of its own (`groupscope up`, or the
    backend with the web server). Every process it starts inherits STACK_ENV=<token>; teardown
    SIGKILLs any still alive, so a failed stack test leaves no broker, Spark or replica
    running on a shared machine."""
    token = uuid.uuid4().hex
    monkeypatch.setenv(STACK_ENV, token)
    try:
        yield token
    finally:
        for proc in stack_processes(token):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(proc.pid, signal.SIGKILL)
