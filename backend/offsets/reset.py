"""The I/O around `plan.py`: read what a reset needs, work out its plan, apply it.

Used by `groupscope offsets` and by the supervisor's replay in the demo, so both preview
and write the same way. Reads go through the reading layer (`KafkaReader`: the group's type
and state, committed offsets, log start and end, offsets for a time). The one write is made
by a confluent-kafka AdminClient (alter), created only in `apply`, after every check, so a
preview can never change anything, whatever goes wrong in it. Kafka accepts offsets
committed from outside a group only while it is Empty (`Group.refuse_unless_empty`).

`keys_moved` is the per-key view of a plan (per car, in the demo): it reads the records a
reset replays or skips, key by key, with an assign()ed consumer that never commits.

Imports inside functions keep `groupscope --help`, which loads this module through
backend/offsets/cli.py, from loading the Java Admin reader and the offsets writer.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from backend.cli_common import UserError
from backend.errors import one_line
from backend.kafka.clients import quiet_admin
from backend.offsets.plan import TP, Extent, Plan, Target, TopicSpec, plan_reset, select_partitions

if TYPE_CHECKING:
    from backend.kafka.javaadmin.reader import KafkaReader, Listing
    from backend.kafka.settings import KafkaSettings

T = TypeVar("T")
WRITE_TIMEOUT_S = 30.0
KEYS_READ_MAX = 500_000  # records keys_moved reads at most, over all partitions


def read(what: str, call: Callable[[], T]) -> T:
    """A reader call whose failure is one line naming what was being read."""
    from backend.kafka.javaadmin.reader import ReaderError

    try:
        return call()
    except ReaderError as exc:
        raise UserError(f"could not read {what}: {exc}") from None


class Group:
    """What the commands need to know about the group before planning."""

    def __init__(self, reader: KafkaReader, settings: KafkaSettings, group: str) -> None:
        self.reader, self.settings, self.name = reader, settings, group
        listing = self._listing()
        self.type = listing.type or "consumer"
        self.state = listing.state

    def _listing(self) -> Listing:
        groups, errors = read("the cluster's groups", self.reader.listing)
        found = next((g for g in groups if g.group == self.name), None)
        if found is not None:
            return found
        if errors:
            raise UserError(f"group {self.name} was not listed, but the listing of "
                            f"{self.settings.bootstrap} is partial: {errors[0]}")
        raise UserError(f"group {self.name} has no committed offsets on "
                        f"{self.settings.bootstrap}")

    def committed(self) -> dict[TP, int]:
        kind = "share" if self.type == "share" else "consumer"
        answer = read(f"the committed offsets of group {self.name}",
                       lambda: self.reader.committed([self.name], kind)).get(self.name, {})
        if isinstance(answer, str):
            raise UserError(f"could not read the committed offsets of group {self.name}: "
                            f"{answer}")
        return answer

    def committed_or_refuse(self) -> dict[TP, int]:
        """The committed offsets, or the one line saying there are none to move."""
        committed = self.committed()
        if not committed:
            raise UserError(f"group {self.name} has no committed offsets on "
                            f"{self.settings.bootstrap}")
        return committed

    def refuse_unless_empty(self) -> None:
        """One line, nothing changed, unless Kafka would take offsets for this group now."""
        if self.state == "Empty":
            return
        members = ""
        described = read(f"group {self.name}",
                          lambda: self.reader.describe([self.name], self.type))
        desc = described.get(self.name)
        if desc is not None and not isinstance(desc, str):
            count = len(desc.members)
            members = f" with {count} member{'s' if count != 1 else ''}"
        raise UserError(f"group {self.name} is {self.state}{members}: stop its members "
                        "first (Kafka takes offsets from outside a group only while it is "
                        "Empty); nothing changed")


def refuse_other_types(group: Group, action: str, executing: bool) -> None:
    """Streams groups are left to Kafka's own tool. A share group's start offsets are reset
    here (`writer.alter_share`); deleting them goes per topic, not per partition, so that is
    left to Kafka's tool too."""
    if group.type == "streams":
        raise UserError(f"group {group.name} is a streams group: {action} its offsets with "
                        f"Kafka's kafka-streams-groups --{action}-offsets; nothing changed")
    if group.type == "share" and action == "delete":
        raise UserError(f"group {group.name} is a share group: its start offsets are deleted "
                        "per topic with Kafka's kafka-share-groups --delete-offsets; nothing "
                        "changed")


def topic_counts(reader: KafkaReader, specs: list[TopicSpec]) -> dict[str, int]:
    """Partition counts of the named topics that exist (the others are left out)."""
    if not specs:
        return {}
    metas, _errors = read("topic metadata", lambda: reader.topics([s.topic for s in specs]))
    return {t: m.count for t, m in metas.items() if m.count}


def extents(reader: KafkaReader, tps: list[TP]) -> dict[TP, Extent]:
    ends, starts, errors = read("log offsets", lambda: reader.log_offsets(tps))
    if errors:
        (t, p), why = sorted(errors.items())[0]
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise UserError(f"could not read the log start and end of {t}-{p}{more}: {why}")
    return {tp: Extent(starts[tp], ends[tp]) for tp in tps}


