"""The message contracts shared by replica, fleet, observer and dashboard (the table of
docs/architecture.md, "Contracts", says which module of this package holds which fact).

The observer must never import the replica, so everything the two exchange over Kafka, and
the Snapshot the dashboard reads, is defined in this package: plain dataclasses, built per
message or per poll; pydantic reads and writes the Snapshot (SNAPSHOT_JSON). The mergeable
per-stream Summary (the changelog's value) is in `backend.contracts.summary`; the control
plane's models are in `backend.contracts.control`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import orjson
from pydantic import TypeAdapter

# ---- topics and group -------------------------------------------------------------------

INPUT_TOPIC = "telemetry"
DEFAULT_GROUP = "telemetry-summariser"
# the share group (KIP-932) whose replicas summarise the same input beside the consumer group
DEFAULT_SHARE_GROUP = "telemetry-queue"
DEFAULT_PARTITIONS = 6


def events_topic(group: str) -> str:
    return f"{group}.events"


def summaries_topic(group: str) -> str:
    """Compacted changelog of per-stream summaries, co-partitioned with the input."""
    return f"{group}.summaries"


def dead_letter_topic(group: str) -> str:
    return f"{group}.dead-letters"


def deltas_topic(group: str) -> str:
    """A share group's per-batch, per-stream summary deltas (contracts.queue_summary), in the
    order its replicas wrote them: one partition, since that order is what out-of-order
    arrivals are counted against."""
    return f"{group}.deltas"


# ---- group types ------------------------------------------------------------------------

# Kafka's group types, as every part of groupscope names them: classic (the original
# rebalance protocol), consumer (KIP-848), share (KIP-932 queues), streams (KIP-1071). The
# first two are also the protocols a replica joins with (`control.PROTOCOL_ASSIGNORS`). Here
# rather than in `overview.py`, which re-exports them, so the replica and the control plane
# can name them without loading the overview's models.
CLASSIC, CONSUMER, SHARE, STREAMS = "classic", "consumer", "share", "streams"
GROUP_TYPES: tuple[str, ...] = (CLASSIC, CONSUMER, SHARE, STREAMS)


def group_type(value: object) -> str | None:
    """The word of GROUP_TYPES for a group type as a client library gives it (librdkafka's
    `ConsumerGroupType.CONSUMER` or its name, any case), None for a type Kafka has no word
    for (librdkafka's UNKNOWN): every reader parses into the one vocabulary here rather than
    through a table of its own."""
    word = str(getattr(value, "name", value)).lower()
    return word if word in GROUP_TYPES else None


# ---- commit modes -----------------------------------------------------------------------

# When a replica commits a batch's offsets, and what a crash then costs. The first is the
# default and the only one a careful consumer uses; `auto` and `before-processing` are there
# to be killed in front of an audience: the per-stream summaries show the records they lose.
AFTER_SUMMARY, TRANSACTIONAL, AUTO_COMMIT, BEFORE_PROCESSING = (
    "after-summary", "transactional", "auto", "before-processing")
COMMIT_MODES: dict[str, str] = {
    AFTER_SUMMARY: "commit once the batch's summaries are durable: at-least-once, a crash "
                   "replays (duplicates), never loses",
    TRANSACTIONAL: "summaries and offsets in one Kafka transaction: exactly-once",
    AUTO_COMMIT: "the client commits what it has read every 5 s, processed or not (as many "
                 "tutorials write it): a crash can lose records, or replay them",
    BEFORE_PROCESSING: "commit as soon as a batch is read: at-most-once, a crash loses the "
                       "batch in flight",
}


def commit_help() -> str:
    """The modes for a command's --help: each with what it does."""
    return "; ".join(f"{mode}: {text}" for mode, text in COMMIT_MODES.items())


# the modes that commit what they have not summarised yet: shown losing records on purpose
CARELESS_COMMITS: frozenset[str] = frozenset({AUTO_COMMIT, BEFORE_PROCESSING})
# what each mode promises, in the words the status tables and the chaos report use
COMMIT_GUARANTEES: dict[str, str] = {
    AFTER_SUMMARY: "at-least-once", TRANSACTIONAL: "exactly-once",
    AUTO_COMMIT: "auto-commit", BEFORE_PROCESSING: "at-most-once"}


# ---- input message ----------------------------------------------------------------------

NUMERIC_FIELDS: tuple[str, ...] = ("speed_kmh", "rpm", "gear", "engine_temp_c", "lat", "lon")
REQUIRED_FIELDS: tuple[str, ...] = ("stream_id", "seq", "ts", *NUMERIC_FIELDS)
MAX_MESSAGE_BYTES = 64 * 1024  # larger values are dead-lettered as oversized


@dataclass(frozen=True)
class TelemetryMessage:
    """One input record; key = stream_id, value = JSON of these fields."""

    stream_id: str
    seq: int
    ts: int
    speed_kmh: float
    rpm: float
    gear: int
    engine_temp_c: float
    lat: float
    lon: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def encode(self) -> bytes:
        """The record's value on the wire: compact JSON, the fields in the order above.

        orjson writes a dataclass by itself, so the field names are this class's and nobody
        else's; no validation happens here (a producer may send thousands a second, and the
        consumers dead-letter what is malformed anyway)."""
        return orjson.dumps(self)


# ---- events -----------------------------------------------------------------------------

class EventType:
    STARTED = "started"
    ASSIGNED = "assigned"
    REVOKED = "revoked"
    LOST = "lost"
    STREAM_RECEIVED = "stream_received"
    STREAMS_REVOKED = "streams_revoked"
    HEARTBEAT = "heartbeat"
    STOPPED = "stopped"
    ERROR = "error"
    DEAD_LETTER = "dead_letter"
    REDELIVERED = "redelivered"  # a share replica got records back (delivery count >= 2)
    OFFSETS_RESET = "offsets_reset"  # the supervisor moved the group's committed offsets


@dataclass(frozen=True)
class Event:
    """Replica telemetry on the events topic (key = replica name)."""

    ts: int
    group: str
    replica: str
    type: str
    fields: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"ts": self.ts, "group": self.group, "replica": self.replica,
                "type": self.type, **self.fields}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Event:
        rest = {k: v for k, v in data.items() if k not in ("ts", "group", "replica", "type")}
        return cls(ts=int(data["ts"]), group=str(data["group"]), replica=str(data["replica"]),
                   type=str(data["type"]), fields=rest)


