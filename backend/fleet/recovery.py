"""Recover each stream's next `seq` from the input topic itself, so a restart never reuses one.

The simulator is the only producer of its keys and uses an idempotent producer, so within one
partition a key's records are in `seq` order and the last one holds the highest seq. Reading
each partition *backwards* in growing windows and stopping early is therefore enough:

* partition p is finished for key K once K has been seen in p (older records of K in p have
  lower seqs), or
* once p has been read back to records older than K's best record found anywhere: a record of
  K with a higher seq was produced later, so it has a later or equal timestamp. The simulator
  makes that true even if the wall clock steps back: its record timestamps (= the message's
  `ts`) never decrease, also across restarts, because it starts from the newest timestamp
  this recovery saw (`newest_ts`).

The second rule matters after partitions were added: K's recent records are in its new
partition and its older ones in the old one; without it, a key hashed back to a partition it
used earlier could resume from a stale seq. A key never produced before is only proven absent
by reading every partition to its start, which costs a full scan only for such keys (on an
empty or new topic that is instant).
"""

from __future__ import annotations

import logging
import math
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

import orjson
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from backend.errors import one_line
from backend.kafka.settings import KafkaSettings

FIRST_WINDOW = 512
MAX_WINDOW = 65_536
CLOCK_SLACK_MS = 0  # timestamps are monotonic (see above); raise for foreign producers
STALL_S = 3.0  # a window whose tail is control records never "reaches" its end: give up waiting


class RecoveryError(RuntimeError):
    """The topic could not be read back in time; producing now could reuse a seq."""


@dataclass
class _Part:
    partition: int
    low: int
    cursor: int  # everything at or above cursor has been read
    oldest_ts: float = math.inf
    found: set[str] = field(default_factory=set)
    done: bool = False


@dataclass
class RecoveryResult:
    next_seq: dict[str, int]
    records_read: int
    seconds: float
    newest_ts: int = 0  # the latest record timestamp in the topic (0 when empty)
    partitions: int = 0  # 0 when the topic does not exist


def recover_next_seq(settings: KafkaSettings, topic: str, keys: Iterable[str],
                     timeout: float = 120.0, slack_ms: int = CLOCK_SLACK_MS) -> RecoveryResult:
    """next seq (last seq + 1, or 0) for every key in `keys`, read from `topic`."""
    wanted = set(keys)
    started = time.monotonic()
    best: dict[str, tuple[int, int]] = {}  # key -> (seq, record ts)
    newest = [0]
    logger = logging.getLogger("groupscope.librdkafka")
    logger.propagate = False
    consumer = Consumer(settings.client_config(**{
        "group.id": f"groupscope-fleet-recovery-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "fetch.max.bytes": 16 * 1024 * 1024,
        "logger": logger,
    }))
    read = 0
    parts: list[_Part] = []
    try:
        parts = _partitions(consumer, topic, timeout)
        window = FIRST_WINDOW
        while True:
            pending = [p for p in parts if not p.done]
            if not pending:
                break
            if time.monotonic() - started > timeout:
                raise RecoveryError(f"reading back {topic} to find the last seq of each stream "
                                    f"took over {timeout:.0f}s ({read} records read)")
            read += _read_window(consumer, topic, pending, window, wanted, best, newest,
                                 started + timeout)
            for p in pending:
                p.done = p.cursor <= p.low or all(
                    k in p.found or (k in best and p.oldest_ts < best[k][1] - slack_ms)
                    for k in wanted)
            window = min(MAX_WINDOW, window * 4)
    finally:
        consumer.close()
    return RecoveryResult({k: best[k][0] + 1 if k in best else 0 for k in wanted}, read,
                          time.monotonic() - started, newest[0], len(parts))


