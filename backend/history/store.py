"""The memory's store: what a recorder writes and a page, a command or the exporter reads,
apart from how it is kept (`sqlite.py` is the backend; a test or a bench may add another).

One `Cycle` is everything one watcher cycle learnt that the memory keeps: the episodes that
began, ended or changed, the state changes, the lag points, and the counters /metrics
exports. The store writes it in one transaction, so a writer killed mid-write loses that
cycle and nothing before it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from backend.contracts.history import Action, AuditEntry, Episode, StateChange
from backend.history.chunks import LagBlock


class StoreError(RuntimeError):
    """The store cannot be used; the message is one line naming the file and what to do."""


@dataclass(frozen=True)
class GroupLag:
    """One group's lag at one cycle; `partitions` only at the coarser partition step."""

    group: str
    ts_ms: int
    lag: int
    lag_seconds: float | None = None
    partitions: Mapping[tuple[str, int], int] | None = None


@dataclass(frozen=True)
class CounterKey:
    group: str
    name: str  # "rebalances", "membership_changes", "unowned_partition_seconds"
    label: str  # a cause, a membership change, or "" for an unlabelled counter


@dataclass
class Cycle:
    """What one cycle adds to the memory of one cluster."""

    cluster: str  # Kafka's cluster id when known, else the bootstrap servers
    name: str  # the bootstrap servers, as the readers name the cluster
    taken_ms: int
    episodes: list[Episode] = field(default_factory=list)
    states: list[StateChange] = field(default_factory=list)
    lag: list[GroupLag] = field(default_factory=list)
    counters: dict[CounterKey, float] = field(default_factory=dict)  # absolute values

    def __bool__(self) -> bool:
        return bool(self.episodes or self.states or self.lag or self.counters)


@dataclass(frozen=True)
class ClusterInfo:
    key: str  # what the recorders call it: Kafka's cluster id, or the bootstrap servers
    name: str  # the bootstrap servers it was last watched at
    seen_ms: int  # the last cycle written for it


@dataclass(frozen=True)
class Seed:
    """What a starting recorder takes from the memory so its outputs continue: every group's
    episode starts of the last day and last cause, and the counters."""

    starts: Mapping[str, tuple[int, ...]]
    last_cause: Mapping[str, tuple[int, str]]  # group -> (start of its last episode, cause)
    counters: Mapping[CounterKey, float]


class HistoryStore(ABC):
    """A memory of groups' rebalances, states and lag, for several clusters, and the audit
    of the writes groupscope made to them.

    Writers call `write` once per cycle and `add_action` when the supervisor acts; only the
    process holding a cluster's lease (`claim`) writes its cycles, so two watchers of one
    cluster do not record everything twice. Readers take any thread's connection."""

    path: str

    # ---- writing --------------------------------------------------------------------------

    @abstractmethod
    def claim(self, cluster: str, owner: str, now_ms: int, ttl_ms: int) -> bool:
        """Take or renew the cluster's writer lease; False while another owner holds it."""

    @abstractmethod
    def release(self, cluster: str, owner: str) -> None: ...

    @abstractmethod
    def write(self, cycle: Cycle) -> None: ...

    @abstractmethod
    def add_action(self, cluster: str, action: Action) -> None: ...

    @abstractmethod
    def add_audit(self, entry: AuditEntry) -> None:
        """Keep one write groupscope made to a cluster; any process may add one, lease or
        not (the writes are rare and each its own transaction)."""

    @abstractmethod
    def maintain(self, now_ms: int, retention_ms: int, max_bytes: int) -> dict[str, int]:
        """Fold recent lag points into blocks, drop what is past the retention or beyond the
        byte bound (oldest lag first, then states, then episodes); what it did, counted."""

    # ---- reading --------------------------------------------------------------------------

    @abstractmethod
    def clusters(self) -> list[ClusterInfo]: ...

    @abstractmethod
    def seed(self, cluster: str, since_ms: int) -> Seed: ...

    @abstractmethod
    def actions(self, cluster: str, since_ms: int) -> list[Action]: ...

    @abstractmethod
    def audit(self, since_ms: int, group: str | None = None) -> list[AuditEntry]:
        """The writes kept since then, of every cluster, oldest first."""

    @abstractmethod
    def groups(self, cluster: str) -> list[str]: ...

    @abstractmethod
    def episodes(self, cluster: str, group: str | None = None, since_ms: int | None = None,
                 until_ms: int | None = None, limit: int | None = None) -> list[Episode]:
        """Those in the span, or overlapping it (begun before, ended in it or still open),
        oldest first; with `limit`, the newest `limit` of them."""

    @abstractmethod
    def states(self, cluster: str, group: str, since_ms: int,
               until_ms: int | None = None) -> list[StateChange]: ...

    @abstractmethod
    def lag(self, cluster: str, group: str, since_ms: int, until_ms: int | None = None,
            partitions: bool = True) -> LagBlock:
        """The group's lag points in the span, oldest first; its partitions' too unless
        `partitions` is False (a chart of the total needs none)."""

    @abstractmethod
    def counters(self, cluster: str) -> dict[CounterKey, float]: ...

    @abstractmethod
    def size_bytes(self) -> int: ...

    @abstractmethod
    def close(self) -> None: ...


def resolve_cluster(clusters: Sequence[ClusterInfo], bootstrap: str | None) -> ClusterInfo | None:
    """The cluster a reader means by its bootstrap servers: one whose recorded servers share a
    host:port with them (the most recently written if several); without servers, the only
    one kept."""
    def hosts(s: str) -> frozenset[str]:
        return frozenset(h.strip().lower() for h in s.split(",") if h.strip())

    if bootstrap:
        mine = hosts(bootstrap)
        matching = [c for c in clusters if hosts(c.name) & mine]
        return max(matching, key=lambda c: c.seen_ms) if matching else None
    return clusters[0] if len(clusters) == 1 else None
