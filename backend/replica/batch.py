"""Micro-batching: collect raw records cheaply, hand Spark one Arrow table per batch.

Per message the consumer loop only reads value/key/partition/offset and appends to lists.
At batch time the records become one Arrow table in one of two feeds (bench/replica_batch.py
measures both): `raw` ships the JSON bytes for Spark to parse; `typed` parses once with
orjson and ships typed columns. A batch is due after `batch_ms` or `batch_max` records.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field

import pyarrow as pa

from backend.contracts import NUMERIC_FIELDS
from backend.replica.deadletter import DeadLetter, cheap_reason, parse_checked

ARROW_SCHEMA = pa.schema([
    ("value", pa.binary()), ("key", pa.binary()),
    ("partition", pa.int32()), ("offset", pa.int64()),
])

TYPED_SCHEMA = pa.schema(
    [("partition", pa.int32()), ("offset", pa.int64()), ("reason", pa.string()),
     ("stream_id", pa.string()), ("seq", pa.int64()), ("ts", pa.int64())]
    + [(f, pa.float64()) for f in NUMERIC_FIELDS]
)


@dataclass
class MicroBatch:
    """Raw records of one batch plus the offsets to commit once its results are durable."""

    values: list[bytes] = field(default_factory=list)
    keys: list[bytes] = field(default_factory=list)
    partitions: list[int] = field(default_factory=list)
    offsets: list[int] = field(default_factory=list)
    dead: list[DeadLetter] = field(default_factory=list)
    next_offsets: dict[int, int] = field(default_factory=dict)  # partition -> last offset + 1
    started: float | None = None

    def __len__(self) -> int:
        return len(self.values) + len(self.dead)

    @property
    def empty(self) -> bool:
        return not self.next_offsets

    def add(self, partition: int, offset: int, key: bytes | None, value: bytes | None) -> None:
        if self.started is None:
            self.started = time.monotonic()
        self.next_offsets[partition] = offset + 1
        reason = cheap_reason(key, value)
        if reason is not None:
            self.dead.append(DeadLetter(partition, offset, key, value, reason))
            return
        self.values.append(value)  # type: ignore[arg-type]
        self.keys.append(key)  # type: ignore[arg-type]
        self.partitions.append(partition)
        self.offsets.append(offset)

    def due(self, now: float, batch_ms: int, batch_max: int) -> bool:
        if self.started is None:
            return False
        return len(self) >= batch_max or (now - self.started) * 1000.0 >= batch_ms

    def to_arrow(self) -> pa.Table:
        return pa.Table.from_arrays(
            [pa.array(self.values, pa.binary()), pa.array(self.keys, pa.binary()),
             pa.array(self.partitions, pa.int32()), pa.array(self.offsets, pa.int64())],
            schema=ARROW_SCHEMA,
        )

    def to_typed_arrow(self) -> tuple[pa.Table, list[DeadLetter]]:
        """Parse + validate in Python (one orjson call per record) into typed columns.

        Invalid records come back as dead letters and never reach Spark.
        """
        cols: dict[str, list] = {c: [] for c in TYPED_SCHEMA.names if c != "reason"}
        bad: list[DeadLetter] = []
        parts, offs = cols["partition"], cols["offset"]
        sids, seqs, tss = cols["stream_id"], cols["seq"], cols["ts"]
        nums = [(f, cols[f]) for f in NUMERIC_FIELDS]
        now_ms = int(time.time() * 1000)  # one processing time per batch, as in the raw feed
        for key, value, p, o in zip(self.keys, self.values, self.partitions, self.offsets,
                                    strict=True):
            d, reason = parse_checked(key, value, NUMERIC_FIELDS, now_ms)
            if d is None:
                bad.append(DeadLetter(p, o, key, value, reason or "invalid"))
                continue
            parts.append(p)
            offs.append(o)
            sids.append(d["stream_id"])
            seqs.append(d["seq"])
            tss.append(d["ts"])
            for f, col in nums:
                col.append(float(d[f]))
        n = len(parts)
        arrays = [pa.array(cols[c], TYPED_SCHEMA.field(c).type) if c != "reason"
                  else pa.nulls(n, pa.string()) for c in TYPED_SCHEMA.names]
        return pa.Table.from_arrays(arrays, schema=TYPED_SCHEMA), bad

    def absorb(self, later: MicroBatch) -> None:
        """Append `later` (records consumed after this batch's) so both retry together."""
        self.values += later.values
        self.keys += later.keys
        self.partitions += later.partitions
        self.offsets += later.offsets
        self.dead += later.dead
        self.next_offsets.update(later.next_offsets)
        if self.started is None:
            self.started = later.started

    def split(self, partitions: Iterable[int]) -> MicroBatch:
        """Remove and return the part of this batch that belongs to `partitions`."""
        wanted = set(partitions)
        out, keep = MicroBatch(), MicroBatch()
        for i, p in enumerate(self.partitions):
            target = out if p in wanted else keep
            target.values.append(self.values[i])
            target.keys.append(self.keys[i])
            target.partitions.append(p)
            target.offsets.append(self.offsets[i])
        for d in self.dead:
            (out if d.partition in wanted else keep).dead.append(d)
        for p, o in self.next_offsets.items():
            (out if p in wanted else keep).next_offsets[p] = o
        out.started = self.started if not out.empty else None
        keep.started = self.started if not keep.empty else None
        self.values, self.keys, self.partitions, self.offsets = (
            keep.values, keep.keys, keep.partitions, keep.offsets)
        self.dead, self.next_offsets, self.started = keep.dead, keep.next_offsets, keep.started
        return out
