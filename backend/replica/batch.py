"""Micro-batching: collect raw records cheaply, hand Spark one Arrow table per batch.

Per message the consumer loop only reads value/key/partition/offset and appends to lists.
At batch time the records become one Arrow table in one of two feeds (bench/replica_batch.py
measures both): `raw` ships the JSON bytes for Spark to parse; `typed` parses once with
orjson and ships typed columns. When a batch is due is `BatchSizing`'s call: large while the
consumer has a backlog, small and soon once it has caught up.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

from backend.contracts import NUMERIC_FIELDS
from backend.replica.deadletter import (
    DeadLetter,
    cheap_reason,
    future_bound_ms,
    parse_checked,
)

ARROW_SCHEMA = pa.schema([
    ("value", pa.binary()), ("key", pa.binary()),
    ("partition", pa.int32()), ("offset", pa.int64()),
])

TYPED_SCHEMA = pa.schema(
    [("partition", pa.int32()), ("offset", pa.int64()), ("reason", pa.string()),
     ("stream_id", pa.string()), ("seq", pa.int64()), ("ts", pa.int64())]
    + [(f, pa.float64()) for f in NUMERIC_FIELDS]
)
# what a message holds, for Arrow's JSON reader: the typed columns that come from the value
_VALUE_SCHEMA = pa.schema([f for f in TYPED_SCHEMA if f.name not in ("partition", "offset",
                                                                     "reason")])
_JSON_PARSE = pa_json.ParseOptions(explicit_schema=_VALUE_SCHEMA,
                                   unexpected_field_behavior="error")


CAUGHT_UP_MS = 250  # a caught-up consumer's batch is due this soon: latency, not size
# ... once it holds this many records. Below that a query costs Spark more than its rows are
# worth (its fixed part is tens of ms of engine CPU, its rows microseconds each: bench/README.md,
# "Spark's fixed cost per batch"), so a trickle waits up to `batch_ms` instead: a demo at rest
# asks Spark about once a second per replica rather than four times. A batch after a new
# assignment is due at CAUGHT_UP_MS whatever its size: a new member's or a rebalance's first
# batch is what the audience waits for.
WORTH_ROWS = 100
# While catching up a batch grows up to this many times `batch_max`. Spark's cost per row is
# flat from 50 000 to 150 000 rows a batch (≈ 6.5 µs on 2 cores, the engine's 480m heap) and
# jumps by half beyond (200 000 rows: ≈ 10 µs, the heap churning): 5 x 20 000 stays below it.
BACKLOG_GROWTH = 5


@dataclass
class BatchSizing:
    """When a batch is due, and how many records it may take.

    Spark costs a fixed part per batch plus a part per row, so the right batch depends on the
    consumer's position. With a backlog (a consume filled all the room it was given) batches
    grow, doubling up to BACKLOG_GROWTH × `batch_max`, to amortise the fixed part; once caught
    up (a consume came back short) a batch of WORTH_ROWS or more is due as soon as it is
    CAUGHT_UP_MS old, so a record waits a quarter second rather than `batch_ms`, and the cap
    shrinks back. A smaller one waits for `batch_ms` unless it is the first since an
    assignment (`prompt`). `batch_ms` stays the longest any record waits.
    """

    batch_ms: int = 1000
    batch_max: int = 20_000
    limit: int = 0  # the current cap, between batch_max and BACKLOG_GROWTH × batch_max
    backlog: bool = True  # until a consume comes back short, assume there is one
    prompt: bool = True  # the next batch is the first since an assignment (or the start)

    def __post_init__(self) -> None:
        self.limit = self.limit or self.batch_max

    @property
    def ceiling(self) -> int:
        return self.batch_max * BACKLOG_GROWTH

    def room(self, batch: MicroBatch) -> int:
        return max(1, self.limit - len(batch))

    def took(self, got: int, asked: int) -> None:
        """After each consume: a full one means more is waiting."""
        self.backlog = got >= asked

    def _due_after_ms(self, batch: MicroBatch) -> float:
        """The age at which `batch` falls due, its size (`limit`) aside."""
        soon = not self.backlog and (self.prompt or len(batch) >= WORTH_ROWS)
        return min(CAUGHT_UP_MS, self.batch_ms) if soon else self.batch_ms

    def due(self, batch: MicroBatch, now: float) -> bool:
        if batch.started is None:
            return False
        return len(batch) >= self.limit or batch.age_ms(now) >= self._due_after_ms(batch)

    def wait_s(self, batch: MicroBatch, now: float, longest: float) -> float:
        """How long the next consume may block before the batch falls due (records that
        arrive meanwhile may bring it forward: the caller waits at most `longest`)."""
        if batch.started is None:
            return longest
        until = self._due_after_ms(batch)
        return max(0.0, min(longest, (until - batch.age_ms(now)) / 1000.0))

    def processed(self, size: int) -> None:
        """After a batch: grow while full batches keep coming, shrink once they do not."""
        self.prompt = False
        if size >= self.limit and self.backlog:
            self.limit = min(self.limit * 2, self.ceiling)
        elif size < self.limit // 2:
            self.limit = max(self.batch_max, self.limit // 2)


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
    committed_early: bool = False  # `before-processing` committed its offsets already

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

    def age_ms(self, now: float) -> float:
        return 0.0 if self.started is None else (now - self.started) * 1000.0

    def to_arrow(self) -> pa.Table:
        return pa.Table.from_arrays(
            [pa.array(self.values, pa.binary()), pa.array(self.keys, pa.binary()),
             pa.array(self.partitions, pa.int32()), pa.array(self.offsets, pa.int64())],
            schema=ARROW_SCHEMA,
        )

    def to_typed_arrow(self, now_ms: int | None = None) -> tuple[pa.Table, list[DeadLetter]]:
        """Parse + validate into typed columns; invalid records come back as dead letters and
        never reach Spark.

        A batch of well-formed records (every batch, in practice) is parsed in one call of
        Arrow's JSON reader, several times faster than a Python loop (bench/README.md, "The
        pipeline at its limit"); one record that reader or its checks cannot vouch for sends
        the whole batch through the per-record parse, which finds each bad record and its
        reason. Both ways give the same table.
        """
        if now_ms is None:  # one processing time per batch, as in the raw feed
            now_ms = int(time.time() * 1000)
        table = self._typed_arrow_at_once(now_ms)
        if table is not None:
            return table, []
        return self._typed_arrow_per_record(now_ms)

    def _typed_arrow_at_once(self, now_ms: int) -> pa.Table | None:
        """The whole batch through Arrow's JSON reader, or None if any record might be bad.

        The values are joined into newline-delimited JSON, so a value holding a line break
        (legal JSON whitespace) or two objects on one line would shift the rows: any count
        other than one row per record falls back. Every check of `parse_checked` holds here
        or makes the reader raise: unknown or repeated fields, wrong types and integers out
        of range raise; missing fields and nulls, NaN, negative seqs, future timestamps,
        invalid UTF-8 and a stream_id other than the key are looked for column by column.
        """
        n = len(self.values)
        if n == 0:
            return None
        text = b"\n".join(self.values)
        if text.count(b"\n") != n - 1:
            return None
        try:
            parsed = pa_json.read_json(pa.BufferReader(text), parse_options=_JSON_PARSE)
        except (pa.ArrowException, UnicodeDecodeError):
            return None
        if parsed.num_rows != n or any(col.null_count for col in parsed.columns):
            return None
        sids = parsed.column("stream_id")
        try:
            sids.validate(full=True)  # the reader copies string bytes without a UTF-8 check
        except pa.ArrowInvalid:
            return None
        suspect = [pc.any(pc.less(parsed.column("seq"), 0)),
                   pc.any(pc.greater(parsed.column("ts"), future_bound_ms(now_ms))),
                   pc.any(pc.not_equal(sids.cast(pa.binary()), pa.array(self.keys, pa.binary())))]
        suspect += [pc.any(pc.invert(pc.is_finite(parsed.column(f)))) for f in NUMERIC_FIELDS]
        if any(flag.as_py() for flag in suspect):
            return None
        columns = {"partition": pa.array(self.partitions, pa.int32()),
                   "offset": pa.array(self.offsets, pa.int64()),
                   "reason": pa.nulls(n, pa.string())}
        return pa.Table.from_arrays(
            [columns[c] if c in columns else parsed.column(c) for c in TYPED_SCHEMA.names],
            schema=TYPED_SCHEMA)

    def _typed_arrow_per_record(self, now_ms: int) -> tuple[pa.Table, list[DeadLetter]]:
        """One orjson parse per record (`parse_checked`), which tells each bad one's reason."""
        cols: dict[str, list] = {c: [] for c in TYPED_SCHEMA.names if c != "reason"}
        bad: list[DeadLetter] = []
        parts, offs = cols["partition"], cols["offset"]
        sids, seqs, tss = cols["stream_id"], cols["seq"], cols["ts"]
        nums = [(f, cols[f]) for f in NUMERIC_FIELDS]
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
        if not later.empty:  # its records were not committed with this batch's
            self.committed_early = False

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
