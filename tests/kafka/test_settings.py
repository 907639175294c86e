"""The connection settings: a client properties file read line by line, its secrets never
shown, an unreachable external cluster named in bounded time."""

from __future__ import annotations

import sys
import time

import pytest

from backend.kafka.properties import KafkaConfigError, parse_properties, redact
from backend.kafka.settings import ClusterUnreachable, resolve_settings
from backend.netutil import free_port
from backend.proc import run


def test_malformed_kafka_config_names_the_bad_line(tmp_path):
    cfg = tmp_path / "client.properties"
    cfg.write_text("security.protocol=SASL_SSL\n# comment\nsasl.mechanism PLAIN oops\n")
    with pytest.raises(KafkaConfigError, match=r"client\.properties:3"):
        resolve_settings(bootstrap="127.0.0.1:1", kafka_config=str(cfg))
    result = run(
        [sys.executable, "-m", "backend.cli", "up", "--bootstrap", "127.0.0.1:1",
         "--kafka-config", str(cfg)],
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 2, result.stderr
    assert "client.properties:3" in result.stderr
    assert "Traceback" not in result.stderr


def test_secrets_are_never_shown():
    props = parse_properties(
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
        "sasl.username=alice\nsasl.password=hunter2-secret\n"
    )
    from backend.kafka.settings import KafkaSettings

    ks = KafkaSettings("broker:9093", props, external=True)
    for text in (ks.describe(), repr(ks), str(redact(props))):
        assert "hunter2" not in text
    assert "SCRAM-SHA-512" in ks.describe()
    with pytest.raises(KafkaConfigError) as bad:
        parse_properties("sasl.password hunter2-secret\n")
    assert "hunter2" not in str(bad.value)


def test_unreachable_external_broker_fails_clearly_in_bounded_time():
    port = free_port()  # nothing listens here
    settings = resolve_settings(bootstrap=f"127.0.0.1:{port}")
    assert settings.external
    started = time.monotonic()
    with pytest.raises(ClusterUnreachable, match=f"127.0.0.1:{port}"):
        settings.check_reachable(timeout=3.0)
    assert time.monotonic() - started < 10.0


def test_client_config_carries_properties_and_drops_java_only_keys():
    props = parse_properties("security.protocol=SSL\nkey.serializer=org.Foo\nclient.id=x\n")
    from backend.kafka.settings import KafkaSettings

    conf = KafkaSettings("h:1", props, external=True).client_config(**{"group.id": "g"})
    assert conf == {"security.protocol": "SSL", "client.id": "x", "bootstrap.servers": "h:1",
                    "group.id": "g"}
