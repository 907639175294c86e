"""The cluster overview: one row per consumer group, what every reader of "all groups" shares.

The overview watcher (`backend/observer/overview.py`) produces an `Overview` per cycle; the
dashboard's Groups page, `groupscope groups`, the Prometheus exporter and the alert rules read
it and nothing else, the way Burrow's collectors, evaluator and notifiers meet in one
protocol module. Plain frozen dataclasses, like the Snapshot: built once per group per cycle
for thousands of groups, and read by several threads.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property

from pydantic import TypeAdapter

# GROUP_TYPES is defined with the other shared words in `backend.contracts`; re-exported for
# the overview's readers, which name a row's type with it
from backend.contracts import GROUP_TYPES as GROUP_TYPES
from backend.contracts import BrokerView

# ---- what the cluster can do --------------------------------------------------------------

# Kafka's metadata.version feature levels: the first level of each release (Kafka's own
# MetadataVersion table), so a cluster's release is read from the feature it finalized
RELEASE_FROM_LEVEL: tuple[tuple[int, str], ...] = (
    (7, "3.3"), (8, "3.4"), (9, "3.5"), (12, "3.6"), (15, "3.7"), (20, "3.8"), (21, "3.9"),
    (22, "4.0"), (26, "4.1"), (28, "4.2"), (30, "4.3"))
# the group types a cluster has only with a feature turned on: the feature, and the first
# release that has it (classic and consumer groups need none a 3.x cluster lacks to be read)
GROUP_TYPE_FEATURES: dict[str, tuple[str, str]] = {
    "share": ("share.version", "4.1"), "streams": ("streams.version", "4.1")}


def kafka_release(finalized: dict[str, int]) -> str | None:
    """The release a cluster's metadata.version belongs to ("3.9"); None when it has none (a
    ZooKeeper cluster) or it is newer than this table ("4.3 or later" would be a guess)."""
    level = finalized.get("metadata.version")
    if level is None:
        return None
    known = [name for first, name in RELEASE_FROM_LEVEL if first <= level]
    if not known:
        return None
    return known[-1] if level < RELEASE_FROM_LEVEL[-1][0] + 1 else f"{known[-1]} or later"


def _older(release: str, than: str) -> bool:
    def parts(v: str) -> tuple[int, ...]:
        return tuple(int(p) for p in v.split()[0].split("."))

    return parts(release) < parts(than)


def lacking(finalized: dict[str, int]) -> tuple[str, ...]:
    """One plain line per group type this cluster cannot have, saying why."""
    release = kafka_release(finalized)
    lines = []
    for group_type, (feature, since) in GROUP_TYPE_FEATURES.items():
        if finalized.get(feature, 0) >= 1:
            continue
        if release is None or _older(release, since):
            runs = f" (this cluster runs Kafka {release})" if release else ""
            lines.append(f"{group_type} groups need Kafka {since} or later{runs}")
        else:
            lines.append(f"{group_type} groups are off on this cluster (its {feature} "
                         f"feature is not enabled)")
    return tuple(lines)


# ---- health -------------------------------------------------------------------------------

OK, WARN, STALL, STOP, REWIND, ERR = "OK", "WARN", "STALL", "STOP", "REWIND", "ERR"
# worst first: a group's health is its worst partition's; ERR = the group could not be
# described at all (no rights, coordinator error), which hides everything else
HEALTH_WORST_FIRST: tuple[str, ...] = (ERR, STOP, STALL, REWIND, WARN, OK)
HEALTH_MEANING: dict[str, str] = {
    OK: "caught up at some point in the window, or consuming faster than it falls behind",
    WARN: "committing, but lag never shrinks: falling behind",
    STALL: "lag and an owner, but the committed offset does not move: the consumer is stuck",
    STOP: "lag and no owner: nobody consumes these partitions",
    REWIND: "the committed offset went backwards (a reset or a replay)",
    ERR: "the group could not be described",
}


def worst(statuses: Iterable[str]) -> str:
    """The worst of several health states (OK when there are none)."""
    seen = set(statuses)
    for s in HEALTH_WORST_FIRST:
        if s in seen:
            return s
    return OK


# ---- bounds -------------------------------------------------------------------------------

TREND_POINTS = 60  # total-lag points kept per group for the sparkline and the rate
REBALANCE_WINDOW_MS = 3_600_000  # "rebalances in the last hour"


# ---- rows ---------------------------------------------------------------------------------

# `PartitionLag.unread_since_ms` of a partition with nothing left to process: its age is 0
NOTHING_UNREAD = -1


def age_seconds(since_ms: int, now_ms: int) -> float:
    """Seconds from a record's timestamp to `now_ms`; 0 for a record from our future (a
    producer's clock ahead of ours)."""
    return (now_ms - since_ms) / 1000.0 if now_ms > since_ms else 0.0