# ---- snapshot (observer → dashboard, `groupscope snapshot --json`) ---------------------
# Frozen dataclasses, built on every poll: as pydantic models they were slower to build
# (see bench/README.md, "Contract types: dataclass vs pydantic"), so pydantic only reads and
# writes them (SNAPSHOT_JSON), where it is several times faster than dataclasses.asdict and
# replaces a hand-written from_dict.


@dataclass(frozen=True)
class MemberView:
    member_id: str
    client_id: str
    partitions: tuple[int, ...]  # on the watched topic
    host: str
    target_partitions: tuple[int, ...] | None = None  # KIP-848 target assignment
    alive: bool = True
    idle: bool = False
    lag_messages: int = 0  # sum over the partitions it owns (share group: it is assigned)
    group_instance_id: str | None = None  # static membership, if used
    # A streams group's member (KIP-1071) is given tasks, not partitions:
    # "<subtopology>_<partition> active|standby|warmup". Empty for every other type.
    tasks: tuple[str, ...] = ()


@dataclass(frozen=True)
class PartitionView:
    partition: int
    owner: str | None  # client id of the owning member
    committed: int | None
    end: int
    lag_messages: int
    lag_seconds: float | None
    health: str = "OK"  # OK, WARN, STALL, STOP, REWIND
    owner_member_id: str | None = None  # member id of the owner (client ids can repeat)
    lag_seconds_exact: bool = False  # True: from the broker (record timestamp, or nothing left)
    # True: `lag_messages` is the lag the broker reports (a share group, KIP-1226: records
    # not yet acknowledged) rather than groupscope's end - committed
    lag_reported: bool = False
    # Kafka's side of the partition, from the topic's metadata: broker ids. `replicas` empty
    # means not known (metadata not read); `leader` None with replicas known means offline.
    leader: int | None = None
    replicas: tuple[int, ...] = ()
    isr: tuple[int, ...] = ()
    # Client ids of every member assigned the partition, sorted. A share group (KIP-932)
    # assigns one partition to several members at once, so it has no single owner: there
    # `owner` and `owner_member_id` are None and `sharers` lists them all, so nothing that
    # assumes one owner per partition (handovers, lag per owner, stream -> owner) credits one
    # sharer with the others' work. Classic and consumer groups: the owner alone, or empty.
    sharers: tuple[str, ...] = ()

    @property
    def under_replicated(self) -> bool:
        return bool(self.replicas) and len(self.isr) < len(self.replicas)

    @property
    def offline(self) -> bool:
        return bool(self.replicas) and self.leader is None


