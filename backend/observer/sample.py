"""Read-only record sampling: which keys live in each partition, and when a record was written.

Two jobs, both with a time budget so a poll never waits on them for long:
- keys: the last few records of each partition give the streams of a foreign group
  (whose keys we cannot know in advance);
- record times: the first record a group has not processed gives the exact age of its lag,
  and tells a real lag from commit markers (see `Sampler.record_times`).

One `Sampler` serves any number of topics and groups (the cluster overview shares one per
cluster); its consumer is the read-only one of `reader.py`, and a lock makes it safe to call
from several threads.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from confluent_kafka import KafkaError, TopicPartition

from backend.kafka.groups import TP
from backend.kafka.settings import KafkaSettings
from backend.observer.reader import readonly_consumer

CACHE_ENTRIES = 50_000
SEEK_GAP = 2_000  # records: further ahead, a seek is cheaper than reading the gap


@dataclass
class _Job:
    """One partition of a read: the starts still unanswered, as (read from, start), in
    offset order, and the log end they are asked up to."""

    pending: list[tuple[int, int]]
    end: int


@dataclass(frozen=True)
class _Scan:
    """What one read learnt about the data records at/after a start offset.

    `first` is the offset of the first data record at/after the start (with its timestamp
    `ts`, -1 when the broker has none); None: no data record in [start, `upto`).
    """

    first: int | None
    ts: int
    upto: int


class Sampler:
    """A read-only, assign()-only reader of record keys and timestamps.

    `group` is only the id the consumer carries (see reader.py): the watched group's for a
    single-group observer, any group the principal may describe for a shared one, or None.
    """

    def __init__(self, settings: KafkaSettings, group: str | None = None) -> None:
        # small fetches: a lag reader wants one record per partition, not a megabyte
        self._consumer = readonly_consumer(settings, "sampler", group, **{
            "max.partition.fetch.bytes": 256 * 1024, "queued.min.messages": 1000})
        self._lock = threading.Lock()
        self._scans: dict[tuple[str, int, int], _Scan] = {}
        self.reads = 0  # record_times calls that had to fetch (the rest came from the cache)

    def sample_keys(self, topic: str, ends: Mapping[int, int], starts: Mapping[int, int],
                    per_partition: int = 20, budget_s: float = 1.0) -> dict[str, int]:
        """key -> partition it was seen in, from the last `per_partition` records of each."""
        assign = []
        for p, end in ends.items():
            first = max(starts.get(p, 0), end - per_partition)
            if end > first:
                assign.append(TopicPartition(topic, p, first))
        if not assign:
            return {}
        remaining = {tp.partition: ends[tp.partition] for tp in assign}
        with self._lock:
            return self._sample(assign, remaining, budget_s)

    def _sample(self, assign: list[TopicPartition], remaining: dict[int, int],
                budget_s: float) -> dict[str, int]:
        keys: dict[str, int] = {}
        self._consumer.assign(assign)
        try:
            deadline = time.monotonic() + budget_s
            while remaining and time.monotonic() < deadline:
                for msg in self._consumer.consume(500, timeout=0.2):
                    p = msg.partition()
                    if msg.error():
                        if msg.error().code() == KafkaError._PARTITION_EOF:
                            remaining.pop(p, None)
                        continue
                    k = msg.key()
                    if k is not None:
                        keys[k.decode("utf-8", "replace")] = p
                    if msg.offset() + 1 >= remaining.get(p, 0):
                        remaining.pop(p, None)
        finally:
            self._consumer.unassign()
        return keys

    def record_times(self, wanted: Mapping[TP, tuple[int, int]],
                     budget_s: float = 0.5) -> dict[TP, int | None]:
        """(topic, partition) -> (from_offset, end_offset) to the broker timestamp (ms) of the
        first *data* record at/after from_offset and before end_offset.

        None: there is none -- only transaction commit/abort markers or records of aborted
        transactions lie in [from, end), so a group committed at `from` has nothing left to
        process (its effective lag is 0 although end - from > 0). A partition is absent when
        it was not learnt within `budget_s`, when an open transaction hides what follows
        (the read_committed reader stops at the last stable offset, before `end`), or when
        the record carries no timestamp.

        The reader is read_committed, so it skips exactly what a read_committed group skips;
        a compacted-away or deleted record at `from` is simply not there, and the first
        survivor after it answers. Answers are cached by start offset: a partition whose
        commit and end do not move costs nothing per call; one whose end grows past an
        all-markers range is read again only from where the last read stopped.
        """
        many = self.record_times_many(
            {tp: ((start,), end) for tp, (start, end) in wanted.items()}, budget_s)
        return {tp: ts for (tp, _start), ts in many.items()}

    def record_times_many(self, wanted: Mapping[TP, tuple[Collection[int], int]],
                          budget_s: float = 0.5) -> dict[tuple[TP, int], int | None]:
        """`record_times` for several start offsets per partition (many groups reading one
        topic at different commits): ((topic, partition), start) -> timestamp / None.

        One pass per partition serves them all: reading forward from the lowest start, each
        data record answers every start at or below it not answered yet; a start far ahead
        of the reader (more than SEEK_GAP records) is reached by a seek, not by reading the
        records in between. With no budget only the cache answers.
        """
        out: dict[tuple[TP, int], int | None] = {}
        todo: dict[TP, _Job] = {}
        with self._lock:
            for tp, (starts, end) in wanted.items():
                pending: list[tuple[int, int]] = []  # (read from, start)
                for start in sorted(set(starts)):
                    if end <= start:
                        out[(tp, start)] = None
                        continue
                    scan = self._cached(tp[0], tp[1], start)
                    if scan is not None and (scan.first is not None or end <= scan.upto):
                        if scan.first is None or scan.first >= end:
                            out[(tp, start)] = None
                        elif scan.ts > 0:
                            out[(tp, start)] = scan.ts
                        continue
                    pending.append((scan.upto if scan is not None else start, start))
                if pending:
                    todo[tp] = _Job(sorted(pending), end)
            if todo and budget_s > 0:
                self._read(todo, out, budget_s)
        return out

    def _cached(self, topic: str, partition: int, start: int) -> _Scan | None:
        key = (topic, partition, start)
        scan = self._scans.pop(key, None)
        if scan is not None:
            self._scans[key] = scan  # most recently used last
        return scan

    def _remember(self, topic: str, partition: int, start: int, scan: _Scan) -> None:
        self._scans[(topic, partition, start)] = scan
        if len(self._scans) > CACHE_ENTRIES:
            for key in list(self._scans)[: CACHE_ENTRIES // 4]:
                del self._scans[key]

    def _read(self, todo: dict[TP, _Job], out: dict[tuple[TP, int], int | None],
              budget_s: float) -> None:
        """Read each partition of `todo` forward until every start it asks about is answered
        by a data record, or the end."""
        self.reads += 1
        self._consumer.assign([TopicPartition(t, p, job.pending[0][0])
                               for (t, p), job in todo.items()])
        paused: list[TopicPartition] = []
        try:
            deadline = time.monotonic() + budget_s
            while todo and (left := deadline - time.monotonic()) > 0:
                done = []
                for msg in self._consumer.consume(len(todo) * 4 + 10, timeout=min(0.1, left)):
                    tp = (msg.topic(), msg.partition())
                    job = todo.get(tp)
                    if job is None:  # answered earlier in this batch, or not asked
                        continue
                    if self._answer(tp, job, msg, out):
                        del todo[tp]
                        done.append(tp)
                if done:
                    # stop fetching what is answered; the rest keeps the budget to itself
                    stop = [TopicPartition(t, p) for t, p in done]
                    self._consumer.pause(stop)
                    paused.extend(stop)
        finally:
            # librdkafka keeps a partition paused across unassign/assign: a paused one
            # would never be fetched again by this consumer
            if paused:
                self._consumer.resume(paused)
            self._consumer.unassign()

    def _answer(self, tp: TP, job: _Job, msg, out: dict[tuple[TP, int], int | None]) -> bool:
        """Fold one consumed message into the partition's job; True when it is finished."""
        err = msg.error()
        if err is not None:
            if err.code() == KafkaError._PARTITION_EOF:
                # nothing readable in [at, eof): markers, aborted records, or (eof < end)
                # the rest belongs to a transaction still open
                eof = msg.offset()
                for at, start in job.pending:
                    self._remember(tp[0], tp[1], start, _Scan(None, -1, max(eof, at)))
                    if max(eof, at) >= job.end:
                        out[(tp, start)] = None
            return True  # any other partition error (deleted topic, no READ): not learnt
        offset = msg.offset()
        if offset < job.pending[0][0]:
            return False
        _, ts = msg.timestamp()
        while job.pending and job.pending[0][0] <= offset:
            _at, start = job.pending.pop(0)
            self._remember(tp[0], tp[1], start, _Scan(offset, ts, offset))
            if offset >= job.end:
                out[(tp, start)] = None
            elif ts > 0:
                out[(tp, start)] = ts
        if not job.pending:
            return True
        if job.pending[0][0] > offset + SEEK_GAP:
            self._consumer.seek(TopicPartition(tp[0], tp[1], job.pending[0][0]))
        return False

    def close(self) -> None:
        with self._lock:
            self._consumer.close()
