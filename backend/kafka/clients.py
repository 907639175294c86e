"""confluent-kafka admin clients as groupscope makes them, for the stack's own topic set-up:
quiet (librdkafka's log lines dropped; errors arrive through error_cb or exceptions, worded
by `backend.errors.one_line`).

Reading a cluster's groups and offsets is not done here but through the Kafka reading layer
(`backend/kafka/javaadmin`): librdkafka 2.16's admin aborts the process when a coordinator-bound
request meets a dropped connection (confluentinc/librdkafka#4605).
"""

from __future__ import annotations

from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from backend.kafka.properties import KafkaConfigError
from backend.kafka.settings import KafkaSettings, quiet_logger


def quiet_admin(settings: KafkaSettings, **overrides: Any) -> AdminClient:
    """The one way groupscope makes an AdminClient: quiet, and with the settings librdkafka
    refuses at creation (a key `ssl.key.password` does not decrypt, a file it cannot read)
    raised as a one-line KafkaConfigError without secrets, worded as `check_reachable` words
    them, so a long-lived reader (observer, overview) fails the way the CLI tools do instead
    of with a raw client exception that a page would print."""
    try:
        return AdminClient(settings.client_config(logger=quiet_logger(), **overrides))
    except KafkaException as exc:
        raise KafkaConfigError(settings.setup_error(exc)) from None


