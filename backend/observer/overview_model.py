"""The overview's memory: from successive readings of each group to its `GroupRow`.

Pure (no Kafka): the watcher feeds it what the collector read, and every rule here is
unit-tested with plain values. Per group it keeps a bounded total-lag trend (sparkline, rate,
time to catch up), Burrow-style offset windows per partition (health, `evaluate.py`), and its
rebalance episodes (the memory's tracker, `backend/history/episodes.py`: the same episodes
and causes the Live page and the stored history show) with the start times of the last day.
A group no longer listed is forgotten, so memory follows the cluster, not the uptime; what
outlives the process is the recorder's (`drain` hands it each cycle's episodes, state
changes and lag points, and `seed` takes back what the store kept).
"""

from __future__ import annotations

import zlib
from bisect import bisect_left
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace

from backend.contracts import CLASSIC
from backend.contracts.history import PARTITION_LAG_STEP_MS, Action, Episode, StateChange
from backend.contracts.overview import (
    ERR,
    REBALANCE_WINDOW_MS,
    TREND_POINTS,
    GroupRow,
    PartitionLag,
    oldest_age,
    worst,
)
from backend.history.episodes import EpisodeTracker
from backend.history.frames import frame_from
from backend.history.store import GroupLag, Seed
from backend.kafka.groups import TP, same_tp
from backend.observer.derive import lag_and_since
from backend.observer.evaluate import REJUDGED, REPEATED, OffsetWindows, Rules
from backend.observer.overview_collect import GroupReading, Listed

REBALANCING = frozenset({"PreparingRebalance", "CompletingRebalance", "Reconciling",
                         "Assigning"})
RATE_SPAN_MS = 60_000  # the lag rate is the slope over about the last minute of points


DAY_MS = 86_400_000
# a group's lag is recorded when it changes, and at least this often while it does not
LAG_KEEPALIVE_MS = 300_000


def lag_phase_ms(group: str) -> int:
    """How far into its first PARTITION_LAG_STEP_MS a group's periodic points are due: a
    stable hash of its name, so a cluster's groups, all first seen in one cycle, do not all
    write their partitions' lag (and keepalive) in the same cycle every step after: 65 000
    groups' partition points at once are one burst for the recorder and the store."""
    return zlib.crc32(group.encode()) % PARTITION_LAG_STEP_MS


@dataclass(slots=True)
class _GroupMemory:
    tracker: EpisodeTracker
    # the total lag at the last TREND_POINTS refreshes and their times, oldest first: tuples
    # replaced at each refresh, so the row's `lag_trend` is this very tuple, and a total
    # repeating the last is the same number: a steady group's sixty points cost one tuple
    trend_ms: tuple[int, ...] = ()
    trend_lag: tuple[int, ...] = ()
    windows: OffsetWindows = field(default_factory=lambda: OffsetWindows(Rules()))
    # episode starts within the last day, oldest first: a tuple, since an empty deque is 760
    # bytes and most groups of a cluster never rebalance
    starts: tuple[int, ...] = ()
    last_rebalance_ms: int | None = None  # kept after the day: "last one 3 days ago"
    last_cause: str | None = None
    state: tuple | None = None  # what the last StateChange said
    # what the tracker last saw: the description's facts, the total lag, the commits and
    # the partition counts (the collector keeps one dict while they do not change, so a
    # quiet group compares them by identity; a new dict is compared by its counts)
    seen: tuple | None = None
    lag_written: tuple[int, int, float | None] | None = None  # (ts, lag, seconds)
    parts_written: tuple[int, dict] | None = None  # (ts, partition lags)
    # what the last reading's partitions rested on (`OverviewModel._unmoved`): its commits
    # (the one dict `seen` holds too), members, record times (the very mapping the watcher
    # handed over) and partitions in the row's order; `settled`: every one of those
    # partitions' windows settled and none fed by that reading
    committed: Mapping[TP, int] | None = None
    members: tuple = ()
    times: Mapping[TP, int | None] | None = None
    tps: tuple[TP, ...] = ()
    settled: bool = False
    # every partition the group commits on or owns, sorted, and the commits it was made from
    # (by identity: the reader hands an unchanged group's very dict back): sorting them
    # again for every group every cycle was a tenth of a busy cycle's fold
    universe: tuple[TP, ...] = ()
    universe_of: Mapping[TP, int] | None = None


