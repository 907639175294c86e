"""The Spark side of a micro-batch: (parse, validate and) aggregate per stream and window.

One Spark query per batch, its records shipped as one row of Arrow columns (`packed`). With
the raw feed the values travel as one binary column (plus key, partition, offset) and Spark
casts, `from_json`s, validates and groups; with the typed feed Python already parsed them
(batch.py) and Spark only groups. Valid rows group by (partition, stream, tumbling window);
invalid rows come back one per record with a reason, so they can be dead-lettered. Python
then folds the handful of result rows into `BatchPartial`s (summary.py).

Two plans compute the same figures. The grouping plan (`aggregate` over `local_frame`)
unpacks the row in a task and groups with Spark's hash aggregation: one job per batch. The
local plan (`local_plan`), for the small batches of a caught-up replica, computes each group's
figures with Spark's array functions over the packed row itself; Spark's optimiser evaluates
such a projection of a local relation while planning, so the query runs no job at all.
bench/replica_batch.py compares the feeds, bench/spark_fixed_cost.py the plans.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from backend.contracts import NUMERIC_FIELDS
from backend.contracts.summary import WINDOW_MS, BatchPartial, FieldStats, WindowAgg
from backend.netutil import port_open
from backend.replica.batch import MicroBatch
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
from backend.spark.session import EngineUnavailable, connect, spark_remote

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


GROUP_KEYS = ("partition", "sid", "win", "reason", "bad_offset")
# Below this many rows the grouping plan runs interpreted (`SparkSummariser._set_execution`):
# the raw feed's batches, typed ones too large for the local plan, and all on Spark workers.
# For a batch of tens or hundreds of rows Spark's fixed cost is the work: generating and
# formatting the Java source of its projections and aggregation (the source is rebuilt per
# query even when the compiled class is cached) costs more than interpreting the rows.
# Interpreted is cheaper up to a few thousand rows, about even here, and dearer above (see
# bench/README.md, "Spark's fixed cost per batch").
INTERPRETED_BELOW_ROWS = 2_000
# Set once per session. The batch query has no exchange (`aggregate`: one task, one stage),
# so adaptive execution has nothing to re-plan, yet it still runs each query's result stage
# through its own stage machinery and thread pool, a share of a tiny query's engine CPU worth
# saving (see bench/README.md, "Spark's fixed cost per batch").
SESSION_CONFS = {"spark.sql.adaptive.enabled": "false"}
# How each execution mode sets the session: whole-stage codegen plus compiled expressions, or
# neither. `factoryMode` is an internal Spark conf that a session may set at run time; the
# public `spark.sql.codegen.wholeStage=false` alone still generates each expression's code,
# and costs a small raw batch as much as compiled does (bench/README.md, "The demo at rest: a
# batch without a job").
EXECUTION_CONFS = {
    "compiled": {"spark.sql.codegen.wholeStage": "true",
                 "spark.sql.codegen.factoryMode": "FALLBACK"},
    "interpreted": {"spark.sql.codegen.wholeStage": "false",
                    "spark.sql.codegen.factoryMode": "NO_CODEGEN"},
}
# The warm-up batch (SparkSummariser.warm_up): enough rows for the engine's JIT to compile the
# query's per-row code (a 1-row warm-up left a fresh engine's first full batch about twice as
# slow: see bench/README.md, "The pipeline at its limit, 2026-11-24", "Start-up"); more rows
# only cost a replica joining a busy demo, whose engine is warm.
WARM_UP_ROWS = 5_000


def with_last_seqs(table: pa.Table, key: str, last_seqs: dict[str, int]) -> pa.Table:
    """`table` plus `last_seq`: the last seq merged so far of each row's stream (-1 for one
    not seen yet), looked up by the row's key column in Arrow, vectorised.

    This is what tells a replayed record (seq <= last_seq) from a new one. It travels as a
    column rather than as a map literal in the query: a literal of even the demo's dozen
    streams added to every batch's planning, and grows with the streams (see bench/README.md,
    "The pipeline at its limit, 2026-11-24", "The Spark query").
    """
    keys = table.column(key)
    names = list(last_seqs)
    value_set = (pa.array([n.encode() for n in names], pa.binary())
                 if pa.types.is_binary(keys.type) else pa.array(names, pa.string()))
    found = pc.index_in(keys, value_set=value_set)
    known = pc.take(pa.array(list(last_seqs.values()), pa.int64()), found)
    return table.append_column("last_seq", pc.fill_null(known, -1))


def seqs_unique(table: pa.Table) -> bool:
    """Whether no stream holds a seq twice in this (typed) batch: one hash grouping in Arrow,
    cheap next to the Spark work it can save (see bench/README.md, "The pipeline at its
    limit, 2026-11-24", "The Spark query").

    It decides which of two exact Spark plans summarises the batch (`aggregate`): with every
    (stream, seq) once, the count of distinct new seqs is the count of new rows, and the
    per-seq aggregation level, a large share of the engine's CPU per batch (same section),
    has nothing to do. Spark computes every figure of the summary either way."""
    if table.num_rows == 0:
        return True
    return table.group_by(["stream_id", "seq"]).aggregate([]).num_rows == table.num_rows


def aggregate(df: Any, validated: bool = False, unique: bool = False) -> Any:
    """Group validated rows per (partition, stream, window); invalid rows one by one.

    `df` has columns partition, offset, reason, stream_id, seq, ts, the numeric fields and
    last_seq (`with_last_seqs`): `old` marks replays, seq <= the stream's last merged seq.
    `validated` (the typed feed): every row is good and `df` has no reason or offset column,
    so each test of them is a constant the optimiser folds away. (Adding them as null
    literal columns instead would be folded into the local relation, row by row, by an
    interpreted projection: slower than shipping them.)
    `unique` (`seqs_unique` said so): no stream repeats a seq in this batch, so distinct new
    seqs are simply new rows and the per-seq level below is left out.

    The plan is lean on purpose. A batch is a local relation of a few thousand to a few
    hundred thousand rows, so it runs as one task (`coalesce(1)`): no shuffle, no exchange,
    one stage. And no distinct aggregate: the count of distinct new seqs (which tells
    duplicates within a batch from gaps) comes from a first aggregation per seq -- one row
    per distinct seq, flagged new or old -- whose rows the second aggregation, per window,
    simply sums; Spark would otherwise plan `count(DISTINCT)` as two extra aggregation
    passes with a shuffle each. Exact for any input, duplicates and gaps included
    (tests/replica and the chaos harness check it); bench/replica_batch.py measures it.
    """
    from pyspark.sql import functions as F

    reason = F.lit(None).cast("string") if validated else F.col("reason")
    offset = F.lit(None).cast("long") if validated else F.col("offset")
    ok = reason.isNull()
    old = F.col("seq") <= F.col("last_seq")
    df = df.coalesce(1).select(
        "partition",
        F.when(ok, F.col("stream_id")).alias("sid"),
        F.when(ok, F.floor(F.col("ts") / WINDOW_MS) * WINDOW_MS).cast("long").alias("win"),
        reason.alias("reason"),
        F.when(~ok, offset).alias("bad_offset"),
        F.when(ok & old, 1).otherwise(0).alias("is_old"),
        F.when(ok & ~old, 1).otherwise(0).alias("is_new"),
        "seq", "ts", *NUMERIC_FIELDS,
    )
    # Per field: sum, sum of squares, min, max. No count per field: a valid row has every
    # field (a missing or null one is a reason), so each field's count is the row count `n`.
    def field_stats(rows_level: bool) -> list[Any]:
        out: list[Any] = []
        for f in NUMERIC_FIELDS:
            if rows_level:  # aggregating input rows
                out += [F.sum(f).alias(f"s_{f}"), F.sum(F.col(f) * F.col(f)).alias(f"q_{f}"),
                        F.min(f).alias(f"lo_{f}"), F.max(f).alias(f"hi_{f}")]
            else:  # aggregating the per-seq level's partial rows
                out += [F.sum(f"s_{f}").alias(f"s_{f}"), F.sum(f"q_{f}").alias(f"q_{f}"),
                        F.min(f"lo_{f}").alias(f"lo_{f}"), F.max(f"hi_{f}").alias(f"hi_{f}")]
        return out

    seq_range = [F.min("seq").alias("min_seq"), F.max("seq").alias("max_seq")]
    if unique:  # one level: every seq once, so the distinct new seqs are the new rows
        return df.groupBy(*GROUP_KEYS).agg(
            F.count(F.lit(1)).alias("n"), F.sum("is_old").alias("old"),
            F.sum("is_new").alias("new_distinct"), *seq_range,
            F.min("ts").alias("min_ts"), F.max("ts").alias("max_ts"), *field_stats(True))
    per_seq = df.groupBy(*GROUP_KEYS, "seq").agg(
        F.count(F.lit(1)).alias("n"), F.sum("is_old").alias("old"),
        F.max("is_new").alias("new"),  # a seq is new or old as a whole
        F.min("ts").alias("min_ts"), F.max("ts").alias("max_ts"), *field_stats(True))
    return per_seq.groupBy(*GROUP_KEYS).agg(
        F.sum("n").alias("n"), F.sum("old").alias("old"), F.sum("new").alias("new_distinct"),
        *seq_range, F.min("min_ts").alias("min_ts"), F.max("max_ts").alias("max_ts"),
        *field_stats(False))


# Above this many bytes a batch goes through `createDataFrame`, which uploads it as an artifact
# the plan refers to, rather than inline in the plan (Spark's default for
# spark.sql.session.localRelationCacheThreshold; a plan must also fit one gRPC message).
INLINE_RELATION_BYTES = 64 * 1024 * 1024


def packed(table: pa.Table) -> pa.Table:
    """`table` as one row whose cells are its columns (Arrow lists).

    Shipped row by row, a batch becomes a local relation that holds one object per row, and
    Spark's analyser and optimiser walk a plan node's arguments, those rows among them, in
    rule after rule: for a 100 000-row batch that walk cost the engine several times the
    aggregation itself, and every branch of a query that reads the relation twice paid it
    again (bench/README.md, "Where the engine's CPU goes at full speed"). One row of arrays
    is one argument to walk, and the arrays cross as contiguous buffers."""
    offsets = pa.array([0, table.num_rows], pa.int32())
    return pa.table({name: pa.ListArray.from_arrays(offsets, column.combine_chunks())
                     for name, column in zip(table.column_names, table.columns, strict=True)})


def local_relation(session: Any, table: pa.Table) -> Any:
    """`table` as a DataFrame over a local relation carried in the plan itself.

    `session.createDataFrame` first asks the engine for thirteen settings, one round trip per
    batch that only matters for pandas input, timestamps and an upload of large tables, and
    adds a renaming node to the plan. A typed Arrow table needs none of it, so the relation
    is built from the client's own plan class; a table past INLINE_RELATION_BYTES still goes
    through `createDataFrame`."""
    if table.nbytes >= INLINE_RELATION_BYTES:
        return session.createDataFrame(table)
    from pyspark.sql.connect.dataframe import DataFrame
    from pyspark.sql.connect.plan import LocalRelation

    return DataFrame(LocalRelation(table), session)


def local_frame(session: Any, table: pa.Table) -> Any:
    """`table`'s rows as a DataFrame, shipped `packed` and unpacked by Spark (`inline` of the
    zipped arrays) in the query's one task."""
    from pyspark.sql import functions as F

    return local_relation(session, packed(table)).select(
        F.inline(F.arrays_zip(*[F.col(name) for name in table.column_names])))


