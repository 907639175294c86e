"""The embedded Spark Connect engine answers real queries through the session factory."""

from __future__ import annotations

import pytest

from backend.engine.session import EngineUnavailable, check_engine, connect
from backend.netutil import free_port


def test_spark_connect_query_returns_the_right_answer(spark_remote):
    session = connect(spark_remote)
    try:
        rows = (
            session.range(1, 1001)
            .selectExpr("id % 4 AS k", "id AS v")
            .groupBy("k")
            .agg({"v": "sum"})
            .orderBy("k")
            .collect()
        )
    finally:
        session.stop()
    sums = {r["k"]: r["sum(v)"] for r in rows}
    expected = {k: sum(v for v in range(1, 1001) if v % 4 == k) for k in range(4)}
    assert sums == expected


def test_check_engine_reports_version_and_unreachable(spark_remote):
    assert check_engine(spark_remote).startswith("4.")
    with pytest.raises(EngineUnavailable, match="nothing is listening"):
        check_engine(f"sc://127.0.0.1:{free_port()}", timeout=2.0)
