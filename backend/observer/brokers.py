"""Stage 2b, brokers: Kafka's side of a topic from its metadata, and what changed (pure).

A metadata answer lists the brokers that are up and, per partition, its leader, replicas and
in-sync replicas (ISR). A broker that is down is missing from the broker list but still named
in replica lists (Kafka keeps a dead broker's replicas assigned to it), so a reader with
DESCRIBE rights alone sees that it exists and is down, without knowing how the cluster was
started. `BrokerLog` also remembers every broker it has seen up, so a down broker that holds
no replica of the watched topic is still shown as down.

Changes are derived from two successive readings: a broker going down or up, a partition's
leader changing (or going: offline), its ISR shrinking or expanding. Nothing here talks to
Kafka, so every rule is unit-tested with plain values.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from backend.contracts import BrokerView, ClusterEvent, ClusterEventType, Placement

MAX_EVENTS = 200  # cluster events a Snapshot carries (newest last)
MAX_KNOWN_BROKERS = 4096


def placement_of(meta: object) -> Placement:
    """From confluent-kafka's PartitionMetadata (leader -1 means none), duck-typed."""
    leader = int(getattr(meta, "leader", -1))
    return Placement(None if leader < 0 else leader,
                     tuple(int(b) for b in getattr(meta, "replicas", ()) or ()),
                     tuple(int(b) for b in getattr(meta, "isrs", ()) or ()))


def live_brokers(brokers: Mapping[int, object]) -> dict[int, str]:
    """id -> host:port from ClusterMetadata.brokers (BrokerMetadata has host and port)."""
    return {int(i): f"{getattr(b, 'host', '?')}:{getattr(b, 'port', '?')}"
            for i, b in brokers.items()}


@dataclass(frozen=True)
class BrokerReading:
    """One metadata answer about one topic: the brokers up and each partition's placement."""

    taken_ms: int
    topic: str | None
    live: Mapping[int, str]  # broker id -> host:port
    placements: Mapping[int, Placement]  # partition -> placement


def totals(placements: Iterable[Placement]) -> tuple[int, int]:
    """(under-replicated, offline) partitions among these."""
    under = offline = 0
    for pl in placements:
        under += pl.under_replicated
        offline += pl.leader is None and bool(pl.replicas)
    return under, offline


def broker_views(live: Mapping[int, str], placements: Iterable[Placement],
                 known: Mapping[int, str | None] | None = None) -> tuple[BrokerView, ...]:
    """Every broker up, named in a replica list, or in `known` (seen before), by id.

    Counts are over `placements`: leaders, replicas held, under-replicated partitions it
    leads (Kafka's per-broker count), partitions it holds outside the ISR, and partitions it
    holds that have no leader."""
    counts: dict[int, list[int]] = {}  # id -> [leaders, replicas, under, out_of_sync, offline]

    def row(broker: int) -> list[int]:
        return counts.setdefault(broker, [0, 0, 0, 0, 0])

    for pl in placements:
        if pl.leader is not None:
            r = row(pl.leader)
            r[0] += 1
            r[2] += pl.under_replicated
        isr = set(pl.isr)
        for b in pl.replicas:
            r = row(b)
            r[1] += 1
            r[3] += b not in isr
            r[4] += pl.leader is None
    ids = set(live) | set(counts) | set(known or ())
    views = []
    for b in sorted(ids):
        c = counts.get(b, [0, 0, 0, 0, 0])
        address = live.get(b) or (known or {}).get(b)
        views.append(BrokerView(broker_id=b, address=address, up=b in live, leaders=c[0],
                                replicas=c[1], under_replicated=c[2], out_of_sync=c[3],
                                offline=c[4]))
    return tuple(views)


def cluster_events(before: BrokerReading, after: BrokerReading) -> list[ClusterEvent]:
    """What changed between two readings: brokers down, leaders changed, ISRs shrunk,
    brokers up, ISRs expanded -- in that order, the order a failure and a recovery unfold.

    Partition changes are compared only when both readings are of the same topic."""
    ts, topic = after.taken_ms, after.topic
    down = [ClusterEvent(ts, ClusterEventType.BROKER_DOWN, topic, None, (b,))
            for b in sorted(set(before.live) - set(after.live))]
    up = [ClusterEvent(ts, ClusterEventType.BROKER_UP, topic, None, (b,))
          for b in sorted(set(after.live) - set(before.live))]
    leaders: list[ClusterEvent] = []
    shrunk: list[ClusterEvent] = []
    expanded: list[ClusterEvent] = []
    if before.topic == after.topic:
        for p in sorted(set(before.placements) & set(after.placements)):
            a, b = before.placements[p], after.placements[p]
            if a.leader != b.leader:
                leaders.append(ClusterEvent(
                    ts, ClusterEventType.LEADER_CHANGED, topic, p,
                    () if b.leader is None else (b.leader,),
                    () if a.leader is None else (a.leader,),
                    () if b.leader is None else (b.leader,)))
            left = tuple(sorted(set(a.isr) - set(b.isr)))
            joined = tuple(sorted(set(b.isr) - set(a.isr)))
            if left:
                shrunk.append(ClusterEvent(ts, ClusterEventType.ISR_SHRUNK, topic, p, left,
                                           tuple(sorted(a.isr)), tuple(sorted(b.isr))))
            if joined:
                expanded.append(ClusterEvent(ts, ClusterEventType.ISR_EXPANDED, topic, p,
                                             joined, tuple(sorted(a.isr)),
                                             tuple(sorted(b.isr))))
    return [*down, *leaders, *shrunk, *up, *expanded]


@dataclass
class BrokerLog:
    """Feed readings in time order with `observe`; read `views()` and `events()`.

    Keeps the brokers seen up (id -> last address), the previous reading to compare with,
    and the last `keep` events."""

    keep: int = MAX_EVENTS
    known: dict[int, str | None] = field(default_factory=dict)
    _latest: BrokerReading | None = None
    _events: deque[ClusterEvent] = field(default_factory=deque)

    def observe(self, reading: BrokerReading) -> list[ClusterEvent]:
        """Record one reading; returns the events it revealed (none for the first)."""
        prev = self._latest
        new = cluster_events(prev, reading) if prev is not None else []
        self._events.extend(new)
        while len(self._events) > self.keep:
            self._events.popleft()
        for b, address in reading.live.items():
            self.known.pop(b, None)  # re-insert: most recently seen last
            self.known[b] = address
        for pl in reading.placements.values():
            for b in pl.replicas:
                self.known.setdefault(b, None)
        while len(self.known) > MAX_KNOWN_BROKERS:
            self.known.pop(next(iter(self.known)))
        self._latest = reading
        return new

    def views(self) -> tuple[BrokerView, ...]:
        r = self._latest
        if r is None:
            return ()
        return broker_views(r.live, r.placements.values(), self.known)

    def events(self) -> tuple[ClusterEvent, ...]:
        return tuple(self._events)