# The typed batch's columns the local plan reads, `last_seq` (`with_last_seqs`) last.
LOCAL_COLUMNS = ("partition", "stream_id", "seq", "ts", *NUMERIC_FIELDS, "last_seq")
# The local plan is for a batch of at most this many rows x groups (partition, stream, window).
# Its array functions find each group's rows by a pass over the batch, so its cost grows with
# rows times groups, where the grouping plan's grows with rows: the local plan is cheaper for
# a caught-up replica's tens or hundreds of rows in a dozen groups, about even at a few
# hundred thousand rows x groups, and dearer beyond (bench/README.md, "The demo at rest: a
# batch without a job").
LOCAL_PLAN_BUDGET = 50_000


def fits_local_plan(table: pa.Table) -> bool:
    """Whether the typed batch `table` is small enough for the local plan (LOCAL_PLAN_BUDGET):
    its groups counted in Arrow, once the rows alone leave room for more than one."""
    rows = table.num_rows
    if rows > LOCAL_PLAN_BUDGET:
        return False
    window = pc.floor(pc.divide(pc.cast(table.column("ts"), pa.float64()), WINDOW_MS))
    keys = pa.table({"partition": table.column("partition"),
                     "stream_id": table.column("stream_id"), "window": window})
    groups = keys.group_by(["partition", "stream_id", "window"]).aggregate([]).num_rows
    return rows * max(1, groups) <= LOCAL_PLAN_BUDGET


