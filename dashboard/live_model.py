"""Pure view-model of the Live page, computed from observer Snapshots and supervisor status.

No Streamlit and no I/O here: the same functions feed the page, the tests and the bench, and
every result is bounded (feed length, chart points) whatever the size of the group's history.
"""

from __future__ import annotations

import time
from collections import defaultdict, deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from backend.contracts import (
    CONSUMER,
    SHARE,
    STREAMS,
    BrokerView,
    ClusterEvent,
    ClusterEventType,
    Event,
    EventType,
    Snapshot,
    events_topic,
)
from backend.kafka.partitioner import partition_for
from dashboard.groups_model import ago_text

MAX_FEED = 200
MAX_POINTS = 300  # ≈ 5 min at one snapshot per second
SMOOTH_S = 5.0  # the throughput line's moving-average window
SMOOTH_LEAD = 20  # snapshots read before the first point shown, to fill its window
HANDOVER_S = 8.0  # how long a partition that changed owner stays highlighted
HANDOVER_LOOKBACK_S = 120.0  # how far back to look for a partition's previous owner
MAX_STREAMS_PER_REVOKE = 50
MAX_LISTED_PARTITIONS = 12  # a cluster feed line names at most this many partitions
KAFKA = "kafka"  # the feed's "replica" of Kafka's own changes, so the filter can pick them
CLUSTER_KINDS = frozenset({"broker", "leader", "isr"})


# ---- replica cards ----------------------------------------------------------------------

@dataclass(frozen=True)
class ReplicaCard:
    name: str
    status: str  # alive | idle | dead | external
    partitions: tuple[int, ...]
    streams: int
    rate: float | None  # messages per second, from the replica's heartbeat
    last_batch_ms: float | None
    managed: bool  # started by this supervisor (so the page may kill / stop it)
    detail: str = ""  # e.g. "killed (SIGKILL) 12 s ago"
    external: bool = False  # in the group but not started by this supervisor (a participant)
    target: tuple[int, ...] | None = None  # KIP-848: the partitions the coordinator intends
    tasks: tuple[str, ...] = ()  # a streams group's member: its tasks (MemberView.tasks)
    in_flight: float | None = None  # a share replica's mean records held unacknowledged


# ---- whose group, and its words -------------------------------------------------------------

def is_own_group(group: str, topics: Iterable[str] = (), events_seen: bool = False) -> bool:
    """A groupscope group: its replicas publish to `<group>.events` (the topic exists, or the
    observer has read events from it). The same rule as the overview's `GroupRow.own`."""
    return events_seen or events_topic(group) in set(topics)


def member_noun(own: bool) -> str:
    """"replica" is groupscope's word for its own members; any other group has members."""
    return "replica" if own else "member"




def is_share(snap: Snapshot) -> bool:
    """A share group: partitions have sharers (PartitionView.sharers), never one owner, so
    the lanes, the idle rule and the locator read sharers instead of `owner`."""
    return snap.protocol == SHARE


def group_type_label(protocol: str) -> str:
    """The header's badge: "share group" and "streams group" say what kind of group this is,
    since neither reads like the classic / consumer groups the rest of the page assumes;
    those two keep their protocol name ("classic", "consumer") as before."""
    return f"{protocol} group" if protocol in (SHARE, STREAMS) else protocol


def generation_label(protocol: str) -> str:
    """Groups of the new protocol (consumer, share, streams) count group epochs, classic ones
    generations."""
    return "group epoch" if protocol in (CONSUMER, SHARE, STREAMS) else "generation"


def offset_label(protocol: str) -> str:
    """What a partition's `committed` offset is: a share group commits no offset, its members
    acknowledge records, and the broker keeps the share-partition start offset (the first
    record not yet acknowledged)."""
    return "share-partition start offset" if protocol == SHARE else "committed"


TASK_KINDS = ("active", "standby", "warmup")


