"""A share group's own settings (KIP-932 group configs), set by the share replicas' set-up.

A share group starts at the log end by default (`share.auto.offset.reset=latest`): a
summariser that joined after the cars started would never see their first records, and the
seq proof would call them lost. groupscope's share groups start at the earliest offset, as a
consumer group without a commit does (`auto.offset.reset=earliest` in the replicas). The lock
time and the delivery limit are the broker's (backend/broker/embedded.py, demo settings).
"""

from __future__ import annotations

from confluent_kafka import KafkaException
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from backend.contracts import dead_letter_topic, deltas_topic, events_topic
from backend.errors import one_line
from backend.kafka.clients import quiet_admin
from backend.kafka.settings import KafkaSettings
from backend.kafka.topics import (
    ADMIN_TIMEOUT_S,
    DEAD_LETTER_CONFIG,
    DEAD_LETTER_PARTITIONS,
    DELTAS_CONFIG,
    DELTAS_PARTITIONS,
    EVENTS_CONFIG,
    EVENTS_PARTITIONS,
    TopicError,
    TopicSpec,
    ensure,
)

SHARE_GROUP_CONFIG: dict[str, str] = {"share.auto.offset.reset": "earliest"}


def configure_share_group(settings: KafkaSettings, group: str) -> None:
    """Set SHARE_GROUP_CONFIG on `group` (idempotent; the group need not exist yet)."""
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
        for k, v in SHARE_GROUP_CONFIG.items()])
    admin = quiet_admin(settings)
    for fut in admin.incremental_alter_configs([resource],
                                               request_timeout=ADMIN_TIMEOUT_S).values():
        try:
            fut.result(ADMIN_TIMEOUT_S)
        except KafkaException as exc:
            raise TopicError(f"cannot configure share group {group}: {one_line(exc)} "
                             f"(needs ALTER_CONFIGS on the group)") from None


def ensure_share_group(settings: KafkaSettings, group: str) -> None:
    """A share group's own topics (deltas, dead letters, events) and its settings; the input
    topic is the consumer group's. Idempotent: every share replica calls it at its start."""
    ensure(settings, [
        TopicSpec(deltas_topic(group), DELTAS_PARTITIONS, None, DELTAS_CONFIG),
        TopicSpec(dead_letter_topic(group), DEAD_LETTER_PARTITIONS, None, DEAD_LETTER_CONFIG),
        TopicSpec(events_topic(group), EVENTS_PARTITIONS, None, EVENTS_CONFIG),
    ])
    configure_share_group(settings, group)
