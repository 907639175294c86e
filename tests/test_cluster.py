"""The embedded broker and the connection settings, on a real Kafka."""

from __future__ import annotations

import socket
import sys
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from backend.cluster.properties import KafkaConfigError, parse_properties, redact
from backend.cluster.settings import ClusterUnreachable, resolve_settings
from backend.kafkanode.embedded import EmbeddedBroker
from backend.netutil import PortBusyError, free_port
from backend.proc import run


def test_broker_restart_on_same_data_dir_keeps_topics_and_messages(tmp_path, broker_factory):
    node = broker_factory(tmp_path / "node")
    node.start()
    try:
        conf = node.settings.client_config()
        admin = AdminClient(conf)
        admin.create_topics([NewTopic("kept", 3, 1)])["kept"].result(15)
        producer = Producer({**conf, "partitioner": "murmur2_random", "acks": "all"})
        for i in range(30):
            producer.produce("kept", key=f"car-{i % 5:02d}", value=f"m{i}".encode())
        assert producer.flush(15) == 0
    finally:
        node.stop()

    node.start()  # same data directory, same controller port
    try:
        conf = node.settings.client_config()
        md = AdminClient(conf).list_topics(timeout=10)
        assert len(md.topics["kept"].partitions) == 3
        consumer = Consumer({**conf, "group.id": "restart-check", "enable.auto.commit": False})
        try:
            values = []
            for p in range(3):
                low, high = consumer.get_watermark_offsets(TopicPartition("kept", p), timeout=10)
                consumer.assign([TopicPartition("kept", p, low)])
                while len([v for v in values if v[0] == p]) < high - low:
                    msg = consumer.poll(5)
                    assert msg is not None, "messages written before the restart are missing"
                    values.append((p, msg.value().decode()))
            assert sorted(v for _, v in values) == sorted(f"m{i}" for i in range(30))
        finally:
            consumer.close()
    finally:
        node.stop()


def test_busy_port_error_names_the_port(tmp_path):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        with pytest.raises(PortBusyError, match=str(port)):
            EmbeddedBroker(tmp_path / "busy", port=port).start()
        # the CLI says the same in one line, exit code 2, no traceback
        result = run(
            [sys.executable, "-m", "backend.cli", "broker", "--port", str(port),
             "--data-dir", str(tmp_path / "busy-cli")],
            capture_output=True, text=True, timeout=120,
        )
    assert result.returncode == 2
    assert f"port {port}" in result.stderr
    assert "Traceback" not in result.stderr


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
    from backend.cluster.settings import KafkaSettings

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
    from backend.cluster.settings import KafkaSettings

    conf = KafkaSettings("h:1", props, external=True).client_config(**{"group.id": "g"})
    assert conf == {"security.protocol": "SSL", "client.id": "x", "bootstrap.servers": "h:1",
                    "group.id": "g"}