def apply(settings: KafkaSettings, plan: Plan) -> dict[TP, str]:
    """Write the plan's changed rows; returns the partitions the broker refused, with why.
    The writing client exists only here, for this one request: confluent-kafka's alter for
    a consumer group's reset, Kafka's Java Admin (`writer.py`) for a share group's reset and
    for a delete, which confluent-kafka does not wrap."""
    from backend.offsets import writer

    if plan.action == "delete":
        return writer.delete_consumer(settings, plan)
    if plan.group_type == "share":
        return writer.alter_share(settings, plan)
    tps = [r.tp for r in plan.changed]
    from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicPartition

    admin = quiet_admin(settings)
    request = ConsumerGroupTopicPartitions(plan.group, [
        TopicPartition(r.topic, r.partition, r.new) for r in plan.changed])
    try:
        future = admin.alter_consumer_group_offsets(
            [request], request_timeout=WRITE_TIMEOUT_S)[plan.group]
        answer = future.result(timeout=WRITE_TIMEOUT_S + 5)
    except KafkaException as exc:
        return dict.fromkeys(tps, settings.scrub(one_line(exc)))
    return {(tp.topic, tp.partition): partition_error(tp.error)
            for tp in answer.topic_partitions or () if tp.error is not None}


def partition_error(error: object) -> str:
    """A partition's commit error in Kafka's words, with what to do when the group gained a
    member between the check and the commit (the broker then refuses it)."""
    name = getattr(error, "name", None)
    text = getattr(error, "str", None)
    if callable(name) and callable(text):
        return with_hint(name(), f"{name()}: {text()}")
    return str(error)


def with_hint(name: str, line: str) -> str:
    """`line`, plus what to do when the broker refused because the group has members now
    (one joined between the check and the write)."""
    if name in ("UNKNOWN_MEMBER_ID", "ILLEGAL_GENERATION", "REBALANCE_IN_PROGRESS",
                "STALE_MEMBER_EPOCH", "GROUP_SUBSCRIBED_TO_TOPIC"):
        return f"{line} (the group is no longer Empty: stop its members first)"
    return line


def plan_reset_now(reader: KafkaReader, group: Group, target: Target,
                   specs: list[TopicSpec]) -> Plan:
    """The reset of `group` to `target` as the cluster stands now (`specs` narrows it)."""
    committed = group.committed_or_refuse()
    tps = select_partitions(group.name, committed, specs, topic_counts(reader, specs))
    found = extents(reader, tps)
    at_time = None
    if target.kind == "datetime":
        at_time, errors = read("offsets for the time", lambda: reader.list_offsets(
            {tp: str(target.value) for tp in tps}))
        if errors:
            (t, p), why = sorted(errors.items())[0]
            raise UserError(f"could not look up {target.describe()} in {t}-{p}: {why}")
    return plan_reset(group.name, target, tps, committed, found, at_time, group.type)


@dataclass(frozen=True)
class KeysMoved:
    """Per key, the records a plan replays and skips; `complete` False when the ranges held
    more than the read's cap, and the counts cover only their first records."""

    replays: dict[str, int]
    skips: dict[str, int]
    records_read: int
    complete: bool


def keys_moved(settings: KafkaSettings, plan: Plan, limit: int = KEYS_READ_MAX,
               timeout_s: float = 30.0) -> KeysMoved:
    """Read the records between each changed row's committed and new offset and count them
    by key: what the reset replays (new < committed) or skips, per key. Offsets outside the
    log are not read (the plan's counts leave them out too)."""
    from confluent_kafka import Consumer, TopicPartition

    ranges = {r.tp: (max(min(r.current, r.new), r.start), min(max(r.current, r.new), r.end),
                     r.new < r.current)
              for r in plan.changed if r.current is not None and r.new is not None}
    ranges = {tp: v for tp, v in ranges.items() if v[0] < v[1]}
    replays: Counter[str] = Counter()
    skips: Counter[str] = Counter()
    if not ranges:
        return KeysMoved({}, {}, 0, True)
    consumer = Consumer(settings.client_config(**{
        "group.id": "groupscope-offsets-preview", "enable.auto.commit": False,
        "enable.partition.eof": False, "fetch.max.bytes": 8 * 1024 * 1024}))
    read_n, complete = 0, True
    try:
        consumer.assign([TopicPartition(t, p, lo) for (t, p), (lo, _, _) in ranges.items()])
        left = {tp: hi for tp, (_, hi, _) in ranges.items()}
        deadline = time.monotonic() + timeout_s
        while left and time.monotonic() < deadline:
            for m in consumer.consume(2000, 0.5):
                if m.error() is not None:
                    continue
                tp = (m.topic(), m.partition())
                hi = left.get(tp)
                if hi is None or m.offset() >= hi:
                    continue
                key = (m.key() or b"").decode(errors="replace")
                (replays if ranges[tp][2] else skips)[key] += 1
                read_n += 1
            # done with a partition once its position passed the range (a compacted or
            # transactional log may have no record at the range's last offset)
            for tp, hi in list(left.items()):
                if consumer.position([TopicPartition(*tp)])[0].offset >= hi:
                    del left[tp]
                    consumer.pause([TopicPartition(*tp)])
            if read_n >= limit:
                complete = False
                break
        if left:
            complete = False
    finally:
        consumer.close()
    return KeysMoved(dict(replays), dict(skips), read_n, complete)
