"""A fresh Spark engine's start, with Spark's class-data archive and without it.

What gates a demo's first summary is not the JVM's launch but the moment a fresh engine has
answered a replica's warm-up (backend/replica/runner.py joins the group only then). Each
repeat starts one engine per variant, interleaved so drift hits both alike, and times:

  listen      launch → the Connect port accepts (the server's Spark session is up)
  first query listen → `up`'s readiness query (check_engine, no warm-up) answered
  warm-up     → a replica's own warm-up (SparkSummariser.warm_up, typed feed) done
  ready       launch → warm-up done: the sum of the three
  engine CPU  the JVM's user+system seconds from launch to ready (2 cores: CPU the start
              takes from everything else running beside it)
  RSS         the engine's resident memory once ready (mapped archive pages included)

The client side (pyspark's Connect client) is imported before the first timing, so both
variants pay only the engine's share. Prints a table; --json PATH writes it.
Usage: python bench/engine_start.py [--repeats 3] [--json PATH]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import LoadSampler, cpu_s, report_variants, rss_mb

from backend.engine import classdata
from backend.engine.server import SparkConnectServer
from backend.netutil import free_port
from backend.replica.spark_summary import SparkSummariser
from backend.spark.session import check_engine

STEPS = ("listen_s", "first_query_s", "warm_up_s", "ready_s", "engine_cpu_s", "rss_mb")


def one_start(archive: Path | None, work: Path) -> dict[str, float]:
    server = SparkConnectServer(work, port=free_port(), class_archive=archive)
    launched = time.monotonic()
    try:
        server.start(query=False, timeout=180.0)
        listen = time.monotonic() - launched
        assert server.process is not None
        pid = server.process.pid
        t = time.monotonic()
        check_engine(server.remote, timeout=60.0)
        first_query = time.monotonic() - t
        t = time.monotonic()
        summariser = SparkSummariser(server.remote)
        summariser.warm_up(typed=True)
        warm_up = time.monotonic() - t
        summariser.reset()
        return {"listen_s": listen, "first_query_s": first_query, "warm_up_s": warm_up,
                "ready_s": time.monotonic() - launched, "engine_cpu_s": cpu_s(pid),
                "rss_mb": rss_mb(pid)}
    finally:
        server.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()

    archive = classdata.cached_archive()
    if archive is None:
        print("no class-data archive for this Java and pyspark: build it first "
              "(make jars, or python -m backend.stack.prepare)", file=sys.stderr)
        return 2
    import pyspark.sql.connect.session  # noqa: F401  (the client's import is not timed)

    load_before = os.getloadavg()[0]
    variants: dict[str, Path | None] = {"no archive": None, "archive": archive}
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in variants}
    with LoadSampler() as load, tempfile.TemporaryDirectory(prefix="gs-engine-start-") as tmp:
        for rep in range(args.repeats):
            for name, path in variants.items():
                run = one_start(path, Path(tmp) / f"{rep}-{name.replace(' ', '-')}")
                runs[name].append(run)
                print(f"repeat {rep + 1} {name:>10}: ready {run['ready_s']:.1f} s "
                      f"(listen {run['listen_s']:.1f} s)", file=sys.stderr, flush=True)

    report_variants(f"Spark engine start, {args.repeats} repeats", runs, STEPS,
                    load_before, load, args.json,
                    archive_mb=round(archive.stat().st_size / 2**20))
    return 0


if __name__ == "__main__":
    sys.exit(main())
