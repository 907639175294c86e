"""The embedded Apache Kafka broker: KRaft, combined broker + controller, one JVM per node.

Group settings are lowered for demos so a crashed member is noticed in seconds.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from confluent_kafka.admin import (
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from backend.classdata import jvm_options
from backend.cluster.classdata import cached_archive
from backend.cluster.clients import quiet_admin
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
    # share groups (KIP-932) and streams groups (KIP-1071): the same 6 s session and 1 s
    # heartbeats (their defaults are 45 s and 5 s), streams without a first-join delay
    "group.share.min.session.timeout.ms": "1000",
    "group.share.session.timeout.ms": "6000",
    "group.share.min.heartbeat.interval.ms": "500",
    "group.share.heartbeat.interval.ms": "1000",
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

# the SCRAM mechanism every SASL user gets (besides PLAIN), and Kafka's minimum iterations
SCRAM_MECHANISM = "SCRAM-SHA-256"
SCRAM_ITERATIONS = 4096

_NODE_SETTINGS: dict[str, str] = {
    "offsets.topic.num.partitions": "6",
    "transaction.state.log.num.partitions": "6",
    "num.partitions": "1",
    "auto.create.topics.enable": "false",
    "log.cleaner.backoff.ms": "2000",
    "log.segment.bytes": str(64 * 1024 * 1024),
}


def replication_for(brokers: int) -> int:
    """The replication factor a cluster of `brokers` gives its topics: up to 3 copies."""
    return max(1, min(3, brokers))


def min_isr_for(replication: int) -> int:
    """In-sync copies a write needs (with acks=all): 2 of 3, so one broker may be down."""
    return 2 if replication >= 3 else 1


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


class BrokerStartError(ServiceStartError):
    pass


@dataclass(frozen=True)
class TlsMaterial:
    """The broker's side of TLS (opt-in): its key store and the CAs it trusts.

    A store's type follows its suffix: `.p12`/`.pfx` PKCS12, `.jks` JKS, anything else PEM.
    The simple pair with the `openssl` CLI is a PKCS12 key store (`openssl pkcs12 -export`,
    whose key the store password protects) and a PEM trust store (the CA's certificate, no
    password). A PEM key store would need its encrypted key in a scheme Java 17 reads, which
    the PBES2 keys OpenSSL 3 writes are not. The passwords go into server.properties (mode
    0600) and nowhere else: not the command line, not a log.
    """

    keystore: Path
    key_password: str | None = field(default=None, repr=False)
    keystore_password: str | None = field(default=None, repr=False)  # PKCS12 / JKS only
    truststore: Path | None = None  # CAs for client certificates; None: the JVM's defaults
    truststore_password: str | None = field(default=None, repr=False)  # PKCS12 / JKS only
    # the SSL listener's demand for a client certificate; the SASL_SSL listener asks none
    client_auth: Literal["required", "requested", "none"] = "required"

    def __post_init__(self) -> None:
        # server.properties is a Java properties file: a backslash or line break would change
        # what the broker reads (the message names no value, which may be a password)
        for value in (str(self.keystore), str(self.truststore or ""), *self.secrets()):
            if "\n" in value or "\\" in value:
                raise ValueError("TLS store paths and passwords must not hold line breaks or "
                                 "backslashes")
        if self.client_auth not in ("required", "requested", "none"):
            raise ValueError(f"client_auth must be required, requested or none, "
                             f"not {self.client_auth!r}")

    def secrets(self) -> list[str]:
        return [s for s in (self.key_password, self.keystore_password,
                            self.truststore_password) if s]

    def properties(self) -> dict[str, str]:
        """The broker-wide `ssl.*` settings (both TLS listeners share one certificate)."""
        props = {"ssl.keystore.type": _store_type(self.keystore),
                 "ssl.keystore.location": str(Path(self.keystore).resolve())}
        if self.keystore_password:
            props["ssl.keystore.password"] = self.keystore_password
        if self.key_password:
            props["ssl.key.password"] = self.key_password
        if self.truststore is not None:
            props["ssl.truststore.type"] = _store_type(self.truststore)
            props["ssl.truststore.location"] = str(Path(self.truststore).resolve())
            if self.truststore_password:
                props["ssl.truststore.password"] = self.truststore_password
        return props


def _store_type(path: Path) -> str:
    suffix = Path(path).suffix.lower()
    return {".p12": "PKCS12", ".pfx": "PKCS12", ".jks": "JKS"}.get(suffix, "PEM")


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
    # TLS (tests of clients that watch a TLS cluster): an SSL listener (client certificates as
    # `client_auth` says; a certificate's CN is its principal) and, with `sasl_users`, a
    # SASL_SSL listener, each on its own port (free ones unless given), advertised on `host`.
    # The plain (or SASL_PLAINTEXT) port stays the broker's own and `settings`' listener.
    tls: TlsMaterial | None = field(default=None, repr=False)
    ssl_port: int | None = None
    sasl_ssl_port: int | None = None
    # One node of a cluster (backend/cluster/nodes.py): the controller quorum's voters,
    # node id -> controller port on `host` (a static quorum; this node votes if it is one of
    # them, else it is a broker only), the cluster's id for formatting, and its size, which
    # sizes the internal topics' replication. None: a single combined node, as by default.
    voters: dict[int, int] | None = None
    cluster_id: str | None = None
    cluster_size: int = 1
    # the class-data archive its JVMs map (backend/cluster/classdata.py): by default the one
    # built for this Java and Kafka, if any; `record_classes` has the node write one at exit
    class_archive: Path | None = field(default_factory=cached_archive)
    record_classes: Path | None = None
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
        if self.voters is not None:
            if self.sasl_users is not None or self.tls is not None or self.room_address:
                raise ValueError("a cluster node speaks PLAINTEXT on loopback only")
            self.controller_port = self.voters.get(self.node_id)  # None: broker only
        elif self.controller_port is None:
            self.controller_port = self._remembered_controller_port()
        if self.tls is not None:
            if self.sasl_users is not None and self.tls.client_auth != "required":
                # ANONYMOUS is a super user here (the controller's own traffic): an SSL client
                # without a certificate would be one too
                raise ValueError("with sasl_users, the SSL listener must require client "
                                 "certificates (client_auth='required')")
            self.ssl_port = self.ssl_port or free_port(self.host)
            if self.sasl_users is not None:
                self.sasl_ssl_port = self.sasl_ssl_port or free_port(self.host)

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
    def ssl_bootstrap(self) -> str:
        """host:port of the SSL listener (with `tls=`)."""
        if self.ssl_port is None:
            raise ValueError("this broker has no TLS listener (pass tls=TlsMaterial(...))")
        return f"{self.host}:{self.ssl_port}"

    @property
    def sasl_ssl_bootstrap(self) -> str:
        """host:port of the SASL_SSL listener (with `tls=` and `sasl_users=`)."""
        if self.sasl_ssl_port is None:
            raise ValueError("this broker has no SASL_SSL listener (needs tls= and sasl_users=)")
        return f"{self.host}:{self.sasl_ssl_port}"

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
        if self.sasl_users is not None:
            props.update(self._sasl_properties())
        elif self.room_address:
            room = f"ROOM://{self.room_address}:{self.room_port}"
            props["listeners"] += f",{room}"
            props["advertised.listeners"] += f",{room}"
            props["listener.security.protocol.map"] += ",ROOM:PLAINTEXT"
        if self.tls is not None:
            self._add_tls_listeners(props)
        props.update(self.extra_properties)
        return props

    def _add_tls_listeners(self, props: dict[str, str]) -> None:
        assert self.tls is not None
        names = ["SSL"] + (["SASL_SSL"] if self.sasl_ssl_port is not None else [])
        ports = {"SSL": self.ssl_port, "SASL_SSL": self.sasl_ssl_port}
        for name in names:
            props["listeners"] += f",{name}://{self.host}:{ports[name]}"
            props["advertised.listeners"] += f",{name}://{self.host}:{ports[name]}"
            props["listener.security.protocol.map"] += f",{name}:{name}"
        props.update(self.tls.properties())
        props["listener.name.ssl.ssl.client.auth"] = self.tls.client_auth
        # the principal of a client certificate is its CN ("watcher"), as for a SASL user,
        # so one ACL covers a user whichever way it logs in
        props["ssl.principal.mapping.rules"] = "RULE:^CN=([^,]+).*$/$1/,DEFAULT"
        if "SASL_SSL" in names:
            props["listener.name.sasl_ssl.ssl.client.auth"] = "none"
            for mech in ("plain", "scram-sha-256"):
                props[f"listener.name.sasl_ssl.{mech}.sasl.jaas.config"] = \
                    props[f"listener.name.sasl_plaintext.{mech}.sasl.jaas.config"]

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
            "sasl.enabled.mechanisms": f"PLAIN,{SCRAM_MECHANISM}",
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
        if self.voters is None:
            (self.data_dir / "controller.port").write_text(str(self.controller_port))
        path = self.data_dir / "server.properties"
        path.touch(mode=0o600)  # may hold SASL and TLS key passwords
        path.chmod(0o600)
        path.write_text("".join(f"{k}={v}\n" for k, v in self.server_properties().items()))
        (self.data_dir / "log4j2.properties").write_text(_LOG4J2.format(log=self.log_file))
        return path

    def _java(self, main: str, *args: str, record: bool = False) -> list[str]:
        """`record`: this JVM (the node, not its format tool) writes `record_classes`."""
        return [
            "java",
            f"-Xmx{self.heap}",
            "-XX:+UseG1GC",
            "-Djava.awt.headless=true",
            *jvm_options(self.class_archive, self.record_classes if record else None),
            f"-Dlog4j2.configurationFile={self.data_dir / 'log4j2.properties'}",
            "-cp",
            kafka_classpath(),
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
        # No --add-scram: it takes each password as an argument, which `ps` shows to every
        # user of the machine; SCRAM users are created through the admin API once the broker
        # answers (wait_ready).
        quorum = ["--standalone"] if self.voters is None else []
        result = run(
            self._java("kafka.tools.StorageTool", "format", f"--cluster-id={cluster_id}", "-c",
                       str(config), *quorum),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            text=True,
        )
        if result.returncode != 0:
            output = result.stdout
            secrets = [*(self.sasl_users or {}).values(), *(self.tls.secrets() if self.tls
                                                            else [])]
            for secret in secrets:  # the tool may quote server.properties
                output = output.replace(secret, "***")
            raise BrokerStartError(f"formatting {self.data_dir} failed:\n{output}")

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
        for port, what in ((self.ssl_port, "SSL"), (self.sasl_ssl_port, "SASL_SSL")):
            if port is not None:
                ensure_port_free(self.host, port, f"Kafka {what} listener")
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

    def wait_ready(self, timeout: float) -> None:
        """Ready means a real metadata request returns this broker and, with `sasl_users`,
        that every user logs in with SCRAM (callers do so right after start); no fixed sleeps.

        The SCRAM credentials are written once the broker answers, by its admin logged in with
        PLAIN (whose users live in the JAAS config of the 0600 server.properties), so no
        password is ever an argument of a process. A credential reaches the broker's
        authenticator only after the controller has committed it, hence the login probe.
        """
        unwritten = dict(self.sasl_users or {})

        def ready() -> bool:
            if self.settings.check_reachable(timeout=1.0) < 1:
                return False
            if unwritten:
                self._write_scram_credentials(unwritten)
                unwritten.clear()  # once per start: a rewrite (new salt) races the logins
            return all(self.settings_for(user, SCRAM_MECHANISM).check_reachable(timeout=1.0)
                       for user in self.sasl_users or {})

        self._service.wait_ready(ready, timeout, f"port {self.port}")

    def _write_scram_credentials(self, users: dict[str, str]) -> None:
        """Create (or replace) a SCRAM-SHA-256 credential for every user in one request."""
        info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, SCRAM_ITERATIONS)
        upserts = [UserScramCredentialUpsertion(user, info, pw.encode())
                   for user, pw in users.items()]
        admin = quiet_admin(self.settings)
        for future in admin.alter_user_scram_credentials(upserts).values():
            future.result(10)

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
