"""The Spark side of a share replica's batch: per stream, what `QueueDelta` carries.

A share group's records come in any order and some twice, so the batch query cannot lean on
a last merged seq as the consumer group's does (spark_summary.aggregate). One query, four
branches over the same local relation, unioned into one result (one `collect`):

- `stats`: per (partition, stream, tumbling window) the rows, timestamps and field statistics,
  as the consumer group's windows;
- `seqs`: the stream's distinct seqs as ranges ("gaps and islands": seq minus its rank among
  the distinct seqs is constant along a run of consecutive seqs);
- `late`: the same for the seqs that arrived after a higher seq of their stream in this
  batch (a running max over the arrival order);
- `deliveries`: rows per Kafka delivery count.

Python only turns the handful of result rows into deltas (`fold`). Every figure is Spark's.
"""

from __future__ import annotations

import time
from typing import Any

import pyarrow as pa

from backend.contracts import NUMERIC_FIELDS
from backend.contracts.queue_summary import QueueDelta, SeqRanges
from backend.contracts.summary import WINDOW_MS, FieldStats, WindowAgg
from backend.replica.spark_summary import SparkSummariser, local_frame

STATS, SEQS, LATE, DELIVERIES = "stats", "seqs", "late", "deliveries"


def share_frame(table: pa.Table, deliveries: list[int]) -> pa.Table:
    """The typed batch (MicroBatch.to_typed_arrow) plus each row's delivery count and its
    place in the batch (the order the replica received it), without the columns only a bad
    record's row needs."""
    n = table.num_rows
    if len(deliveries) != n:
        raise ValueError(f"{len(deliveries)} delivery counts for {n} rows")
    slim = table.drop_columns([c for c in ("reason", "offset") if c in table.column_names])
    return (slim.append_column("delivery", pa.array(deliveries, pa.int32()))
            .append_column("arrival", pa.array(range(n), pa.int64())))


def share_aggregate(df: Any) -> Any:
    """The four branches of the module docstring, one DataFrame (column `kind`)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    df = df.coalesce(1)  # one task: a batch is a small local relation
    before = (Window.partitionBy("stream_id").orderBy("arrival")
              .rowsBetween(Window.unboundedPreceding, -1))
    df = df.withColumn("is_late", F.when(F.col("seq") < F.max("seq").over(before), 1)
                       .otherwise(0))
    stats = df.groupBy(
        "partition", "stream_id",
        (F.floor(F.col("ts") / WINDOW_MS) * WINDOW_MS).cast("long").alias("win"),
    ).agg(F.count(F.lit(1)).alias("n"), F.min("ts").alias("min_ts"),
          F.max("ts").alias("max_ts"),
          *[a for f in NUMERIC_FIELDS for a in (
              F.sum(f).alias(f"s_{f}"), F.sum(F.col(f) * F.col(f)).alias(f"q_{f}"),
              F.min(f).alias(f"lo_{f}"), F.max(f).alias(f"hi_{f}"))]
    ).withColumn("kind", F.lit(STATS))
    distinct = df.groupBy("stream_id", "seq").agg(F.max("is_late").alias("is_late"))

    def islands(rows: Any, kind: str) -> Any:
        rank = F.row_number().over(Window.partitionBy("stream_id").orderBy("seq"))
        return (rows.withColumn("island", F.col("seq") - rank)
                .groupBy("stream_id", "island")
                .agg(F.min("seq").alias("lo"), F.max("seq").alias("hi"))
                .drop("island").withColumn("kind", F.lit(kind)))

    late = islands(distinct.where(F.col("is_late") == 1), LATE)
    seqs = islands(distinct, SEQS)
    deliveries = (df.groupBy("stream_id", "delivery").agg(F.count(F.lit(1)).alias("n"))
                  .withColumn("kind", F.lit(DELIVERIES)))
    return (stats.unionByName(seqs, allowMissingColumns=True)
            .unionByName(late, allowMissingColumns=True)
            .unionByName(deliveries, allowMissingColumns=True))


def fold(rows: list[Any], replica: str, taken_ms: int) -> dict[str, QueueDelta]:
    """Spark's result rows -> one delta per stream."""
    deltas: dict[str, QueueDelta] = {}
    seqs: dict[str, list[tuple[int, int]]] = {}
    late: dict[str, list[tuple[int, int]]] = {}
    for r in rows:
        if r["kind"] != STATS:
            continue
        sid = str(r["stream_id"])
        d = deltas.get(sid)
        if d is None:
            d = deltas[sid] = QueueDelta(sid, int(r["partition"]), replica, count=0,
                                         seqs=SeqRanges(), taken_ms=taken_ms)
        n = int(r["n"])
        fields = {f: FieldStats(count=n, sum=float(r[f"s_{f}"] or 0.0),
                                sumsq=float(r[f"q_{f}"] or 0.0), min=r[f"lo_{f}"],
                                max=r[f"hi_{f}"]) for f in NUMERIC_FIELDS}
        d.count += n
        d.min_ts = r["min_ts"] if d.min_ts is None else min(d.min_ts, r["min_ts"])
        d.max_ts = r["max_ts"] if d.max_ts is None else max(d.max_ts, r["max_ts"])
        for name, stats in fields.items():
            d.fields.setdefault(name, FieldStats()).merge(stats)
        win = d.windows.setdefault(int(r["win"]), WindowAgg(int(r["win"])))
        win.merge(WindowAgg(int(r["win"]), n, fields))
    for r in rows:
        kind, sid = r["kind"], str(r["stream_id"])
        if kind == SEQS:
            seqs.setdefault(sid, []).append((int(r["lo"]), int(r["hi"])))
        elif kind == LATE:
            late.setdefault(sid, []).append((int(r["lo"]), int(r["hi"])))
        elif kind == DELIVERIES and sid in deltas:
            deltas[sid].deliveries[int(r["delivery"])] = int(r["n"])
    for sid, d in deltas.items():
        d.seqs = SeqRanges.of(seqs.get(sid, ()))
        d.late = SeqRanges.of(late.get(sid, ()))
    return deltas


def summarise_share(spark: SparkSummariser, table: pa.Table, deliveries: list[int],
                    replica: str) -> tuple[dict[str, QueueDelta], float]:
    """One share batch through Spark: its deltas, and the seconds the query took."""
    frame = share_frame(table, deliveries)
    start = time.monotonic()
    rows = spark.collect(lambda session: share_aggregate(local_frame(session, frame)),
                         frame.num_rows)
    return fold(rows, replica, int(time.time() * 1000)), time.monotonic() - start