def _same_lag(last: tuple[int, int, float | None], now: int, total: int,
              seconds: float | None) -> bool:
    """Nothing new since the point written last: the same lag, and its age the same oldest
    record's, grown by the time between (a stuck or idle group: most of a cluster's)."""
    ts, lag, was = last
    if lag != total or (was is None) != (seconds is None):
        return False
    return seconds is None or was is None or abs(seconds - was - (now - ts) / 1000) < 1.0


def lag_rate(times: Sequence[int], lags: Sequence[int],
             span_ms: int = RATE_SPAN_MS) -> float | None:
    """Least-squares slope of total lag over time, msg/s, from the points (`times[i]`,
    `lags[i]`) of the last `span_ms`; None with fewer than two points or under a second of
    span. One pass over the span's points alone (the times ascend, so it is a tail found by
    bisection): the overview computes it for every group every cycle."""
    if len(times) != len(lags):
        raise ValueError("lag_rate needs one lag per time")
    if len(times) < 2:
        return None
    newest = times[-1]
    first = bisect_left(times, newest - span_ms)  # times ascend: the span is a tail
    n = len(times) - first
    if n < 2 or newest - times[first] < 1000:
        return None
    if lags[-1] == lags[first] and lags[first:].count(lags[-1]) == n:
        return 0.0  # a steady lag (most groups): the slope the sums below would give
    st = sv = stt = stv = 0.0
    for i in range(first, len(times)):
        t, v = times[i], lags[i]
        t -= newest  # centred near zero: no precision lost in t*t
        st += t
        sv += v
        stt += t * t
        stv += t * v
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


