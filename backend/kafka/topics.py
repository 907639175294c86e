"""Create (idempotently) and grow the topics groupscope needs.

One input topic plus three per-group internal topics: events (replica telemetry), the
summaries changelog (compacted, co-partitioned with the input so a replica owning input
partition p restores its state from changelog partition p) and dead letters. Existing topics
are never shrunk, deleted or reconfigured behind the user's back: a conflict that would break
the design (a changelog that is not compacted, or is not co-partitioned) is a clear error.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic

from backend.contracts import (
    DEFAULT_GROUP,
    DEFAULT_PARTITIONS,
    INPUT_TOPIC,
    dead_letter_topic,
    events_topic,
    summaries_topic,
)
from backend.errors import one_line
from backend.kafka.clients import quiet_admin
from backend.kafka.settings import KafkaSettings

ADMIN_TIMEOUT_S = 15.0

# Internal topic configs. The changelog is read whole on every assignment, so it is compacted
# with short segments (compaction only touches closed segments) to keep restores small.
SUMMARIES_CONFIG: dict[str, str] = {
    "cleanup.policy": "compact",
    "segment.ms": str(10 * 60 * 1000),
    "min.cleanable.dirty.ratio": "0.1",
}
EVENTS_CONFIG: dict[str, str] = {"cleanup.policy": "delete", "retention.ms": str(24 * 3600 * 1000)}
DEAD_LETTER_CONFIG: dict[str, str] = {
    "cleanup.policy": "delete",
    "retention.ms": str(7 * 24 * 3600 * 1000),
    # oversized input is dead-lettered as is, so allow a little more than the input limit
    "max.message.bytes": str(2 * 1024 * 1024),
}
# A share group's deltas: the whole history is its summaries' proof, kept a week like the
# dead letters; one partition (contracts.deltas_topic).
DELTAS_CONFIG: dict[str, str] = {"cleanup.policy": "delete",
                                 "retention.ms": str(7 * 24 * 3600 * 1000)}
DELTAS_PARTITIONS = 1
# Events stay in one partition: one total order the observer can replay as a timeline.
EVENTS_PARTITIONS = 1
DEAD_LETTER_PARTITIONS = 1


def replication_for(brokers: int) -> int:
    """The replication factor a cluster of `brokers` gives its topics: up to 3 copies. The
    embedded nodes size Kafka's internal topics by the same rule (backend/broker)."""
    return max(1, min(3, brokers))


def min_isr_for(replication: int) -> int:
    """In-sync copies a write needs (with acks=all): 2 of 3, so one broker may be down."""
    return 2 if replication >= 3 else 1


