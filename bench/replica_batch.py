"""Micro-batch throughput: raw JSON strings parsed by Spark vs typed columns parsed in Python.

Both ways run the same aggregation (backend.replica.spark_summary.aggregate) on the same
messages; only where parsing/validation happens differs:

  raw    Arrow (value bytes, key, partition, offset) -> Spark from_json + validation + groupBy
  typed  Python orjson.loads + validation per message -> typed Arrow columns -> Spark groupBy

Both use the replica's own code (MicroBatch.to_arrow / to_typed_arrow, aggregate, fold).

Prints a table (median of --repeat runs) and optionally writes --json PATH.
Usage: python bench/replica_batch.py [--spark-remote sc://H:P] [--sizes 1000,10000,50000]
Without --spark-remote an embedded Spark Connect server is started on a free port.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from backend.replica.batch import MicroBatch
from backend.replica.spark_summary import aggregate, batch_frame, fold


def make_messages(n: int, streams: int = 12) -> list[tuple[int, int, bytes, bytes]]:
    out = []
    for i in range(n):
        sid = f"car-{i % streams + 1:02d}"
        seq = i // streams
        value = orjson.dumps({"stream_id": sid, "seq": seq, "ts": 1_700_000_000_000 + seq * 100,
                              "speed_kmh": 40.0 + seq % 50, "rpm": 1500.0 + seq % 7 * 100,
                              "gear": 3, "engine_temp_c": 88.5, "lat": 48.1, "lon": 11.5})
        out.append((i % 6, i, sid.encode(), value))
    return out


def run_raw(session, msgs) -> tuple[float, float, int]:
    t0 = time.perf_counter()
    b = MicroBatch()
    for p, o, k, v in msgs:
        b.add(p, o, k, v)
    table = b.to_arrow()
    t1 = time.perf_counter()
    rows = aggregate(batch_frame(session, table, {}, typed=False)).collect()
    t2 = time.perf_counter()
    return t1 - t0, t2 - t1, sum(p.count for p in fold(rows).partials.values())


def run_typed(session, msgs) -> tuple[float, float, int]:
    t0 = time.perf_counter()
    b = MicroBatch()
    for p, o, k, v in msgs:
        b.add(p, o, k, v)
    table, bad = b.to_typed_arrow()
    assert not bad
    t1 = time.perf_counter()
    rows = aggregate(batch_frame(session, table, {}, typed=True), validated=True).collect()
    t2 = time.perf_counter()
    return t1 - t0, t2 - t1, sum(p.count for p in fold(rows).partials.values())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spark-remote", default=None)
    ap.add_argument("--sizes", default="1000,10000,50000")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()

    from backend.spark.session import connect

    server = None
    remote = args.spark_remote
    if remote is None:
        from backend.engine.server import SparkConnectServer
        from backend.netutil import free_port

        server = SparkConnectServer(Path(tempfile.mkdtemp()), port=free_port()).start()
        remote = server.remote
    session = connect(remote)
    results = []
    try:
        warm = make_messages(500)
        run_raw(session, warm)
        run_typed(session, warm)
        for n in (int(s) for s in args.sizes.split(",")):
            msgs = make_messages(n)
            for name, fn in (("raw", run_raw), ("typed", run_typed)):
                runs = [fn(session, msgs) for _ in range(args.repeat)]
                assert all(r[2] == n for r in runs), f"{name} lost rows"
                py = statistics.median(r[0] for r in runs)
                spark = statistics.median(r[1] for r in runs)
                total = py + spark
                results.append({"way": name, "rows": n, "python_s": round(py, 3),
                                "spark_s": round(spark, 3), "total_s": round(total, 3),
                                "rows_per_s": round(n / total)})
    finally:
        session.stop()
        if server is not None:
            server.stop()
    print(f"{'way':6} {'rows':>8} {'python s':>9} {'spark s':>8} {'total s':>8} {'rows/s':>9}")
    for r in results:
        print(f"{r['way']:6} {r['rows']:>8} {r['python_s']:>9.3f} {r['spark_s']:>8.3f} "
              f"{r['total_s']:>8.3f} {r['rows_per_s']:>9}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
