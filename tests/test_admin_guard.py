"""The admin guard: after a failure, no group request until metadata answers, then a new client."""

from __future__ import annotations

import pytest

from backend.cluster.clients import GuardedAdmin, error_text, quiet_admin
from backend.cluster.settings import ClusterUnreachable, KafkaSettings
from backend.netutil import free_port


def test_a_healthy_guard_keeps_its_client(kafka: KafkaSettings) -> None:
    made = []
    guard = GuardedAdmin(lambda: made.append(1) or quiet_admin(kafka))
    first = guard.client
    guard.ready()
    guard.ready()
    assert guard.client is first and len(made) == 1
    guard.close()


def test_after_a_failure_the_next_request_gets_a_fresh_connected_client(
        kafka: KafkaSettings) -> None:
    made = []
    guard = GuardedAdmin(lambda: made.append(1) or quiet_admin(kafka))
    first = guard.client  # held, so its id cannot be reused by the next client
    guard.failed()
    guard.ready()
    assert len(made) == 2 and guard.client is not first
    assert guard.client.list_consumer_groups(request_timeout=10).result(timeout=11) is not None
    guard.ready()
    assert len(made) == 2  # healthy again: no further replacement
    guard.close()


def test_an_unreachable_cluster_is_refused_before_any_group_request() -> None:
    dead = KafkaSettings(bootstrap=f"127.0.0.1:{free_port()}")
    made = []
    guard = GuardedAdmin(lambda: made.append(1) or quiet_admin(dead))
    guard.failed()
    for _ in range(2):  # stays refused: each attempt probes with a new client, then drops it
        with pytest.raises(ClusterUnreachable, match=r"^cluster unreachable: "):
            guard.ready()
        with pytest.raises(ClusterUnreachable):
            _ = guard.client  # no caller gets the failed client back
    assert len(made) == 1 + 4
    guard.close()


def test_error_text_names_librdkafka_errors_and_keeps_other_messages_short() -> None:
    from confluent_kafka import KafkaError, KafkaException

    exc = KafkaException(KafkaError(KafkaError._TRANSPORT, "broker down"))
    assert error_text(exc) == "_TRANSPORT: broker down"
    assert error_text(RuntimeError("first\nsecond")) == "first"
    assert error_text(RuntimeError()) == "RuntimeError"