class OverviewModel:
    def __init__(self, cluster: str = "") -> None:
        self.cluster = cluster
        # the rows by group, kept in name order between publications (a sort of 65 000 names
        # per batch cost 2 s a cycle, a lookup of each name per publication 1 s): a row
        # replaced keeps its place, and `_in_order` is False when a group came or went
        self._rows: dict[str, GroupRow] = {}
        self._in_order = True
        self._memory: dict[str, _GroupMemory] = {}
        self._episodes: list[Episode] = []
        self._states: list[StateChange] = []
        self._lag: list[GroupLag] = []
        self._seed: Seed | None = None

    def drain(self) -> tuple[list[Episode], list[StateChange], list[GroupLag]]:
        """The episodes, state changes and lag points recorded since the last drain."""
        out = (self._episodes, self._states, self._lag)
        self._episodes, self._states, self._lag = [], [], []
        return out

    def seed(self, seed: Seed) -> None:
        """What the store kept of each group: its episode starts of the last day and its
        last cause, so the counts continue across a restart. A group not seen yet takes it
        when it is."""
        self._seed = seed
        for group, mem in self._memory.items():
            self._seed_group(group, mem)

    def _seed_group(self, group: str, mem: _GroupMemory) -> None:
        if self._seed is None:
            return
        known = set(mem.starts)
        older = [t for t in self._seed.starts.get(group, ()) if t not in known]
        if older:
            mem.starts = tuple(sorted([*older, *mem.starts]))
        last = self._seed.last_cause.get(group)
        if last is not None and (mem.last_rebalance_ms is None or last[0] > mem.last_rebalance_ms):
            mem.last_rebalance_ms, mem.last_cause = last
        elif mem.starts and mem.last_rebalance_ms is None:
            mem.last_rebalance_ms = mem.starts[-1]

    def _remember(self, group: str) -> _GroupMemory:
        mem = self._memory.get(group)
        if mem is None:
            mem = self._memory[group] = _GroupMemory(EpisodeTracker(self.cluster, group, keep=1))
            self._seed_group(group, mem)
        return mem

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
        if seen.keys() == self._rows.keys():
            self._rows.update(seen)  # the same groups: each keeps its place
        else:
            self._rows = seen
            self._in_order = False

    def failed(self, group: str, error: str, now_ms: int) -> GroupRow:
        row = self._rows.get(group) or GroupRow(group=group, state="Unknown",
                                                protocol=CLASSIC)
        row = replace(row, error=error, health=ERR, described_ms=now_ms)
        self._put(row)
        return row

    def _put(self, row: GroupRow) -> None:
        if row.group not in self._rows:
            self._in_order = False
        self._rows[row.group] = row

    def update(self, reading: GroupReading, ends: Mapping[TP, int], starts: Mapping[TP, int],
               own: bool, oldest_unread_ms: Mapping[TP, int | None] | None = None,
               counts: Mapping[str, int] | None = None,
               actions: Sequence[Action] = (), moved: AbstractSet[TP] | None = None
               ) -> GroupRow:
        """Fold one reading into the group's row.

        `oldest_unread_ms` maps a partition to the broker timestamp of the first record the
        group has not processed; None there means nothing but transaction markers (or aborted
        records) lies between the commit and the log end, so the partition is caught up.
        A share group's lag is the one its broker reports (`reading.reported_lag`) where it
        reports one, as on its Live page. `counts` (topic -> partitions) lets the episode
        tracker see partitions added; `actions` are the supervisor's on the group's replicas.
        `moved`: the partitions whose log end or start is not last cycle's (the watcher's);
        with it, a group none of whose inputs moved takes its last partitions, aged
        (`_unmoved`); without it every partition is folded.
        """
        if reading.error is not None or reading.description is None:
            return self.failed(reading.group, reading.error or "no description", reading.taken_ms)
        desc = reading.description
        now = reading.taken_ms
        mem = self._remember(reading.group)
        times = oldest_unread_ms or {}
        last = self._rows.get(reading.group)
        taken = 0
        if moved is not None and last is not None and self._unmoved(
                reading, mem, last, ends, moved, oldest_unread_ms):
            # settled windows are not fed; filling ones take the repeat in constant time (not
            # a share group's: its lag is the broker's, not one of the inputs compared)
            taken = REPEATED if mem.settled else \
                0 if reading.reported_lag else mem.windows.repeat_all(now)
        if taken:
            parts = last.partitions  # the very objects: their ages are kept as times
            health = last.health
            if taken == REJUDGED:  # enough points now to judge the lagging partitions
                parts = tuple(self._rejudged(parts, mem.windows))
                health = worst(p.health for p in parts)
            # windows filled by repeats alone settle as a fold would find them: from then on
            # not even the clock moves
            mem.settled = mem.settled or mem.windows.all_settled()
            total, topics = last.lag_messages or 0, last.topics
        else:
            parts, owners = self._fold(reading, mem, last, ends, starts, times, now)
            mem.times = oldest_unread_ms
            total = sum(p.lag_messages for p in parts)
            topics = tuple(sorted({p.topic for p in parts} | {t for t, _ in owners}))
            health = worst(p.health for p in parts)
        if mem.trend_lag and mem.trend_lag[-1] == total:
            total = mem.trend_lag[-1]
        mem.trend_ms = (*mem.trend_ms[1 - TREND_POINTS:], now)
        mem.trend_lag = (*mem.trend_lag[1 - TREND_POINTS:], total)
        rate = lag_rate(mem.trend_ms, mem.trend_lag)
        max_s = oldest_age(parts, now)
        self._track(reading, mem, ends, counts or {}, total, actions)
        self._record(reading.group, mem, desc, now, total, max_s, parts)
        day_ago, hour_ago = now - DAY_MS, now - REBALANCE_WINDOW_MS
        if mem.starts and mem.starts[0] < day_ago:
            mem.starts = mem.starts[bisect_left(mem.starts, day_ago):]
        row = GroupRow(
            group=reading.group, state=desc.state, protocol=desc.protocol,
            assignor=desc.assignor, members=len(desc.members),
            topics=topics, lag_messages=total, max_lag_seconds=max_s,
            lag_trend=mem.trend_lag, lag_rate=rate,
            catch_up_seconds=catch_up_seconds(total, rate),
            health=health,
            rebalances_last_hour=sum(1 for t in mem.starts if t >= hour_ago),
            rebalances_24h=len(mem.starts),
            rebalance_times=tuple(t for t in mem.starts if t >= hour_ago),
            last_rebalance_ms=mem.last_rebalance_ms, last_cause=mem.last_cause,
            rebalancing=mem.tracker.in_progress, generation=desc.epoch,
            own=own, partitions=tuple(parts), described_ms=now)
        self._put(row)
        return row

    def _fold(self, reading: GroupReading, mem: _GroupMemory, last: GroupRow | None,
              ends: Mapping[TP, int], starts: Mapping[TP, int],
              times: Mapping[TP, int | None], now: int
              ) -> tuple[list[PartitionLag], dict[TP, str]]:
        """Every partition of the reading, each judged by its window (fed unless settled and
        unmoved); notes in `mem` what the parts rested on, for `_unmoved` next time."""
        desc = reading.description
        assert desc is not None
        reported = reading.reported_lag  # empty but for share groups: one lookup a partition
        owners = {tp: m.client_id for m in desc.members for tp in m.assignment}
        if reading.committed is not mem.universe_of or desc.members != mem.members:
            mem.universe = tuple(sorted(set(reading.committed) | set(owners)))
            mem.universe_of = reading.committed
        tps = mem.universe
        if not all(map(ends.__contains__, tps)):
            # partitions with no log end known (topic gone, or leaderless) are not counted
            tps = tuple(tp for tp in tps if tp in ends)
        before = last.partitions if last is not None else ()
        if len(before) != len(tps):
            before = ()
        windows = mem.windows
        parts = []
        fed = False
        for i, tp in enumerate(tps):
            committed = reading.committed.get(tp)
            end = ends[tp]
            start = starts.get(tp, 0)
            lag, since = lag_and_since(committed, end, start, times, tp, reported.get(tp))
            owner = owners.get(tp)
            was = before[i] if before else None
            same = was is not None and was.lag_messages == lag and was.committed == committed \
                and was.end == end and was.owner == owner and was.partition == tp[1] \
                and was.topic == tp[0]
            if same and windows.settled(tp):
                # nothing moved on a partition whose window is settled: its health stands
                # and its window need not be fed (most partitions of a large cluster, most
                # cycles: the fold's largest cost was feeding and judging them)
                parts.append(was if was.unread_since_ms == since else PartitionLag(
                    tp[0], tp[1], committed, end, lag, since, was.health, owner))
                continue
            fed = True
            health = windows.feed(tp, now, committed, lag, owned=owner is not None)
            # a repeated reading whose verdict stands keeps its partition: making it again
            # was a tenth of a busy cycle's fold
            parts.append(was if same and was.health == health and was.unread_since_ms == since
                         else PartitionLag(tp[0], tp[1], committed, end, lag, since, health,
                                           owner))
        if mem.committed is not reading.committed and mem.committed != reading.committed:
            # equal commits: one dict kept (`seen`'s too)
            mem.committed = reading.committed
        mem.members, mem.tps, mem.settled = desc.members, tps, not fed and not reported
        return parts, owners

    @staticmethod
    def _unmoved(reading: GroupReading, mem: _GroupMemory, last: GroupRow,
                 ends: Mapping[TP, int], moved: AbstractSet[TP],
                 times: Mapping[TP, int | None] | None) -> bool:
        """Whether the reading repeats the last one on every input of its partitions: the
        same commits and members, the same record times (the watcher hands over the very
        mapping it kept when it did not ask again), no log end or start moved. Then `_fold`
        would keep each partition's numbers, and its health where its window is settled or
        takes the repeat in constant time (`OffsetWindows.repeat_all`); only the ages grow
        (most groups of a large cluster, most cycles, from their first readings on)."""
        desc = reading.description
        assert desc is not None
        return last.error is None and times is mem.times \
            and (reading.committed is mem.committed or reading.committed == mem.committed) \
            and desc.members == mem.members \
            and moved.isdisjoint(mem.tps) and all(map(ends.__contains__, mem.tps)) \
            and len(last.partitions) == len(mem.tps)

    @staticmethod
    def _rejudged(parts: Iterable[PartitionLag], windows: OffsetWindows
                  ) -> Iterable[PartitionLag]:
        """The partitions with their windows' verdicts, once every window took a repeat that
        changed a verdict: each is its window's steady verdict, read from its lag and owner."""
        for p in parts:
            health = windows.steady_verdict(p.lag_messages, p.owner is not None)
            yield p if health == p.health else PartitionLag(
                p.topic, p.partition, p.committed, p.end, p.lag_messages, p.unread_since_ms,
                health, p.owner)

    def _track(self, reading: GroupReading, mem: _GroupMemory, ends: Mapping[TP, int],
               counts: Mapping[str, int], total: int, actions: Sequence[Action]) -> None:
        """The group's episodes: one per rebalance, counted when first seen."""
        desc = reading.description
        assert desc is not None
        seen = (desc.state, desc.protocol, desc.assignor, desc.epoch, desc.target_epoch,
                desc.members, total, mem.committed, counts)  # the reading's, kept once
        if mem.tracker.idle and seen == mem.seen:
            # most groups most cycles (Empty, their commits where they were): the tracker
            # learns only the time, for a small share of a frame's cost (bench/README.md,
            # "The memory")
            mem.tracker.touch(reading.taken_ms)
            return
        mem.seen = seen
        frame = frame_from(desc, reading.taken_ms, mem.committed or {}, ends, counts, total)
        for ep in mem.tracker.observe(frame, actions):
            self._episodes.append(ep)
            if not ep.rebalance:
                continue  # kept by the memory, not counted
            if not mem.starts or ep.start_ms > mem.starts[-1]:
                mem.starts = (*mem.starts, ep.start_ms)
            if mem.last_rebalance_ms is None or ep.start_ms >= mem.last_rebalance_ms:
                mem.last_rebalance_ms = ep.start_ms
                if ep.end_ms is not None:
                    mem.last_cause = ep.cause

    def _record(self, group: str, mem: _GroupMemory, desc, now: int, total: int,
                max_s: float | None, parts: list[PartitionLag]) -> None:
        """What the memory keeps of this reading: a state change when the description's
        facts changed, the total lag when it changed (or every LAG_KEEPALIVE_MS), and each
        partition's every PARTITION_LAG_STEP_MS, at the group's own phase of the step."""
        state = (desc.state, desc.protocol, desc.assignor, len(desc.members), desc.epoch)
        if state != mem.state:
            mem.state = state
            self._states.append(StateChange(now, group, *state))
        seconds = None if max_s is None else round(max_s, 1)
        last = mem.lag_written
        lags = None
        if mem.parts_written is None or now - mem.parts_written[0] >= PARTITION_LAG_STEP_MS:
            lags = {same_tp(p.topic, p.partition): p.lag_messages for p in parts}
            if mem.parts_written is None:  # the first points; the next due at the group's phase
                mem.parts_written = (now - lag_phase_ms(group), lags)
            elif lags == mem.parts_written[1] and now - mem.parts_written[0] < LAG_KEEPALIVE_MS:
                lags = None
            else:
                mem.parts_written = (now, lags)
        if lags is not None or last is None or now - last[0] >= LAG_KEEPALIVE_MS \
                or not _same_lag(last, now, total, seconds):
            mem.lag_written = (now, total, seconds)
            self._lag.append(GroupLag(group, now, total, seconds, lags))

    def rows(self) -> tuple[GroupRow, ...]:
        if not self._in_order:
            self._rows = dict(sorted(self._rows.items()))
            self._in_order = True
        return tuple(self._rows.values())

    def row(self, group: str) -> GroupRow | None:
        return self._rows.get(group)
