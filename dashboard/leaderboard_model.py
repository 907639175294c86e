"""Pure model of the room leaderboard: who is in the group, and how much each one processed.

Credit comes from committed offsets, the one measure every member shares whatever it runs
(a groupscope replica, a participant's ten-line confluent-kafka loop, the Java console
consumer): each time a partition's committed offset advances between two polls, the advance
goes to the partition's owner at the newer poll (or, when nobody owns it at that poll, as in
the middle of a rebalance, to its last known owner: a member commits what it processed as
its partitions are revoked). So a member's total is what it processed while it was a member,
and it keeps that total after it leaves.

`Leaderboard.fold` takes the observer's Snapshots in time order, any number at a time, and
`rows` reads the table. Memory is bounded: live rows are the group's members, departed ones
are capped (MAX_DEPARTED, oldest departure dropped first), and every per-member series is a
short window.

How a member went: nothing in a Snapshot tells a graceful leave from a session expiry (the
timeline records only who left). Two other sources do. The supervisor knows how the
replicas it spawned ended (killed or crashed, or stopped). A groupscope replica publishes a
`stopped` event after it has left the group, so a replica that departs without one within
STOP_GRACE_MS crashed. For any other consumer there is no way to know: "left or crashed".
"""

from __future__ import annotations

from collections import Counter, OrderedDict, deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from backend.contracts import EventType, Snapshot

MAX_DEPARTED = 50
RATE_WINDOW_MS = 10_000  # messages per second over the last ten seconds
STOP_GRACE_MS = 30_000  # a replica's `stopped` event may arrive this long after it left
MAX_NAMES = 512  # names known to publish events / stop events remembered

LEFT = "left"
CRASHED = "crashed"
UNKNOWN_EXIT = "left or crashed"
SHARING, SOLO, WAITING = "sharing", "solo", "waiting"
_CRASH_STATES = ("killed", "crashed")
_STOP_STATES = ("stopped",)


@dataclass(frozen=True)
class LeaderRow:
    """One member as the leaderboard shows it; `left_ms` is None while it is in the group."""

    member_id: str
    name: str  # client.id
    host: str
    partitions: tuple[int, ...]
    streams: int
    rate: float  # messages per second over RATE_WINDOW_MS (0 once departed)
    processed: int
    joined_ms: int  # first poll that saw it
    seen_at_start: bool  # already a member when the leaderboard began: joined earlier
    left_ms: int | None
    how: str | None  # LEFT, CRASHED or UNKNOWN_EXIT once departed
    badge: str  # SHARING, SOLO or WAITING while a member, else `how`

    @property
    def departed(self) -> bool:
        return self.left_ms is not None

    def in_group_ms(self, now_ms: int) -> int:
        return max(0, (self.left_ms if self.left_ms is not None else now_ms) - self.joined_ms)


@dataclass
class _Member:
    member_id: str
    name: str
    host: str
    joined_ms: int
    seen_at_start: bool
    partitions: tuple[int, ...] = ()
    streams: int = 0
    processed: int = 0
    points: deque[tuple[int, int]] = field(default_factory=lambda: deque(maxlen=64))
    left_ms: int | None = None
    how: str | None = None
    exit_final: bool = False  # `how` decided, or no evidence can come any more

    def rate(self) -> float:
        """Processed per second across the window `points` holds (trimmed as polls come)."""
        if self.left_ms is not None or len(self.points) < 2:
            return 0.0
        (t0, n0), (t1, n1) = self.points[0], self.points[-1]
        return (n1 - n0) * 1000.0 / (t1 - t0) if t1 > t0 else 0.0


