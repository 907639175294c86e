"""The overview's memory: from successive readings of each group to its `GroupRow`.

Pure (no Kafka): the watcher feeds it what the collector read, and every rule here is
unit-tested with plain values. Per group it keeps a bounded total-lag trend (sparkline, rate,
time to catch up), Burrow-style offset windows per partition (health, `evaluate.py`), and
the times of recent rebalances; a group no longer listed is forgotten, so memory follows the
cluster, not the uptime.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from backend.cluster.groups import TP
from backend.contracts import CLASSIC
from backend.contracts.overview import (
    ERR,
    REBALANCE_WINDOW_MS,
    TREND_POINTS,
    GroupRow,
    PartitionLag,
    worst,
)
from backend.observer.derive import effective_lag
from backend.observer.evaluate import OffsetPoint, OffsetWindows, Rules
from backend.observer.overview_collect import GroupReading, Listed

REBALANCING = frozenset({"PreparingRebalance", "CompletingRebalance", "Reconciling",
                         "Assigning"})
RATE_SPAN_MS = 60_000  # the lag rate is the slope over about the last minute of points


@dataclass
class _GroupMemory:
    trend: deque[tuple[int, int]] = field(default_factory=lambda: deque(maxlen=TREND_POINTS))
    windows: OffsetWindows = field(default_factory=lambda: OffsetWindows(Rules()))
    rebalances: deque[int] = field(default_factory=deque)  # times within the last hour
    last_rebalance_ms: int | None = None  # kept after the hour: "last one 3 h ago"
    signature: tuple | None = None
    rebalancing: bool = False


def lag_rate(points: Iterable[tuple[int, int]], span_ms: int = RATE_SPAN_MS) -> float | None:
    """Least-squares slope of total lag over time, msg/s, from the points of the last
    `span_ms`; None with fewer than two points or under a second of span. One pass over
    the points: the overview computes it for every group every cycle."""
    pts = points if isinstance(points, Sequence) else list(points)
    if len(pts) < 2:
        return None
    newest = pts[-1][0]
    n = 0
    st = sv = stt = stv = 0.0
    oldest = newest
    for t, v in pts:
        if newest - t > span_ms:
            continue
        if n == 0:
            oldest = t
        n += 1
        t -= newest  # centred near zero: no precision lost in t*t
        st += t
        sv += v
        stt += t * t
        stv += t * v
    if n < 2 or newest - oldest < 1000:
        return None
    var = stt - st * st / n
    if var <= 0:
        return None
    return (stv - st * sv / n) / var * 1000.0


def catch_up_seconds(lag: int | None, rate: float | None) -> float | None:
    """Seconds until the lag reaches zero at the current rate; 0 when there is none; None
    when it is not shrinking."""
    if lag is None:
        return None
    if lag == 0:
        return 0.0
    if rate is None or rate >= 0:
        return None
    return lag / -rate


def _signature(reading: GroupReading) -> tuple:
    desc = reading.description
    if desc is None:
        return ()
    return tuple(sorted((m.member_id, m.assignment) for m in desc.members))


class OverviewModel:
    def __init__(self) -> None:
        self._rows: dict[str, GroupRow] = {}
        self._memory: dict[str, _GroupMemory] = {}

    def listed(self, groups: Iterable[Listed], partial: bool = False) -> None:
        """The groups the cluster lists now: new ones get a pending row, vanished ones are
        forgotten; a described row keeps its values but takes the listing's state. A
        `partial` listing (a broker did not answer: its groups are missing, not gone)
        forgets nothing."""
        seen = {} if not partial else dict(self._rows)
        for g in groups:
            row = self._rows.get(g.group)
            if row is None:
                row = GroupRow(group=g.group, state=g.state, protocol=g.protocol or CLASSIC)
            elif row.state != g.state and row.error is None:
                row = replace(row, state=g.state)
            seen[g.group] = row
        for gone in set(self._memory) - set(seen):
            del self._memory[gone]
        self._rows = seen

    def failed(self, group: str, error: str, now_ms: int) -> GroupRow:
        row = self._rows.get(group) or GroupRow(group=group, state="Unknown",
                                                protocol=CLASSIC)
        row = replace(row, error=error, health=ERR, described_ms=now_ms)
        self._rows[group] = row
        return row

    def update(self, reading: GroupReading, ends: Mapping[TP, int], starts: Mapping[TP, int],
               own: bool, oldest_unread_ms: Mapping[TP, int | None] | None = None) -> GroupRow:
        """Fold one reading into the group's row.

        `oldest_unread_ms` maps a partition to the broker timestamp of the first record the
        group has not processed; None there means nothing but transaction markers (or aborted
        records) lies between the commit and the log end, so the partition is caught up.
        A share group's lag is the one its broker reports (`reading.reported_lag`) where it
        reports one, as on its Live page.
        """
        if reading.error is not None or reading.description is None:
            return self.failed(reading.group, reading.error or "no description", reading.taken_ms)
        desc = reading.description
        now = reading.taken_ms
        mem = self._memory.setdefault(reading.group, _GroupMemory())
        times = oldest_unread_ms or {}
        reported = reading.reported_lag  # empty but for share groups: one lookup a partition

        owners = {tp: m.client_id for m in desc.members for tp in m.assignment}
        tps = sorted(set(reading.committed) | set(owners))
        parts = []
        for tp in tps:
            if tp not in ends:
                continue  # no log end known (topic gone, or leaderless): not counted
            committed = reading.committed.get(tp)
            end, start = ends[tp], starts.get(tp, 0)
            lag, lag_s = effective_lag(committed, end, start, now, times, tp, reported.get(tp))
            mem.windows.add(tp, OffsetPoint(now, committed, lag))
            health = mem.windows.evaluate(tp, owned=tp in owners)
            parts.append(PartitionLag(topic=tp[0], partition=tp[1], committed=committed,
                                      end=end, lag_messages=lag, lag_seconds=lag_s,
                                      health=health, owner=owners.get(tp)))

        total = sum(p.lag_messages for p in parts)
        mem.trend.append((now, total))
        rate = lag_rate(mem.trend)
        self._count_rebalance(mem, reading, now)
        known_s = [p.lag_seconds for p in parts if p.lag_seconds is not None]
        row = GroupRow(
            group=reading.group, state=desc.state, protocol=desc.protocol,
            assignor=desc.assignor, members=len(desc.members),
            topics=tuple(sorted({p.topic for p in parts} | {t for t, _ in owners})),
            lag_messages=total, max_lag_seconds=max(known_s) if known_s else None,
            lag_trend=tuple(v for _, v in mem.trend), lag_rate=rate,
            catch_up_seconds=catch_up_seconds(total, rate),
            health=worst(p.health for p in parts),
            rebalances_last_hour=len(mem.rebalances),
            last_rebalance_ms=mem.last_rebalance_ms,
            own=own, partitions=tuple(parts), described_ms=now)
        self._rows[reading.group] = row
        return row

    @staticmethod
    def _count_rebalance(mem: _GroupMemory, reading: GroupReading, now: int) -> None:
        """One rebalance per episode: entering a rebalancing state, or (between two polls
        that both saw it settled) a change of members or assignment."""
        desc = reading.description
        assert desc is not None
        signature = _signature(reading)
        rebalancing = desc.state in REBALANCING
        if mem.signature is not None and not mem.rebalancing and (
                rebalancing or signature != mem.signature):
            mem.rebalances.append(now)
            mem.last_rebalance_ms = now
        mem.signature, mem.rebalancing = signature, rebalancing
        while mem.rebalances and now - mem.rebalances[0] > REBALANCE_WINDOW_MS:
            mem.rebalances.popleft()

    def rows(self) -> tuple[GroupRow, ...]:
        return tuple(self._rows[g] for g in sorted(self._rows))

    def row(self, group: str) -> GroupRow | None:
        return self._rows.get(group)