@dataclass(frozen=True)
class StreamView:
    stream_id: str
    partition: int
    owner: str | None
    source: str = "murmur2"  # murmur2 (computed from the key) or sampled (seen in the partition)


@dataclass(frozen=True)
class RebalanceView:
    start_ms: int
    end_ms: int | None
    generation: int | None
    joined: tuple[str, ...]
    left: tuple[str, ...]
    moved: tuple[tuple[int, str | None, str | None], ...]  # (partition, from, to)
    gap_ms: int | None = None
    # how it was seen: "state" (group left Stable), "generation" (epoch moved between two
    # polls), "assignment" (owners changed between two polls), "reconcile" (KIP-848 targets)
    reason: str = ""
    previous_generation: int | None = None
    # why, once it ended: its main cause (contracts.history.CAUSES) and each cause's evidence
    cause: str = ""
    evidence: tuple[str, ...] = ()


@dataclass(frozen=True)
class Placement:
    """One partition as the cluster's metadata reports it: broker ids; `leader` None = no
    leader. What the reading layer returns and the observer's broker view derives from."""

    leader: int | None
    replicas: tuple[int, ...]
    isr: tuple[int, ...]

    @property
    def under_replicated(self) -> bool:
        return len(self.isr) < len(self.replicas)


@dataclass(frozen=True)
class BrokerView:
    """One Kafka broker, counted over the partitions one reading covered (a Snapshot: the
    watched topic; the Status page: every topic).

    A broker that is down is absent from the metadata's broker list but still named in
    partitions' replica lists (or was seen up before): that is how a reader with DESCRIBE
    rights alone knows it exists and is down."""

    broker_id: int
    address: str | None  # host:port it advertises; None when never seen up
    up: bool
    leaders: int = 0  # partitions it leads
    replicas: int = 0  # partition replicas it holds
    # partitions it leads whose ISR is smaller than their replica set (Kafka's own per-broker
    # UnderReplicatedPartitions: counted by the leader)
    under_replicated: int = 0
    out_of_sync: int = 0  # partitions it holds a replica of without being in their ISR
    offline: int = 0  # partitions it holds a replica of that have no leader


class ClusterEventType:
    """What the observer derives from two successive readings of the topic's metadata."""

    BROKER_DOWN = "broker_down"
    BROKER_UP = "broker_up"
    LEADER_CHANGED = "leader_changed"
    ISR_SHRUNK = "isr_shrunk"
    ISR_EXPANDED = "isr_expanded"


@dataclass(frozen=True)
class ClusterEvent:
    """A change on Kafka's side seen between two polls (not a replica's event).

    `brokers` are the ones concerned: the broker that went down or up, the new leader, the
    replicas that left or joined the ISR. `before` / `after` are the leader (one id, or none:
    no leader) or the ISR, before and after."""

    ts: int
    type: str
    topic: str | None = None
    partition: int | None = None
    brokers: tuple[int, ...] = ()
    before: tuple[int, ...] = ()
    after: tuple[int, ...] = ()


@dataclass(frozen=True)
class Snapshot:
    taken_ms: int
    group: str
    topic: str | None
    state: str
    protocol: str  # the group's type, one of GROUP_TYPES
    assignor: str | None
    generation: int | None
    members: tuple[MemberView, ...]
    partitions: tuple[PartitionView, ...]
    streams: tuple[StreamView, ...]
    rebalances: tuple[RebalanceView, ...]
    health: str = "OK"
    error: str | None = None
    total_lag: int = 0
    max_lag_seconds: float | None = None
    events: tuple[Event, ...] = ()  # recent replica events (our own groups only)
    partition_count: int = 0
    # The epoch of the assignment the coordinator targets; behind `generation` while members
    # still reconcile towards it. A consumer group's when `__consumer_offsets` is readable;
    # a share or streams group's from its description
    target_epoch: int | None = None
    # Kafka's side, from the watched topic's metadata read in the same poll: every broker
    # known (up or down) with its counts over the topic's partitions, the topic's
    # under-replicated and offline partitions, and recent changes (newest last)
    brokers: tuple[BrokerView, ...] = ()
    under_replicated: int = 0
    offline_partitions: int = 0
    cluster_events: tuple[ClusterEvent, ...] = ()


SNAPSHOT_JSON: TypeAdapter[Snapshot] = TypeAdapter(Snapshot)
"""`SNAPSHOT_JSON.dump_json(snap)` is what `groupscope snapshot --json` prints, and
`SNAPSHOT_JSON.validate_json(text)` reads it back into a Snapshot."""
