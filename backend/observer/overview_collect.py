"""Collect for the cluster overview: every group of a cluster, with one AdminClient.

The single-group collector (`collect.py`) asks everything about one group per poll. At 5 000
groups that is 5 000 metadata and ListOffsets round trips a cycle, so this one splits the work
by what it depends on:

- ListGroups: one request, every cycle (cheap: ids, states and types only);
- Metadata: one request for every topic, cached (partition counts change only when an
  operator adds partitions), and it also tells which groups are groupscope's own (their
  `<group>.events` topic exists);
- DescribeConsumerGroups: many groups per call (librdkafka sends one request per
  coordinator for a whole batch);
- OffsetFetch: one group per request (librdkafka's admin API allows no more), so these go
  out concurrently, at most `concurrency` in flight;
- ListOffsets: the log ends and starts of every partition any group of a batch reads, once
  per batch, shared by all the groups that read it.

Offsets are fetched only for groups whose describe succeeded: librdkafka 2.16 aborts the
process when an admin OffsetFetch meets a coordinator or authorization error, and a
successful describe means the coordinator is known and the group may be described (see
`backend/cluster/clients.py` for the guard that replaces a client after a failure).
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from backend.cluster.clients import GuardedAdmin, error_text, quiet_admin
from backend.cluster.groups import TP, GroupDescription, description_from, state_name
from backend.cluster.settings import ClusterUnreachable, KafkaSettings
from backend.contracts import BrokerView, events_topic
from backend.observer.brokers import broker_views, live_brokers, placement_of, totals

DESCRIBE_BATCH = 100  # groups per DescribeConsumerGroups call
OFFSET_BATCH = 2000  # partitions per ListOffsets call
METADATA_MAX_AGE_S = 30.0
# describe errors that say something about the group, not about the connection
_BENIGN = ("GROUP_AUTHORIZATION_FAILED", "GROUP_ID_NOT_FOUND", "INVALID_GROUP_ID")


class ClusterError(RuntimeError):
    """The cluster could not be read at all this cycle (one line, never a secret)."""


@dataclass(frozen=True)
class Listed:
    group: str
    state: str
    protocol: str  # classic / consumer / "" when the broker did not say


@dataclass(frozen=True)
class GroupReading:
    """What one batch learnt about one group: its description and committed offsets, or the
    one-line reason it could not be described."""

    group: str
    taken_ms: int
    description: GroupDescription | None
    committed: dict[TP, int]
    error: str | None = None


class ClusterCollector:
    """The overview's only window on the cluster. Counts the requests it issues, so the cost
    of a cycle is reported rather than guessed."""

    def __init__(self, settings: KafkaSettings, timeout: float = 15.0,
                 concurrency: int = 32) -> None:
        self.settings = settings
        self.timeout = timeout
        self.concurrency = concurrency
        self.requests = 0  # Admin API calls issued since creation (monotonic, for stats)
        self._lock = threading.Lock()
        self._topics: dict[str, int] = {}
        self._topics_at = 0.0
        # brokers over every topic's partitions, from the cached metadata (as old as it is)
        self.brokers: tuple[BrokerView, ...] = ()
        self.under_replicated = 0
        self.offline_partitions = 0
        self.guard = GuardedAdmin(lambda: quiet_admin(
            settings, **{"client.id": "groupscope-overview"}))

    @property
    def admin(self) -> AdminClient:
        try:
            return self.guard.client
        except ClusterUnreachable as exc:
            raise ClusterError(str(exc)) from None

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
            result = self.admin.list_consumer_groups(request_timeout=self.timeout).result()
        except KafkaException as exc:
            self.guard.failed()
            raise ClusterError(f"cannot list consumer groups: {error_text(exc)}") from None
        out = []
        for g in result.valid:
            gtype = getattr(getattr(g, "type", None), "name", "")
            protocol = {"CONSUMER": "consumer", "CLASSIC": "classic"}.get(gtype, "")
            out.append(Listed(g.group_id, state_name(getattr(g, "state", "UNKNOWN")), protocol))
        return sorted(out, key=lambda g: g.group)

    def topics(self, refresh: bool = False) -> dict[str, int]:
        """topic -> partition count for every topic the principal may describe, cached."""
        if refresh or time.monotonic() - self._topics_at > METADATA_MAX_AGE_S:
            self._count()
            try:
                md = self.admin.list_topics(timeout=self.timeout)
            except KafkaException as exc:
                raise ClusterError(f"cannot read metadata: {error_text(exc)}") from None
            self._topics = {name: len(t.partitions) for name, t in md.topics.items()
                            if t.error is None and t.partitions}
            self._topics_at = time.monotonic()
            # the same answer names the brokers up and every partition's replicas and ISR
            placements = [placement_of(pm) for t in md.topics.values() if t.error is None
                          for pm in t.partitions.values()]
            self.brokers = broker_views(live_brokers(md.brokers), placements)
            self.under_replicated, self.offline_partitions = totals(placements)
        return self._topics

    def is_own(self, group: str) -> bool:
        """A groupscope group: its replicas' events topic exists."""
        return events_topic(group) in self._topics

    # ---- one batch of groups ---------------------------------------------------------

    def read_groups(self, groups: Sequence[str]) -> list[GroupReading]:
        """Describe the groups (batched) and fetch their committed offsets (concurrently)."""
        readings: dict[str, GroupReading] = {}
        described: dict[str, GroupDescription] = {}
        suspect = False
        for i in range(0, len(groups), DESCRIBE_BATCH):
            chunk = list(groups[i:i + DESCRIBE_BATCH])
            self._count()
            futures = self.admin.describe_consumer_groups(chunk, request_timeout=self.timeout)
            now = int(time.time() * 1000)
            for gid, fut in futures.items():
                try:
                    described[gid] = description_from(gid, fut.result())
                except KafkaException as exc:
                    text = error_text(exc)
                    if "GROUP_ID_NOT_FOUND" in text:  # deleted since the listing
                        described[gid] = GroupDescription(gid, "Dead", "classic", None, ())
                    else:
                        readings[gid] = GroupReading(gid, now, None, {},
                                                     f"cannot describe: {text}")
                        if not any(code in text for code in _BENIGN):
                            suspect = True
        if suspect:  # the next group request goes out on a fresh, probed client
            self.guard.failed()
        committed = self._committed([g for g in groups if g in described])
        if any(isinstance(v, str) for v in committed.values()):
            self.guard.failed()
        for gid, desc in described.items():
            offsets = committed.get(gid)
            if isinstance(offsets, str):
                readings[gid] = GroupReading(gid, int(time.time() * 1000), desc, {}, offsets)
            else:
                readings[gid] = GroupReading(gid, int(time.time() * 1000), desc, offsets or {})
        return [readings[g] for g in groups if g in readings]

    def _committed(self, groups: Sequence[str]) -> dict[str, dict[TP, int] | str]:
        """group -> committed offsets (or an error line), at most `concurrency` in flight."""
        out: dict[str, dict[TP, int] | str] = {}
        todo = list(reversed(groups))
        in_flight: dict[concurrent.futures.Future, str] = {}
        while todo or in_flight:
            while todo and len(in_flight) < self.concurrency:
                gid = todo.pop()
                self._count()
                fut = self.admin.list_consumer_group_offsets(
                    [ConsumerGroupTopicPartitions(gid)], request_timeout=self.timeout)[gid]
                in_flight[fut] = gid
            done, _ = concurrent.futures.wait(in_flight, timeout=self.timeout + 5,
                                              return_when=concurrent.futures.FIRST_COMPLETED)
            if not done:  # the client stopped answering: give up on what is left
                for gid in [*in_flight.values(), *todo]:
                    out[gid] = "cannot read committed offsets: timed out"
                return out
            for fut in done:
                gid = in_flight.pop(fut)
                try:
                    tps = fut.result().topic_partitions or []
                except KafkaException as exc:
                    out[gid] = f"cannot read committed offsets: {error_text(exc)}"
                    continue
                out[gid] = {(tp.topic, tp.partition): tp.offset for tp in tps
                            if tp.error is None and tp.offset >= 0}
        return out

    def log_offsets(self, tps: Iterable[TP]) -> tuple[dict[TP, int], dict[TP, int]]:
        """Log-end and log-start offsets, in batches; partitions that fail are left out."""
        wanted = sorted(set(tps))
        ends: dict[TP, int] = {}
        starts: dict[TP, int] = {}
        for i in range(0, len(wanted), OFFSET_BATCH):
            chunk = [TopicPartition(t, p) for t, p in wanted[i:i + OFFSET_BATCH]]
            self._count(2)
            latest = self.admin.list_offsets({tp: OffsetSpec.latest() for tp in chunk},
                                             request_timeout=self.timeout)
            earliest = self.admin.list_offsets({tp: OffsetSpec.earliest() for tp in chunk},
                                               request_timeout=self.timeout)
            for futs, into in ((latest, ends), (earliest, starts)):
                for tp, fut in futs.items():
                    try:
                        into[(tp.topic, tp.partition)] = fut.result().offset
                    except KafkaException:
                        continue  # a leaderless partition: its lag stays unknown this batch
        return ends, starts

    def failed(self) -> None:
        """After an unexpected error: replace the client before the next group request."""
        self.guard.failed()

    def close(self) -> None:
        self.guard.close()