class TopicError(RuntimeError):
    """The broker refused a topic operation, or an existing topic conflicts with the design.
    `transient`: the cluster could not answer just now (a node down, a controller being
    elected); asking again shortly may well succeed."""

    def __init__(self, message: str, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient


def _transient(exc: BaseException) -> bool:
    """A Kafka error that a moment's wait may cure: time-outs, a broker or controller gone."""
    err = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
    if not isinstance(err, KafkaError):
        return False
    return err.retriable() or err.code() in (
        KafkaError._TIMED_OUT, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN,
        KafkaError.REQUEST_TIMED_OUT, KafkaError.NOT_CONTROLLER,
        KafkaError.LEADER_NOT_AVAILABLE, KafkaError.NOT_LEADER_FOR_PARTITION)


@dataclass(frozen=True)
class TopicSpec:
    """A topic as the stack wants it."""

    name: str
    partitions: int
    replication: int | None  # None: as many copies as the cluster gives (replication_for)
    config: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class TopicInfo(TopicSpec):
    """What the broker reports about one topic after ensure/grow."""

    created: bool = False  # True when this call created it


@dataclass(frozen=True)
class TopicLayout:
    """The four topics of one group on one input topic."""

    group: str
    input: TopicInfo
    events: TopicInfo
    summaries: TopicInfo
    dead_letters: TopicInfo

    @property
    def all(self) -> tuple[TopicInfo, ...]:
        return (self.input, self.events, self.summaries, self.dead_letters)




def _is_code(exc: BaseException, code: int) -> bool:
    return (isinstance(exc, KafkaException) and bool(exc.args)
            and isinstance(exc.args[0], KafkaError) and exc.args[0].code() == code)


def _describe(admin: AdminClient, names: list[str]) -> dict[str, tuple[int, int]]:
    """name -> (partitions, replication) for the topics that exist (fully, with leaders)."""
    try:
        md = admin.list_topics(timeout=ADMIN_TIMEOUT_S)
    except KafkaException as exc:
        raise TopicError(f"cannot list topics: {one_line(exc)}",
                         transient=_transient(exc)) from None
    found: dict[str, tuple[int, int]] = {}
    for name in names:
        topic = md.topics.get(name)
        if topic is None or topic.error is not None or not topic.partitions:
            continue
        if any(p.leader < 0 or p.error is not None for p in topic.partitions.values()):
            continue  # just created or grown: not usable until every partition has a leader
        replication = min(len(p.replicas) for p in topic.partitions.values())
        found[name] = (len(topic.partitions), replication)
    return found


def _configs(admin: AdminClient, names: list[str],
             patience_s: float = ADMIN_TIMEOUT_S) -> dict[str, dict[str, str]]:
    """Each topic's configuration, asked again for a while when the answer is a passing one:
    on a cluster of several brokers, one may not know a topic another just created."""
    deadline = time.monotonic() + patience_s
    while True:
        try:
            return _configs_once(admin, names)
        except TopicError as exc:
            if not exc.transient or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _configs_once(admin: AdminClient, names: list[str]) -> dict[str, dict[str, str]]:
    resources = [ConfigResource(ConfigResource.Type.TOPIC, n) for n in names]
    out: dict[str, dict[str, str]] = {}
    for res, fut in admin.describe_configs(resources, request_timeout=ADMIN_TIMEOUT_S).items():
        try:
            entries = fut.result(timeout=ADMIN_TIMEOUT_S)
        except KafkaException as exc:
            # the topic is in the metadata (ensure waited for it), so "unknown" here is a
            # broker that has not heard of it yet: passing too
            raise TopicError(f"cannot read the config of topic {res.name}: "
                             f"{one_line(exc)}", transient=_transient(exc) or _is_code(
                                 exc, KafkaError.UNKNOWN_TOPIC_OR_PART)) from None
        # only what was set on the topic (plus the cleanup policy): a small, readable dict
        out[res.name] = {k: e.value for k, e in entries.items()
                         if e.value is not None and (not e.is_default or k == "cleanup.policy")}
    return out


def _wait_visible(admin: AdminClient, expected: dict[str, int],
                  timeout: float) -> dict[str, tuple[int, int]]:
    """KRaft propagates new topics/partitions asynchronously: wait until one metadata answer
    shows them all, and return that answer (`_describe`'s)."""
    deadline = time.monotonic() + timeout
    while True:
        seen = _describe(admin, list(expected))
        if all(seen.get(n, (0, 0))[0] >= p for n, p in expected.items()):
            return seen
        if time.monotonic() >= deadline:
            missing = sorted(n for n, p in expected.items() if seen.get(n, (0, 0))[0] < p)
            raise TopicError(f"topic {', '.join(missing)} not ready after {timeout:.0f}s "
                             f"(missing from metadata, or a partition has no leader)")
        time.sleep(0.1)


def ensure(settings: KafkaSettings, specs: list[TopicSpec]) -> list[TopicInfo]:
    """Create the missing topics of `specs`; leave existing ones as they are. Idempotent."""
    admin = quiet_admin(settings)
    names = [s.name for s in specs]
    existing = _describe(admin, names)
    to_create = [s for s in specs if s.name not in existing]
    created: set[str] = set()
    if to_create:
        new = [_new_topic(s, admin) for s in to_create]
        failures: list[str] = []
        for name, fut in admin.create_topics(new, request_timeout=ADMIN_TIMEOUT_S).items():
            try:
                fut.result(timeout=ADMIN_TIMEOUT_S)
                created.add(name)
            except KafkaException as exc:
                if _is_code(exc, KafkaError.TOPIC_ALREADY_EXISTS):
                    continue  # another process won the race: fine, it exists
                failures.append(f"{name}: {one_line(exc)}")
        if failures:
            raise TopicError("broker refused to create topic " + "; ".join(failures))
        _wait_visible(admin, {s.name: s.partitions for s in to_create}, ADMIN_TIMEOUT_S)
    # every topic seen in one answer: brokers of a cluster learn of a new topic one by one,
    # so the broker asked now may not know one the broker asked a moment ago showed
    layout = _wait_visible(admin, dict.fromkeys(names, 1), ADMIN_TIMEOUT_S)
    configs = _configs(admin, names)
    return [TopicInfo(name=s.name, partitions=layout[s.name][0], replication=layout[s.name][1],
                      config=configs.get(s.name, {}), created=s.name in created)
            for s in specs]


def _new_topic(spec: TopicSpec, admin: AdminClient) -> NewTopic:
    """The topic to create: with the cluster's replication unless the spec names one, and
    from three copies on two of them in sync for every write (producers use acks=all)."""
    replication = spec.replication
    if replication is None:
        brokers = len(admin.list_topics(timeout=ADMIN_TIMEOUT_S).brokers)
        replication = replication_for(brokers)
    config = dict(spec.config)
    if replication >= 3:
        config.setdefault("min.insync.replicas", str(min_isr_for(replication)))
    return NewTopic(spec.name, num_partitions=spec.partitions, replication_factor=replication,
                    config=config)


def group_specs(group: str, topic: str, partitions: int,
                replication: int | None) -> list[TopicSpec]:
    """The input topic first, then events, summaries and dead letters for `group`."""
    return [
        TopicSpec(topic, partitions, replication),
        TopicSpec(events_topic(group), EVENTS_PARTITIONS, replication, EVENTS_CONFIG),
        TopicSpec(summaries_topic(group), partitions, replication, SUMMARIES_CONFIG),
        TopicSpec(dead_letter_topic(group), DEAD_LETTER_PARTITIONS, replication,
                  DEAD_LETTER_CONFIG),
    ]


def ensure_input_topic(settings: KafkaSettings, topic: str = INPUT_TOPIC,
                       partitions: int = DEFAULT_PARTITIONS,
                       replication: int | None = None) -> TopicInfo:
    """Only the input topic (what the producer needs); an existing topic keeps its count."""
    _check_counts(partitions, replication)
    return ensure(settings, [TopicSpec(topic, partitions, replication)])[0]


def ensure_topics(settings: KafkaSettings, group: str = DEFAULT_GROUP, topic: str = INPUT_TOPIC,
                  partitions: int = DEFAULT_PARTITIONS,
                  replication: int | None = None) -> TopicLayout:
    """Create whichever of the four topics is missing; return what the broker now has.

    An existing input topic keeps its partition count (`partitions` only applies on
    creation); the changelog is then created with, or grown to, the input's count so the two
    stay co-partitioned. A changelog that is not compacted or has more partitions than the
    input cannot be fixed safely here and raises TopicError.
    """
    _check_counts(partitions, replication)
    input_info = ensure(settings, [TopicSpec(topic, partitions, replication)])[0]
    specs = group_specs(group, topic, input_info.partitions, replication)[1:]
    events, summaries, dead = ensure(settings, specs)
    if summaries.config.get("cleanup.policy", "") != "compact":
        raise TopicError(f"topic {summaries.name} exists with cleanup.policy="
                         f"{summaries.config.get('cleanup.policy', '?')}; the summaries changelog "
                         f"must be compacted (delete it or set cleanup.policy=compact)")
    if summaries.partitions > input_info.partitions:
        raise TopicError(f"topic {summaries.name} has {summaries.partitions} partitions but "
                         f"{topic} has {input_info.partitions}; they must be co-partitioned "
                         f"(grow {topic} to {summaries.partitions})")
    if summaries.partitions < input_info.partitions:
        summaries = add_partitions(settings, summaries.name, input_info.partitions)
    return TopicLayout(group=group, input=input_info, events=events, summaries=summaries,
                       dead_letters=dead)


def add_partitions(settings: KafkaSettings, topic: str, n: int) -> TopicInfo:
    """Grow `topic` to `n` partitions in total (Kafka can add partitions, never remove them).

    Idempotent: a topic that already has `n` is left alone. Keys then hash to new partitions,
    so per-key order across the change is broken: that is the point the demo shows.
    """
    if n < 1:
        raise TopicError(f"partition count must be at least 1, got {n}")
    admin = quiet_admin(settings)
    current = _describe(admin, [topic])
    if topic not in current:
        raise TopicError(f"topic {topic} does not exist")
    have = current[topic][0]
    if n < have:
        raise TopicError(f"topic {topic} has {have} partitions; Kafka cannot reduce it to {n}")
    if n > have:
        fut = admin.create_partitions([NewPartitions(topic, n)],
                                      request_timeout=ADMIN_TIMEOUT_S)[topic]
        try:
            fut.result(timeout=ADMIN_TIMEOUT_S)
        except KafkaException as exc:
            # a concurrent grow to the same count reports INVALID_PARTITIONS: re-check below
            if not _is_code(exc, KafkaError.INVALID_PARTITIONS):
                raise TopicError(f"broker refused to grow {topic} to {n} partitions: "
                                 f"{one_line(exc)}") from None
        _wait_visible(admin, {topic: n}, ADMIN_TIMEOUT_S)
    parts, replication = _describe(admin, [topic])[topic]
    if parts != n:
        raise TopicError(f"topic {topic} has {parts} partitions after growing it to {n}")
    return TopicInfo(name=topic, partitions=parts, replication=replication,
                     config=_configs(admin, [topic])[topic], created=False)


def _check_counts(partitions: int, replication: int | None) -> None:
    if partitions < 1:
        raise TopicError(f"partition count must be at least 1, got {partitions}")
    if replication is not None and replication < 1:
        raise TopicError(f"replication factor must be at least 1, got {replication}")
