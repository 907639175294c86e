"""The embedded Apache Kafka broker: KRaft, combined broker + controller, one JVM per node.

Group settings are lowered for demos so a crashed member is noticed in seconds.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from backend.cluster.jars import KAFKA_VERSION, kafka_classpath
from backend.cluster.settings import KafkaSettings
from backend.netutil import ensure_port_free, free_port
from backend.proc import die_with_parent

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
}

_SINGLE_NODE_SETTINGS: dict[str, str] = {
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "6",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "6",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "num.partitions": "1",
    "auto.create.topics.enable": "false",
    "log.cleaner.backoff.ms": "2000",
    "log.segment.bytes": str(64 * 1024 * 1024),
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


class BrokerStartError(RuntimeError):
    pass


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
    process: subprocess.Popen | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.data_dir = Path(self.data_dir)
        if self.controller_port is None:
            self.controller_port = self._remembered_controller_port()

    @property
    def settings(self) -> KafkaSettings:
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

    def server_properties(self) -> dict[str, str]:
        props = {
            "process.roles": "broker,controller",
            "node.id": str(self.node_id),
            "controller.quorum.bootstrap.servers": f"{self.host}:{self.controller_port}",
            "listeners": f"PLAINTEXT://{self.host}:{self.port},"
            f"CONTROLLER://{self.host}:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://{self.host}:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name": "PLAINTEXT",
            "log.dirs": str(self.data_dir / "logs"),
            **_SINGLE_NODE_SETTINGS,
            **DEMO_GROUP_SETTINGS,
        }
        props.update(self.extra_properties)
        return props

    def _write_config(self) -> Path:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        (self.data_dir / "controller.port").write_text(str(self.controller_port))
        path = self.data_dir / "server.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in self.server_properties().items()))
        (self.data_dir / "log4j2.properties").write_text(_LOG4J2.format(log=self.log_file))
        return path

    def _java(self, main: str, *args: str) -> list[str]:
        return [
            "java",
            f"-Xmx{self.heap}",
            "-XX:+UseG1GC",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.data_dir / 'log4j2.properties'}",
            "-cp",
            kafka_classpath(),
            main,
            *args,
        ]

    def _format_storage(self, config: Path) -> None:
        if (self.data_dir / "logs" / "meta.properties").exists():
            return
        cluster_id = _random_cluster_id()
        result = subprocess.run(
            self._java("kafka.tools.StorageTool", "format", "-t", cluster_id, "-c",
                       str(config), "--standalone"),
            capture_output=True,
            text=True,
        )
        if result.returncode != 0:
            raise BrokerStartError(f"formatting {self.data_dir} failed:\n{result.stdout}"
                                   f"{result.stderr}")

    # ---- lifecycle -----------------------------------------------------------------

    def start(self, timeout: float = 60.0) -> EmbeddedBroker:
        ensure_port_free(self.host, self.port, "Kafka broker")
        ensure_port_free(self.host, self.controller_port, "Kafka controller")
        config = self._write_config()
        self._format_storage(config)
        with open(self.data_dir / "broker.out", "ab") as out:
            self.process = subprocess.Popen(
                self._java("kafka.Kafka", str(config)),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                preexec_fn=die_with_parent(),
            )
        (self.data_dir / "broker.pid").write_text(str(self.process.pid))
        self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout: float) -> None:
        """Ready means a real metadata request returns this broker; no fixed sleeps."""
        deadline = time.monotonic() + timeout
        while True:
            if self.process is not None and self.process.poll() is not None:
                raise BrokerStartError(
                    f"Kafka exited with code {self.process.returncode} during start-up; "
                    f"last lines of {self.log_file}:\n{self._tail()}"
                )
            try:
                if self.settings.check_reachable(timeout=1.0) >= 1:
                    return
            except Exception:
                pass
            if time.monotonic() >= deadline:
                self.stop()
                raise BrokerStartError(
                    f"Kafka did not become ready on port {self.port} within {timeout:.0f}s; "
                    f"see {self.log_file}:\n{self._tail()}"
                )
            time.sleep(0.2)

    def _tail(self, lines: int = 20) -> str:
        for path in (self.log_file, self.data_dir / "broker.out"):
            if path.exists():
                text = path.read_text(errors="replace").splitlines()[-lines:]
                if text:
                    return "\n".join(text)
        return "(no log)"

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM (controlled shutdown), SIGKILL if it hangs. Returns the exit code."""
        proc = self.process
        if proc is None:
            return None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.process = None
        (self.data_dir / "broker.pid").unlink(missing_ok=True)
        return proc.returncode

    def run_foreground(self) -> int:
        """`groupscope broker`: start, report, and stop cleanly on Ctrl-C or SIGTERM."""
        self.start()
        sys.stderr.write(
            f"Kafka {KAFKA_VERSION} ready on {self.host}:{self.port} "
            f"(data {self.data_dir}, log {self.log_file})\n"
        )
        return wait_for_signal_then(self.stop, self.process)

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def wait_for_signal_then(stop, proc: subprocess.Popen | None) -> int:
    """Block until SIGINT/SIGTERM or the child dies; then call `stop`."""
    stopping = {"flag": False}

    def handler(signum: int, frame: object) -> None:
        stopping["flag"] = True

    old = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        while not stopping["flag"] and proc is not None and proc.poll() is None:
            time.sleep(0.2)
        died = proc is not None and proc.poll() is not None and not stopping["flag"]
        stop()
        return 1 if died else 0
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def _random_cluster_id() -> str:
    import base64
    import uuid

    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