def tasks_text(tasks: Sequence[str]) -> str:
    """A streams member's tasks by kind, "active 0_0, 0_1 · standby 1_0", or "none".

    Each task is "<subtopology>_<partition> <kind>" (MemberView.tasks); one with a kind this
    page does not know is listed under that kind, after the known ones."""
    by_kind: dict[str, list[str]] = {}
    for task in tasks:
        name, _, kind = task.partition(" ")
        by_kind.setdefault(kind or "?", []).append(name)
    kinds = [k for k in TASK_KINDS if k in by_kind] + sorted(set(by_kind) - set(TASK_KINDS))
    return " · ".join(f"{k} {', '.join(sorted(by_kind[k], key=_task_order))}"
                      for k in kinds) or "none"


def _task_order(name: str) -> tuple[int | str, ...]:
    """"0_10" after "0_2": subtopology then partition, numerically where they are numbers."""
    return tuple(int(x) if x.isdigit() else x for x in name.split("_"))


def assignment_text(partitions: Sequence[int], target: Sequence[int] | None = None) -> str:
    """"P1,P2", or "P1,P2 → target P1,P2,P3" while a KIP-848 member is still reconciling
    towards the assignment the coordinator chose for it."""
    def names(ps: Sequence[int]) -> str:
        return ",".join(f"P{p}" for p in sorted(ps)) or "none"

    now = names(partitions)
    if target is None or sorted(target) == sorted(partitions):
        return now
    return f"{now} → target {names(target)}"


def _heartbeats(events: Iterable[Event]) -> dict[str, Event]:
    last: dict[str, Event] = {}
    for ev in events:
        if ev.type == EventType.HEARTBEAT:
            last[ev.replica] = ev
    return last


def replica_cards(snap: Snapshot, supervised: Sequence[object] = (),
                  now_s: float | None = None) -> list[ReplicaCard]:
    """Members the broker reports, plus replicas the supervisor ran that are gone now.

    `supervised` holds the supervisor's ReplicaInfo objects (duck-typed: name, state, alive,
    exit_signal, ended_at), so this module does not need the supervisor package.
    """
    import time

    now_s = now_s or time.time()
    beats = _heartbeats(snap.events)
    by_owner: dict[str | None, int] = defaultdict(int)
    by_partition: dict[int, int] = defaultdict(int)
    for s in snap.streams:
        by_owner[s.owner] += 1
        by_partition[s.partition] += 1
    shared = is_share(snap)
    managed = {getattr(r, "name", ""): r for r in supervised}
    cards: list[ReplicaCard] = []
    seen: set[str] = set()
    for m in sorted(snap.members, key=lambda m: m.client_id):
        name = m.client_id
        seen.add(name)
        hb = beats.get(name)
        info = managed.get(name)
        if not m.alive:
            status = "dead"
        elif not m.partitions and not m.tasks:  # a streams member's tasks are its work
            status = "idle"
        elif info is None and supervised:
            status = "external"
        else:
            status = "alive"
        # a share group's streams have no owner: a sharer may get any of its partitions'
        streams = (sum(by_partition.get(p, 0) for p in set(m.partitions)) if shared
                   else by_owner.get(name, 0))
        cards.append(ReplicaCard(
            name, status, tuple(sorted(m.partitions)), streams,
            _num(hb.fields.get("rate")) if hb else None,
            _num(hb.fields.get("last_batch_ms")) if hb else None,
            info is not None,
            "not started here" if info is None and supervised else "",
            info is None and bool(supervised),
            tuple(sorted(m.target_partitions)) if m.target_partitions is not None else None,
            tuple(m.tasks),
            _num(hb.fields.get("in_flight")) if hb and shared else None,
        ))
    for name, info in sorted(managed.items()):
        if name in seen:
            continue
        alive = bool(getattr(info, "alive", False))
        state = str(getattr(info, "state", "?"))
        ended = getattr(info, "ended_at", None)
        if alive:
            detail = "starting: not in the group yet"
        else:
            sig = getattr(info, "exit_signal", None)
            ago = f" {now_s - ended:.0f} s ago" if ended else ""
            detail = f"{state}{f' ({sig})' if sig else ''}{ago}"
        cards.append(ReplicaCard(name, "alive" if alive else "dead", (), 0, None, None, True,
                                 detail))
    return cards


