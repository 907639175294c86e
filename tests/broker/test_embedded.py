"""The embedded broker on a real Kafka: a restart on the same data keeps topics and
messages, and a port already taken is named, by the class and by `groupscope broker`."""

from __future__ import annotations

import socket
import sys

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from backend.broker.embedded import EmbeddedBroker
from backend.netutil import PortBusyError
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
