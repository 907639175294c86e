"""What the episode tracker compares: one description of a group, reduced to a `Frame`.

Two pipelines observe groups: the overview (every group of a cluster, a cycle every few
seconds) and the Live page's observer (one group, twice a second). Both reduce what they read
to frames, so one tracker (`episodes.py`) tells every rebalance and its causes for both.

A frame's keys are "slots": (topic, partition) for classic, consumer and share groups; for a
streams group (KIP-1071) its active tasks, as ("subtopology N", partition), since a streams
member owns tasks rather than partitions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from backend.contracts import SHARE, STREAMS
from backend.kafka.groups import GroupDescription, GroupMember

Slot = tuple[str, int]

# a group in one of these states, with every KIP-848 member owning its target, is settled
SETTLED_STATES = frozenset({"Stable", "Empty", "Dead"})


@dataclass(frozen=True)
class Member:
    member_id: str
    client_id: str
    host: str = ""
    instance_id: str | None = None  # group.instance.id: static membership


@dataclass(frozen=True)
class Frame:
    taken_ms: int
    state: str
    protocol: str = "classic"
    assignor: str | None = None
    generation: int | None = None  # generation (classic) or group epoch, when known
    target_epoch: int | None = None
    members: Mapping[str, Member] = field(default_factory=dict)  # member id -> member
    assignment: Mapping[Slot, str] = field(default_factory=dict)  # slot -> member id
    # KIP-848: member ids whose assignment is not (yet) their target
    reconciling: frozenset[str] = frozenset()
    # a share group's: slot -> member ids of its sharers (then `assignment` is empty)
    shared: Mapping[Slot, tuple[str, ...]] = field(default_factory=dict)
    committed: Mapping[Slot, int] = field(default_factory=dict)
    # slots whose committed offset was behind the log end: records waited there (the slots
    # alone, not the cycle's log ends: a frame kept for minutes must not keep those alive)
    behind: frozenset[Slot] = frozenset()
    partition_counts: Mapping[str, int] = field(default_factory=dict)  # the group's topics
    lag: int | None = None  # the group's total lag, when known

    @property
    def settled(self) -> bool:
        return self.state in SETTLED_STATES and not self.reconciling

    def owners(self) -> Mapping[Slot, str]:
        return self.assignment

    def owned_topics(self) -> frozenset[str]:
        return frozenset(t for t, _ in (*self.assignment, *self.shared))


def _task_slots(m: GroupMember) -> tuple[Slot, ...]:
    """A streams member's active tasks as slots: "0_3 active" -> ("subtopology 0", 3)."""
    out = []
    for task in m.tasks:
        name, _, kind = task.partition(" ")
        sub, _, p = name.rpartition("_")
        if kind == "active" and p.isdigit():
            out.append((f"subtopology {sub}", int(p)))
    return tuple(out)


def members_of(members: Iterable[GroupMember]) -> dict[str, Member]:
    return {m.member_id: Member(m.member_id, m.client_id, m.host, m.group_instance_id)
            for m in members}


def frame_from(desc: GroupDescription, taken_ms: int, committed: Mapping[Slot, int],
               ends: Mapping[Slot, int], counts: Mapping[str, int],
               lag: int | None = None) -> Frame:
    """A frame of one description and the offsets read with it (the overview's)."""
    return frame_of(taken_ms, desc.state, desc.protocol, desc.assignor, desc.epoch,
                    desc.target_epoch, desc.members, committed, ends, counts, lag)


def frame_of(taken_ms: int, state: str, protocol: str, assignor: str | None,
             generation: int | None, target_epoch: int | None,
             members: Iterable[GroupMember], committed: Mapping[Slot, int],
             ends: Mapping[Slot, int], counts: Mapping[str, int], lag: int | None = None,
             topic: str | None = None) -> Frame:
    """A frame of a group's members and offsets; `topic` keeps only that topic's slots (the
    Live page shows one)."""
    shared: dict[Slot, list[str]] = {}
    assignment: dict[Slot, str] = {}
    reconciling = set()
    share = protocol == SHARE
    members = tuple(members)
    for m in members:
        slots = _task_slots(m) if protocol == STREAMS else m.assignment
        if topic is not None:
            slots = tuple(s for s in slots if s[0] == topic)
        for s in slots:
            if share:
                shared.setdefault(s, []).append(m.member_id)
            else:
                assignment[s] = m.member_id
        if m.target is not None:
            target = m.target if topic is None else tuple(s for s in m.target if s[0] == topic)
            if set(target) != set(slots):
                reconciling.add(m.member_id)
    if topic is not None:
        committed = {s: o for s, o in committed.items() if s[0] == topic}
        topics = {topic}
    else:
        topics = {t for t, _ in committed} | {t for t, _ in assignment} | {t for t, _ in shared}
    return Frame(
        taken_ms=taken_ms, state=state, protocol=protocol, assignor=assignor,
        generation=generation, target_epoch=target_epoch, members=members_of(members),
        assignment=assignment, reconciling=frozenset(reconciling),
        shared={s: tuple(sorted(ms)) for s, ms in shared.items()},
        committed=committed,
        behind=frozenset(s for s, o in committed.items() if o < ends.get(s, -1)),
        partition_counts={t: counts[t] for t in topics if t in counts}, lag=lag)
