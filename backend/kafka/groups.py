"""A group as groupscope reads it: plain data in Kafka's own words, whoever read it.

The Kafka reader (`javaadmin/reader.py`, Kafka's Java Admin) fills these for every group type;
the observer, the overview, the supervisor, the exporter and the memory take them from there.
`state_name` turns librdkafka's enum spelling (`PREPARING_REBALANCING`) into Kafka's own
(`PreparingRebalance`), for the exporter's table of every state a group can be in.
"""
from __future__ import annotations

from dataclasses import dataclass

TP = tuple[str, int]  # (topic, partition)


# One (topic, partition) tuple per partition for the process. The overview keys several dicts
# by partition for every group (its commits, its health windows, the lags it wrote down):
# 650 000 keys at 65 000 groups over 3 000 partitions, each answer making them anew, each
# with a topic string of its own, ~110 bytes a key. Past _SAME_TPS_MAX (months of topics
# coming and going) the table starts afresh.
_SAME_TPS: dict[TP, TP] = {}
_SAME_TPS_MAX = 1_000_000


def same_tp(topic: str, partition: int) -> TP:
    """The process's one tuple for this partition (equal, and the same object)."""
    key = (topic, partition)
    kept = _SAME_TPS.get(key)
    if kept is None:
        if len(_SAME_TPS) >= _SAME_TPS_MAX:
            _SAME_TPS.clear()
        _SAME_TPS[key] = kept = key
    return kept


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
