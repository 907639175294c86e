"""Streams page rows from real replica Summary objects (the changelog's value format)."""

from __future__ import annotations

from backend.contracts.summary import BatchPartial, FieldStats, Summary, WindowAgg
from dashboard.streams_model import stream_rows


def _stats(*values: float) -> FieldStats:
    return FieldStats(count=len(values), sum=sum(values), sumsq=sum(v * v for v in values),
                      min=min(values), max=max(values))


def test_rows_show_means_maxima_duplicates_gaps_and_sparkline():
    s = Summary("car-04", partition=2, replica="ada")
    part = BatchPartial("car-04", 2, count=4, new_distinct=3, min_seq=0, max_seq=3,
                        min_ts=1_000, max_ts=4_000,
                        fields={"speed_kmh": _stats(50, 60, 70, 80),
                                "engine_temp_c": _stats(90, 91, 92, 95)},
                        windows={0: WindowAgg(0, 2, {"speed_kmh": _stats(50, 60)}),
                                 5000: WindowAgg(5000, 2, {"speed_kmh": _stats(70, 80)})})
    s.merge_batch(part)
    rows = stream_rows({"car-04": s.to_dict()}, now_ms=6_000)
    assert len(rows) == 1
    row = rows[0]
    assert row["stream"] == "car-04" and row["partition"] == 2 and row["replica"] == "ada"
    assert row["count"] == 4 and row["mean speed"] == 65.0 and row["max speed"] == 80.0
    assert row["max temp °C"] == 95.0
    assert row["duplicates"] == 1 and row["gaps"] == 1  # 4 rows, 3 distinct of seq 0..3
    assert row["last seen s ago"] == 2.0
    assert row["speed"] == [55.0, 75.0]


def test_missing_fields_degrade_to_empty_cells():
    rows = stream_rows({"odd": {"count": 3}}, now_ms=0)
    assert rows[0]["mean speed"] is None and rows[0]["last seen s ago"] is None
    assert rows[0]["speed"] == []
