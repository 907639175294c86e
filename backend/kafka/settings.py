"""How to reach Kafka: the embedded broker, or an external cluster given by flags or env."""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass, field

from confluent_kafka.admin import AdminClient

from backend.kafka.clusterfile import running_bootstrap
from backend.kafka.properties import SECRET_KEY, KafkaConfigError, load_properties, redact

ENV_BOOTSTRAP = "GROUPSCOPE_BOOTSTRAP"
ENV_KAFKA_CONFIG = "GROUPSCOPE_KAFKA_CONFIG"
ENV_KAFKA_PORT = "GROUPSCOPE_KAFKA_PORT"
DEFAULT_BOOTSTRAP = "127.0.0.1:9092"

# librdkafka rejects Java-only keys; these are dropped with no harm to the connection.
_JAVA_ONLY = {"key.serializer", "value.serializer", "key.deserializer", "value.deserializer"}


class ClusterUnreachable(RuntimeError):
    """The cluster did not answer a metadata request in time."""


@dataclass(frozen=True)
class KafkaSettings:
    bootstrap: str = DEFAULT_BOOTSTRAP
    client_properties: dict[str, str] = field(default_factory=dict, repr=False)
    external: bool = False

    def client_config(self, **overrides: object) -> dict[str, object]:
        """A confluent-kafka config dict for this cluster, plus per-client overrides."""
        conf: dict[str, object] = {
            k: v for k, v in self.client_properties.items() if k not in _JAVA_ONLY
        }
        conf["bootstrap.servers"] = self.bootstrap
        conf.update(overrides)
        return conf

    def describe(self) -> str:
        """One line, safe to print: never shows a password."""
        mode = "external" if self.external else "embedded"
        props = redact(self.client_properties)
        proto = props.get("security.protocol", "PLAINTEXT")
        mech = props.get("sasl.mechanism") or props.get("sasl.mechanisms")
        extra = f", {mech}" if mech else ""
        return f"{self.bootstrap} ({mode}, {proto}{extra})"

    def __repr__(self) -> str:  # dataclass repr would leak nothing, but be explicit
        return f"KafkaSettings({self.describe()})"

    def check_reachable(self, timeout: float = 10.0) -> int:
        """Return the broker count, or raise ClusterUnreachable within about `timeout` s.

        librdkafka keeps retrying a refused login or TLS handshake and reports it only through
        the error callback, which an AdminClient serves from `poll()`; the probe therefore asks
        in short rounds and polls in between, so a wrong password, an untrusted broker
        certificate or a refused client certificate is named as such at once instead of
        surfacing as a generic transport failure after the timeout. Settings librdkafka
        refuses outright (a key it cannot decrypt, a file it cannot read) are a
        KafkaConfigError. No message carries a secret of this file.
        """
        import time

        from confluent_kafka import KafkaException

        refused = self.refused_everywhere()
        if refused:
            raise ClusterUnreachable(f"Kafka at {self.bootstrap} refused the connection "
                                     f"({refused}): is the broker running there?")
        errors: list[tuple[str, str]] = []

        def on_error(err: object) -> None:
            name = getattr(err, "name", lambda: "")()
            errors.append((name, getattr(err, "str", lambda: str(err))()))

        try:
            admin = AdminClient(self.client_config(error_cb=on_error, logger=quiet_logger()))
        except KafkaException as exc:
            raise KafkaConfigError(self.setup_error(exc)) from None
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            try:
                md = admin.list_topics(timeout=max(0.1, min(1.0, left)))
                return len(md.brokers)
            except Exception as exc:
                admin.poll(0)
                refusal = _refusal(errors)
                if refusal:
                    raise ClusterUnreachable(
                        self.scrub(f"Kafka at {self.bootstrap} {refusal}")) from None
                if time.monotonic() >= deadline:
                    detail = errors[-1][1] if errors else str(exc)
                    raise ClusterUnreachable(self.scrub(
                        f"Kafka at {self.bootstrap} did not answer within {timeout:.0f}s: "
                        f"{detail}")) from None

    def scrub(self, text: str) -> str:
        """`text` with every secret value of these settings replaced by ***: a last guard on
        messages that quote a client's error, whatever a future client version puts in."""
        for key, value in self.client_properties.items():
            if value and SECRET_KEY.search(key):
                text = text.replace(value, "***")
        return " ".join(text.split())  # one line

    def setup_error(self, exc: BaseException) -> str:
        """One line for settings librdkafka refuses when a client is created."""
        err = exc.args[0] if exc.args else exc
        text = str(getattr(err, "str", lambda: str(err))())
        text = re.sub(r"^Failed to create \w+( client)?: ", "", text)
        hint = ""
        if "ssl.key.location" in text:
            hint = (" (check ssl.key.password, and that ssl.key.location is the PEM key of "
                    "ssl.certificate.location)")
        return self.scrub(f"the Kafka client settings for {self.bootstrap} were refused: "
                          f"{text}{hint}")

    def refused_everywhere(self) -> str | None:
        """A reason when every bootstrap server actively refuses TCP connections (nothing
        listens there), else None. A refusal answers at once, so a command pointed at a
        stopped broker says so now instead of after its whole timeout; a server that is slow,
        filtered or not resolvable is left to the client's own timeout."""
        import socket

        reasons = []
        for server in self.bootstrap.split(","):
            host, _, port = server.strip().rpartition(":")
            try:
                with socket.create_connection((host.strip("[]"), int(port)), timeout=1.0):
                    return None
            except ConnectionRefusedError:
                reasons.append("connection refused")
            except (OSError, ValueError):
                return None
        return reasons[0] if reasons else None


