"""Collect for the cluster overview: every group of a cluster, through the reading layer.

The single-group collector (`collect.py`) asks everything about one group per poll. At 5 000
groups that is 5 000 round trips a cycle, so this one splits the work by what it depends on,
each a batched call of the Kafka reader (`backend/kafka/javaadmin`, Kafka's Java Admin):

- ListGroups: one request, every cycle (ids, types, states of every group type);
- Metadata: one request for every topic, cached (partition counts change only when an
  operator adds partitions), and it also tells which groups are groupscope's own (their
  `<group>.events` topic exists);
- describe: many groups per call, per group type (classic and consumer groups together,
  share groups, streams groups);
- committed offsets: many groups per OffsetFetch (KIP-709), per group type; a share
  group's answer also carries the lag its broker reports (KIP-1226);
- ListOffsets: the log ends and starts of every partition any group of a batch reads, once
  per batch, shared by all the groups that read it.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from backend.contracts import CLASSIC, CONSUMER, GROUP_TYPES, BrokerView, events_topic
from backend.kafka.groups import TP, GroupDescription
from backend.kafka.javaadmin.reader import GroupOffsets, KafkaReader, ReaderError
from backend.kafka.settings import KafkaSettings
from backend.observer.brokers import broker_views, totals

METADATA_MAX_AGE_S = 30.0


class ClusterError(RuntimeError):
    """The cluster could not be read at all this cycle (one line, never a secret)."""


@dataclass(frozen=True)
class Listed:
    group: str
    state: str
    protocol: str  # the group's type (GROUP_TYPES), "" when the broker did not say


@dataclass(frozen=True)
class GroupReading:
    """What one batch learnt about one group: its description and committed offsets, or the
    one-line reason it could not be described."""

    group: str
    taken_ms: int
    description: GroupDescription | None
    committed: dict[TP, int]
    error: str | None = None
    # a share group's lag per partition as its broker reports it (KIP-1226), read with its
    # start offsets; only where reported, empty for every other type
    reported_lag: dict[TP, int] = field(default_factory=dict)


class ClusterCollector:
    """The overview's only window on the cluster. Counts the reader calls it makes, so the
    cost of a cycle is reported rather than guessed."""

    def __init__(self, settings: KafkaSettings, timeout: float = 15.0) -> None:
        self.settings = settings
        self.timeout = timeout
        self.requests = 0  # reader calls made since creation (monotonic, for stats)
        self._lock = threading.Lock()
        self._topics: dict[str, int] = {}
        self._topics_at = 0.0
        self._types: dict[str, str] = {}  # group -> type, from the last listing
        self._states: dict[str, str] = {}  # group -> state, from the last listing
        # each group's last committed-offsets answer, handed back to the reader so that an
        # unchanged one is neither sent nor parsed again (and stays the same object)
        self._offsets: dict[str, GroupOffsets] = {}
        # the description of each group listed Empty, made once and handed out again while
        # it stays so (a large cluster's groups are mostly Empty: one object each, not one
        # a cycle)
        self._empty: dict[str, GroupDescription] = {}
        self.partial = False  # the last listing missed a broker's groups
        self.cluster_id: str | None = None  # Kafka's, once the metadata has been read
        self.features: dict[str, int] | None = None  # finalized, read with the metadata
        # brokers over every topic's partitions, from the cached metadata (as old as it is)
        self.brokers: tuple[BrokerView, ...] = ()
        self.under_replicated = 0
        self.offline_partitions = 0
        self.reader = KafkaReader.shared(settings, "groupscope-overview", timeout)

    def _count(self, n: int = 1) -> None:
        with self._lock:
            self.requests += n

    # ---- cheap, every cycle ----------------------------------------------------------

    def list_groups(self) -> list[Listed]:
        refused = self.settings.refused_everywhere()
        if refused:
            raise ClusterError(f"cluster unreachable: Kafka at {self.settings.bootstrap} "
                               f"refused the connection ({refused})")
        self._count()
        try:
            listed, errors = self.reader.listing()
        except ReaderError as exc:
            raise ClusterError(f"cannot list groups: {exc}") from None
        self.partial = bool(errors)
        keep = errors  # a partial listing: the missing groups keep what was known
        self._types = {**(self._types if keep else {}), **{g.group: g.type for g in listed}}
        self._states = {**(self._states if keep else {}), **{g.group: g.state for g in listed}}
        if not keep:  # answers held for groups no longer listed are let go
            for gone in self._offsets.keys() - self._types.keys():
                del self._offsets[gone]
            for gone in self._empty.keys() - self._types.keys():
                del self._empty[gone]
        return [Listed(g.group, g.state, g.type) for g in listed]

    def topics(self, refresh: bool = False) -> dict[str, int]:
        """topic -> partition count for every topic the principal may describe, cached."""
        if refresh or time.monotonic() - self._topics_at > METADATA_MAX_AGE_S:
            self._count(2)
            try:
                metas, _errors = self.reader.topics()
                cluster = self.reader.cluster()
                live = cluster.brokers
                self.cluster_id = cluster.cluster_id or self.cluster_id
            except ReaderError as exc:
                raise ClusterError(f"cannot read metadata: {exc}") from None
            self._read_features()
            counts = {name: m.count for name, m in metas.items() if m.count}
            if counts != self._topics:  # the same dict while nothing changed: the groups'
                self._topics = counts   # trackers see it is the one they saw, at once
            self._topics_at = time.monotonic()
            # the same answers name the brokers up and every partition's replicas and ISR
            placements = [pl for m in metas.values() for pl in m.placements.values()]
            self.brokers = broker_views(live, placements)
            self.under_replicated, self.offline_partitions = totals(placements)
        return self._topics

    def _read_features(self) -> None:
        """What the cluster can do, with the metadata: a cluster that will not say keeps
        what it said last (features change only with an upgrade)."""
        self._count()
        with contextlib.suppress(ReaderError):
            self.features = self.reader.features()

    def known_topics(self) -> dict[str, int]:
        """The partition counts as last read, without asking the cluster."""
        return self._topics

    def is_own(self, group: str) -> bool:
        """A groupscope group: its replicas' events topic exists."""
        return events_topic(group) in self._topics

    # ---- one batch of groups ---------------------------------------------------------

    def read_groups(self, groups: Sequence[str]) -> list[GroupReading]:
        """Describe the groups and fetch their committed offsets (and a share group's
        reported lag): two calls per group type whatever the number of groups, all at once."""
        by_type: dict[str, list[str]] = {}
        for g in groups:
            kind = self._types.get(g, "")
            by_type.setdefault(kind if kind in GROUP_TYPES else CONSUMER, []).append(g)
        # a group the listing says is Empty has no member to describe (most groups of a
        # production cluster, most of the time): its committed offsets are all there is
        empty = {g for g in groups if self._states.get(g) == "Empty"}
        to_describe = {kind: [g for g in members if g not in empty]
                       for kind, members in by_type.items()}
        readings: dict[str, GroupReading] = {}
        self._count(sum(1 + bool(to_describe[k]) for k in by_type))
        try:
            answers = self.reader.read_groups(to_describe, by_type, self._offsets)
        except ReaderError as exc:
            raise ClusterError(str(exc)) from None
        now = int(time.time() * 1000)
        for kind, members in by_type.items():
            described, read = answers[kind]
            described = {**{g: self._empty_description(g) for g in members if g in empty},
                         **described}
            for gid in members:
                desc = described.get(gid)
                if isinstance(desc, str) and "GROUP_ID_NOT_FOUND" in desc:  # gone since listed
                    desc = GroupDescription(gid, "Dead", self._types.get(gid) or CLASSIC,
                                            None, ())
                offsets = read.get(gid)
                if isinstance(offsets, GroupOffsets):
                    self._offsets[gid] = offsets
                else:
                    self._offsets.pop(gid, None)
                if isinstance(desc, str):
                    readings[gid] = GroupReading(gid, now, None, {}, f"cannot describe: {desc}")
                elif isinstance(offsets, str):
                    readings[gid] = GroupReading(
                        gid, now, desc, {}, f"cannot read committed offsets: {offsets}")
                elif offsets is None:  # not answered for: nothing committed to show
                    readings[gid] = GroupReading(gid, now, desc, {})
                else:
                    readings[gid] = GroupReading(gid, now, desc, offsets.committed,
                                                 reported_lag=offsets.lag)
        return [readings[g] for g in groups if g in readings]

    def _empty_description(self, group: str) -> GroupDescription:
        """An Empty group's description: no member, nothing but its type to say."""
        kind = self._types.get(group) or CLASSIC
        desc = self._empty.get(group)
        if desc is None or desc.protocol != kind:
            desc = self._empty[group] = GroupDescription(group, "Empty", kind, None, ())
        return desc

    def log_offsets(self, tps: Iterable[TP]) -> tuple[dict[TP, int], dict[TP, int]]:
        """Log-end and log-start offsets; partitions that fail (leaderless) are left out."""
        wanted = set(tps)
        if not wanted:
            return {}, {}
        self._count(2)
        try:
            ends, starts, _failed = self.reader.log_offsets(wanted)
        except ReaderError as exc:
            raise ClusterError(f"cannot list offsets: {exc}") from None
        return ends, starts

    def close(self) -> None:
        self.reader.close()
