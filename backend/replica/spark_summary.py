"""The Spark side of a micro-batch: (parse, validate and) aggregate per stream and window.

One Spark query per batch. With the raw feed the values travel as one Arrow binary column
(plus key, partition, offset) and Spark casts, `from_json`s, validates and groups; with the
typed feed Python already parsed them (batch.py) and Spark only groups. Valid rows group by
(partition, stream, tumbling window); invalid rows come back one per record with a reason,
so they can be dead-lettered. Python then folds the handful of result rows into
`BatchPartial`s (summary.py). bench/replica_batch.py compares this with typed columns.
"""

from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from backend.contracts import NUMERIC_FIELDS
from backend.contracts.summary import WINDOW_MS, BatchPartial, FieldStats, WindowAgg
from backend.replica.deadletter import (
    REASON_FUTURE_TS,
    REASON_KEY_MISMATCH,
    REASON_NEGATIVE_SEQ,
    REASON_NON_FINITE,
    REASON_NOT_JSON,
    REASON_NOT_OBJECT,
    REASON_NOT_UTF8,
    REASON_UNKNOWN_FIELD,
    REASON_WRONG_TYPE,
    future_bound_ms,
)

log = logging.getLogger("groupscope.replica")


@dataclass
class BatchResult:
    partials: dict[tuple[int, str], BatchPartial] = field(default_factory=dict)
    bad: list[tuple[int, int, str]] = field(default_factory=list)  # (partition, offset, reason)
    seconds: float = 0.0


def _json_schema() -> Any:
    from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

    return StructType(
        [StructField("stream_id", StringType()), StructField("seq", LongType()),
         StructField("ts", LongType())]
        + [StructField(f, DoubleType()) for f in NUMERIC_FIELDS]
    )


def reason_column(parsed: Any, key: Any, text: Any, now_ms: int | None = None) -> Any:
    """null for a valid row, else why it is invalid (first failing check wins).

    `text` is the value cast to string, `parsed` its from_json struct. Mirrors
    deadletter.parse_checked check for check. The extra parses (try_parse_json) run only
    for rows from_json could not read; json_object_keys runs for every row, the price of
    rejecting unknown fields.
    """
    from pyspark.sql import functions as F

    numeric = list(NUMERIC_FIELDS)
    fields = ("stream_id", "seq", "ts", *numeric)
    # from_json yields a struct of nulls (not a null) for text that is not a JSON object
    nothing = parsed.isNull() | F.coalesce(*[parsed[n].cast("string") for n in fields]).isNull()
    # null for non-objects and for non-strict JSON (NaN, Infinity): see parse_checked
    keys = F.json_object_keys(text)
    unknown = F.array_sort(F.array_except(keys, F.array(*[F.lit(f) for f in fields])))
    expr = F.when(~F.is_valid_utf8(text), F.lit(REASON_NOT_UTF8))
    expr = expr.when(nothing & F.try_parse_json(text).isNull(), F.lit(REASON_NOT_JSON))
    expr = expr.when(keys.isNull() & F.try_parse_json(text).isNotNull(), F.lit(REASON_NOT_OBJECT))
    expr = expr.when(F.size(unknown) > 0,
                     F.concat(F.lit(f"{REASON_UNKNOWN_FIELD}: "), F.element_at(unknown, 1)))
    for name in fields:
        expr = expr.when(parsed[name].isNull(), F.lit(f"{REASON_WRONG_TYPE}: {name}"))
    for name in numeric:
        value = parsed[name]
        expr = expr.when(F.isnan(value) | (F.abs(value) == float("inf")),
                         F.lit(f"{REASON_NON_FINITE}: {name}"))
    expr = expr.when(parsed["seq"] < 0, F.lit(REASON_NEGATIVE_SEQ))
    expr = expr.when(parsed["ts"] > F.lit(future_bound_ms(now_ms)), F.lit(REASON_FUTURE_TS))
    expr = expr.when(parsed["stream_id"] != key, F.lit(REASON_KEY_MISMATCH))
    return expr


def aggregate(df: Any, last_seqs: dict[str, int]) -> Any:
    """Group validated rows per (partition, stream, window); invalid rows one by one.

    `df` has columns partition, offset, reason, stream_id, seq, ts and the numeric fields.
    `old` marks replays: seq <= the stream's last merged seq, passed in as a map literal.
    """
    from pyspark.sql import functions as F

    ok = F.col("reason").isNull()
    if last_seqs:
        pairs: list[Any] = []
        for sid, seq in last_seqs.items():
            pairs += [F.lit(sid), F.lit(int(seq))]
        known = F.coalesce(F.element_at(F.create_map(*pairs), F.col("stream_id")), F.lit(-1))
        old = F.col("seq") <= known
    else:
        old = F.lit(False)
    df = df.select(
        "partition",
        F.when(ok, F.col("stream_id")).alias("sid"),
        F.when(ok, F.floor(F.col("ts") / WINDOW_MS) * WINDOW_MS).cast("long").alias("win"),
        "reason",
        F.when(~ok, F.col("offset")).alias("bad_offset"),
        F.when(ok & old, 1).otherwise(0).alias("is_old"),
        F.when(ok & ~old, F.col("seq")).alias("new_seq"),
        "seq", "ts", *NUMERIC_FIELDS,
    )
    aggs = [
        F.count(F.lit(1)).alias("n"), F.sum("is_old").alias("old"),
        F.count_distinct("new_seq").alias("new_distinct"),
        F.min("seq").alias("min_seq"), F.max("seq").alias("max_seq"),
        F.min("ts").alias("min_ts"), F.max("ts").alias("max_ts"),
    ]
    for f in NUMERIC_FIELDS:
        aggs += [F.count(f).alias(f"c_{f}"), F.sum(f).alias(f"s_{f}"),
                 F.sum(F.col(f) * F.col(f)).alias(f"q_{f}"),
                 F.min(f).alias(f"lo_{f}"), F.max(f).alias(f"hi_{f}")]
    return df.groupBy("partition", "sid", "win", "reason", "bad_offset").agg(*aggs)