@dataclass(frozen=True, slots=True)
class PartitionLag:
    """One partition a group has committed to or owns, as of the group's last refresh.
    Slotted, as `GroupRow`: an overview of 65 000 groups holds 650 000 of them, twice while a
    cycle replaces the rows.

    Its lag's age is kept as a time, the broker's timestamp of the oldest record the group has
    not processed, and read as seconds at the row's time (`lag_seconds`): a partition none of
    whose offsets moved stays the same object from cycle to cycle, though it grows older."""

    topic: str
    partition: int
    committed: int | None  # None: no commit yet (lag counts from the log start)
    end: int
    lag_messages: int
    # the oldest unprocessed record's broker timestamp; NOTHING_UNREAD when nothing is left
    # (caught up, or only transaction markers); None: not known yet
    unread_since_ms: int | None
    health: str = OK
    owner: str | None = None  # client id of the member that owns it, if any

    def lag_seconds(self, as_of_ms: int) -> float | None:
        """How old the oldest unprocessed record is at `as_of_ms` (its row's `described_ms`):
        0 when nothing is left, None when not known."""
        return seconds_since(self.unread_since_ms, as_of_ms)


def seconds_since(since_ms: int | None, as_of_ms: int) -> float | None:
    """An `unread_since_ms` read as an age at `as_of_ms`."""
    if since_ms is None:
        return None
    return 0.0 if since_ms == NOTHING_UNREAD else age_seconds(since_ms, as_of_ms)


def oldest_age(parts: Iterable[PartitionLag], as_of_ms: int) -> float | None:
    """The largest of the partitions' `lag_seconds` at `as_of_ms`, None when none is known:
    the age of the oldest record any of them has left, found without making each age."""
    oldest: int | None = None
    nothing_left = False
    for p in parts:
        since = p.unread_since_ms
        if since is None:
            continue
        if since == NOTHING_UNREAD:
            nothing_left = True
        elif oldest is None or since < oldest:
            oldest = since
    if oldest is not None:
        return age_seconds(oldest, as_of_ms)
    return 0.0 if nothing_left else None


@dataclass(frozen=True, slots=True)
class GroupRow:
    """Everything the overview knows about one group.

    A row exists from the moment the group is listed; `described_ms` is None until its first
    description and offsets arrived (the row is then "pending"). Values that need more than
    one observation (rate, catch-up, health) are None / OK until the window allows them.
    """

    group: str
    state: str  # Kafka's names: Stable, Empty, PreparingRebalance, Reconciling, Dead, ...
    protocol: str  # the group's type, one of GROUP_TYPES
    assignor: str | None = None
    members: int = 0
    topics: tuple[str, ...] = ()
    lag_messages: int | None = None  # total over all its partitions
    max_lag_seconds: float | None = None
    lag_trend: tuple[int, ...] = ()  # total lag at its last refreshes, oldest first
    lag_rate: float | None = None  # msg/s the total lag changes by (< 0: catching up)
    catch_up_seconds: float | None = None  # at the current rate; None: not catching up
    health: str = OK
    rebalances_last_hour: int = 0
    last_rebalance_ms: int | None = None
    rebalances_24h: int = 0
    # the starts of the last hour's rebalances, oldest first (the storm rule counts them)
    rebalance_times: tuple[int, ...] = ()
    last_cause: str | None = None  # of the last rebalance that ended (contracts.history)
    rebalancing: bool = False  # a rebalance is under way
    generation: int | None = None  # generation (classic) or group epoch (consumer) if known
    own: bool = False  # a groupscope group: its `<group>.events` topic exists
    partitions: tuple[PartitionLag, ...] = ()
    described_ms: int | None = None  # when description + offsets were last read
    error: str | None = None  # one line, never a secret; health is ERR while it is set

    @property
    def pending(self) -> bool:
        return self.described_ms is None and self.error is None

    @property
    def falling_behind(self) -> bool:
        return self.lag_rate is not None and self.lag_rate > 0 and bool(self.lag_messages)


@dataclass(frozen=True)
class CycleStats:
    """What one refresh cycle cost: for the page's footer and the exporter's own metrics."""

    started_ms: int
    seconds: float
    requests: int  # Admin API requests issued (list, describe batches, offset fetches, ...)
    groups_refreshed: int
    errors: int


@dataclass(frozen=True)
class Overview:
    taken_ms: int
    cluster: str  # a label for the cluster (the bootstrap servers, never credentials)
    rows: tuple[GroupRow, ...] = ()  # sorted by group id
    listed: int = 0  # groups the last listing returned
    cycle: CycleStats | None = None
    error: str | None = None  # the cluster itself could not be read (listing failed)
    history: tuple[CycleStats, ...] = field(default=())  # recent cycles, oldest first
    # every broker over every topic's partitions, from the metadata the overview caches
    # (METADATA_MAX_AGE_S), and the cluster's under-replicated and offline partitions
    brokers: tuple[BrokerView, ...] = ()
    under_replicated: int = 0
    offline_partitions: int = 0
    # the cluster's release ("3.9") and the group types it cannot have, one line each;
    # None and () until its features have been read
    kafka_release: str | None = None
    lacks: tuple[str, ...] = ()

    @property
    def described(self) -> int:
        return sum(1 for r in self.rows if not r.pending)

    @cached_property
    def _by_group(self) -> dict[str, GroupRow]:
        return {r.group: r for r in self.rows}

    def row(self, group: str) -> GroupRow | None:
        """One group's row; an index built on first use (pages and tests look many up)."""
        return self._by_group.get(group)


OVERVIEW_JSON = TypeAdapter(Overview)
GROUP_ROWS_JSON = TypeAdapter(tuple[GroupRow, ...])
