"""Read every stream's latest Summary and judge it against what the fleet produced.

The Summary contract makes the judgement exact: seqs are contiguous from 0 per stream, so a
stream produced `n` messages is complete when its summary saw seqs 0..n-1 (`last_seq == n-1`,
no gaps); `duplicates` counts messages merged more than once.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import orjson
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

from backend.contracts import summaries_topic
from backend.contracts.queue_summary import QueueSummary
from backend.contracts.summary import fold_raw
from backend.kafka.settings import KafkaSettings


@dataclass(frozen=True)
class StreamVerdict:
    stream_id: str
    produced: int
    processed: int  # messages merged, duplicates included
    lost: int
    duplicates: int
    unexpected: int  # seqs beyond what the fleet says it produced (should never happen)
    redelivered: int = 0  # share group: records summarised on a second or later delivery
    out_of_order: int = 0  # share group: summarised after a higher seq of the stream


@dataclass(frozen=True)
class Verdict:
    streams: tuple[StreamVerdict, ...]

    def total(self, name: str) -> int:
        return sum(getattr(s, name) for s in self.streams)

    produced = property(lambda self: self.total("produced"))
    processed = property(lambda self: self.total("processed"))
    lost = property(lambda self: self.total("lost"))
    duplicates = property(lambda self: self.total("duplicates"))
    unexpected = property(lambda self: self.total("unexpected"))
    redelivered = property(lambda self: self.total("redelivered"))
    out_of_order = property(lambda self: self.total("out_of_order"))

    @property
    def unexplained_duplicates(self) -> int:
        """Share group: streams' duplicates beyond their redeliveries (a duplicate needs one)."""
        return sum(max(0, s.duplicates - s.redelivered) for s in self.streams)


def judge(produced: dict[str, int], summaries: dict[str, dict]) -> Verdict:
    """`produced`: messages per stream (seq 0..n-1); `summaries`: latest Summary dict per stream."""
    out = []
    for stream in sorted(set(produced) | set(summaries)):
        n = produced.get(stream, 0)
        s = summaries.get(stream)
        if s is None:
            out.append(StreamVerdict(stream, n, 0, n, 0, 0))
            continue
        count, dups = int(s.get("count", 0)), int(s.get("duplicates", 0))
        last_seq, gaps = int(s.get("last_seq", -1)), int(s.get("gaps", 0))
        distinct = last_seq + 1 - gaps  # seqs 0..last_seq seen at least once
        seen_in_range = min(distinct, n)
        out.append(StreamVerdict(
            stream_id=stream, produced=n, processed=count,
            lost=n - seen_in_range,
            duplicates=dups,
            unexpected=max(0, last_seq + 1 - n),
        ))
    return Verdict(tuple(out))


def judge_share(produced: dict[str, int], queue: dict[str, QueueSummary]) -> Verdict:
    """The same verdict for a share group, from its folded deltas (the set of seqs seen):
    a duplicate there is a record summarised twice, which only a redelivery can cause
    (`redelivered` bounds it)."""
    out = []
    for stream in sorted(set(produced) | set(queue)):
        n = produced.get(stream, 0)
        q = queue.get(stream)
        if q is None:
            out.append(StreamVerdict(stream, n, 0, n, 0, 0))
            continue
        seen = q.seqs.count_below(n)
        out.append(StreamVerdict(stream_id=stream, produced=n, processed=q.count,
                                 lost=n - seen, duplicates=q.duplicates,
                                 unexpected=q.distinct - seen, redelivered=q.redelivered,
                                 out_of_order=q.out_of_order))
    return Verdict(tuple(out))


def read_summaries(settings: KafkaSettings, group: str, timeout: float = 20.0) -> dict[str, dict]:
    """Each stream's committed summary, read to the end of the changelog as it is now: the one
    furthest along (`contracts.summary.fold_raw`), as a replica restoring it would take."""
    topic = summaries_topic(group)
    c = Consumer(settings.client_config(**{
        "group.id": f"groupscope-verify-{time.time_ns()}", "enable.auto.commit": False,
        "enable.partition.eof": True, "isolation.level": "read_committed"}))
    try:
        meta = c.list_topics(topic, timeout=10).topics.get(topic)
        if meta is None or meta.error is not None:
            raise RuntimeError(f"cannot read {topic}: {meta.error if meta else 'no metadata'}")
        ends = {}
        for p in meta.partitions:
            lo, hi = c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            if hi > lo:
                ends[p] = hi
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in ends])
        out: dict[str, dict] = {}
        pending = set(ends)
        deadline = time.monotonic() + timeout
        while pending and time.monotonic() < deadline:
            for m in c.consume(1000, 0.3):
                if m.error() is not None:
                    eof = m.error().code() == KafkaError._PARTITION_EOF
                    if eof and m.offset() >= ends[m.partition()]:
                        pending.discard(m.partition())
                    continue
                if m.key() is not None:
                    fold_raw(out, m.key().decode(),
                             None if m.value() is None else orjson.loads(m.value()))
                if m.offset() + 1 >= ends[m.partition()]:
                    pending.discard(m.partition())
        if pending:
            raise TimeoutError(f"changelog partitions {sorted(pending)} not read to their end "
                               f"within {timeout:.0f}s")
        return out
    finally:
        c.close()
