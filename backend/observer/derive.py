"""Stage 2, derive: pure functions from observations to ownership, lag and streams.

Nothing here talks to Kafka, so every rule is unit-tested with plain values.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from backend.contracts import MemberView, PartitionView, StreamView
from backend.observer.collect import TP, RawMember, RawObservation

# ---- ownership ---------------------------------------------------------------------------


def ownership(members: Iterable[RawMember], topic: str) -> dict[int, RawMember]:
    """partition -> member that currently owns it (assignment, not target)."""
    owners: dict[int, RawMember] = {}
    for m in members:
        for t, p in m.assignment:
            if t == topic:
                owners[p] = m
    return owners


def assignment_map(members: Iterable[RawMember], topic: str) -> dict[int, str]:
    """partition -> member id; the shape the timeline diffs."""
    return {p: m.member_id for p, m in ownership(members, topic).items()}


@dataclass(frozen=True)
class Move:
    partition: int
    source: str | None  # member id (or None: was unowned)
    target: str | None  # member id (or None: now unowned)


def assignment_diff(before: Mapping[int, str], after: Mapping[int, str]) -> list[Move]:
    """Partitions whose owner changed, including ones that became owned or unowned."""
    moves = []
    for p in sorted(set(before) | set(after)):
        a, b = before.get(p), after.get(p)
        if a != b:
            moves.append(Move(p, a, b))
    return moves


# ---- lag ---------------------------------------------------------------------------------


def lag_messages(committed: int | None, end: int, start: int = 0) -> int:
    """Messages not yet processed. With no commit, everything still in the log counts."""
    base = committed if committed is not None else start
    return max(0, end - max(base, start))


def lag_seconds(committed: int | None, end: int, points: Sequence[tuple[int, int]],
                now_ms: int, exact_ts_ms: int | None = None,
                start: int = 0) -> float | None:
    """How old the oldest unprocessed message is, in seconds.

    Exact when the record timestamp at the committed offset is known. Otherwise the log-end
    offset history `points` ((end offset, observed ms), oldest first) tells when the log
    grew past the committed offset: the record at offset c arrived when the end went from c
    to c + 1, located by linear interpolation between the two observations around it.
    Older than the history: the history's age is returned as a lower bound. None: unknown.
    """
    base = committed if committed is not None else start
    if base >= end:
        return 0.0
    if exact_ts_ms is not None:
        return max(0.0, (now_ms - exact_ts_ms) / 1000.0)
    if not points:
        return None
    target = base + 1  # the end offset right after the oldest unprocessed record arrived
    offsets = [o for o, _ in points]
    i = bisect_right(offsets, target - 1)  # points[:i] have end <= base
    if i == 0:
        return max(0.0, (now_ms - points[0][1]) / 1000.0)
    if i >= len(points):
        # the log has not been seen past `base` yet (end moved since the last point)
        return max(0.0, (now_ms - points[-1][1]) / 1000.0)
    (o1, t1), (o2, t2) = points[i - 1], points[i]
    arrived = t1 + (target - o1) / (o2 - o1) * (t2 - t1)
    return max(0.0, (now_ms - arrived) / 1000.0)


# ---- views -------------------------------------------------------------------------------


def partition_views(obs: RawObservation, topic: str,
                    end_history: Mapping[int, Sequence[tuple[int, int]]],
                    exact_ts: Mapping[int, int],
                    health: Mapping[int, str]) -> tuple[PartitionView, ...]:
    owners = ownership(obs.members, topic)
    views = []
    for p in range(obs.partition_counts.get(topic, 0)):
        tp: TP = (topic, p)
        end = obs.end_offsets.get(tp, 0)
        start = obs.start_offsets.get(tp, 0)
        committed = obs.committed.get(tp)
        owner = owners.get(p)
        exact = exact_ts.get(p)
        views.append(PartitionView(
            partition=p,
            owner=owner.client_id if owner else None,
            committed=committed,
            end=end,
            lag_messages=lag_messages(committed, end, start),
            lag_seconds=lag_seconds(committed, end, end_history.get(p, ()), obs.taken_ms,
                                    exact, start),
            health=health.get(p, "OK"),
            owner_member_id=owner.member_id if owner else None,
            lag_seconds_exact=exact is not None,
        ))
    return tuple(views)


def member_views(obs: RawObservation, topic: str,
                 partitions: Sequence[PartitionView]) -> tuple[MemberView, ...]:
    """Members in a stable order; idle = owns nothing on the watched topic."""
    lag_by_member: dict[str, int] = {}
    for pv in partitions:
        if pv.owner_member_id:
            lag_by_member[pv.owner_member_id] = (lag_by_member.get(pv.owner_member_id, 0)
                                                 + pv.lag_messages)
    views = []
    for m in sorted(obs.members, key=lambda m: (m.client_id, m.member_id)):
        mine = tuple(p for t, p in m.assignment if t == topic)
        target = None if m.target is None else tuple(p for t, p in m.target if t == topic)
        views.append(MemberView(
            member_id=m.member_id, client_id=m.client_id, host=m.host, partitions=mine,
            target_partitions=target, alive=True, idle=not mine and not target,
            lag_messages=lag_by_member.get(m.member_id, 0),
            group_instance_id=m.group_instance_id))
    return tuple(views)


def stream_views(keys: Mapping[str, int | None], num_partitions: int,
                 owners: Mapping[int, str | None]) -> tuple[StreamView, ...]:
    """stream -> partition -> owner.

    `keys` maps a stream id to the partition it was seen in (sampled from the log) or None
    when only the key is known (our own streams): then the Java default partitioner
    (murmur2) says where it lives. A seen partition wins: a foreign producer may use
    another partitioner, and what is in the log is the truth.
    """
    if num_partitions <= 0:
        return ()
    from backend.cluster.partitioner import partition_for

    views = []
    for key in sorted(keys):
        seen = keys[key]
        if seen is not None and seen < num_partitions:
            p, source = seen, "sampled"
        else:
            p, source = partition_for(key, num_partitions), "murmur2"
        views.append(StreamView(stream_id=key, partition=p, owner=owners.get(p), source=source))
    return tuple(views)


def choose_topic(obs: RawObservation, preferred: str | None) -> str | None:
    """The topic a snapshot shows: the one asked for, else the one with most partitions."""
    if preferred is not None:
        return preferred
    if not obs.partition_counts:
        return None
    return max(sorted(obs.partition_counts), key=lambda t: obs.partition_counts[t])


WORST_FIRST = ("STOP", "STALL", "REWIND", "WARN", "OK")


def worst(statuses: Iterable[str]) -> str:
    seen = set(statuses)
    for s in WORST_FIRST:
        if s in seen:
            return s
    return "OK"
