"""The cluster's settings as Kafka's Java client takes them.

groupscope's settings are librdkafka's (`client.properties` as confluent-kafka reads it); the
reading layer's Admin is Kafka's Java client, whose keys differ for SASL logins and PEM files.
The mapped values carry secrets (a password, a private key), so they only ever travel over
the child's standard input: never an argv, an environment variable or a file of their own.
"""

from __future__ import annotations

from pathlib import Path

from backend.kafka.properties import KafkaConfigError
from backend.kafka.settings import KafkaSettings

# librdkafka-only keys with no Java counterpart that matters to an Admin client
_DROPPED = frozenset({
    "socket.keepalive.enable", "debug", "log_level", "statistics.interval.ms",
    "api.version.request", "broker.version.fallback", "enable.ssl.certificate.verification",
    "ssl.ca.location", "ssl.certificate.location", "ssl.key.location", "ssl.key.password",
    "sasl.username", "sasl.password", "sasl.mechanisms",
    "key.serializer", "value.serializer", "key.deserializer", "value.deserializer",
})
_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}
# An Admin call gives up within the reader's own deadline rather than Kafka's minute. The
# Admin describes a classic group by retrying after the newer API refused it, and waits
# retry.backoff.ms first (100 ms by default, most of such a describe): 10 ms, growing
# exponentially up to Kafka's 1 s when a broker is really away.
_DEFAULTS = {"request.timeout.ms": "10000", "default.api.timeout.ms": "15000",
             "reconnect.backoff.max.ms": "1000", "retry.backoff.ms": "10"}


def java_properties(settings: KafkaSettings, client_id: str) -> dict[str, str]:
    """Java Admin properties equivalent to `settings`; a combination that has no Java
    equivalent is a KafkaConfigError naming the key."""
    props = settings.client_properties
    out = dict(_DEFAULTS)
    out.update({k: v for k, v in props.items() if k not in _DROPPED})
    out["bootstrap.servers"] = settings.bootstrap
    out["client.id"] = client_id
    mechanism = props.get("sasl.mechanism") or props.get("sasl.mechanisms")
    if mechanism:
        out["sasl.mechanism"] = mechanism
    if "sasl.username" in props and "sasl.jaas.config" not in props:
        module = _LOGIN_MODULES.get((mechanism or "PLAIN").upper())
        if module is None:
            raise KafkaConfigError(f"sasl.mechanism={mechanism} with sasl.username: the "
                                   f"reader knows PLAIN and SCRAM logins; give sasl.jaas.config")
        out["sasl.jaas.config"] = (f'{module} required username="{_jaas(props["sasl.username"])}" '
                                   f'password="{_jaas(props.get("sasl.password", ""))}";')
    if props.get("ssl.endpoint.identification.algorithm", "").lower() == "none":
        out["ssl.endpoint.identification.algorithm"] = ""
    if props.get("enable.ssl.certificate.verification", "true").lower() == "false":
        raise KafkaConfigError("enable.ssl.certificate.verification=false: the reader always "
                               "verifies the broker; give ssl.ca.location instead")
    ca = props.get("ssl.ca.location")
    if ca and ca != "probe":
        out["ssl.truststore.type"] = "PEM"
        out["ssl.truststore.certificates"] = _pem(ca, "ssl.ca.location")
    cert, key = props.get("ssl.certificate.location"), props.get("ssl.key.location")
    if cert and key:
        out["ssl.keystore.type"] = "PEM"
        out["ssl.keystore.certificate.chain"] = _pem(cert, "ssl.certificate.location")
        out["ssl.keystore.key"] = _plain_key(_pem(key, "ssl.key.location"),
                                             props.get("ssl.key.password"))
    return out


def properties_text(props: dict[str, str]) -> str:
    """`props` in java.util.Properties' format, one escaped line each (PEM blocks included)."""
    return "".join(f"{_escape(k)}={_escape(v)}\n" for k, v in sorted(props.items()))


def _escape(text: str) -> str:
    out = text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
    out = out.replace("=", "\\=").replace(":", "\\:").replace("#", "\\#").replace("!", "\\!")
    return "\\ " + out[1:] if out.startswith(" ") else out


def _jaas(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


def _plain_key(pem: str, password: str | None) -> str:
    """The private key as unencrypted PKCS#8 PEM. Java 17's PEM key store cannot decrypt
    what OpenSSL 3 writes by default (PBES2), so the key is decrypted here and handed over
    the child's standard input only: it is never written anywhere."""
    from cryptography.hazmat.primitives import serialization

    try:
        key = serialization.load_pem_private_key(
            pem.encode(), password.encode() if password else None)
    except (ValueError, TypeError) as exc:
        raise KafkaConfigError(f"ssl.key.location: the key cannot be read with "
                               f"ssl.key.password ({type(exc).__name__})") from None
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode().strip()


def _pem(path: str, key: str) -> str:
    try:
        return Path(path).read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise KafkaConfigError(f"{key}={path}: cannot read it as a PEM file ({exc})") from None
