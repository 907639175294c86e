"""A consumer that can only read: assign() with explicit offsets, never subscribe, never commit.

The Python client refuses to build a consumer without `group.id` (and aborts the process on
an empty one), and librdkafka then looks up that group's coordinator in the background. We
therefore set the id of the group being watched -- the one id the observer is sure to be
allowed to DESCRIBE (an invented id is refused by an ACL-enforcing cluster, and librdkafka
2.16 can crash on that refusal). A reader shared by many groups (the cluster overview's)
passes any group the principal may describe, or none: then `SHARED_READER_GROUP`, fine on a
cluster without ACLs. The id is inert: without subscribe() no JoinGroup is ever sent, so the
consumer is never a member; with auto commit and offset store off, and explicit start offsets
on every assign(), it sends neither OffsetCommit nor OffsetFetch. Reading needs READ on the
topic only.

`isolation.level` is read_committed (librdkafka's default, written down because the lag
reader depends on it): records of aborted or still open transactions are never delivered
and commit markers are skipped, so what the reader sees is what a read_committed group sees.
"""

from __future__ import annotations

from confluent_kafka import Consumer

from backend.kafka.settings import KafkaSettings, quiet_logger

SHARED_READER_GROUP = "groupscope-observer"


def readonly_consumer(settings: KafkaSettings, purpose: str, group: str | None = None,
                      **tuning: object) -> Consumer:
    """`tuning`: fetch sizes and the like; the read-only settings always win over it."""
    return Consumer(settings.client_config(**{
        **tuning,
        "group.id": group or SHARED_READER_GROUP,
        "client.id": f"groupscope-observer-{purpose}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        "enable.partition.eof": True,
        "isolation.level": "read_committed",
        "fetch.wait.max.ms": 100,
        "logger": quiet_logger(),
    }))
