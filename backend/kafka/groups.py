"""One reading of DescribeConsumerGroups for the supervisor, the observer and the status page.

librdkafka reports group states as enum names (`PREPARING_REBALANCING`) and hides the protocol in
a `type` enum; everything above this module sees Kafka's own vocabulary (states such as
`PreparingRebalance`, group types as `backend.contracts.GROUP_TYPES` names them) and plain
tuples, so the three readers cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from backend.contracts import CLASSIC, CONSUMER, group_type

TP = tuple[str, int]  # (topic, partition)

# librdkafka's enum names -> the names Kafka's own tools print.
_STATE_NAMES = {
    "STABLE": "Stable",
    "PREPARING_REBALANCING": "PreparingRebalance",
    "COMPLETING_REBALANCING": "CompletingRebalance",
    "EMPTY": "Empty",
    "DEAD": "Dead",
    "UNKNOWN": "Unknown",
    "UNKOWN": "Unknown",  # the spelling some librdkafka versions use
}


def state_name(value: object) -> str:
    """Kafka's name for a librdkafka group state (enum member or its name)."""
    name = str(getattr(value, "name", value))
    return _STATE_NAMES.get(name, name.title())


def _tps(tps: Iterable[TopicPartition] | None) -> tuple[TP, ...]:
    return tuple(sorted((tp.topic, tp.partition) for tp in (tps or ())))


@dataclass(frozen=True)
class GroupMember:
    member_id: str
    client_id: str
    host: str
    assignment: tuple[TP, ...]
    target: tuple[TP, ...] | None = None  # KIP-848 only: what the coordinator wants it to own
    group_instance_id: str | None = None
    tasks: tuple[str, ...] = ()  # a streams group's member: "<subtopology>_<partition> <kind>"

    def partitions(self, topic: str | None = None) -> tuple[int, ...]:
        """Owned partition numbers, of one topic or of all."""
        return tuple(sorted(p for t, p in self.assignment if topic is None or t == topic))


@dataclass(frozen=True)
class GroupDescription:
    group: str
    state: str  # Stable, PreparingRebalance, CompletingRebalance, Reconciling, Empty, Dead, Unknown
    protocol: str  # the group's type, one of GROUP_TYPES (backend.contracts)
    assignor: str | None
    members: tuple[GroupMember, ...]
    epoch: int | None = None  # group epoch (consumer, share, streams groups)
    target_epoch: int | None = None  # target-assignment epoch

    @property
    def client_ids(self) -> list[str]:
        return sorted(m.client_id for m in self.members)


def description_from(group: str, desc: Any) -> GroupDescription:
    """Plain data from librdkafka's ConsumerGroupDescription."""
    members = tuple(sorted(
        (GroupMember(
            member_id=m.member_id,
            client_id=m.client_id,
            host=m.host,
            assignment=_tps(m.assignment.topic_partitions if m.assignment else ()),
            target=None if getattr(m, "target_assignment", None) is None
            else _tps(m.target_assignment.topic_partitions),
            group_instance_id=m.group_instance_id,
        ) for m in desc.members),
        key=lambda m: (m.client_id, m.member_id),
    ))
    # librdkafka says UNKNOWN when the broker predates group types (KIP-848): a classic group
    protocol = group_type(getattr(desc, "type", None)) or CLASSIC
    state = state_name(getattr(desc, "state", "UNKNOWN"))
    if protocol == CONSUMER and state == "Unknown" and members:
        # KIP-848 groups also report Assigning / Reconciling, which librdkafka's enum has no
        # names for: a live group moving partitions, not an unknown one
        state = "Reconciling"
    return GroupDescription(group, state, protocol, desc.partition_assignor or None, members)


def describe_group(admin: AdminClient, group: str, timeout: float = 5.0) -> GroupDescription:
    """One DescribeConsumerGroups call. A group that does not exist yet is Dead with no members,
    as the broker itself reports it; other errors raise KafkaException."""
    future = admin.describe_consumer_groups([group], request_timeout=timeout)[group]
    try:
        desc = future.result(timeout=timeout + 1)
    except KafkaException as exc:
        if "GROUP_ID_NOT_FOUND" in str(exc):
            return GroupDescription(group, "Dead", CLASSIC, None, ())
        raise
    return description_from(group, desc)
