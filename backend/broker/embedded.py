"""The embedded Apache Kafka broker: KRaft, combined broker + controller, one JVM per node.

Group settings are lowered for demos so a crashed member is noticed in seconds. A node speaks
PLAINTEXT on loopback, plus a workshop room's listener when asked; listeners with SASL, TLS
and ACLs are only ever needed by tests, which extend this class (tests/kafka_security.py)
through `server_properties`, `settings`, `prepare` and `answers`.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from backend import classdata as base
from backend.classdata import jvm_options
from backend.kafka.jars import KAFKA_VERSION, kafka_classpath, kafka_lib_dir, major
from backend.kafka.settings import KafkaSettings
from backend.kafka.topics import min_isr_for, replication_for
from backend.netutil import ensure_port_free, free_port
from backend.proc import STOP_BUDGET_S, ServiceProcess, ServiceStartError, run

# Broker settings that make rebalances visible in a workshop instead of after 45 s.
DEMO_GROUP_SETTINGS: dict[str, str] = {
    "group.initial.rebalance.delay.ms": "0",
    # classic protocol: allow a 6 s session (clients default to 45 s)
    "group.min.session.timeout.ms": "1000",
    # KIP-848 consumer protocol: the broker owns session and heartbeat
    "group.consumer.min.session.timeout.ms": "1000",
    "group.consumer.session.timeout.ms": "6000",
    "group.consumer.min.heartbeat.interval.ms": "500",
    "group.consumer.heartbeat.interval.ms": "1000",
    # share groups (KIP-932) and streams groups (KIP-1071): the same 6 s session and 1 s
    # heartbeats (their defaults are 45 s and 5 s), streams without a first-join delay
    "group.share.min.session.timeout.ms": "1000",
    "group.share.session.timeout.ms": "6000",
    "group.share.min.heartbeat.interval.ms": "500",
    "group.share.heartbeat.interval.ms": "1000",
    # a share group's records are locked to the member that took them for 5 s (Kafka: 30 s,
    # at least 15 s), so a killed share replica's records come back to the others while the
    # audience still watches; a record given out 5 times without an ACCEPT is archived
    # (Kafka's default delivery limit, kept)
    "group.share.min.record.lock.duration.ms": "1000",
    "group.share.record.lock.duration.ms": "5000",
    "group.streams.initial.rebalance.delay.ms": "0",
    "group.streams.min.session.timeout.ms": "1000",
    "group.streams.session.timeout.ms": "6000",
    "group.streams.min.heartbeat.interval.ms": "500",
    "group.streams.heartbeat.interval.ms": "1000",
    # exactly-once: a crashed replica's open transaction is aborted (and its partitions
    # readable by the new owner) soon after its transaction.timeout.ms, not a minute later
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
}

# A cluster's nodes: a killed node is fenced by the controller (its leaderships moved, it
# leaves the ISRs) 3 s after its last heartbeat rather than Kafka's 9 s, as with groups above.
DEMO_CLUSTER_SETTINGS: dict[str, str] = {
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "500",
}

_NODE_SETTINGS: dict[str, str] = {
    "offsets.topic.num.partitions": "6",
    "transaction.state.log.num.partitions": "6",
    "num.partitions": "1",
    "auto.create.topics.enable": "false",
    "log.cleaner.backoff.ms": "2000",
    "log.segment.bytes": str(64 * 1024 * 1024),
    # an idle controller appends a no-op record to the metadata log this often (Kafka: every
    # 0.5 s) so brokers can tell it is alive; every 5 s costs an idle node a third less CPU
    # (bench/README.md, "The embedded broker at rest"), and no group or partition waits on it
    "metadata.max.idle.interval.ms": "5000",
}


def _replication_settings(brokers: int) -> dict[str, str]:
    """Kafka's internal topics (offsets, transactions, share groups) sized for the cluster."""
    rf = replication_for(brokers)
    isr = str(min_isr_for(rf))
    return {
        "offsets.topic.replication.factor": str(rf),
        "transaction.state.log.replication.factor": str(rf),
        "transaction.state.log.min.isr": isr,
        "share.coordinator.state.topic.replication.factor": str(rf),
        "share.coordinator.state.topic.min.isr": isr,
        "default.replication.factor": str(rf),
    }


