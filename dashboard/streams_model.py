"""Rows of the Streams page from the summaries changelog (one Summary dict per stream), or a
share group's folded `QueueSummary`s.

Summaries are `backend.contracts.summary.Summary.to_dict()`; this module reads them
defensively (a missing field is shown as empty, never an exception) so a schema change
upstream degrades one column, not the page. A share group's rows are the same columns (its
"gaps" being the seqs below the highest nobody has summarised yet, lost or in flight) plus
what only a share group has: records that arrived out of order, and redeliveries.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from backend.contracts.queue_summary import QueueSummary

SPARK_POINTS = 30


def _field(summary: Mapping[str, Any], name: str, stat: str) -> float | None:
    value = (summary.get("fields") or {}).get(name, {}).get(stat)
    if stat == "mean" and value is None:
        f = (summary.get("fields") or {}).get(name, {})
        if f.get("count"):
            value = f.get("sum", 0.0) / f["count"]
    return float(value) if isinstance(value, int | float) else None


def window_means(summary: Mapping[str, Any], name: str) -> list[float]:
    out: list[float] = []
    for w in (summary.get("windows") or [])[-SPARK_POINTS:]:
        f = (w.get("fields") or {}).get(name) or {}
        if f.get("count"):
            out.append(float(f.get("sum", 0.0)) / float(f["count"]))
    return out


def stream_rows(summaries: Mapping[str, Mapping[str, Any]], now_ms: int) -> list[dict[str, Any]]:
    rows = []
    for stream_id, s in sorted(summaries.items()):
        last = s.get("last_ts")
        rows.append({
            "stream": stream_id,
            "partition": s.get("partition"),
            "replica": s.get("replica"),
            "count": s.get("count", 0),
            "mean speed": _field(s, "speed_kmh", "mean"),
            "max speed": _field(s, "speed_kmh", "max"),
            "mean rpm": _field(s, "rpm", "mean"),
            "mean temp °C": _field(s, "engine_temp_c", "mean"),
            "max temp °C": _field(s, "engine_temp_c", "max"),
            "last seen s ago": round((now_ms - last) / 1000.0, 1) if isinstance(last, int)
            else None,
            "duplicates": s.get("duplicates", 0),
            "gaps": s.get("gaps", 0),
            "speed": window_means(s, "speed_kmh"),
        })
    return rows


def queue_rows(queue: Mapping[str, QueueSummary], now_ms: int) -> list[dict[str, Any]]:
    """A share group's streams in the consumer group's columns, its sharers as "replica",
    and per car the records that arrived after a higher seq and those delivered again."""
    as_summaries = {car: {
        "partition": q.partition, "count": q.count, "last_ts": q.last_ts,
        "replica": ", ".join(sorted(q.replicas)), "duplicates": q.duplicates, "gaps": q.lost,
        "fields": {k: v.to_dict() for k, v in q.fields.items()},
        "windows": [w.to_dict() for w in q.windows]} for car, q in queue.items()}
    rows = stream_rows(as_summaries, now_ms)
    for row in rows:
        q = queue[row["stream"]]
        row["out of order"], row["redelivered"] = q.out_of_order, q.redelivered
    return rows


def with_share_order(rows: list[dict[str, Any]], queue: Mapping[str, QueueSummary]
                     ) -> list[dict[str, Any]]:
    """The consumer group's rows with, per car, how many of its records arrived out of order
    in the share group beside it on the same topic (none where that group has not seen it)."""
    return [{**row, "share group: out of order": queue[row["stream"]].out_of_order
             if row["stream"] in queue else None} for row in rows]
