"""Stage 1, collect: ask the cluster about one group and return plain data (`RawObservation`).

Only reads are made, through the reading layer (`backend/kafka/javaadmin`: describe, committed
offsets, ListOffsets, metadata), so the observer needs DESCRIBE on the cluster and the group
and DESCRIBE on the topic -- it never joins the group, never commits and never produces.
Every group type is read: classic and consumer groups, share groups (their committed offset
is the share-partition start offset, and the broker may report their lag: `reported_lag`) and
streams groups.

Metadata is cached per topic, except the watched topic's, read anew every poll: that one
request is also the broker view (the brokers up; each partition's leader, replicas and ISR),
so leaders moving and ISRs shrinking are seen within a poll at the cost of one request.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, NoReturn

from backend.contracts import CLASSIC, CONSUMER, SHARE, STREAMS, Placement
from backend.kafka.groups import TP, GroupDescription, GroupMember
from backend.kafka.javaadmin.reader import TRANSIENT, KafkaReader, ReaderDown, ReaderError
from backend.kafka.settings import KafkaSettings

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
    protocol: str  # the group's type: classic, consumer, share or streams
    assignor: str | None
    members: tuple[RawMember, ...]
    committed: dict[TP, int] = field(default_factory=dict)  # only partitions with a commit
    # a share group's lag per partition as its broker reports it (KIP-1226), read with the
    # start offsets; only where it is reported, and empty for every other type
    reported_lag: dict[TP, int] = field(default_factory=dict)
    end_offsets: dict[TP, int] = field(default_factory=dict)
    start_offsets: dict[TP, int] = field(default_factory=dict)
    partition_counts: dict[str, int] = field(default_factory=dict)
    generation: int | None = None  # group generation / epoch when a source knows it
    # the epoch of the assignment the coordinator targets, from the description of a share
    # or streams group (a consumer group's comes from the __consumer_offsets tail)
    target_epoch: int | None = None
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
    """Reads one group per poll through the process's Kafka reader (one JVM however many
    groups are watched)."""

    def __init__(self, settings: KafkaSettings, timeout: float = 10.0) -> None:
        self.settings = settings
        self.timeout = timeout
        self.errors: list[str] = []  # the last failed polls' lines (never a secret)
        self._answered = False  # the last poll completed: no need to probe the port first
        self._metadata_cache: dict[str, _TopicMeta] = {}
        self._types: dict[str, str] = {}  # group -> type, once a listing or a describe said
        self.reader = KafkaReader.shared(settings, "groupscope-observer", timeout)
        self._pool = ThreadPoolExecutor(max_workers=3, thread_name_prefix="collect")

    def _note(self, line: str) -> None:
        self.errors.append(line)
        del self.errors[:-20]

    # ---- single requests (each returns plain data) ----------------------------------

    def list_groups(self) -> list[tuple[str, str, str]]:
        """(group id, state, type) for every group of every type the principal may DESCRIBE."""
        listed = self.reader.list_groups()
        self._types.update({g.group: g.type for g in listed if g.type})
        return [(g.group, g.state, g.type or "unknown") for g in listed]

    def partition_counts(self, topics: Iterable[str], max_age: float = 30.0) -> dict[str, int]:
        """Partition counts from metadata, cached briefly: they change only when an operator
        adds partitions, and a full metadata request per poll is the slowest call at scale.
        A poll that meets a partition past the cached count re-reads that topic at once."""
        now = time.monotonic()
        counts: dict[str, int] = {}
        stale = [t for t in topics if not ((c := self._metadata_cache.get(t))
                                             and now - c.read_at < max_age)]
        if stale:
            self._read_metadata(stale, now)
        for topic in topics:
            cached = self._metadata_cache.get(topic)
            if cached is not None:
                counts[topic] = cached.count
        return counts

    def _read_metadata(self, topics: list[str], now: float) -> None:
        metas, _errors = self.reader.topics(topics)
        live = self.reader.cluster().brokers
        for topic, meta in metas.items():
            if meta.count:
                self._metadata_cache[topic] = _TopicMeta(now, meta.count, live,
                                                         dict(meta.placements))

    def fresh_metadata(self, topic: str, since: float) -> _TopicMeta | None:
        """The topic's metadata read at or after `since` (time.monotonic()): the cached
        answer when this poll already read it, else one request now."""
        cached = self._metadata_cache.get(topic)
        if cached is not None and cached.read_at >= since:
            return cached
        self._read_metadata([topic], time.monotonic())
        return self._metadata_cache.get(topic)

    def forget_metadata(self, topics: Iterable[str]) -> None:
        """Drop the cached partition counts of these topics: the next read asks the cluster."""
        for topic in topics:
            self._metadata_cache.pop(topic, None)

    # ---- one poll --------------------------------------------------------------------

    def collect(self, group: str, topic: str | None = None,
                attempts: int = 6) -> RawObservation:
        """Describe the group, fetch its committed offsets and the log ends of its topics.

        Transient coordinator errors (loading, moving) are retried a few times at once: they
        are normal right after a broker start and say nothing about the group. The reader's
        JVM dying is answered "reconnecting to the cluster" at once; the next poll has a
        fresh one."""
        refused = None if self._answered else self.settings.refused_everywhere()
        if refused:  # nothing listens: say so now, not after the request timeout
            raise CollectError(f"cluster unreachable: Kafka at {self.settings.bootstrap} "
                               f"refused the connection ({refused})")
        for attempt in range(attempts):
            try:
                observation = self._collect(group, topic)
                self._answered = True
                return observation
            except ReaderDown as exc:
                self._answered = False
                self._note(str(exc))
                raise CollectError(str(exc)) from None
            except ReaderError as exc:
                self._answered = False  # the next poll checks the port first
                self._note(str(exc))
                raise CollectError(f"cannot read the cluster: {exc}") from None
            except _Retriable as exc:
                if attempt == attempts - 1:
                    self._answered = False
                    self._note(str(exc))
                    raise CollectError(str(exc)) from None
                time.sleep(0.2 * (attempt + 1))
            except CollectError as exc:
                self._answered = False
                self._note(str(exc))
                raise
        raise AssertionError("unreachable")

    def _describe(self, group: str) -> GroupDescription:
        kind = self._types.get(group, CONSUMER)
        answer = self.reader.describe([group], kind).get(group, "GROUP_ID_NOT_FOUND")
        if isinstance(answer, str) and "GROUP_ID_NOT_FOUND" in answer and kind == CONSUMER:
            # not a classic or consumer group: it may be a share or streams group
            for g, _state, gtype in self.list_groups():
                if g == group and gtype in (SHARE, STREAMS):
                    kind = gtype
                    answer = self.reader.describe([group], kind).get(group, answer)
        if isinstance(answer, str):
            if "GROUP_ID_NOT_FOUND" in answer:  # not created yet: Dead, as Kafka reports it
                return GroupDescription(group, "Dead", CLASSIC, None, ())
            _raise(f"cannot describe group {group!r}", answer)
        self._types[group] = answer.protocol
        return answer

    def _collect(self, group: str, topic: str | None) -> RawObservation:
        t0 = time.perf_counter()
        started = time.monotonic()
        taken_ms = int(time.time() * 1000)
        # The reads that do not depend on the description go out beside it: the committed
        # offsets (of the type seen last), and with a watched topic whose partitions are
        # known, its metadata and log offsets. A poll then costs its slowest read, not
        # their sum; what the description changes (another type, new partitions) is read
        # again after it.
        known = _offset_kind(self._types.get(group, CONSUMER))
        cached = self._metadata_cache.get(topic) if topic is not None else None
        ahead = {"committed": self._pool.submit(self.reader.offsets, [group], known)}
        if cached is not None:
            ahead["meta"] = self._pool.submit(self._read_metadata, [topic], started)
            ahead["offsets"] = self._pool.submit(self.log_offsets, {topic: cached.count})
        try:
            described = self._describe(group)
        finally:
            done = {name: _outcome(f) for name, f in ahead.items()}
        kind = _offset_kind(described.protocol)
        group_offsets = (done["committed"]() if kind == known
                         else self.reader.offsets([group], kind)).get(group)
        if isinstance(group_offsets, str):
            if "GROUP_ID_NOT_FOUND" not in group_offsets:
                _raise(f"cannot read committed offsets of {group!r}", group_offsets)
            group_offsets = None
        committed: dict[TP, int] = group_offsets.committed if group_offsets is not None else {}
        members = described.members

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
        if "meta" in done:
            done["meta"]()
        meta = self.fresh_metadata(watched, started) if watched in counts else None
        if meta is not None:
            counts[watched] = meta.count  # type: ignore[index]
        if cached is not None and counts == {topic: cached.count}:
            end_offsets, start_offsets = done["offsets"]()
        else:
            end_offsets, start_offsets = self.log_offsets(counts)
        return RawObservation(
            taken_ms=taken_ms, group=group, state=described.state,
            protocol=described.protocol, assignor=described.assignor, members=members,
            committed=committed, end_offsets=end_offsets, start_offsets=start_offsets,
            reported_lag=group_offsets.lag if group_offsets is not None else {},
            partition_counts=counts, duration_ms=(time.perf_counter() - t0) * 1000,
            # share and streams groups keep no generation in __consumer_offsets for the
            # observer's tail to read: their group epoch, and the target assignment's, come
            # with the description
            generation=described.epoch if kind != CONSUMER else None,
            target_epoch=described.target_epoch if kind != CONSUMER else None,
            watched=watched if meta is not None else None,
            live_brokers=dict(meta.live) if meta is not None else {},
            placements=dict(meta.placements) if meta is not None else {})

    def log_offsets(self, counts: dict[str, int]) -> tuple[dict[TP, int], dict[TP, int]]:
        """Log-end and log-start offsets of every partition, two batched ListOffsets calls."""
        if not counts:
            return {}, {}
        tps = [(t, p) for t, n in counts.items() for p in range(n)]
        ends, starts, failed = self.reader.log_offsets(tps)
        if failed:
            (t, p), text = next(iter(sorted(failed.items())))
            _raise(f"cannot list offsets of {t}[{p}]", text)
        return ends, starts

    def offsets_for_times(self, requests: dict[TP, int]) -> dict[TP, int]:
        """First offset at or after a timestamp, per partition (-1 when none)."""
        if not requests:
            return {}
        offsets, failed = self.reader.list_offsets({tp: str(ms) for tp, ms in requests.items()})
        if failed:
            (t, p), text = next(iter(sorted(failed.items())))
            _raise(f"cannot list offsets of {t}[{p}]", text)
        return offsets

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self.reader.close()


def _offset_kind(group_type: str) -> str:
    """Which committed-offsets call a group type needs (classic and consumer share one)."""
    return group_type if group_type in (SHARE, STREAMS) else CONSUMER


def _outcome(future: Future) -> Callable[[], Any]:
    """A finished read as a call that returns its value or raises its error, so an error of
    a read made ahead surfaces where its value is used, as if it had been made there."""
    try:
        value = future.result()
    except BaseException as exc:
        error = exc

        def fail() -> Any:
            raise error

        return fail
    return lambda: value


class _Retriable(CollectError):
    """A transient error worth an immediate retry."""


def _raise(what: str, text: str) -> NoReturn:
    retriable = any(code in text for code in TRANSIENT)
    raise (_Retriable if retriable else CollectError)(f"{what}: {text}")