_LOG4J2 = """status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
appender.console.type = Console
appender.console.name = console
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [broker] %p %m%n
appender.console.filter.threshold.type = ThresholdFilter
appender.console.filter.threshold.level = warn
rootLogger.level = info
rootLogger.appenderRef.file.ref = file
rootLogger.appenderRef.console.ref = console
logger.kafka.name = kafka
logger.kafka.level = info
logger.state.name = state.change.logger
logger.state.level = warn
"""

# Kafka 3.x's log4j 1 (reload4j): the same two outputs
_LOG4J1 = """log4j.rootLogger=INFO, file, console
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File={log}
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.appender.console=org.apache.log4j.ConsoleAppender
log4j.appender.console.Threshold=WARN
log4j.appender.console.layout=org.apache.log4j.PatternLayout
log4j.appender.console.layout.ConversionPattern=[broker] %p %m%n
log4j.logger.state.change.logger=WARN
"""

# what only Kafka 4.x knows (share and streams groups): left out of a 3.x node's settings, which
# would log each as an unknown setting
_SINCE_KAFKA4 = ("group.share.", "group.streams.", "share.coordinator.")


class BrokerStartError(ServiceStartError):
    pass


# the class-data archive a node's JVMs map (backend/classdata.py)
ARCHIVE_NAME = "kafka"


def class_archive_path() -> Path | None:
    """Where the class-data archive for this Java and the pinned Kafka's jars lives (None: no
    java or no jars yet). Decided here, beside the class path it is only valid for, and
    re-exported by classdata.py, which starts nodes of its own to build it: a node needs
    nothing of that module."""
    return base.archive_path(ARCHIVE_NAME, KAFKA_VERSION, kafka_lib_dir())


def cached_class_archive() -> Path | None:
    """The archive a node starts on, if it has been built."""
    return base.cached(class_archive_path())


# The node's collector and compiler. Kafka ships G1 with the full tiered JIT, for servers
# with cores to spare; the embedded node is a demo's, on a laptop beside Spark and the
# replicas, where the client compiler alone starts it and keeps it for less CPU
# (bench/README.md, "The embedded broker's JVM").
G1_TIERED = ("-XX:+UseG1GC",)
G1_C1 = ("-XX:+UseG1GC", "-XX:TieredStopAtLevel=1")
BROKER_JVM = G1_C1


