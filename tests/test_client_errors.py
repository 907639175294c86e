"""How a confluent-kafka client error is worded: one line, with librdkafka's error name."""

from __future__ import annotations

from backend.cluster.clients import error_text


def test_error_text_names_librdkafka_errors_and_keeps_other_messages_short() -> None:
    from confluent_kafka import KafkaError, KafkaException

    exc = KafkaException(KafkaError(KafkaError._TRANSPORT, "broker down"))
    assert error_text(exc) == "_TRANSPORT: broker down"
    assert error_text(RuntimeError("first\nsecond")) == "first"
    assert error_text(RuntimeError()) == "RuntimeError"