def raw_frame(session: Any, table: pa.Table, now_ms: int | None = None) -> Any:
    """Arrow (value, key, partition, offset) -> parsed columns + reason, all inside Spark."""
    from pyspark.sql import functions as F

    df = session.createDataFrame(table)
    key = F.col("key").cast("string")
    text = F.col("value").cast("string")
    parsed = F.from_json(text, _json_schema())
    df = df.select("partition", "offset", key.alias("key"), text.alias("text"), parsed.alias("p"))
    reason = reason_column(F.col("p"), F.col("key"), F.col("text"), now_ms)
    return df.select(
        "partition", "offset", reason.alias("reason"),
        *[F.col("p")[c].alias(c) for c in ("stream_id", "seq", "ts", *NUMERIC_FIELDS)],
    )


def fold(rows: list[Any]) -> BatchResult:
    """Spark result rows -> one BatchPartial per (partition, stream) + the bad records."""
    result = BatchResult()
    for r in rows:
        if r["reason"] is not None:
            result.bad.append((int(r["partition"]), int(r["bad_offset"]), str(r["reason"])))
            continue
        fields = {
            f: FieldStats(count=int(r[f"c_{f}"]), sum=float(r[f"s_{f}"] or 0.0),
                          sumsq=float(r[f"q_{f}"] or 0.0), min=r[f"lo_{f}"], max=r[f"hi_{f}"])
            for f in NUMERIC_FIELDS
        }
        win = WindowAgg(int(r["win"]), int(r["n"]), {k: _copy(v) for k, v in fields.items()})
        part = BatchPartial(
            stream_id=str(r["sid"]), partition=int(r["partition"]), count=int(r["n"]),
            old=int(r["old"] or 0), new_distinct=int(r["new_distinct"]),
            min_seq=r["min_seq"], max_seq=r["max_seq"], min_ts=r["min_ts"], max_ts=r["max_ts"],
            fields=fields, windows={win.start: win},
        )
        k = (part.partition, part.stream_id)
        if k in result.partials:
            result.partials[k].add(part)
        else:
            result.partials[k] = part
    return result


def _copy(s: FieldStats) -> FieldStats:
    return FieldStats(s.count, s.sum, s.sumsq, s.min, s.max)


class SparkSummariser:
    """Holds one Spark Connect session; drops it after a failure so the next try reconnects."""

    def __init__(self, remote: str | None) -> None:
        self.remote = remote
        self._session: Any = None

    def session(self) -> Any:
        """The session, (re)connected on demand; fails fast when nothing listens.

        The Connect client's default retry policy tolerates ~10 minutes of outage inside one
        call, during which the consumer loop could not poll; a short policy hands control
        back within seconds so the replica can pause, report and back off instead.
        """
        if self._session is None:
            from urllib.parse import urlparse

            from pyspark.sql.connect.client.retries import DefaultPolicy

            from backend.engine.session import EngineUnavailable, connect, spark_remote
            from backend.netutil import port_open

            url = spark_remote(self.remote)
            parsed = urlparse(url.replace("sc://", "http://", 1))
            if not port_open(parsed.hostname or "127.0.0.1", parsed.port or 15002, timeout=2.0):
                raise EngineUnavailable(f"nothing is listening at {url}")
            session = connect(url)
            session.client.set_retry_policies(
                [DefaultPolicy(max_retries=3, initial_backoff=200, max_backoff=2000)])
            self._session = session
        return self._session

    def warm_up(self, typed: bool = False) -> None:
        """First query of a fresh session is slow; pay it before joining the group."""
        from backend.replica.batch import MicroBatch

        batch = MicroBatch()
        batch.add(0, 0, b"w", b'{"stream_id":"w","seq":0,"ts":0,"speed_kmh":0,"rpm":0,'
                              b'"gear":0,"engine_temp_c":0,"lat":0,"lon":0}')
        table = batch.to_typed_arrow()[0] if typed else batch.to_arrow()
        self.summarise(table, {"w": -1}, typed=typed)

    def summarise(self, table: pa.Table, last_seqs: dict[str, int],
                  typed: bool = False) -> BatchResult:
        """`typed`: the table already has parsed columns (MicroBatch.to_typed_arrow)."""
        start = time.monotonic()
        try:
            session = self.session()
            df = session.createDataFrame(table) if typed else raw_frame(session, table)
            rows = aggregate(df, last_seqs).collect()
        except Exception:
            self.reset()
            raise
        result = fold(rows)
        result.seconds = time.monotonic() - start
        return result

    def reset(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            with contextlib.suppress(Exception):
                session.stop()