@dataclass
class EmbeddedBroker:
    """One KRaft node. `start()` returns once a metadata request succeeds."""

    data_dir: Path
    port: int = 9092
    controller_port: int | None = None
    host: str = "127.0.0.1"
    node_id: int = 1
    heap: str = "512m"
    extra_properties: dict[str, str] = field(default_factory=dict)
    # a workshop room: a second listener on this LAN address, advertised as such, so another
    # machine bootstrapping from it is handed addresses it can reach
    room_address: str | None = None
    room_port: int | None = None
    # One node of a cluster (backend/broker/nodes.py): the controller quorum's voters,
    # node id -> controller port on `host` (a static quorum; this node votes if it is one of
    # them, else it is a broker only), the cluster's id for formatting, and its size, which
    # sizes the internal topics' replication. None: a single combined node, as by default.
    voters: dict[int, int] | None = None
    cluster_id: str | None = None
    cluster_size: int = 1
    # the class-data archive its JVMs map (built by backend/broker/classdata.py): by default
    # the one built for this Java and Kafka, if any; `record_classes` has the node write one
    class_archive: Path | None = field(default_factory=cached_class_archive)
    record_classes: Path | None = None
    # the Kafka release it runs: the pinned one, or another by Maven coordinates (the suite
    # runs jars.KAFKA3_VERSION beside it); only the pinned one maps the class-data archive
    kafka_version: str = KAFKA_VERSION
    jvm_flags: tuple[str, ...] = BROKER_JVM
    _service: ServiceProcess = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.data_dir = Path(self.data_dir)
        if self.kafka_version != KAFKA_VERSION:
            self.class_archive = self.record_classes = None
        self._service = ServiceProcess(
            "Kafka", (self.data_dir / "broker.log", self.data_dir / "broker.out"),
            BrokerStartError)
        if self.voters is not None:
            if self.room_address:
                raise ValueError("a cluster node speaks PLAINTEXT on loopback only")
            self.controller_port = self.voters.get(self.node_id)  # None: broker only
        elif self.controller_port is None:
            self.controller_port = self._remembered_controller_port()

    @property
    def settings(self) -> KafkaSettings:
        """How to connect: PLAINTEXT on the node's own port."""
        return KafkaSettings(bootstrap=f"{self.host}:{self.port}")

    @property
    def log_file(self) -> Path:
        return self.data_dir / "broker.log"

    # ---- configuration -------------------------------------------------------------

    def _remembered_controller_port(self) -> int:
        """The controller port is part of the formatted quorum: keep it across restarts."""
        saved = self.data_dir / "controller.port"
        if saved.exists():
            return int(saved.read_text())
        return free_port(self.host)

    @property
    def is_controller(self) -> bool:
        return self.controller_port is not None

    def server_properties(self) -> dict[str, str]:
        listeners = f"PLAINTEXT://{self.host}:{self.port}"
        if self.is_controller:
            listeners += f",CONTROLLER://{self.host}:{self.controller_port}"
        props = {
            "process.roles": "broker,controller" if self.is_controller else "broker",
            "node.id": str(self.node_id),
            "listeners": listeners,
            "advertised.listeners": f"PLAINTEXT://{self.host}:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name": "PLAINTEXT",
            "log.dirs": str(self.data_dir / "logs"),
            **_NODE_SETTINGS,
            **_replication_settings(self.cluster_size),
            **DEMO_GROUP_SETTINGS,
        }
        if self.voters is None:
            props["controller.quorum.bootstrap.servers"] = f"{self.host}:{self.controller_port}"
        else:
            props["controller.quorum.voters"] = ",".join(
                f"{i}@{self.host}:{port}" for i, port in sorted(self.voters.items()))
            props.update(DEMO_CLUSTER_SETTINGS)
        if self.room_address:
            room = f"ROOM://{self.room_address}:{self.room_port}"
            props["listeners"] += f",{room}"
            props["advertised.listeners"] += f",{room}"
            props["listener.security.protocol.map"] += ",ROOM:PLAINTEXT"
        if major(self.kafka_version) < 4:
            props = {k: v for k, v in props.items() if not k.startswith(_SINCE_KAFKA4)}
        props.update(self.extra_properties)
        return props

    def _write_config(self) -> Path:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        (self.data_dir / "tmp").mkdir(exist_ok=True)
        if self.voters is None:
            (self.data_dir / "controller.port").write_text(str(self.controller_port))
        path = self.data_dir / "server.properties"
        # 0600 before anything is written: extra_properties, or a subclass's listeners (the
        # tests' SASL and TLS ones), may hold passwords
        path.touch(mode=0o600)
        path.chmod(0o600)
        path.write_text("".join(f"{k}={v}\n" for k, v in self.server_properties().items()))
        if major(self.kafka_version) < 4:
            (self.data_dir / "log4j.properties").write_text(_LOG4J1.format(log=self.log_file))
        else:
            (self.data_dir / "log4j2.properties").write_text(_LOG4J2.format(log=self.log_file))
        return path

    def _java(self, main: str, *args: str, record: bool = False) -> list[str]:
        """`record`: this JVM (the node, not its format tool) writes `record_classes`."""
        return [
            "java",
            f"-Xmx{self.heap}",
            *self.jvm_flags,
            "-Djava.awt.headless=true",
            # lz4-java unpacks its native library into the JVM's temporary directory and a
            # killed node never removes it: in the node's own directory it goes with the node
            f"-Djava.io.tmpdir={self.data_dir / 'tmp'}",
            *jvm_options(self.class_archive, self.record_classes if record else None),
            f"-Dlog4j.configuration=file:{self.data_dir / 'log4j.properties'}"
            if major(self.kafka_version) < 4 else
            f"-Dlog4j2.configurationFile={self.data_dir / 'log4j2.properties'}",
            "-cp",
            kafka_classpath(self.kafka_version),
            main,
            *args,
        ]

    def _format_storage(self, config: Path) -> None:
        if formatted_cluster_id(self.data_dir) is not None:
            return
        # may start with '-': pass it as --cluster-id=ID
        cluster_id = self.cluster_id or random_cluster_id()
        # A single node formats itself as a one-voter dynamic quorum (--standalone); a cluster
        # node formats with the static voters of its server.properties, all with one id.
        quorum = ["--standalone"] if self.voters is None else []
        result = run(
            self._java("kafka.tools.StorageTool", "format", f"--cluster-id={cluster_id}", "-c",
                       str(config), *quorum),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            text=True,
        )
        if result.returncode != 0:
            raise BrokerStartError(f"formatting {self.data_dir} failed:\n{result.stdout}")

    # ---- lifecycle -----------------------------------------------------------------

    def start(self, timeout: float = 60.0) -> EmbeddedBroker:
        """Format (once), spawn, and wait until it answers."""
        self.launch(self.prepare())
        self.wait_ready(timeout)
        return self

    def prepare(self) -> Path:
        """Check the ports, write the configuration and format the storage (once): all but
        the spawn, so a cluster can format its nodes side by side (`nodes.py`)."""
        ensure_port_free(self.host, self.port, f"Kafka broker {self.node_id}")
        if self.controller_port is not None:
            ensure_port_free(self.host, self.controller_port, f"Kafka controller {self.node_id}")
        if self.room_address:
            ensure_port_free(self.room_address, self.room_port or 0, "Kafka room listener")
        config = self._write_config()
        self._format_storage(config)
        return config

    def launch(self, config: Path) -> None:
        """Spawn the node. Call from a thread that outlives it (the main one): a child of
        backend.proc dies with the thread that spawned it."""
        self._service.spawn(self._java("kafka.Kafka", str(config), record=True),
                            self.data_dir / "broker.out")
        (self.data_dir / "broker.pid").write_text(str(self.process.pid))

    def running(self) -> bool:
        return self._service.running()

    def kill(self) -> None:
        """SIGKILL: a crash, no controlled shutdown (its leaderships move only once the
        controller notices)."""
        proc = self._service.popen
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(10)
        self._service.popen = None
        (self.data_dir / "broker.pid").unlink(missing_ok=True)

    @property
    def process(self) -> subprocess.Popen | None:
        return self._service.popen

    def wait_ready(self, timeout: float, give_up: bool = True) -> bool:
        """Ready means `answers` holds (a real metadata request returns this broker); no
        fixed sleeps. `give_up=False`: a node still silent at the timeout keeps running
        (False), for a restart in a live cluster (nodes.py)."""
        return self._service.wait_ready(self.answers, timeout, f"port {self.port}",
                                        give_up=give_up)

    def answers(self) -> bool:
        """One readiness probe. A node that must do more once it answers extends it: the
        tests' SASL broker writes its SCRAM users there (tests/kafka_security.py)."""
        return self.settings.check_reachable(timeout=1.0) >= 1

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM (controlled shutdown), SIGKILL if it hangs. Returns the exit code."""
        code = self._service.stop(timeout)
        (self.data_dir / "broker.pid").unlink(missing_ok=True)
        return code

    def run_foreground(self) -> int:
        """`groupscope broker`: start, report, and stop cleanly on Ctrl-C or SIGTERM."""
        self.start()
        sys.stderr.write(
            f"Kafka {self.kafka_version} ready on {self.host}:{self.port} "
            f"(data {self.data_dir}, log {self.log_file})\n"
        )
        return self._service.run_until_signal(lambda: self.stop(STOP_BUDGET_S))

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def random_cluster_id() -> str:
    import base64
    import uuid

    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def formatted_cluster_id(data_dir: Path) -> str | None:
    """The cluster id a node's storage was formatted with, or None if it is not formatted."""
    meta = Path(data_dir) / "logs" / "meta.properties"
    if not meta.exists():
        return None
    for line in meta.read_text().splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "cluster.id":
            return value.strip()
    return None