@functools.cache
def local_summaries() -> Any:
    """The local plan's one column: an array of one struct per (partition, stream, window)
    with the grouping plan's result columns (`aggregate`, typed feed, so no invalid rows).

    The figures follow `aggregate`'s definitions: a row is old when its seq <= last_seq, the
    distinct new seqs are counted directly, and the sums run over the group's rows in batch
    order, as the one-level grouping plan's do. Built once: a Column is an expression tree
    that names no session, and building this one costs the client a few milliseconds."""
    from pyspark.sql import functions as F

    rows = F.arrays_zip(*[F.col(name) for name in LOCAL_COLUMNS])

    def window(x: Any) -> Any:
        return (F.floor(x["ts"] / WINDOW_MS) * WINDOW_MS).cast("long")

    keys = F.array_distinct(F.transform(rows, lambda x: F.struct(
        x["partition"].alias("partition"), x["stream_id"].alias("sid"),
        window(x).alias("win"))))
    groups = F.transform(keys, lambda k: F.filter(rows, lambda x: (
        (x["partition"] == k["partition"]) & (x["stream_id"] == k["sid"])
        & (window(x) == k["win"]))))

    def figures(key: Any, group: Any) -> Any:
        def lowest(name: str) -> Any:
            return F.array_min(F.transform(group, lambda x: x[name]))

        def highest(name: str) -> Any:
            return F.array_max(F.transform(group, lambda x: x[name]))

        def total(name: str, squared: bool = False) -> Any:  # from 0.0, in batch order
            return F.aggregate(group, F.lit(0.0),
                               lambda a, x: a + (x[name] * x[name] if squared else x[name]))

        new = F.filter(group, lambda x: x["seq"] > x["last_seq"])
        out = [key["partition"].alias("partition"), key["sid"].alias("sid"),
               key["win"].alias("win"), F.lit(None).cast("string").alias("reason"),
               F.lit(None).cast("long").alias("bad_offset"),
               F.size(group).alias("n"),
               F.size(F.filter(group, lambda x: x["seq"] <= x["last_seq"])).alias("old"),
               F.size(F.array_distinct(F.transform(new, lambda x: x["seq"]))).alias(
                   "new_distinct"),
               lowest("seq").alias("min_seq"), highest("seq").alias("max_seq"),
               lowest("ts").alias("min_ts"), highest("ts").alias("max_ts")]
        for f in NUMERIC_FIELDS:
            out += [total(f).alias(f"s_{f}"), total(f, squared=True).alias(f"q_{f}"),
                    lowest(f).alias(f"lo_{f}"), highest(f).alias(f"hi_{f}")]
        return F.struct(*out)

    return F.zip_with(keys, groups, figures).alias("groups")


