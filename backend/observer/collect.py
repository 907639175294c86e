"""Stage 1, collect: ask the cluster about one group and return plain data (`RawObservation`).

Only Admin API reads are used (DescribeGroups / ConsumerGroupDescribe, OffsetFetch,
ListOffsets, Metadata), so the observer needs DESCRIBE on the cluster and the group and
DESCRIBE on the topic -- it never joins the group, never commits and never produces.
The requests of one poll are issued together and awaited together, so a poll costs about
one round trip per request type whatever the number of partitions.

Metadata is cached per topic, except the watched topic's, read anew every poll: that one
request is also the broker view (the brokers up; each partition's leader, replicas and ISR),
so leaders moving and ISRs shrinking are seen within a poll at the cost of one request.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NoReturn

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from backend.cluster.clients import GuardedAdmin, error_text, quiet_admin
from backend.cluster.groups import TP, GroupMember, description_from, state_name
from backend.cluster.settings import ClusterUnreachable, KafkaSettings
from backend.observer.brokers import Placement, live_brokers, placement_of

log = logging.getLogger("groupscope.observer")


class CollectError(RuntimeError):
    """A poll that could not be completed; the message never contains a secret."""


RawMember = GroupMember  # the observer's name for a member as the cluster reported it


@dataclass(frozen=True)
class RawObservation:
    """Everything one poll learnt about a group, as the cluster reported it."""

    taken_ms: int
    group: str
    state: str  # Stable, PreparingRebalance, CompletingRebalance, Empty, Dead, Unknown
    protocol: str  # classic or consumer
    assignor: str | None
    members: tuple[RawMember, ...]
    committed: dict[TP, int] = field(default_factory=dict)  # only partitions with a commit
    end_offsets: dict[TP, int] = field(default_factory=dict)
    start_offsets: dict[TP, int] = field(default_factory=dict)
    partition_counts: dict[str, int] = field(default_factory=dict)
    generation: int | None = None  # group generation / epoch when a source knows it
    error: str | None = None
    duration_ms: float = 0.0
    # the watched topic (watched_topic()), whose metadata this poll read anew: the brokers
    # that answered it as up (id -> host:port) and its partitions' leader, replicas and ISR
    watched: str | None = None
    live_brokers: dict[int, str] = field(default_factory=dict)
    placements: dict[int, Placement] = field(default_factory=dict)

    @property
    def topics(self) -> tuple[str, ...]:
        return tuple(sorted(self.partition_counts))


def watched_topic(counts: dict[str, int], preferred: str | None) -> str | None:
    """The topic a snapshot shows: the one asked for, else the one with most partitions."""
    if preferred is not None:
        return preferred
    if not counts:
        return None
    return max(sorted(counts), key=lambda t: counts[t])


@dataclass(frozen=True)
class _TopicMeta:
    """What one metadata answer about one topic says, as cached."""

    read_at: float  # time.monotonic()
    count: int
    live: dict[int, str]
    placements: dict[int, Placement]


class Collector:
    """One AdminClient, reused for every poll of every group (connections stay warm), and
    replaced through its guard after a poll that failed."""

    def __init__(self, settings: KafkaSettings, timeout: float = 10.0) -> None:
        self.settings = settings
        self.timeout = timeout
        self.errors: list[str] = []
        self._answered = False  # the last poll completed: no need to probe the port first
        self._metadata_cache: dict[str, _TopicMeta] = {}
        self.guard = GuardedAdmin(lambda: quiet_admin(
            settings, error_cb=self._on_error, **{"client.id": "groupscope-observer"}))

    @property
    def admin(self) -> AdminClient:
        return self.guard.client

    def _on_error(self, err: object) -> None:
        self.errors.append(str(err))
        del self.errors[:-20]

    # ---- single requests (each returns plain data) ----------------------------------

    def list_groups(self) -> list[tuple[str, str, str]]:
        """(group id, state, type) for every group the principal may DESCRIBE."""
        result = self.admin.list_consumer_groups(request_timeout=self.timeout).result()
        out = []
        for g in result.valid:
            state = state_name(getattr(g, "state", "UNKNOWN"))
            gtype = getattr(getattr(g, "type", None), "name", "UNKNOWN").lower()
            out.append((g.group_id, state, gtype))
        return sorted(out)

    def partition_counts(self, topics: Iterable[str], max_age: float = 30.0) -> dict[str, int]:
        """Partition counts from metadata, cached briefly: they change only when an operator
        adds partitions, and a full metadata request per poll is the slowest call at scale.
        A poll that meets a partition past the cached count re-reads that topic at once."""
        now = time.monotonic()
        counts: dict[str, int] = {}
        for topic in topics:
            cached = self._metadata_cache.get(topic)
            if not (cached and now - cached.read_at < max_age):
                cached = self._read_metadata(topic, now)
            if cached is not None:
                counts[topic] = cached.count
        return counts

    def _read_metadata(self, topic: str, now: float) -> _TopicMeta | None:
        md = self.admin.list_topics(topic=topic, timeout=self.timeout)
        t = md.topics.get(topic)
        if t is None or t.error is not None or not t.partitions:
            return None
        meta = _TopicMeta(now, len(t.partitions), live_brokers(md.brokers),
                          {int(p): placement_of(pm) for p, pm in t.partitions.items()})
        self._metadata_cache[topic] = meta
        return meta

    def fresh_metadata(self, topic: str, since: float) -> _TopicMeta | None:
        """The topic's metadata read at or after `since` (time.monotonic()): the cached
        answer when this poll already read it, else one request now."""
        cached = self._metadata_cache.get(topic)
        if cached is not None and cached.read_at >= since:
            return cached
        return self._read_metadata(topic, time.monotonic())

    def forget_metadata(self, topics: Iterable[str]) -> None:
        """Drop the cached partition counts of these topics: the next read asks the cluster."""
        for topic in topics:
            self._metadata_cache.pop(topic, None)

    # ---- one poll --------------------------------------------------------------------

    def collect(self, group: str, topic: str | None = None,
                attempts: int = 6) -> RawObservation:
        """Describe the group, fetch its committed offsets and the log ends of its topics.

        Transient coordinator errors (loading, moving) are retried a few times at once: they
        are normal right after a broker start and say nothing about the group."""
        refused = None if self._answered else self.settings.refused_everywhere()
        if refused:  # nothing listens: say so now, not after the request timeout
            raise CollectError(f"cluster unreachable: Kafka at {self.settings.bootstrap} "
                               f"refused the connection ({refused})")
        try:
            self.guard.ready()
        except ClusterUnreachable as exc:
            raise CollectError(str(exc)) from None
        for attempt in range(attempts):
            try:
                observation = self._collect(group, topic)
                self._answered = True
                return observation
            except _Retriable as exc:
                if attempt == attempts - 1:
                    self._answered = False
                    self.guard.failed()
                    raise CollectError(str(exc)) from None
                time.sleep(0.2 * (attempt + 1))
            except BaseException:
                self._answered = False
                self.guard.failed()
                raise
        raise AssertionError("unreachable")

    def _collect(self, group: str, topic: str | None) -> RawObservation:
        t0 = time.perf_counter()
        started = time.monotonic()
        taken_ms = int(time.time() * 1000)
        describe_f = self.admin.describe_consumer_groups([group], request_timeout=self.timeout)
        try:
            desc = describe_f[group].result()
        except KafkaException as exc:
            _raise(f"cannot describe group {group!r}", exc)
        # Only after a successful describe: librdkafka 2.16 crashes the process when an
        # admin OffsetFetch meets a coordinator or authorization error, and a successful
        # describe means the coordinator is known and the group may be described.
        offsets_f = self.admin.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group)], request_timeout=self.timeout)
        try:
            committed_raw = offsets_f[group].result().topic_partitions or []
        except KafkaException as exc:
            _raise(f"cannot read committed offsets of {group!r}", exc)

        described = description_from(group, desc)
        members = described.members
        committed = {(tp.topic, tp.partition): tp.offset for tp in committed_raw
                     if tp.error is None and tp.offset >= 0}

        seen = set(committed)  # every partition the group itself mentions
        for m in members:
            seen.update(m.assignment)
            seen.update(m.target or ())
        topics = {topic} if topic is not None else {t for t, _ in seen}
        counts = self.partition_counts(sorted(topics))
        # A partition at or past the cached count means partitions were added since it was
        # cached: forget that topic's count, so the new partitions appear in this poll.
        grown = {t for t, p in seen if t in counts and p >= counts[t]}
        if grown:
            self.forget_metadata(grown)
            counts.update(self.partition_counts(sorted(grown)))
        watched = watched_topic(counts, topic)
        meta = self.fresh_metadata(watched, started) if watched in counts else None
        if meta is not None:
            counts[watched] = meta.count  # type: ignore[index]
        end_offsets, start_offsets = self.log_offsets(counts)
        return RawObservation(
            taken_ms=taken_ms, group=group, state=described.state,
            protocol=described.protocol, assignor=described.assignor, members=members,
            committed=committed, end_offsets=end_offsets, start_offsets=start_offsets,
            partition_counts=counts, duration_ms=(time.perf_counter() - t0) * 1000,
            watched=watched if meta is not None else None,
            live_brokers=dict(meta.live) if meta is not None else {},
            placements=dict(meta.placements) if meta is not None else {})

    def log_offsets(self, counts: dict[str, int]) -> tuple[dict[TP, int], dict[TP, int]]:
        """Log-end and log-start offsets of every partition, two batched ListOffsets calls."""
        if not counts:
            return {}, {}
        tps = [TopicPartition(t, p) for t, n in counts.items() for p in range(n)]
        latest_f = self.admin.list_offsets({tp: OffsetSpec.latest() for tp in tps},
                                           request_timeout=self.timeout)
        earliest_f = self.admin.list_offsets({tp: OffsetSpec.earliest() for tp in tps},
                                             request_timeout=self.timeout)
        return _resolve_offsets(latest_f), _resolve_offsets(earliest_f)

    def offsets_for_times(self, requests: dict[TP, int]) -> dict[TP, int]:
        """First offset at or after a timestamp, per partition (-1 when none)."""
        if not requests:
            return {}
        futs = self.admin.list_offsets(
            {TopicPartition(t, p): OffsetSpec.for_timestamp(ms) for (t, p), ms in requests.items()},
            request_timeout=self.timeout)
        return _resolve_offsets(futs)

    def close(self) -> None:
        self.guard.close()


class _Retriable(CollectError):
    """A transient error worth an immediate retry."""


def _raise(what: str, exc: KafkaException) -> NoReturn:
    err = exc.args[0] if exc.args else None
    retriable = bool(getattr(err, "retriable", lambda: False)())
    text = error_text(exc)
    if not retriable and any(code in text for code in _TRANSIENT):
        retriable = True
    raise (_Retriable if retriable else CollectError)(f"{what}: {text}") from None


_TRANSIENT = ("COORDINATOR_LOAD_IN_PROGRESS", "NOT_COORDINATOR", "COORDINATOR_NOT_AVAILABLE")


def _resolve_offsets(futs: dict) -> dict[TP, int]:
    out: dict[TP, int] = {}
    for tp, fut in futs.items():
        try:
            out[(tp.topic, tp.partition)] = fut.result().offset
        except KafkaException as exc:
            _raise(f"cannot list offsets of {tp.topic}[{tp.partition}]", exc)
    return out
