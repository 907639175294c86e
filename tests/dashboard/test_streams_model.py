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


def test_a_share_groups_rows_name_its_sharers_and_count_out_of_order_and_redelivered():
    from backend.contracts.queue_summary import QueueDelta, SeqRanges, fold_deltas
    from dashboard.streams_model import queue_rows, with_share_order

    queue = fold_deltas([
        # bruno summarises seqs 5..9 first; ada's 0..3 come after them (4 out of order),
        # two of them on a second delivery; seq 4 is nobody's yet
        QueueDelta("car-04", 1, "bruno", 5, SeqRanges.of([(5, 9)]), deliveries={1: 5},
                   min_ts=5_000, max_ts=9_000, fields={"speed_kmh": _stats(70, 80)},
                   windows={5000: WindowAgg(5000, 5, {"speed_kmh": _stats(70, 80)})}),
        QueueDelta("car-04", 1, "ada", 4, SeqRanges.of([(0, 3)]), deliveries={1: 2, 2: 2},
                   min_ts=0, max_ts=3_000, fields={"speed_kmh": _stats(50, 60)},
                   windows={0: WindowAgg(0, 4, {"speed_kmh": _stats(50, 60)})}),
    ])
    [row] = queue_rows(queue, now_ms=10_000)
    assert row["stream"] == "car-04" and row["partition"] == 1
    assert row["replica"] == "ada, bruno" and row["count"] == 9
    assert (row["out of order"], row["redelivered"]) == (4, 2)
    assert (row["duplicates"], row["gaps"]) == (0, 1)
    assert row["mean speed"] == 65.0 and row["speed"] == [55.0, 75.0]
    assert row["last seen s ago"] == 1.0

    consumer = stream_rows({"car-04": {"count": 10}, "car-05": {"count": 3}}, now_ms=0)
    beside = {r["stream"]: r["share group: out of order"]
              for r in with_share_order(consumer, queue)}
    assert beside == {"car-04": 4, "car-05": None}
