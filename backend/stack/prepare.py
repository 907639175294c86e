"""What a first `make demo` or `make test` prepares once, so later starts are offline and fast.

Two things: Kafka's jars by Maven coordinates (backend/cluster/jars.py), in the user's cache
and shared by every clone, and Spark's class-data archive (backend/engine/classdata.py), in
this environment (its jars' paths are in it), recorded while a training engine answers the
very queries the replicas send.
The archive lives here rather than in the engine package because its training queries are
the replica's (backend/replica/spark_summary.py), and the engine must not depend on its
clients.

An archive that cannot be built is a warning, not a failure: the engine starts without it,
only slower.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from backend.engine import classdata


def train_engine(remote: str) -> None:
    """Every query a replica or `up` sends a fresh engine: the readiness probe (here with a
    grouped warm-up query as well, a superset), and each batch plan (raw and typed feeds;
    unique, repeated and two-row batches), so the classes all of them load are recorded."""
    from backend.engine.session import check_engine
    from backend.replica.spark_summary import SparkSummariser

    check_engine(remote, warm_up=True, timeout=60.0)
    for typed in (False, True):
        summariser = SparkSummariser(remote)
        try:
            summariser.warm_up(typed=typed, both_plans=True)
        finally:
            summariser.reset()


def spark_class_archive(progress: Callable[[str], None] = print) -> Path | None:
    """This Java's and pyspark's archive, built now if it is not yet; None (with one line
    saying why) when it cannot be."""
    try:
        return classdata.build(train_engine, progress)
    except Exception as exc:
        why = (str(exc).splitlines() or [type(exc).__name__])[0]
        progress(f"no class-data archive for Spark ({why}); the engine starts without one, "
                 f"a few seconds slower")
        return None


def main() -> int:
    from backend.cluster.jars import kafka_classpath

    kafka_classpath()
    spark_class_archive(lambda line: print(line, file=sys.stderr, flush=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
