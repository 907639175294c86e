"""A consumer that can only read: assign() with explicit offsets, never subscribe, never commit.

The Python client refuses to build a consumer without `group.id`, and librdkafka then looks
up that group's coordinator in the background. We therefore set the id of the group being
watched -- the one id the observer is sure to be allowed to DESCRIBE (an invented id is
refused by an ACL-enforcing cluster, and librdkafka 2.16 can crash on that refusal). The id
is inert: without subscribe() no JoinGroup is ever sent, so the consumer is never a member;
with auto commit and offset store off, and explicit start offsets on every assign(), it
sends neither OffsetCommit nor OffsetFetch. Reading needs READ on the topic only.
"""

from __future__ import annotations

from confluent_kafka import Consumer

from backend.cluster.clients import quiet_logger
from backend.cluster.settings import KafkaSettings


def readonly_consumer(settings: KafkaSettings, purpose: str, group: str) -> Consumer:
    return Consumer(settings.client_config(**{
        "group.id": group,
        "client.id": f"groupscope-observer-{purpose}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        "enable.partition.eof": True,
        "fetch.wait.max.ms": 100,
        "logger": quiet_logger(),
    }))
