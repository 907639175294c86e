"""The embedded Spark Connect engine answers real queries through the session factory."""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from backend.cli_common import UserError
from backend.netutil import free_port
from backend.proc import run as run_process
from backend.spark.executors import ENV_UI, ExecutorsProbe, executors_at
from backend.spark.session import EngineUnavailable, answering_engine, check_engine, connect


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


@contextlib.contextmanager
def no_engine_listening() -> Iterator[int]:
    """A port where something accepts connections and closes them at once, never answering
    gRPC: an engine that died after its port opened, or another program."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        listener.settimeout(0.2)
        stop = threading.Event()

        def hang_up() -> None:
            while not stop.is_set():
                with contextlib.suppress(OSError):
                    conn, _ = listener.accept()
                    conn.close()

        closer = threading.Thread(target=hang_up, daemon=True)
        closer.start()
        try:
            yield listener.getsockname()[1]
        finally:
            stop.set()
            closer.join(5)


def test_check_engine_gives_up_in_about_its_timeout_on_a_port_that_is_no_engine():
    """The check fails in about its timeout, not the Connect client's ten minutes of
    retries, and its session's release is bounded the same way."""
    with no_engine_listening() as port:
        started = time.monotonic()
        with pytest.raises(EngineUnavailable, match="failed a test query"):
            check_engine(f"sc://127.0.0.1:{port}", timeout=3.0)
        assert time.monotonic() - started < 30


def test_a_session_left_open_does_not_hold_its_process_at_exit_when_the_engine_is_gone():
    """At exit the Connect client asks the engine to clean up after every client left open;
    with the engine gone, its default retries would hold the process ten minutes."""
    with no_engine_listening() as port:
        started = time.monotonic()
        done = run_process([sys.executable, "-c",
                            "from backend.spark.session import connect\n"
                            f"connect('sc://127.0.0.1:{port}')\n"],
                           timeout=60, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-2000:]
        assert time.monotonic() - started < 30


def test_local_engine_lists_its_one_driver_through_sparks_rest_api(spark_engine, spark_remote):
    """local[*]: the driver is the only executor and runs every task; the Status page's
    probe finds its UI through Spark Connect, as it would on a cluster."""
    session = connect(spark_remote)
    try:
        assert session.range(10_000).selectExpr("sum(id)").collect()[0][0] == 49_995_000
    finally:
        session.stop()
    direct = executors_at(spark_engine.ui_url)
    assert [(e.id, e.active, e.cores) for e in direct] == [("driver", True, os.cpu_count())]
    assert direct[0].completed_tasks > 0
    assert spark_engine.executors() == []  # no executor besides the driver
    found = ExecutorsProbe(spark_remote)()
    assert [e.id for e in found] == ["driver"]
    assert found[0].completed_tasks >= direct[0].completed_tasks


def test_executors_of_an_engine_that_is_gone_are_one_line(monkeypatch):
    dead = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(EngineUnavailable, match=rf"^the Spark UI at {dead} did not list "
                                                r"executors: .*refused") as failed:
        executors_at(dead)
    assert "\n" not in str(failed.value)
    monkeypatch.setenv(ENV_UI, dead)  # told where the UI is: no Connect session is opened
    with pytest.raises(EngineUnavailable, match="did not list executors"):
        ExecutorsProbe(f"sc://127.0.0.1:{free_port()}")()


def test_a_command_without_an_answering_engine_is_one_line_saying_how_to_start_one() -> None:
    with pytest.raises(UserError, match=r"start it with `groupscope up` or `groupscope spark`"):
        answering_engine(f"sc://127.0.0.1:{free_port()}")
