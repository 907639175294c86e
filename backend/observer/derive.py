"""Stage 2, derive: pure functions from observations to ownership, lag and streams.

Nothing here talks to Kafka, so every rule is unit-tested with plain values.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from backend.contracts import SHARE, MemberView, PartitionView, StreamView
from backend.contracts.overview import NOTHING_UNREAD, seconds_since
from backend.kafka.partitioner import partition_for
from backend.observer.brokers import Placement
from backend.observer.collect import TP, RawMember, RawObservation, watched_topic

K = TypeVar("K")  # a partition's key: (topic, partition), or the partition of one topic

# ---- ownership ---------------------------------------------------------------------------




def is_shared(protocol: str) -> bool:
    """A share group assigns one partition to several members at once (a queue): it has
    sharers, never one owner, so rules built on one owner per partition do not apply."""
    return protocol == SHARE


def ownership(members: Iterable[RawMember], topic: str) -> dict[int, RawMember]:
    """partition -> member that currently owns it (assignment, not target). Meaningful for
    classic and consumer groups only: in a share group it would pick one sharer at random,
    so callers use `assigned` there."""
    owners: dict[int, RawMember] = {}
    for m in members:
        for t, p in m.assignment:
            if t == topic:
                owners[p] = m
    return owners


def assigned(members: Iterable[RawMember], topic: str) -> dict[int, tuple[RawMember, ...]]:
    """partition -> every member assigned it, by (client id, member id): one member in a
    classic or consumer group, any number in a share group."""
    by_partition: dict[int, list[RawMember]] = {}
    for m in members:
        for p in {p for t, p in m.assignment if t == topic}:
            by_partition.setdefault(p, []).append(m)
    return {p: tuple(sorted(ms, key=lambda m: (m.client_id, m.member_id)))
            for p, ms in by_partition.items()}


def assignment_map(members: Iterable[RawMember], topic: str) -> dict[int, str]:
    """partition -> member id; the shape the timeline diffs."""
    return {p: m.member_id for p, m in ownership(members, topic).items()}


def share_map(members: Iterable[RawMember], topic: str) -> dict[int, tuple[str, ...]]:
    """partition -> member ids of its sharers, sorted: what the timeline compares for a share
    group, where partitions gain and lose sharers instead of moving."""
    return {p: tuple(sorted(m.member_id for m in ms))
            for p, ms in assigned(members, topic).items()}


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


def first_unread(committed: int | None, start: int = 0) -> int:
    """The offset a group reads next: its commit, clamped to the log start (records below it
    were deleted or compacted away); the log start when it has not committed."""
    return start if committed is None or committed < start else committed


def lag_messages(committed: int | None, end: int, start: int = 0,
                 drained: bool = False) -> int:
    """Messages not yet processed. With no commit, everything still in the log counts.

    `drained`: a read_committed reader found no data record between the first unread offset
    and the end (`Sampler.record_times` answered None): what is left are transaction markers
    or aborted records, which no consumer ever processes, so the lag is 0 -- not the stuck 1
    a commit marker leaves after every transaction.
    """
    if drained:
        return 0
    left = end - first_unread(committed, start)
    return left if left > 0 else 0


def lag_seconds(committed: int | None, end: int, now_ms: int,
                record_ts_ms: int | None = None, start: int = 0,
                drained: bool = False) -> float | None:
    """How old the oldest unprocessed message is, in seconds; None when unknown.

    Only the broker's own timestamp of the first unprocessed data record (`record_ts_ms`,
    from `Sampler.record_times`) gives a value; a group with nothing left (caught up, or
    `drained`: only markers left) is 0. There is deliberately no fallback: the one this
    replaced interpolated the observer's history of log-end offsets, which dates when the
    *observer* saw the end move rather than when the record was written, starts only when
    the observer does, and cannot tell a data record from a commit marker -- on an idle
    transactional topic it made a caught-up group look older every second. An unknown age
    (no READ on the topic, or not read within the poll's budget) stays None, which every
    reader already shows as "unknown"; the next poll usually learns it, from the cache.
    The value is finite and never negative (a producer clock ahead of ours gives 0).
    """
    return seconds_since(_since(committed, end, start, record_ts_ms, drained), now_ms)


def _since(committed: int | None, end: int, start: int, record_ts_ms: int | None,
           drained: bool) -> int | None:
    """The age of what is left as a time: NOTHING_UNREAD when nothing is, else the first
    unprocessed record's timestamp (None: not known)."""
    if drained or first_unread(committed, start) >= end:
        return NOTHING_UNREAD
    return record_ts_ms


def unread_ranges(committed: Mapping[TP, int], ends: Mapping[TP, int],
                  starts: Mapping[TP, int], tps: Iterable[TP]) -> dict[TP, tuple[int, int]]:
    """(first unread offset, log end) of each partition in `tps` that has something left:
    the question `Sampler.record_times` answers."""
    ranges = {}
    for tp in tps:
        end = ends.get(tp, 0)
        first = first_unread(committed.get(tp), starts.get(tp, 0))
        if first < end:
            ranges[tp] = (first, end)
    return ranges


def effective_lag(committed: int | None, end: int, start: int, now_ms: int,
                  record_times: Mapping[K, int | None], key: K,
                  reported: int | None = None) -> tuple[int, float | None]:
    """(lag messages, lag seconds) of one partition, given what `Sampler.record_times`
    answered for it under `key`: a timestamp, None (only markers left: drained) or nothing
    (not learnt: the message count stands, the age is unknown).

    `reported`: the lag the broker reports for a share group's partition (KIP-1226), which
    is then the lag: it counts the records not yet acknowledged, where end - start offset
    also counts those acknowledged beyond the start offset. The age still comes from the
    record at the start offset, the oldest one not acknowledged.
    """
    lag, since = lag_and_since(committed, end, start, record_times, key, reported)
    return lag, seconds_since(since, now_ms)


def lag_and_since(committed: int | None, end: int, start: int,
                  record_times: Mapping[K, int | None], key: K,
                  reported: int | None = None) -> tuple[int, int | None]:
    """`effective_lag` with its age kept as a time (`PartitionLag.unread_since_ms`): the
    broker timestamp of the first record not processed, NOTHING_UNREAD when nothing is
    left, None when not learnt."""
    ts = record_times.get(key)
    drained = ts is None and key in record_times
    return (lag_messages(committed, end, start, drained) if reported is None else reported,
            _since(committed, end, start, ts, drained))


# ---- views -------------------------------------------------------------------------------


def partition_views(obs: RawObservation, topic: str,
                    record_times: Mapping[int, int | None],
                    health: Mapping[int, str]) -> tuple[PartitionView, ...]:
    """One view per partition of `topic`, with its effective lag: `record_times` is what
    `Sampler.record_times` answered, by partition, and a share group's lag is the broker's
    where it reports one (see `effective_lag`); with its leader, replicas and ISR when the
    poll read `topic`'s metadata."""
    shared = is_shared(obs.protocol)
    owners = {} if shared else ownership(obs.members, topic)
    everyone = assigned(obs.members, topic) if shared else {}
    placements = obs.placements if obs.watched == topic else {}
    views = []
    for p in range(obs.partition_counts.get(topic, 0)):
        tp: TP = (topic, p)
        end = obs.end_offsets.get(tp, 0)
        committed = obs.committed.get(tp)  # a share group's: the share-partition start offset
        owner = owners.get(p)
        sharers = (tuple(m.client_id for m in everyone.get(p, ())) if shared
                   else (owner.client_id,) if owner else ())
        reported = obs.reported_lag.get(tp)
        lag, lag_s = effective_lag(committed, end, obs.start_offsets.get(tp, 0), obs.taken_ms,
                                   record_times, p, reported)
        views.append(PartitionView(
            partition=p,
            owner=owner.client_id if owner else None,
            committed=committed,
            end=end,
            lag_messages=lag,
            lag_seconds=lag_s,
            health=health.get(p, "OK"),
            owner_member_id=owner.member_id if owner else None,
            lag_seconds_exact=lag_s is not None,
            lag_reported=reported is not None,
            sharers=sharers,
            **_placement_fields(placements.get(p)),
        ))
    return tuple(views)


def _placement_fields(pl: Placement | None) -> dict[str, object]:
    if pl is None:
        return {}
    return {"leader": pl.leader, "replicas": pl.replicas, "isr": pl.isr}


def member_views(obs: RawObservation, topic: str,
                 partitions: Sequence[PartitionView]) -> tuple[MemberView, ...]:
    """Members in a stable order, with their lag and whether they are idle.

    Idle = nothing to work on: no partition of the watched topic (nor a target one) and, in a
    streams group, no task either (its members are given tasks, often no partitions at all).
    In a share group every member assigned a partition works on it, however many others
    share it, and its lag is the backlog of the partitions it shares: so the members' lags
    overlap there and only the partitions' lags add up to the group's.
    """
    shared = is_shared(obs.protocol)
    lag_by_member: dict[str, int] = {}
    for pv in partitions:
        if pv.owner_member_id:
            lag_by_member[pv.owner_member_id] = (lag_by_member.get(pv.owner_member_id, 0)
                                                 + pv.lag_messages)
    lag_by_partition = {pv.partition: pv.lag_messages for pv in partitions}
    views = []
    for m in sorted(obs.members, key=lambda m: (m.client_id, m.member_id)):
        mine = tuple(p for t, p in m.assignment if t == topic)
        target = None if m.target is None else tuple(p for t, p in m.target if t == topic)
        lag = (sum(lag_by_partition.get(p, 0) for p in set(mine)) if shared
               else lag_by_member.get(m.member_id, 0))
        views.append(MemberView(
            member_id=m.member_id, client_id=m.client_id, host=m.host, partitions=mine,
            target_partitions=target, alive=True,
            idle=not mine and not target and not m.tasks, lag_messages=lag,
            group_instance_id=m.group_instance_id, tasks=m.tasks))
    return tuple(views)


def stream_views(keys: Mapping[str, int | None], num_partitions: int,
                 owners: Mapping[int, str | None]) -> tuple[StreamView, ...]:
    """stream -> partition -> owner (None in a share group, whose partitions have sharers:
    a stream's records go to whichever sharer acquires them).

    `keys` maps a stream id to the partition it was seen in (sampled from the log) or None
    when only the key is known (our own streams): then the Java default partitioner
    (murmur2) says where it lives. A seen partition wins: a foreign producer may use
    another partitioner, and what is in the log is the truth.
    """
    if num_partitions <= 0:
        return ()

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
    """The topic a snapshot shows: the one asked for, else the one with most partitions
    (the collector's rule, so it is the topic whose metadata the poll read anew)."""
    return watched_topic(obs.partition_counts, preferred)
