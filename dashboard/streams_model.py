"""Rows of the Streams page from the summaries changelog (one Summary dict per stream).

Summaries are `backend.contracts.summary.Summary.to_dict()`; this module reads them
defensively (a missing field is shown as empty, never an exception) so a schema change
upstream degrades one column, not the page.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

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
