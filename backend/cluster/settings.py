"""How to reach Kafka: the embedded broker, or an external cluster given by flags or env."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from confluent_kafka.admin import AdminClient

from backend.cluster.properties import KafkaConfigError, load_properties, redact

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

        librdkafka keeps retrying a refused login and reports it only through the error
        callback, which an AdminClient serves from `poll()`; the probe therefore asks in short
        rounds and polls in between, so a wrong password is named as such at once instead of
        surfacing as a generic transport failure after the timeout.
        """
        import time

        refused = self.refused_everywhere()
        if refused:
            raise ClusterUnreachable(f"Kafka at {self.bootstrap} refused the connection "
                                     f"({refused}): is the broker running there?")
        errors: list[tuple[str, str]] = []

        def on_error(err: object) -> None:
            name = getattr(err, "name", lambda: "")()
            errors.append((name, getattr(err, "str", lambda: str(err))()))

        admin = AdminClient(self.client_config(error_cb=on_error, **_quiet_logger()))
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            try:
                md = admin.list_topics(timeout=max(0.1, min(1.0, left)))
                return len(md.brokers)
            except Exception as exc:
                admin.poll(0)
                auth = [text for name, text in errors if name == "_AUTHENTICATION"]
                if auth:
                    raise ClusterUnreachable(
                        f"Kafka at {self.bootstrap} refused the login: {auth[-1]}") from None
                if time.monotonic() >= deadline:
                    detail = errors[-1][1] if errors else str(exc)
                    raise ClusterUnreachable(
                        f"Kafka at {self.bootstrap} did not answer within {timeout:.0f}s: "
                        f"{detail}") from None


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


def _quiet_logger() -> dict[str, object]:
    from backend.cluster.clients import quiet_logger  # clients imports this module

    return {"logger": quiet_logger()}


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
    port = port or int(os.environ.get(ENV_KAFKA_PORT, "9092"))
    return KafkaSettings(bootstrap=f"127.0.0.1:{port}")