def _partitions(consumer: Consumer, topic: str, timeout: float) -> list[_Part]:
    try:
        md = consumer.list_topics(topic, timeout=min(timeout, 15.0))
    except KafkaException as exc:
        raise RecoveryError(f"cannot read metadata of {topic}: {one_line(exc)}") from None
    meta = md.topics.get(topic)
    if meta is None or meta.error is not None:
        return []  # no topic, no history: every stream starts at 0
    parts = []
    for pid in sorted(meta.partitions):
        low, high = _watermarks(consumer, TopicPartition(topic, pid), min(timeout, 15.0))
        parts.append(_Part(pid, low, high, done=high <= low))
    return parts


def _watermarks(consumer: Consumer, tp: TopicPartition, timeout: float) -> tuple[int, int]:
    """Retry while leadership settles (a new or grown topic answers NOT_LEADER for a moment)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return consumer.get_watermark_offsets(tp, timeout=timeout)
        except KafkaException as exc:
            err = exc.args[0] if exc.args else None
            retriable = isinstance(err, KafkaError) and (err.retriable() or err.code() in (
                KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE,
                KafkaError.UNKNOWN_TOPIC_OR_PART))
            if not retriable or time.monotonic() >= deadline:
                raise RecoveryError(f"cannot read the offsets of {tp.topic} [{tp.partition}]: "
                                    f"{one_line(exc)}") from None
            time.sleep(0.2)


def _read_window(consumer: Consumer, topic: str, pending: list[_Part], window: int,
                 wanted: set[str], best: dict[str, tuple[int, int]], newest: list[int],
                 deadline: float) -> int:
    """Read [cursor - window, cursor) of every pending partition; move each cursor down."""
    ends: dict[int, int] = {}
    assign = []
    for p in pending:
        start = max(p.low, p.cursor - window)
        ends[p.partition] = p.cursor
        assign.append(TopicPartition(topic, p.partition, start))
        p.cursor = start
    by_id = {p.partition: p for p in pending}
    consumer.assign(assign)
    consumer.resume(assign)  # pause() of an earlier window sticks to the partition otherwise
    open_parts = set(ends)
    read = 0
    last_progress = time.monotonic()
    try:
        while open_parts:
            batch = consumer.consume(5000, timeout=0.2)
            for msg in batch:
                if msg.error() is not None:
                    continue
                pid = msg.partition()
                end = ends[pid]
                if pid not in open_parts or msg.offset() >= end:
                    continue
                read += 1
                part = by_id[pid]
                ts = msg.timestamp()[1]
                if ts < part.oldest_ts:
                    part.oldest_ts = ts
                if ts > newest[0]:
                    newest[0] = ts
                key = msg.key()
                name = key.decode("utf-8", "replace") if key is not None else None
                if name in wanted:
                    seq = _seq_of(msg.value())
                    if seq is not None:
                        part.found.add(name)
                        if name not in best or seq > best[name][0]:
                            best[name] = (seq, ts)
                if msg.offset() >= end - 1:
                    _close(consumer, topic, pid, open_parts)
            if batch:
                last_progress = time.monotonic()
            for pid in list(open_parts):
                pos = consumer.position([TopicPartition(topic, pid)])[0].offset
                if pos >= ends[pid]:
                    _close(consumer, topic, pid, open_parts)
            if open_parts and time.monotonic() - last_progress > STALL_S:
                break  # only control records (or nothing) left in these windows
            if time.monotonic() > deadline:
                raise RecoveryError(f"reading back {topic} timed out")
    finally:
        consumer.unassign()
    return read


def _close(consumer: Consumer, topic: str, pid: int, open_parts: set[int]) -> None:
    """This partition's window is read: stop fetching past it."""
    open_parts.discard(pid)
    consumer.pause([TopicPartition(topic, pid)])


def _seq_of(value: bytes | None) -> int | None:
    """The `seq` of one of our messages; None for anything else (it cannot be ours)."""
    if not value:
        return None
    try:
        seq = orjson.loads(value).get("seq")
    except (orjson.JSONDecodeError, AttributeError):
        return None
    return seq if isinstance(seq, int) and not isinstance(seq, bool) and seq >= 0 else None