def local_plan(session: Any, table: pa.Table, last_seqs: dict[str, int]) -> Any:
    """The local plan over the typed batch `table`: a DataFrame of one row whose one cell
    holds the groups' figures (`local_summaries`), computed by Spark without a job."""
    slim = with_last_seqs(table.select(list(LOCAL_COLUMNS[:-1])), "stream_id", last_seqs)
    return local_relation(session, packed(slim)).select(local_summaries())


def batch_frame(session: Any, table: pa.Table, last_seqs: dict[str, int], typed: bool) -> Any:
    """The batch as the DataFrame `aggregate` reads, for either feed.

    The typed feed has no bad record left by now, so it ships without `reason` and `offset`
    (which only a bad record's row needs): aggregate it with `validated=True`."""
    if not typed:
        return raw_frame(session, with_last_seqs(table, "key", last_seqs))
    slim = table.drop_columns(["reason", "offset"])
    return local_frame(session, with_last_seqs(slim, "stream_id", last_seqs))


def raw_frame(session: Any, table: pa.Table, now_ms: int | None = None) -> Any:
    """Arrow (value, key, partition, offset[, last_seq]) -> parsed columns + reason, all
    inside Spark."""
    from pyspark.sql import functions as F

    df = local_frame(session, table)
    key = F.col("key").cast("string")
    text = F.col("value").cast("string")
    parsed = F.from_json(text, _json_schema())
    carried = ["last_seq"] if "last_seq" in table.column_names else []
    df = df.select("partition", "offset", key.alias("key"), text.alias("text"), parsed.alias("p"),
                   *carried)
    reason = reason_column(F.col("p"), F.col("key"), F.col("text"), now_ms)
    return df.select(
        "partition", "offset", reason.alias("reason"),
        *[F.col("p")[c].alias(c) for c in ("stream_id", "seq", "ts", *NUMERIC_FIELDS)],
        *carried,
    )