class Leaderboard:
    """Folds successive Snapshots of one group into per-member rows (not thread-safe)."""

    def __init__(self, max_departed: int = MAX_DEPARTED,
                 rate_window_ms: int = RATE_WINDOW_MS) -> None:
        self.max_departed = max_departed
        self.rate_window_ms = rate_window_ms
        self.last_ms: int | None = None  # taken_ms of the newest Snapshot folded
        self._answered = False  # a Snapshot without error has been folded
        self._topic: str | None = None
        self._live: dict[str, _Member] = {}
        self._departed: OrderedDict[str, _Member] = OrderedDict()  # oldest departure first
        self._committed: dict[int, int] = {}  # partition -> committed offset at the last poll
        self._owner: dict[int, str] = {}  # partition -> member id of its last known owner
        self._emitters: OrderedDict[str, None] = OrderedDict()  # names that publish events
        self._stops: OrderedDict[tuple[str, int], int] = OrderedDict()  # (name, ts) -> seen

    # ---- input ------------------------------------------------------------------------

    def fold(self, snapshots: Iterable[Snapshot], supervised: Sequence[object] = ()) -> None:
        """Take Snapshots in time order; ones not newer than the last folded are skipped.

        `supervised` is the supervisor's ReplicaInfo list (duck-typed: name, state,
        ended_at in epoch seconds), used to tell how its replicas ended.
        """
        newest: Snapshot | None = None
        for snap in snapshots:
            if self.last_ms is not None and snap.taken_ms <= self.last_ms:
                continue
            self.last_ms = snap.taken_ms
            if snap.error:  # an unanswered poll says nothing about who is in the group
                continue
            self._fold_one(snap, first=not self._answered)
            self._answered = True
            newest = snap
        if newest is not None:
            self._count_streams(newest)
        if self.last_ms is not None:
            self._settle_exits(self.last_ms, supervised)

    def _fold_one(self, snap: Snapshot, first: bool) -> None:
        now = snap.taken_ms
        if snap.topic != self._topic:  # other partitions: offsets are not comparable
            self._topic = snap.topic
            self._committed.clear()
            self._owner.clear()
        self._note_events(snap, now, first)
        members = {m.member_id: m for m in snap.members if m.alive}
        for mid, m in members.items():
            row = self._live.get(mid) or self._departed.pop(mid, None)  # back after a blip
            if row is None:
                row = _Member(mid, m.client_id, m.host, now, seen_at_start=first)
            row.left_ms = row.how = None
            row.exit_final = False
            row.name, row.host, row.partitions = m.client_id, m.host, tuple(sorted(m.partitions))
            self._live[mid] = row
        self._credit(snap, members)
        for mid in [mid for mid in self._live if mid not in members]:
            row = self._live.pop(mid)
            row.left_ms = now
            row.how = UNKNOWN_EXIT
            self._departed[mid] = row
        while len(self._departed) > self.max_departed:
            self._departed.popitem(last=False)
        for row in self._live.values():
            row.points.append((now, row.processed))
            while len(row.points) > 2 and row.points[1][0] < now - self.rate_window_ms:
                row.points.popleft()

    def _count_streams(self, snap: Snapshot) -> None:
        """Streams each member owns now: only the newest Snapshot's count is ever shown, so
        a fold of a long history pays for one pass over the streams, not one per poll."""
        per_lane = Counter((s.partition, s.owner) for s in snap.streams)
        for row in self._live.values():
            row.streams = sum(per_lane[(p, row.name)] for p in row.partitions)

    def _credit(self, snap: Snapshot, members: dict) -> None:
        by_name: dict[str, str | None] = {}
        for mid, m in members.items():  # a client id names a member only if it is unique
            by_name[m.client_id] = None if m.client_id in by_name else mid
        for pv in snap.partitions:
            owner = pv.owner_member_id or (by_name.get(pv.owner) if pv.owner else None)
            if owner is not None and owner in members:
                self._owner[pv.partition] = owner
            if pv.committed is None:
                continue
            before = self._committed.get(pv.partition)
            self._committed[pv.partition] = pv.committed
            if before is None or pv.committed <= before:
                continue  # first sight, no progress, or a rewind: nothing processed
            credited = self._owner.get(pv.partition)
            row = (self._live.get(credited) or self._departed.get(credited)) if credited else None
            if row is not None:
                row.processed += pv.committed - before

    def _note_events(self, snap: Snapshot, now: int, first: bool) -> None:
        for ev in snap.events:
            self._remember(self._emitters, ev.replica, None)
            if ev.type == EventType.STOPPED and (ev.replica, ev.ts) not in self._stops:
                # stops already there at the first poll ended earlier lives of the members
                # seen then: they must not explain a later departure
                self._remember(self._stops, (ev.replica, ev.ts), -1 if first else now)

    @staticmethod
    def _remember(store: OrderedDict, key: object, value: object) -> None:
        store[key] = value
        store.move_to_end(key)
        while len(store) > MAX_NAMES:
            store.popitem(last=False)

    def _settle_exits(self, now: int, supervised: Sequence[object]) -> None:
        """Decide how recent departures went, as the evidence for them arrives."""
        ended = _supervised_ends(supervised)
        for row in self._departed.values():
            if row.exit_final or row.left_ms is None:
                continue
            row.how = self._how(row, now, ended)
            row.exit_final = row.how != UNKNOWN_EXIT or now - row.left_ms > STOP_GRACE_MS

    def _how(self, row: _Member, now: int, ended: dict[str, tuple[str, int]]) -> str:
        assert row.left_ms is not None
        state_end = ended.get(row.name)
        if state_end is not None and row.joined_ms <= state_end[1] <= row.left_ms + STOP_GRACE_MS:
            if state_end[0] in _CRASH_STATES:
                return CRASHED
            if state_end[0] in _STOP_STATES:
                return LEFT
        if any(name == row.name and seen >= row.joined_ms
               for (name, _ts), seen in self._stops.items()):
            return LEFT
        if row.name in self._emitters and now - row.left_ms > STOP_GRACE_MS:
            return CRASHED  # a groupscope replica that left without saying so
        return UNKNOWN_EXIT

    # ---- output -----------------------------------------------------------------------

    def rows(self) -> list[LeaderRow]:
        """Members first, then departed ones, each by messages processed (most first).

        Members first: in a long workshop the departed would otherwise push the people in
        the room off the visible part of the table.
        """
        active = sum(1 for r in self._live.values() if r.partitions)
        out = []
        for row in [*self._live.values(), *self._departed.values()]:
            if row.left_ms is not None:
                badge = row.how or UNKNOWN_EXIT
            elif not row.partitions:
                badge = WAITING
            else:
                badge = SHARING if active >= 2 else SOLO
            out.append(LeaderRow(
                member_id=row.member_id, name=row.name, host=row.host,
                partitions=row.partitions if row.left_ms is None else (),
                streams=row.streams if row.left_ms is None else 0,
                rate=row.rate(), processed=row.processed,
                joined_ms=row.joined_ms, seen_at_start=row.seen_at_start,
                left_ms=row.left_ms, how=row.how, badge=badge))
        out.sort(key=lambda r: (r.departed, -r.processed, r.name, r.member_id))
        return out


def _supervised_ends(supervised: Sequence[object]) -> dict[str, tuple[str, int]]:
    """name -> (final state, end in epoch ms) for the supervisor's replicas that ended."""
    ends: dict[str, tuple[str, int]] = {}
    for info in supervised:
        ended = getattr(info, "ended_at", None)
        if isinstance(ended, int | float) and not getattr(info, "alive", False):
            ends[str(getattr(info, "name", ""))] = (str(getattr(info, "state", "")),
                                                    int(ended * 1000))
    return ends


def duration_text(ms: int) -> str:
    """A time in the group as people say it: 42 s, 3 min 05 s, 1 h 02 min."""
    s = max(0, ms) // 1000
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"
