"""A consumer that can only read: assign() with explicit offsets, never subscribe, never commit.

The Python client refuses to build a consumer without `group.id`, so a throw-away id is
set -- but it is never used: without subscribe() no JoinGroup is sent, with
enable.auto.commit / enable.auto.offset.store off and explicit start offsets there is no
OffsetCommit and no OffsetFetch. Reading needs READ on the topic only.
"""

from __future__ import annotations

import uuid

from confluent_kafka import Consumer

from backend.cluster.settings import KafkaSettings
from backend.observer.collect import _quiet_logger


def readonly_consumer(settings: KafkaSettings, purpose: str) -> Consumer:
    return Consumer(settings.client_config(**{
        "group.id": f"groupscope-readonly-{purpose}-{uuid.uuid4().hex[:8]}",
        "client.id": f"groupscope-observer-{purpose}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        "enable.partition.eof": True,
        "fetch.wait.max.ms": 100,
        "logger": _quiet_logger(),
        "error_cb": lambda err: None,
    }))
