"""The embedded Apache Kafka broker: KRaft, combined broker + controller, one JVM per node.

Group settings are lowered for demos so a crashed member is noticed in seconds.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from backend.cluster.jars import KAFKA_VERSION, kafka_classpath
from backend.cluster.settings import KafkaSettings
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
    # exactly-once: a crashed replica's open transaction is aborted (and its partitions
    # readable by the new owner) soon after its transaction.timeout.ms, not a minute later
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
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


class BrokerStartError(ServiceStartError):
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
    # Optional security (tests of least-privilege clients): user -> password. When set, the
    # client port speaks SASL_PLAINTEXT (PLAIN and SCRAM-SHA-256 for every user) and ACLs are
    # enforced by StandardAuthorizer; `sasl_admin` is the super user the broker itself uses.
    sasl_users: dict[str, str] | None = field(default=None, repr=False)
    sasl_admin: str = "admin"
    # a workshop room: a second listener on this LAN address, advertised as such, so another
    # machine bootstrapping from it is handed addresses it can reach
    room_address: str | None = None
    room_port: int | None = None
    _service: ServiceProcess = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.data_dir = Path(self.data_dir)
        self._service = ServiceProcess(
            "Kafka", (self.data_dir / "broker.log", self.data_dir / "broker.out"),
            BrokerStartError)
        if self.sasl_users is not None:
            if self.sasl_admin not in self.sasl_users:
                raise ValueError(f"sasl_users must include the broker's own user "
                                 f"{self.sasl_admin!r}")
            for user, pw in self.sasl_users.items():
                if not pw or any(c in user + pw for c in '"=,[] \\\n;'):
                    raise ValueError(f"SASL user {user!r}: name and password must be non-empty "
                                     "without quotes, brackets, commas, '=', ';' or spaces")
        if self.controller_port is None:
            self.controller_port = self._remembered_controller_port()

    @property
    def settings(self) -> KafkaSettings:
        """How to connect; with SASL enabled, as the super user."""
        if self.sasl_users is not None:
            return self.settings_for(self.sasl_admin)
        return KafkaSettings(bootstrap=f"{self.host}:{self.port}")

    def settings_for(self, user: str, mechanism: str = "PLAIN") -> KafkaSettings:
        """Client settings for one SASL user (`PLAIN` or `SCRAM-SHA-256`)."""
        if self.sasl_users is None:
            raise ValueError("this broker has no SASL users")
        props = {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism,
            "sasl.username": user,
            "sasl.password": self.sasl_users[user],
        }
        return KafkaSettings(bootstrap=f"{self.host}:{self.port}", client_properties=props,
                             external=True)

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
        if self.sasl_users is not None:
            props.update(self._sasl_properties())
        elif self.room_address:
            room = f"ROOM://{self.room_address}:{self.room_port}"
            props["listeners"] += f",{room}"
            props["advertised.listeners"] += f",{room}"
            props["listener.security.protocol.map"] += ",ROOM:PLAINTEXT"
        props.update(self.extra_properties)
        return props

    def _sasl_properties(self) -> dict[str, str]:
        assert self.sasl_users is not None
        users = " ".join(f'user_{u}="{pw}"' for u, pw in self.sasl_users.items())
        admin_pw = self.sasl_users[self.sasl_admin]
        plain = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
                 f'username="{self.sasl_admin}" password="{admin_pw}" {users};')
        return {
            "listeners": f"SASL_PLAINTEXT://{self.host}:{self.port},"
            f"CONTROLLER://{self.host}:{self.controller_port}",
            "advertised.listeners": f"SASL_PLAINTEXT://{self.host}:{self.port}",
            "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT,"
            "CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name": "SASL_PLAINTEXT",
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": plain,
            "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config":
                "org.apache.kafka.common.security.scram.ScramLoginModule required;",
            "authorizer.class.name":
                "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            # the controller listener only listens on this host and carries the broker's own
            # (unauthenticated) controller traffic
            "super.users": f"User:{self.sasl_admin};User:ANONYMOUS",
            "allow.everyone.if.no.acl.found": "false",
        }

    def _write_config(self) -> Path:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        (self.data_dir / "controller.port").write_text(str(self.controller_port))
        path = self.data_dir / "server.properties"
        path.touch(mode=0o600)  # may hold SASL passwords
        path.chmod(0o600)
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
        cluster_id = _random_cluster_id()  # may start with '-': pass it as --cluster-id=ID
        scram: list[str] = []
        for user, pw in (self.sasl_users or {}).items():
            scram += ["--add-scram", f"SCRAM-SHA-256=[name={user},password={pw}]"]
        result = run(
            self._java("kafka.tools.StorageTool", "format", f"--cluster-id={cluster_id}", "-c",
                       str(config), "--standalone", *scram),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            text=True,
        )
        if result.returncode != 0:
            output = result.stdout
            for pw in (self.sasl_users or {}).values():
                output = output.replace(pw, "***")
            raise BrokerStartError(f"formatting {self.data_dir} failed:\n{output}")

    # ---- lifecycle -----------------------------------------------------------------

    def start(self, timeout: float = 60.0) -> EmbeddedBroker:
        ensure_port_free(self.host, self.port, "Kafka broker")
        ensure_port_free(self.host, self.controller_port, "Kafka controller")
        if self.room_address:
            ensure_port_free(self.room_address, self.room_port or 0, "Kafka room listener")
        config = self._write_config()
        self._format_storage(config)
        self._service.spawn(self._java("kafka.Kafka", str(config)), self.data_dir / "broker.out")
        (self.data_dir / "broker.pid").write_text(str(self.process.pid))
        self.wait_ready(timeout)
        return self

    @property
    def process(self) -> subprocess.Popen | None:
        return self._service.popen

    def wait_ready(self, timeout: float) -> None:
        """Ready means a real metadata request returns this broker; no fixed sleeps."""
        self._service.wait_ready(lambda: self.settings.check_reachable(timeout=1.0) >= 1,
                                 timeout, f"port {self.port}")

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM (controlled shutdown), SIGKILL if it hangs. Returns the exit code."""
        code = self._service.stop(timeout)
        (self.data_dir / "broker.pid").unlink(missing_ok=True)
        return code

    def run_foreground(self) -> int:
        """`groupscope broker`: start, report, and stop cleanly on Ctrl-C or SIGTERM."""
        self.start()
        sys.stderr.write(
            f"Kafka {KAFKA_VERSION} ready on {self.host}:{self.port} "
            f"(data {self.data_dir}, log {self.log_file})\n"
        )
        return self._service.run_until_signal(lambda: self.stop(STOP_BUDGET_S))

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _random_cluster_id() -> str:
    import base64
    import uuid

    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
