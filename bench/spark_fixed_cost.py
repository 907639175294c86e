"""Spark's fixed cost per batch: engine CPU and wall per query, by batch size and execution mode.

A caught-up replica sends Spark a batch of tens of rows several times a second, so what a
query costs regardless of its rows decides how busy a demo's engine is at rest (and so how
soon a new replica's first batch gets through). This runs the replica's own batch queries
(typed feed: the grouping plan, `aggregate` over `batch_frame`, and the local plan,
`local_plan`) on one engine, the modes interleaved round by round so drift hits them alike:

  default      Spark's defaults: adaptive execution on, whole-stage codegen
  compiled     the replica's SESSION_CONFS (adaptive off) + EXECUTION_CONFS["compiled"]
  interpreted  the replica's SESSION_CONFS + EXECUTION_CONFS["interpreted"]
  local        the local plan: Spark's array functions over the packed row, no job
  replica      what SparkSummariser picks for that batch (fits_local_plan, else
               INTERPRETED_BELOW_ROWS)

The first three run the grouping plan (one job of one task).

Engine CPU is the server JVM's user+system time over each query (the engine serves nothing
else meanwhile), so start it on a quiet machine. Prints a table; --json PATH writes it.
Usage: python bench/spark_fixed_cost.py [--spark-remote sc://H:P --engine-pid PID]
       [--sizes 50,500,2000,10000,50000] [--rounds 3] [--queries 10]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import LoadSampler, machine
from replica_batch import make_messages

from backend.replica.batch import MicroBatch
from backend.replica.spark_summary import (
    EXECUTION_CONFS,
    INTERPRETED_BELOW_ROWS,
    LOCAL_PLAN_BUDGET,
    SESSION_CONFS,
    SparkSummariser,
)

SPARK_DEFAULTS = {"spark.sql.adaptive.enabled": "true", **EXECUTION_CONFS["compiled"]}
MODES: dict[str, dict[str, str] | None] = {
    "default": SPARK_DEFAULTS,
    "compiled": {**SESSION_CONFS, **EXECUTION_CONFS["compiled"]},
    "interpreted": {**SESSION_CONFS, **EXECUTION_CONFS["interpreted"]},
    "local": None,  # no job, so no execution mode
    "replica": None,  # SparkSummariser's own choice
}


def engine_jvm(pid: int) -> Any:
    """The JVM among `pid` and its children (spark-submit may or may not exec into it)."""
    import psutil

    proc = psutil.Process(pid)
    for p in [proc, *proc.children(recursive=True)]:
        if p.name() == "java":
            return p
    return proc


STREAMS = 12  # make_messages' default: a demo's fleet


def typed_table(n: int) -> Any:
    batch = MicroBatch()
    for p, o, k, v in make_messages(n, STREAMS):
        batch.add(p, o, k, v)
    table, bad = batch.to_typed_arrow()
    assert not bad
    return table


def set_mode(summariser: SparkSummariser, mode: str) -> None:
    """Before a mode's timed queries: its session settings ("replica" sets its own, "local"
    needs none)."""
    confs = MODES[mode]
    if confs is not None:
        session = summariser.session()
        for key, value in confs.items():
            session.conf.set(key, value)
    summariser._execution = ""  # whichever mode ran before, "replica" chooses afresh


def run_mode(summariser: SparkSummariser, mode: str, table: Any) -> int:
    """One query in `mode` (the replica's own query, `set_mode` done); returns the rows it
    summarised, which the caller checks against the batch."""
    if mode == "replica":
        result = summariser.summarise(table, {}, typed=True)
    elif mode == "local":
        result = summariser.query_local(table, {})
    else:
        result = summariser.query(table, {}, typed=True)
    return sum(p.count for p in result.partials.values())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spark-remote", default=None)
    ap.add_argument("--engine-pid", type=int, default=None,
                    help="the engine's pid, with --spark-remote (CPU is read from it)")
    ap.add_argument("--sizes", default="50,500,2000,10000,50000")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--queries", type=int, default=10, help="per mode, size and round")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    if args.spark_remote and not args.engine_pid:
        ap.error("--spark-remote needs --engine-pid: the engine's CPU is the measurement")

    load_start = os.getloadavg()[0]  # before this bench's own engine starts
    server = None
    remote, pid = args.spark_remote, args.engine_pid
    if remote is None:
        from backend.engine.server import SparkConnectServer
        from backend.netutil import free_port

        server = SparkConnectServer(Path(tempfile.mkdtemp()), port=free_port()).start()
        remote, pid = server.remote, server.process.pid  # type: ignore[union-attr]
    jvm = engine_jvm(pid)

    def cpu_s() -> float:
        t = jvm.cpu_times()
        return t.user + t.system

    summariser = SparkSummariser(remote)
    results: list[dict[str, Any]] = []
    try:
        with LoadSampler() as load:
            summariser.warm_up(typed=True, both_plans=True)
            for _ in range(100):  # the JIT compiles the small-batch path too
                summariser.summarise(typed_table(50), {}, typed=True)
            for n in (int(s) for s in args.sizes.split(",")):
                table = typed_table(n)
                walls: dict[str, list[float]] = {m: [] for m in MODES}
                cpus: dict[str, list[float]] = {m: [] for m in MODES}
                for _ in range(args.rounds):
                    for mode in MODES:
                        set_mode(summariser, mode)
                        run_mode(summariser, mode, table)  # nor is a mode's first query
                        for _ in range(args.queries):
                            c0, w0 = cpu_s(), time.perf_counter()
                            assert run_mode(summariser, mode, table) == n, f"{mode} lost rows"
                            walls[mode].append(time.perf_counter() - w0)
                            cpus[mode].append(cpu_s() - c0)
                for mode in MODES:
                    results.append({
                        "rows": n, "mode": mode,
                        "wall_ms": round(statistics.median(walls[mode]) * 1000, 1),
                        "engine_cpu_ms": round(statistics.mean(cpus[mode]) * 1000, 1),
                    })
    finally:
        summariser.reset()
        if server is not None:
            server.stop()
    base = {r["rows"]: r["engine_cpu_ms"] for r in results if r["mode"] == "default"}
    print(f"load {load_start:.2f} at start, {load.summary()} during; the replica takes the "
          f"local plan up to {LOCAL_PLAN_BUDGET} rows x groups ({STREAMS} streams here), "
          f"else goes interpreted below {INTERPRETED_BELOW_ROWS} rows; engine CPU is a mean, "
          f"wall a median")
    print(f"{'rows':>7} {'mode':12} {'wall ms':>8} {'engine CPU ms':>14} {'vs default':>11}")
    for r in results:
        ratio = r["engine_cpu_ms"] / base[r["rows"]] if base[r["rows"]] else float("nan")
        print(f"{r['rows']:>7} {r['mode']:12} {r['wall_ms']:>8.1f} {r['engine_cpu_ms']:>14.1f} "
              f"{ratio:>10.2f}x")
    if args.json:
        args.json.write_text(json.dumps({
            "machine": machine(), "load_at_start": round(load_start, 2), "load": load.summary(),
            "interpreted_below_rows": INTERPRETED_BELOW_ROWS,
            "local_plan_budget": LOCAL_PLAN_BUDGET, "streams": STREAMS,
            "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
