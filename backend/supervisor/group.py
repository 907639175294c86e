"""The broker's view of the group, for telling our replicas from external members.

Only what the supervisor needs (who is a member, what it owns); the observer builds the full
model. Works for classic and KIP-848 consumer groups alike.
"""

from __future__ import annotations

from dataclasses import dataclass

from confluent_kafka import ConsumerGroupState
from confluent_kafka.admin import AdminClient


@dataclass(frozen=True)
class GroupMember:
    member_id: str
    client_id: str
    host: str
    partitions: tuple[int, ...]


@dataclass(frozen=True)
class GroupView:
    group: str
    state: str
    members: tuple[GroupMember, ...]

    @property
    def client_ids(self) -> list[str]:
        return sorted(m.client_id for m in self.members)


def describe_group(admin: AdminClient, group: str, topic: str | None = None,
                   timeout: float = 5.0) -> GroupView:
    """One DescribeConsumerGroups call; `topic` limits the partitions listed to that topic.

    A group that does not exist yet is reported as DEAD with no members, as the broker does.
    """
    futures = admin.describe_consumer_groups([group], request_timeout=timeout)
    try:
        desc = futures[group].result(timeout=timeout + 1)
    except Exception as exc:
        if "GROUP_ID_NOT_FOUND" in str(exc):
            return GroupView(group, "DEAD", ())
        raise
    members = []
    for m in desc.members:
        tps = m.assignment.topic_partitions if m.assignment else []
        parts = tuple(sorted(tp.partition for tp in tps if topic is None or tp.topic == topic))
        members.append(GroupMember(m.member_id, m.client_id, m.host, parts))
    state = desc.state.name if isinstance(desc.state, ConsumerGroupState) else str(desc.state)
    return GroupView(group, state, tuple(sorted(members, key=lambda m: m.client_id)))