def external_members(snap: Snapshot, supervised: Sequence[object] = ()) -> frozenset[str]:
    """Client ids in the group that this supervisor did not start: participants' consumers
    and replicas started by hand, drawn in the second palette.

    Without a supervisor (the Watch page, a production group) there is no "ours" to tell
    apart, so nobody is external and every member keeps the replica palette. The rule is
    the one the cards use for their "external" status, so lanes and cards agree.
    """
    if not supervised:
        return frozenset()
    managed = {getattr(r, "name", "") for r in supervised}
    return frozenset(m.client_id for m in snap.members if m.client_id not in managed)


def _num(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def dead_letter_total(snap: Snapshot) -> int:
    """Malformed records dead-lettered, summed over each replica's latest heartbeat.

    Each replica counts since it started, so the figure drops when a replica restarts: it
    is a live signal that bad input is arriving, the dead-letter topic is the ledger.
    """
    return sum(int(n) for hb in _heartbeats(snap.events).values()
               if isinstance(n := hb.fields.get("dead_letters"), int) and n > 0)


def idle_replicas(snap: Snapshot) -> list[str]:
    """Members with nothing to do because the group has more members than partitions.

    Only classic and consumer groups have that rule. A share group gives one partition to
    several members, so more members than partitions are all busy; a streams group gives its
    members tasks: there a member is idle only when it was given nothing at all."""
    live = [m for m in snap.members if m.alive]
    if snap.protocol in (SHARE, STREAMS):
        return sorted(m.client_id for m in live if not m.partitions and not m.tasks)
    n = snap.partition_count or len(snap.partitions)
    if n <= 0 or len(live) <= n:
        return []
    return sorted(m.client_id for m in live if not m.partitions)


def idle_warning(snap: Snapshot, noun: str = "replica") -> str | None:
    """The golden rule, when the group breaks it: name the idle replicas once it is settled.

    Mid-rebalance every joining member looks idle for a moment, so then only the count that
    will be idle is given, not names that would be wrong a second later. `noun` is
    member_noun(): "replica" only for groupscope's own groups. A share or streams group does
    not have the rule (see idle_replicas), so it gets no warning.
    """
    if snap.protocol in (SHARE, STREAMS):
        return None
    n = snap.partition_count or len(snap.partitions)
    live = sum(1 for m in snap.members if m.alive)
    if n <= 0 or live <= n:
        return None
    rule = (f"Rule: a partition is read by one {noun} of the group at a time, so a group "
            f"never has more busy {noun}s than partitions.")
    idle = idle_replicas(snap)
    if snap.state != "Stable" or len(idle) != live - n:
        spare = live - n
        return (f"{live} {noun}s share {n} partitions: once the group settles, {spare} of "
                f"them will be idle. {rule}")
    names = ", ".join(idle)
    verb = "is" if len(idle) == 1 else "are"
    return f"{live} {noun}s share {n} partitions, so {names} {verb} idle. {rule}"


# ---- event feed ---------------------------------------------------------------------------

@dataclass(frozen=True)
class FeedItem:
    ts: int
    replica: str
    stream: str | None
    # received | revoked | assigned | lost | joined | left | crashed | error | redelivered
    # (a share replica's) | reset (the supervisor moved the offsets), and Kafka's own
    # (CLUSTER_KINDS): broker (down / up) | leader | isr
    kind: str
    text: str


def _parts(ev: Event) -> str:
    parts = ev.fields.get("partitions") or []
    return ", ".join(str(p) for p in parts) if parts else "none"


def _listed(parts: Sequence[str]) -> str:
    shown = ", ".join(parts[:MAX_LISTED_PARTITIONS])
    more = len(parts) - MAX_LISTED_PARTITIONS
    return f"{shown} and {more} more" if more > 0 else shown


def _ids(brokers: Sequence[int]) -> str:
    return ",".join(map(str, brokers)) or "none"


def cluster_feed_items(events: Iterable[ClusterEvent]) -> list[FeedItem]:
    """Kafka's changes as feed lines, one per poll and kind: a broker killed under six
    partitions is three lines (down, leaders moved, left the ISR), not thirteen."""
    T = ClusterEventType
    grouped: dict[tuple[int, str, tuple[int, ...]], list[ClusterEvent]] = {}
    for ev in events:
        # ISR changes are grouped by the brokers that left or joined, leader moves per poll
        who = ev.brokers if ev.type in (T.ISR_SHRUNK, T.ISR_EXPANDED, T.BROKER_DOWN,
                                        T.BROKER_UP) else ()
        grouped.setdefault((ev.ts, ev.type, who), []).append(ev)
    items: list[FeedItem] = []
    for (ts, kind, who), evs in grouped.items():
        said = _cluster_line(kind, who, evs)
        if said is not None:
            items.append(FeedItem(ts, KAFKA, None, *said))
    return items


def _cluster_line(kind: str, who: tuple[int, ...],
                  evs: list[ClusterEvent]) -> tuple[str, str] | None:
    """The feed kind and text of one poll's `evs` of one `kind` (None: not a feed line)."""
    T = ClusterEventType
    parts = [f"P{e.partition}" for e in evs if e.partition is not None]
    if kind == T.BROKER_DOWN:
        return "broker", f"Broker {_ids(who)} went down"
    if kind == T.BROKER_UP:
        return "broker", f"Broker {_ids(who)} is up"
    if kind == T.LEADER_CHANGED:
        moves = [f"P{e.partition} {_ids(e.before)} → "
                 f"{_ids(e.after) if e.after else 'no leader'}" for e in evs]
        return "leader", f"Leader moved: {_listed(moves)}"
    if kind == T.ISR_SHRUNK:
        return "isr", f"Broker {_ids(who)} left the ISR of {_listed(parts)}"
    if kind == T.ISR_EXPANDED:
        return "isr", f"Broker {_ids(who)} rejoined the ISR of {_listed(parts)}"
    return None


def redelivery_items(ev: Event) -> list[FeedItem]:
    """A share replica's `redelivered` event: one line per record it names, and one for the
    rest it only counts."""
    named = [x for x in ev.fields.get("records") or [] if isinstance(x, dict)]
    items = [FeedItem(ev.ts, ev.replica, str(x.get("key")), "redelivered",
                      f"{x.get('key')} offset {x.get('offset')} (P{x.get('partition')}) "
                      f"redelivered to {ev.replica}, delivery {x.get('delivery')}")
             for x in named]
    rest = int(ev.fields.get("count") or 0) - len(named)
    if rest > 0:
        items.append(FeedItem(ev.ts, ev.replica, None, "redelivered",
                              f"{rest} more records redelivered to {ev.replica}"))
    return items


def reset_text(ev: Event) -> str:
    """"presenter moved the group's offsets to earliest: P0 1 200 → 0, P1 980 → 0; 2 180
    records to read again, 0 skipped"."""
    moves = [f"P{m[0]} {'-' if m[1] is None else m[1]} → {m[2]}"
             for m in ev.fields.get("moves") or [] if isinstance(m, list) and len(m) == 3]
    return (f"{ev.fields.get('by') or ev.replica} moved the group's offsets to "
            f"{ev.fields.get('target')}: {_listed(moves) or 'nothing changed'}; "
            f"{int(ev.fields.get('replays') or 0):,} records to read again, "
            f"{int(ev.fields.get('skips') or 0):,} skipped")


def feed_items(events: Iterable[Event], supervised: Sequence[object] = (),
               cluster: Iterable[ClusterEvent] = ()) -> list[FeedItem]:
    """The feed newest first, in the Quix wording, plus joins, leaves and crashes, and
    Kafka's own changes (`cluster`: brokers down and up, leaders, ISRs)."""
    items: list[FeedItem] = cluster_feed_items(cluster)
    for ev in events:
        t, r = ev.type, ev.replica
        if t == EventType.STREAM_RECEIVED:
            s = str(ev.fields.get("stream"))
            items.append(FeedItem(ev.ts, r, s, "received", f"New stream received: {s}"))
        elif t == EventType.STREAMS_REVOKED:
            for s in list(ev.fields.get("streams") or [])[:MAX_STREAMS_PER_REVOKE]:
                items.append(FeedItem(ev.ts, r, str(s), "revoked", f"Stream revoked: {s}"))
        elif t == EventType.ASSIGNED:
            items.append(FeedItem(ev.ts, r, None, "assigned",
                                  f"{r} assigned partitions {_parts(ev)}"))
        elif t == EventType.REVOKED:
            items.append(FeedItem(ev.ts, r, None, "revoked",
                                  f"{r} gave up partitions {_parts(ev)}"))
        elif t == EventType.LOST:
            items.append(FeedItem(ev.ts, r, None, "lost", f"{r} lost partitions {_parts(ev)}"))
        elif t == EventType.STARTED:
            how = "/".join(str(ev.fields[k]) for k in ("protocol", "assignor") if ev.fields.get(k))
            items.append(FeedItem(ev.ts, r, None, "joined",
                                  f"{r} started and is joining the group ({how})"))
        elif t == EventType.STOPPED:
            items.append(FeedItem(ev.ts, r, None, "left", f"{r} stopped and left the group"))
        elif t == EventType.ERROR:
            items.append(FeedItem(ev.ts, r, None, "error", f"{r}: {ev.fields.get('error')}"))
        elif t == EventType.REDELIVERED:  # a share replica got records back
            items.extend(redelivery_items(ev))
        elif t == EventType.OFFSETS_RESET:  # the supervisor moved the group's offsets
            items.append(FeedItem(ev.ts, str(ev.fields.get("by") or r), None, "reset",
                                  reset_text(ev)))
    for info in supervised:
        ended = getattr(info, "ended_at", None)
        state = str(getattr(info, "state", ""))
        if ended and state in ("killed", "crashed"):
            sig = getattr(info, "exit_signal", None)
            name = str(getattr(info, "name", "?"))
            items.append(FeedItem(int(ended * 1000), name, None, "crashed",
                                  f"{name} {state}{f' ({sig})' if sig else ''}: the group "
                                  f"notices after the session timeout"))
    items.sort(key=lambda i: i.ts, reverse=True)
    return items[:MAX_FEED]


def filter_feed(items: Iterable[FeedItem], replicas: Sequence[str] = (),
                stream: str = "") -> list[FeedItem]:
    stream = stream.strip().lower()
    return [i for i in items
            if (not replicas or i.replica in replicas)
            and (not stream or (i.stream is not None and stream in i.stream.lower()))]


# ---- brokers ---------------------------------------------------------------------------

def multi_broker(brokers: Sequence[BrokerView]) -> bool:
    """Leaders and ISRs are worth showing only on a cluster of more than one broker."""
    return len(brokers) > 1


def broker_line(b: BrokerView) -> str:
    """"leads 2 · 6 replicas · 1 under-replicated · 6 out of ISR · 0 offline" (only the
    nonzero troubles)."""
    parts = [f"leads {b.leaders}", f"{b.replicas} replica{'' if b.replicas == 1 else 's'}"]
    if b.under_replicated:
        parts.append(f"{b.under_replicated} under-replicated")
    if b.out_of_sync:
        parts.append(f"{b.out_of_sync} out of ISR")
    if b.offline:
        parts.append(f"{b.offline} offline")
    return " · ".join(parts)


def brokers_summary(brokers: Sequence[BrokerView], under: int, offline: int) -> str:
    """"2 of 3 brokers up · 6 under-replicated · 0 offline partitions"."""
    up = sum(b.up for b in brokers)
    return (f"{up} of {len(brokers)} broker{'' if len(brokers) == 1 else 's'} up · "
            f"{under} under-replicated · {offline} offline partition"
            f"{'' if offline == 1 else 's'}")


# ---- throughput and lag over time ----------------------------------------------------------

@dataclass(frozen=True)
class SeriesPoint:
    ts: int
    produced_per_s: float | None  # between this snapshot and the one before
    consumed_per_s: float | None
    lag: int
    produced_avg_per_s: float | None = None  # over the SMOOTH_S before this snapshot
    consumed_avg_per_s: float | None = None


def series(history: Sequence[Snapshot], limit: int = MAX_POINTS,
           smooth_s: float = SMOOTH_S) -> list[SeriesPoint]:
    """Rates from consecutive snapshots of the same topic, raw and averaged; ≤ `limit` points.

    Replicas commit once per micro-batch (≈ 1 s) while the observer polls twice a second, so
    the raw processed rate alternates between 0 and twice the truth. The average is messages
    over seconds across the trailing `smooth_s` (a time-weighted moving average, right with
    uneven poll spacing); the window restarts when the topic changes. A few snapshots before
    the first point shown are read too, so the first point's average has a full window.
    """
    snaps = [s for s in history[-(limit + 1 + SMOOTH_LEAD):] if s.error is None]
    window_ms = smooth_s * 1000.0
    points: list[SeriesPoint] = []
    steps: deque[tuple[int, float, int, int]] = deque()  # (ts, seconds, produced, consumed)
    prev: tuple[int, int, int, str | None] | None = None
    for s in snaps:
        end = sum(p.end for p in s.partitions)
        done = sum(p.committed or 0 for p in s.partitions)
        produced = consumed = produced_avg = consumed_avg = None
        if prev is not None and prev[3] != s.topic:
            steps.clear()
        if prev is not None and prev[3] == s.topic and s.taken_ms > prev[0]:
            dt = (s.taken_ms - prev[0]) / 1000.0
            made, read = max(0, end - prev[1]), max(0, done - prev[2])
            produced, consumed = made / dt, read / dt
            steps.append((s.taken_ms, dt, made, read))
        while steps and steps[0][0] <= s.taken_ms - window_ms:
            steps.popleft()
        if steps:
            seconds = sum(st[1] for st in steps)
            produced_avg = sum(st[2] for st in steps) / seconds
            consumed_avg = sum(st[3] for st in steps) / seconds
        points.append(SeriesPoint(s.taken_ms, produced, consumed, s.total_lag,
                                  produced_avg, consumed_avg))
        prev = (s.taken_ms, end, done, s.topic)
    return points[-limit:]


def rebalance_periods(snap: Snapshot, since_ms: int) -> list[tuple[int, int, bool]]:
    """(start, end, finished) of rebalances overlapping [since_ms, now]; a static member's
    rejoin is no rebalance (nothing paused, nothing moved), so it is not shaded."""
    out = []
    for r in snap.rebalances:
        if r.reason == "rejoin":
            continue
        end = r.end_ms if r.end_ms is not None else snap.taken_ms
        if end >= since_ms:
            out.append((max(r.start_ms, since_ms), end, r.end_ms is not None))
    return out


# ---- partitions that just changed owner -----------------------------------------------------

@dataclass(frozen=True)
class Handover:
    partition: int
    previous: str  # client id of the owner before
    owner: str  # client id of the owner now
    at_ms: int  # the first snapshot that showed the new owner


def handovers(history: Sequence[Snapshot], now_ms: int | None = None,
              hold_s: float = HANDOVER_S) -> dict[int, Handover]:
    """Partitions whose owner changed in the last `hold_s`, with the owner they came from.

    The lanes highlight these for a few seconds ("from ada"), so the room sees what a
    rebalance moved. The previous owner is the last *named* one: an eager rebalance, or a
    crashed owner awaiting its session timeout, leaves a partition unowned in between, and
    "from nobody" would hide the story. A partition that is unowned now, or whose owner is
    the one it had before the gap (a replica that came back), is not a move. Owners are told
    apart by client id, the name on the screen. Only snapshots from `HANDOVER_LOOKBACK_S`
    before `now_ms` (default: the newest snapshot) are read, so the cost stays bounded. A
    share group's partitions have no owner (PartitionView.sharers): nothing is handed over.
    """
    if not history:
        return {}
    now = history[-1].taken_ms if now_ms is None else now_ms
    since = now - HANDOVER_LOOKBACK_S * 1000.0
    last: dict[int, str] = {}
    moves: dict[int, Handover] = {}
    for s in history:
        if s.error is not None or s.taken_ms < since or s.taken_ms > now:
            continue
        for pv in s.partitions:
            p, owner = pv.partition, pv.owner
            if owner is None:
                moves.pop(p, None)
                continue
            before = last.get(p)
            if before != owner:
                if before is not None:
                    moves[p] = Handover(p, before, owner, s.taken_ms)
                else:
                    moves.pop(p, None)
                last[p] = owner
    return {p: h for p, h in moves.items() if now - h.at_ms <= hold_s * 1000.0}


# ---- a share group's lanes ------------------------------------------------------------------

@dataclass(frozen=True)
class ShareLane:
    """One partition of a share group as its lane shows it: every member sharing it (one chip
    each, in the member's colour), its streams, and its backlog from the share-partition start
    offset, which is not a committed offset and is never called one."""

    partition: int
    sharers: tuple[str, ...]  # client ids, sorted (PartitionView.sharers)
    streams: tuple[str, ...]  # stream ids seen in or mapped to the partition, sorted
    start_offset: int | None  # the share-partition start offset; None until Kafka reports one
    end: int
    lag_messages: int
    lag_seconds: float | None
    health: str
    # the lag is the broker's (KIP-1226: records not yet acknowledged), not end - start offset
    lag_reported: bool = False


def share_lanes(snap: Snapshot) -> list[ShareLane]:
    """A share group's lanes in partition order. Streams have no owner there (a record goes
    to whichever sharer acquires it), so they are listed by partition only."""
    streams: dict[int, list[str]] = defaultdict(list)
    for sv in snap.streams:
        streams[sv.partition].append(sv.stream_id)
    return [ShareLane(pv.partition, tuple(sorted(pv.sharers)),
                      tuple(sorted(streams.get(pv.partition, ()))), pv.committed, pv.end,
                      pv.lag_messages, pv.lag_seconds, pv.health, pv.lag_reported)
            for pv in sorted(snap.partitions, key=lambda pv: pv.partition)]


def sharers_text(sharers: Sequence[str]) -> str:
    """"ada, bruno" or "nobody": who a share-group partition is delivered to."""
    return ", ".join(sharers) or "nobody"


# ---- stream locator -----------------------------------------------------------------------

@dataclass(frozen=True)
class Location:
    key: str
    partition: int
    partitions: int
    owner: str | None  # None in a share group: see `sharers`
    # (since ms, owner), oldest first; in a share group (since ms, "ada, bruno"): its sharers
    history: tuple[tuple[int, str | None], ...]
    known: bool  # the observer has seen this stream
    sharers: tuple[str, ...] = ()  # a share group's: every member the partition goes to
    shared: bool = False  # the group is a share group: read `sharers`, not `owner`


def _holder(snap: Snapshot, p: int) -> str | None:
    """Who partition `p` goes to, as one value to follow through the history: its owner, or
    a share group's sharers as one text (None when nobody has it)."""
    pv = next((pv for pv in snap.partitions if pv.partition == p), None)
    if pv is None:
        return None
    if is_share(snap):
        return sharers_text(pv.sharers) if pv.sharers else None
    return pv.owner


def locate(key: str, snap: Snapshot, history: Sequence[Snapshot]) -> Location | None:
    """Where a key lives: murmur2 partition, owner now (a share group: its sharers), and
    their changes in the history."""
    n = snap.partition_count or len(snap.partitions)
    if not key or n <= 0:
        return None
    p = partition_for(key, n)
    now = next((pv for pv in snap.partitions if pv.partition == p), None)
    changes: list[tuple[int, str | None]] = []
    for s in history:
        if (s.partition_count or len(s.partitions)) != n or s.error:
            continue
        holder = _holder(s, p)
        if not changes or changes[-1][1] != holder:
            changes.append((s.taken_ms, holder))
    known = any(st.stream_id == key for st in snap.streams)
    return Location(key, p, n, now.owner if now else None, tuple(changes[-20:]), known,
                    tuple(now.sharers) if now is not None and is_share(snap) else (),
                    is_share(snap))


def stale_note(snap: Snapshot, now_ms: int | None = None) -> str:
    """After a failed poll a page keeps the last good figures (SnapshotStore.latest_shown):
    this says from when they are. Empty when the failed poll had nothing good before it."""
    if snap.error is None or not (snap.members or snap.partitions):
        return ""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    at = time.strftime("%H:%M:%S", time.localtime(snap.taken_ms / 1000))
    return f"; the figures below are the last read, at {at} ({ago_text(snap.taken_ms, now_ms)})"
