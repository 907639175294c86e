"""A share group's per-stream summary: what several members summarised of one stream, out of
order and partly twice, still proving what happened (docs/architecture.md, "Contracts").

A consumer group's `Summary` can rely on order: one member reads a stream's partition from
its last committed offset, so a seq at or below the last one merged is a replay. In a share
group (KIP-932) any member may take any record, records come back after their holder dies
(with a higher delivery count) and nothing is in order, so a summary keeps the *set* of seqs
it has seen, as sorted disjoint ranges (`SeqRanges`: a few ranges per stream, since a stream's
seqs are contiguous but for what is still in flight). From it:

- lost = max seq + 1 - distinct seqs (a seq never summarised by anyone);
- duplicates = count - distinct (a record summarised twice: a redelivery whose first holder
  had summarised it but died before acknowledging);
- out of order = records summarised after a higher seq of their stream had been.

A share replica keeps no state: each batch's Spark query gives one `QueueDelta` per stream,
written to the group's deltas topic before the batch's records are acknowledged. Folding
the deltas in the topic's order (`QueueSummary.fold`) gives the group's summary; merging two
summaries of disjoint sets of deltas (`QueueSummary.merge`) gives the same counts but the out
of order ones, which depend on the order. Pure Python: every rule has a fast unit test.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from backend.contracts.summary import (
    RING_SIZE,
    WINDOW_MS,
    FieldStats,
    WindowAgg,
    merge_fields,
)

Range = tuple[int, int]  # inclusive: (lo, hi)


@dataclass(frozen=True)
class SeqRanges:
    """A set of non-negative integers as sorted, disjoint, non-adjacent inclusive ranges."""

    ranges: tuple[Range, ...] = ()

    @classmethod
    def of(cls, ranges: Iterable[Range]) -> SeqRanges:
        """Any ranges (overlapping, adjacent, unsorted) normalised."""
        out: list[list[int]] = []
        for lo, hi in sorted(ranges):
            if hi < lo:
                raise ValueError(f"empty range ({lo}, {hi})")
            if out and lo <= out[-1][1] + 1:
                out[-1][1] = max(out[-1][1], hi)
            else:
                out.append([lo, hi])
        return cls(tuple((lo, hi) for lo, hi in out))

    @classmethod
    def of_seqs(cls, seqs: Iterable[int]) -> SeqRanges:
        return cls.of((s, s) for s in seqs)

    def union(self, other: SeqRanges) -> SeqRanges:
        if not other.ranges:
            return self
        if not self.ranges:
            return other
        return SeqRanges.of(self.ranges + other.ranges)

    def __len__(self) -> int:
        return sum(hi - lo + 1 for lo, hi in self.ranges)

    def __contains__(self, seq: object) -> bool:
        return isinstance(seq, int) and any(lo <= seq <= hi for lo, hi in self.ranges)

    @property
    def max(self) -> int:
        """The highest seq, -1 for an empty set."""
        return self.ranges[-1][1] if self.ranges else -1

    def count_below(self, bound: int) -> int:
        """How many seqs of the set are < bound."""
        n = 0
        for lo, hi in self.ranges:
            if lo >= bound:
                break
            n += min(hi, bound - 1) - lo + 1
        return n

    def count_at_least(self, bound: int) -> int:
        return len(self) - self.count_below(bound)

    def missing(self, limit: int = 10) -> list[Range]:
        """The first `limit` gaps below the highest seq, as ranges (what was lost)."""
        gaps: list[Range] = []
        expect = 0
        for lo, hi in self.ranges:
            if lo > expect:
                gaps.append((expect, lo - 1))
                if len(gaps) >= limit:
                    break
            expect = hi + 1
        return gaps

    def to_list(self) -> list[list[int]]:
        return [[lo, hi] for lo, hi in self.ranges]

    @classmethod
    def from_list(cls, items: Iterable[Iterable[int]]) -> SeqRanges:
        return cls.of((int(lo), int(hi)) for lo, hi in items)


@dataclass
class QueueDelta:
    """What one batch of one share replica contributed to one stream (Spark's result).

    `seqs`: the distinct seqs of the batch; `late`: the distinct seqs that arrived in the
    batch after a higher seq of the same stream (the batch's own disorder);
    `deliveries`: delivery count -> records (Kafka's count: 1 for a first delivery).
    """

    stream_id: str
    partition: int
    replica: str
    count: int
    seqs: SeqRanges
    late: SeqRanges = field(default_factory=SeqRanges)
    deliveries: dict[int, int] = field(default_factory=dict)
    min_ts: int | None = None
    max_ts: int | None = None
    fields: dict[str, FieldStats] = field(default_factory=dict)
    windows: dict[int, WindowAgg] = field(default_factory=dict)
    taken_ms: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"stream_id": self.stream_id, "partition": self.partition,
                "replica": self.replica, "count": self.count, "seqs": self.seqs.to_list(),
                "late": self.late.to_list(),
                "deliveries": {str(k): v for k, v in sorted(self.deliveries.items())},
                "min_ts": self.min_ts, "max_ts": self.max_ts,
                "fields": {k: v.to_dict() for k, v in self.fields.items()},
                "windows": [w.to_dict() for w in self.windows.values()],
                "taken_ms": self.taken_ms}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> QueueDelta:
        windows = [WindowAgg.from_dict(w) for w in d.get("windows", [])]
        return cls(stream_id=str(d["stream_id"]), partition=int(d["partition"]),
                   replica=str(d["replica"]), count=int(d["count"]),
                   seqs=SeqRanges.from_list(d.get("seqs", [])),
                   late=SeqRanges.from_list(d.get("late", [])),
                   deliveries={int(k): int(v) for k, v in d.get("deliveries", {}).items()},
                   min_ts=d.get("min_ts"), max_ts=d.get("max_ts"),
                   fields={k: FieldStats.from_dict(v) for k, v in d.get("fields", {}).items()},
                   windows={w.start: w for w in windows}, taken_ms=int(d.get("taken_ms", 0)))


@dataclass
class QueueSummary:
    """One stream's summary in a share group: the fold of its deltas."""

    stream_id: str
    partition: int
    count: int = 0
    seqs: SeqRanges = field(default_factory=SeqRanges)
    out_of_order: int = 0
    deliveries: dict[int, int] = field(default_factory=dict)
    replicas: dict[str, int] = field(default_factory=dict)  # records summarised by each
    first_ts: int | None = None
    last_ts: int | None = None
    fields: dict[str, FieldStats] = field(default_factory=dict)
    windows: list[WindowAgg] = field(default_factory=list)
    window_ms: int = WINDOW_MS
    updated_ms: int = 0

    @property
    def distinct(self) -> int:
        return len(self.seqs)

    @property
    def last_seq(self) -> int:
        return self.seqs.max

    @property
    def lost(self) -> int:
        """Seqs below the highest one that nobody summarised (in flight, or lost)."""
        return self.seqs.max + 1 - self.distinct

    @property
    def duplicates(self) -> int:
        return self.count - self.distinct

    @property
    def redelivered(self) -> int:
        """Records summarised on a second or later delivery."""
        return sum(n for k, n in self.deliveries.items() if k >= 2)

    def fold(self, delta: QueueDelta) -> None:
        """Apply the next delta of this stream, in the order the group wrote them.

        A record is out of order when a higher seq of its stream had been summarised
        before it: every seq of the delta below the highest seq folded so far, plus those
        of the delta's own disorder above it (counted once each, per distinct seq).
        """
        before = self.seqs.max
        self.out_of_order += (delta.seqs.count_below(before)
                              + delta.late.count_at_least(before))
        self._absorb(delta.count, delta.seqs, delta.deliveries, {delta.replica: delta.count},
                     delta.min_ts, delta.max_ts, delta.fields, delta.windows.values())
        self.updated_ms = max(self.updated_ms, delta.taken_ms)

    def merge(self, other: QueueSummary) -> None:
        """Combine with a summary of other deltas of the same stream. Associative and
        commutative; `out_of_order` adds up (each side's, as its own order saw it)."""
        self.out_of_order += other.out_of_order
        self._absorb(other.count, other.seqs, other.deliveries, other.replicas,
                     other.first_ts, other.last_ts, other.fields, other.windows)
        self.updated_ms = max(self.updated_ms, other.updated_ms)

    def _absorb(self, count: int, seqs: SeqRanges, deliveries: dict[int, int],
                replicas: dict[str, int], lo_ts: int | None, hi_ts: int | None,
                fields: dict[str, FieldStats], windows: Iterable[WindowAgg]) -> None:
        self.count += count
        self.seqs = self.seqs.union(seqs)
        for k, n in deliveries.items():
            self.deliveries[k] = self.deliveries.get(k, 0) + n
        for name, n in replicas.items():
            self.replicas[name] = self.replicas.get(name, 0) + n
        if lo_ts is not None:
            self.first_ts = lo_ts if self.first_ts is None else min(self.first_ts, lo_ts)
        if hi_ts is not None:
            self.last_ts = hi_ts if self.last_ts is None else max(self.last_ts, hi_ts)
        merge_fields(self.fields, fields)
        by_start = {w.start: w for w in self.windows}
        for win in windows:
            mine = by_start.get(win.start)
            if mine is None:
                mine = by_start[win.start] = WindowAgg(win.start)
            mine.merge(win)
        self.windows = sorted(by_start.values(), key=lambda w: w.start)[-RING_SIZE:]


def fold_deltas(deltas: Iterable[QueueDelta]) -> dict[str, QueueSummary]:
    """stream -> its summary, folding `deltas` in the order given (the deltas topic's)."""
    out: dict[str, QueueSummary] = {}
    for d in deltas:
        s = out.get(d.stream_id)
        if s is None:
            s = out[d.stream_id] = QueueSummary(d.stream_id, d.partition)
        s.fold(d)
    return out