def fold(rows: list[Any]) -> BatchResult:
    """Spark result rows -> one BatchPartial per (partition, stream) + the bad records."""
    result = BatchResult()
    for r in rows:
        if r["reason"] is not None:
            result.bad.append((int(r["partition"]), int(r["bad_offset"]), str(r["reason"])))
            continue
        fields = {
            f: FieldStats(count=int(r["n"]), sum=float(r[f"s_{f}"] or 0.0),
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
        self._execution = ""  # the session's EXECUTION_CONFS mode, "" until first set
        self._on_workers = False  # the engine runs tasks on Spark workers' executors
        self.warm = False  # warm_up ran on the current session: a replica need not again

    def session(self) -> Any:
        """The session, (re)connected on demand; fails fast when nothing listens.

        The Connect client's default retry policy tolerates ~10 minutes of outage inside one
        call, during which the consumer loop could not poll; a short policy hands control
        back within seconds so the replica can pause, report and back off instead.
        """
        if self._session is None:
            from urllib.parse import urlparse

            url = spark_remote(self.remote)
            parsed = urlparse(url.replace("sc://", "http://", 1))
            if not port_open(parsed.hostname or "127.0.0.1", parsed.port or 15002, timeout=2.0):
                raise EngineUnavailable(f"nothing is listening at {url}")
            session = connect(url)  # a few seconds of retries, then the batch fails
            try:
                for key, value in SESSION_CONFS.items():
                    session.conf.set(key, value)
                master = str(session.conf.get("spark.master", "local[*]"))
            except BaseException:
                with contextlib.suppress(Exception):
                    session.stop()
                raise
            self._on_workers = not master.startswith("local")
            self._session = session
            self._execution = ""
        return self._session

    def _workers(self) -> bool:
        try:
            self.session()
        except Exception:
            self.reset()
            raise
        return self._on_workers

    def _set_execution(self, rows: int) -> None:
        """Interpreted below INTERPRETED_BELOW_ROWS rows, compiled above: a session setting,
        changed (one small call per key) only when a batch crosses the line, which a
        steady replica's batches seldom do."""
        mode = "interpreted" if rows < INTERPRETED_BELOW_ROWS else "compiled"
        if mode != self._execution:
            for key, value in EXECUTION_CONFS[mode].items():
                self.session().conf.set(key, value)
            self._execution = mode

    def warm_up(self, typed: bool = False, rows: int = WARM_UP_ROWS,
                both_plans: bool = False) -> None:
        """Pay a fresh session's first-query cost before joining the group, with the very
        query a backlog's batch runs (the grouping plan), over enough rows (WARM_UP_ROWS)
        that the engine's JIT compiles its per-row code too.

        `both_plans` also runs the grouping plan for a batch that repeats a seq
        (`aggregate`'s per-seq level, which a replayed or duplicated record brings): a first
        such batch otherwise costs much more on 2 busy cores (see bench/README.md, "A warm
        standby replica, 2026-11-25"), and a two-row batch as a new member's first batch
        runs (the local plan for the typed feed, the interpreted mode for the raw one,
        INTERPRETED_BELOW_ROWS). A standby, off the start's critical path, pays them; a
        cold start does not wait."""
        plans = [(list(range(rows)), True)]
        if both_plans:
            plans += [([*range(rows), 0], True), ([0, 1], False)]
        for seqs, grouping in plans:
            batch = MicroBatch()
            for seq in seqs:
                batch.add(0, seq, b"w", b'{"stream_id":"w","seq":%d,"ts":0,"speed_kmh":0,'
                                        b'"rpm":0,"gear":0,"engine_temp_c":0,"lat":0,'
                                        b'"lon":0}' % seq)
            table = batch.to_typed_arrow()[0] if typed else batch.to_arrow()
            if grouping:  # by size alone the one-stream batch would take the local plan
                self.query_grouped(table, {"w": -1}, typed=typed)
            else:
                self.summarise(table, {"w": -1}, typed=typed)
        self.warm = True

    def keep_alive(self) -> None:
        """One trivial query: keeps a waiting session from the server's idle timeout."""
        self.session().sql("SELECT 1").collect()

    def summarise(self, table: pa.Table, last_seqs: dict[str, int],
                  typed: bool = False) -> BatchResult:
        """`typed`: the table already has parsed columns (MicroBatch.to_typed_arrow). A
        typed batch that `fits_local_plan` takes the local plan, any other the grouping
        plan in the execution mode for its size. On Spark workers every batch takes the
        grouping plan: there the executors' tasks are the lesson, and the local plan runs
        none."""
        if typed and fits_local_plan(table) and not self._workers():
            return self.query_local(table, last_seqs)
        return self.query_grouped(table, last_seqs, typed)

    def query_grouped(self, table: pa.Table, last_seqs: dict[str, int],
                      typed: bool = False) -> BatchResult:
        """The grouping plan in the execution mode for the batch's size."""
        try:
            self._set_execution(table.num_rows)
        except Exception:
            self.reset()
            raise
        return self.query(table, last_seqs, typed)

    def collect(self, build: Callable[[Any], Any], rows: int) -> list[Any]:
        """The rows of the query `build(session)` makes, over a batch of `rows` input rows,
        in the execution mode for that size; a failure drops the session, as in `summarise`.
        For queries other than the consumer group's batch (a share group's: share_spark)."""
        try:
            self._set_execution(rows)
            return build(self.session()).collect()
        except Exception:
            self.reset()
            raise

    def query(self, table: pa.Table, last_seqs: dict[str, int],
              typed: bool = False) -> BatchResult:
        """The grouping plan in the session's current execution mode (`summarise` picks
        it; bench/spark_fixed_cost.py sets it and calls this)."""
        def rows(session: Any) -> list[Any]:
            frame = batch_frame(session, table, last_seqs, typed)
            unique = typed and seqs_unique(table)  # the raw feed's seqs are parsed in Spark
            return aggregate(frame, validated=typed, unique=unique).collect()

        return self._folded(rows)

    def query_local(self, table: pa.Table, last_seqs: dict[str, int]) -> BatchResult:
        """The local plan over the typed batch `table` (`summarise` picks it): its one row's
        one cell holds the result rows."""
        return self._folded(lambda session: local_plan(session, table, last_seqs).collect()[0][0])

    def _folded(self, result_rows: Callable[[Any], list[Any]]) -> BatchResult:
        """`result_rows(session)` folded into a BatchResult and timed; a failure drops the
        session, so the next batch reconnects."""
        start = time.monotonic()
        try:
            rows = result_rows(self.session())
        except Exception:
            self.reset()
            raise
        result = fold(rows)
        result.seconds = time.monotonic() - start
        return result

    def reset(self) -> None:
        session, self._session = self._session, None
        self.warm = False
        if session is not None:
            with contextlib.suppress(Exception):
                session.stop()