def _refusal(errors: list[tuple[str, str]]) -> str | None:
    """What the broker's side refused, from librdkafka's errors so far, or None while nothing
    says the next attempt would fare better: a login, the broker's certificate (not trusted
    by ssl.ca.location) or this client's certificate (rejected by the broker's TLS alert)."""
    for name, text in reversed(errors):
        if name == "_AUTHENTICATION":
            return f"refused the login: {text}"
        if name == "_SSL" and "verif" in text.lower():
            return (f"presented a TLS certificate that could not be verified (is "
                    f"ssl.ca.location the CA that signed it, for this host name?): {text}")
        if name == "_SSL":
            return f"failed the TLS handshake: {text}"
        if name == "_TRANSPORT" and re.search(r"ssl/tls alert|tlsv1\d? alert", text, re.I):
            return (f"refused this client's TLS certificate (check ssl.certificate.location, "
                    f"ssl.key.location and that the broker trusts its CA): {text}")
    return None


def quiet_logger(name: str = "groupscope.librdkafka") -> logging.Logger:
    """A logger that drops librdkafka's connection chatter instead of printing it to stderr:
    what every confluent-kafka client of ours gets, the reachability probe above first
    (clients.py's admin clients, the observer's consumers and the dashboard's probe too)."""
    logger = logging.getLogger(name)
    if not logger.handlers:
        logger.addHandler(logging.NullHandler())
    logger.propagate = False
    return logger


def resolve_settings(
    bootstrap: str | None = None, kafka_config: str | None = None
) -> KafkaSettings:
    """Flags win over environment variables; with neither, the embedded broker is used."""
    bootstrap = bootstrap or os.environ.get(ENV_BOOTSTRAP) or None
    kafka_config = kafka_config or os.environ.get(ENV_KAFKA_CONFIG) or None
    props = load_properties(kafka_config) if kafka_config else {}
    if "bootstrap.servers" in props and not bootstrap:
        bootstrap = props.pop("bootstrap.servers")
    props.pop("bootstrap.servers", None)
    if kafka_config and not bootstrap:
        raise KafkaConfigError(
            f"{kafka_config} gives no bootstrap.servers; pass --bootstrap HOST:PORT"
        )
    if bootstrap:
        return KafkaSettings(bootstrap=bootstrap, client_properties=props, external=True)
    return embedded_settings()


def embedded_settings(port: int | None = None) -> KafkaSettings:
    """The embedded broker on `port`; every node's address when it is the first node of a
    running embedded cluster (its cluster.json), so a client still bootstraps with that node
    down."""
    port = port or int(os.environ.get(ENV_KAFKA_PORT, "9092"))
    return KafkaSettings(bootstrap=running_bootstrap(port) or f"127.0.0.1:{port}")
