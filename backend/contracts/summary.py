"""The mergeable per-stream Summary and the per-batch partials it merges (docs/architecture.md,
"Contracts": what a Summary carries).

The replica writes it to the summaries changelog; the observer, dashboard and chaos verifier
read it back. Pure Python, no Kafka and no Spark, so every rule here has a fast unit test. A
summary proves by itself whether anything was lost or double-counted: `seq` is contiguous per
stream, so `count - duplicates == last_seq + 1` and `gaps == 0` exactly when every message was
merged once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from backend.contracts import NUMERIC_FIELDS

WINDOW_MS = 10_000  # tumbling-window width for the chart ring
RING_SIZE = 30  # windows kept per stream (5 minutes at 10 s)
WINDOW_FIELDS: tuple[str, ...] = ("speed_kmh", "rpm", "engine_temp_c")


def further_along(kept_count: int | None, count: int) -> bool:
    """Whether a reader of the changelog takes a stream's summary that has counted `count`
    records over the one it holds (`kept_count`; None: none yet).

    Reading the latest record per key is not enough in at-least-once mode, where nothing
    fences a former owner: its write, queued while a broker was away, can land after the new
    owner's newer summary. Along one history a summary only grows (a record read again is
    counted as a duplicate), and the new owner's history began from what the former one had
    committed, so the summary with more records counted is the newer; a tie goes to the later
    write. A tombstone ends a history: readers forget the stream's summary there.
    """
    return kept_count is None or count >= kept_count


def raw_count(raw: object) -> int:
    """The records a JSON-decoded summary has counted, for `further_along`; 0 for anything
    malformed (a reader skips bad input, it does not stop on it)."""
    count = raw.get("count") if isinstance(raw, dict) else None
    return count if isinstance(count, int) and not isinstance(count, bool) else 0


def fold_raw(kept: dict[str, dict], key: str, raw: object | None) -> None:
    """One changelog record, JSON-decoded (None: a tombstone), into `kept` (stream id ->
    summary as a dict) by the readers' rule: a tombstone forgets the stream, a summary
    replaces the kept one when `further_along`; anything but an object is skipped."""
    if raw is None:
        kept.pop(key, None)
    elif isinstance(raw, dict):
        held = kept.get(key)
        if further_along(None if held is None else raw_count(held), raw_count(raw)):
            kept[key] = raw


@dataclass
class FieldStats:
    """count / sum / sum of squares / min / max: enough for mean and stddev, and mergeable."""

    count: int = 0
    sum: float = 0.0
    sumsq: float = 0.0
    min: float | None = None
    max: float | None = None

    def merge(self, other: FieldStats) -> None:
        if other.count == 0:
            return
        self.count += other.count
        self.sum += other.sum
        self.sumsq += other.sumsq
        self.min = other.min if self.min is None else min(self.min, other.min)  # type: ignore[type-var]
        self.max = other.max if self.max is None else max(self.max, other.max)  # type: ignore[type-var]

    @property
    def mean(self) -> float | None:
        return self.sum / self.count if self.count else None

    @property
    def stddev(self) -> float | None:
        """Population standard deviation; clamped at 0 against rounding."""
        if not self.count:
            return None
        mean = self.sum / self.count
        return math.sqrt(max(0.0, self.sumsq / self.count - mean * mean))

    def to_dict(self) -> dict[str, Any]:
        return {"count": self.count, "sum": self.sum, "sumsq": self.sumsq,
                "min": self.min, "max": self.max, "mean": self.mean, "stddev": self.stddev}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> FieldStats:
        return cls(count=int(d.get("count", 0)), sum=float(d.get("sum", 0.0)),
                   sumsq=float(d.get("sumsq", 0.0)), min=d.get("min"), max=d.get("max"))


@dataclass
class WindowAgg:
    """One tumbling window of one stream: [start, start + WINDOW_MS)."""

    start: int
    count: int = 0
    fields: dict[str, FieldStats] = field(default_factory=dict)

    def merge(self, other: WindowAgg) -> None:
        self.count += other.count
        merge_fields(self.fields, other.fields)

    def to_dict(self) -> dict[str, Any]:
        return {"start": self.start, "count": self.count,
                "fields": {k: v.to_dict() for k, v in self.fields.items()}}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> WindowAgg:
        return cls(start=int(d["start"]), count=int(d.get("count", 0)),
                   fields={k: FieldStats.from_dict(v) for k, v in d.get("fields", {}).items()})


@dataclass
class BatchPartial:
    """What one micro-batch contributed to one stream, as aggregated by Spark.

    `old` counts rows whose seq was <= the stream's last_seq when the batch was built (replays);
    `new_distinct` counts distinct seqs above it. Together with min/max seq that is enough to
    derive duplicates and gaps without looking at single messages in Python.
    """

    stream_id: str
    partition: int
    count: int = 0
    old: int = 0
    new_distinct: int = 0
    min_seq: int | None = None
    max_seq: int | None = None
    min_ts: int | None = None
    max_ts: int | None = None
    fields: dict[str, FieldStats] = field(default_factory=dict)
    windows: dict[int, WindowAgg] = field(default_factory=dict)

    def add(self, other: BatchPartial) -> None:
        """Fold another partial of the same stream (Spark returns one row per window)."""
        self.count += other.count
        self.old += other.old
        self.new_distinct += other.new_distinct
        self.min_seq, self.max_seq = _widen(self.min_seq, self.max_seq,
                                            other.min_seq, other.max_seq)
        self.min_ts, self.max_ts = _widen(self.min_ts, self.max_ts, other.min_ts, other.max_ts)
        merge_fields(self.fields, other.fields)
        for start, win in other.windows.items():
            self.windows.setdefault(start, WindowAgg(start)).merge(win)


@dataclass
class Summary:
    """One stream's running summary: the value of the compacted changelog (key = stream_id)."""

    stream_id: str
    partition: int
    count: int = 0
    first_ts: int | None = None
    last_ts: int | None = None
    last_seq: int = -1
    duplicates: int = 0
    gaps: int = 0
    fields: dict[str, FieldStats] = field(default_factory=dict)
    windows: list[WindowAgg] = field(default_factory=list)
    window_ms: int = WINDOW_MS
    updated_ms: int = 0
    replica: str | None = None

    @property
    def complete(self) -> bool:
        """True when every seq 0..last_seq was merged exactly once."""
        return self.gaps == 0 and self.count - self.duplicates == self.last_seq + 1

    def merge_batch(self, part: BatchPartial) -> None:
        """Merge a batch partial computed against this summary's current last_seq."""
        if part.count == 0:
            return
        self.count += part.count
        new_rows = part.count - part.old
        self.duplicates += part.old + (new_rows - part.new_distinct)
        new_hi = max(self.last_seq, part.max_seq if part.max_seq is not None else -1)
        expected_new = new_hi - self.last_seq
        self.gaps += max(0, expected_new - part.new_distinct)
        self.last_seq = new_hi
        self.first_ts, self.last_ts = _widen(self.first_ts, self.last_ts,
                                             part.min_ts, part.max_ts)
        merge_fields(self.fields, part.fields)
        self._merge_windows(part.windows.values())

    def merge(self, other: Summary) -> None:
        """Combine two summaries of the same stream (e.g. two disjoint seq ranges)."""
        self.count += other.count
        self.duplicates += other.duplicates
        self.gaps += other.gaps
        self.last_seq = max(self.last_seq, other.last_seq)
        self.first_ts, self.last_ts = _widen(self.first_ts, self.last_ts,
                                             other.first_ts, other.last_ts)
        merge_fields(self.fields, other.fields)
        self._merge_windows(other.windows)

    def _merge_windows(self, windows: Any) -> None:
        by_start = {w.start: w for w in self.windows}
        for win in windows:
            if win.start in by_start:
                by_start[win.start].merge(win)
            else:
                copy = WindowAgg(win.start)
                copy.merge(win)
                by_start[win.start] = copy
        self.windows = sorted(by_start.values(), key=lambda w: w.start)[-RING_SIZE:]

    def to_dict(self) -> dict[str, Any]:
        return {
            "stream_id": self.stream_id, "partition": self.partition, "count": self.count,
            "first_ts": self.first_ts, "last_ts": self.last_ts, "last_seq": self.last_seq,
            "duplicates": self.duplicates, "gaps": self.gaps,
            "fields": {k: v.to_dict() for k, v in self.fields.items()},
            "windows": [w.to_dict() for w in self.windows], "window_ms": self.window_ms,
            "updated_ms": self.updated_ms, "replica": self.replica,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Summary:
        return cls(
            stream_id=str(d["stream_id"]), partition=int(d["partition"]),
            count=int(d.get("count", 0)), first_ts=d.get("first_ts"), last_ts=d.get("last_ts"),
            last_seq=int(d.get("last_seq", -1)), duplicates=int(d.get("duplicates", 0)),
            gaps=int(d.get("gaps", 0)),
            fields={k: FieldStats.from_dict(v) for k, v in d.get("fields", {}).items()},
            windows=[WindowAgg.from_dict(w) for w in d.get("windows", [])],
            window_ms=int(d.get("window_ms", WINDOW_MS)), updated_ms=int(d.get("updated_ms", 0)),
            replica=d.get("replica"),
        )


def merge_fields(into: dict[str, FieldStats], other: dict[str, FieldStats]) -> None:
    """Fold per-field statistics into `into`, field by field (a field new to it is added)."""
    for name, stats in other.items():
        into.setdefault(name, FieldStats()).merge(stats)


def _widen(lo: Any, hi: Any, other_lo: Any, other_hi: Any) -> tuple[Any, Any]:
    """The range [lo, hi] grown to cover [other_lo, other_hi]; None is an unknown bound."""
    return (other_lo if lo is None else lo if other_lo is None else min(lo, other_lo),
            other_hi if hi is None else hi if other_hi is None else max(hi, other_hi))


__all__ = ["NUMERIC_FIELDS", "RING_SIZE", "WINDOW_FIELDS", "WINDOW_MS", "BatchPartial",
           "FieldStats", "Summary", "WindowAgg"]
