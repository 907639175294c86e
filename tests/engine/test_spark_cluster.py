"""Spark on a standalone cluster, real processes: a master, workers, their executors and the
Spark Connect server as the driver. The replica's own batch query runs on the executors and
its summaries are exact; faults are one line and leave nothing; a stop signal ends it all."""

from __future__ import annotations

import ipaddress
import os
import signal
import socket
import threading
import time

import psutil
import pytest

from backend.contracts.summary import RING_SIZE, WINDOW_MS, Summary
from backend.engine.home import EngineStartError
from backend.netutil import PortBusyError, free_port, wait_until
from backend.proc import STOP_WITHIN_S
from backend.replica.batch import MicroBatch
from backend.replica.spark_summary import SparkSummariser
from backend.spark.executors import ExecutorsProbe
from backend.spark.session import connect
from tests.replica.harness import message

STREAMS = ("car-01", "car-02", "car-03", "car-04")
BATCHES = 4
PER_STREAM = 1_500  # rows of each stream in each batch


def _v4(ip: str) -> str:
    """An IPv4-mapped IPv6 address (how a JVM's sockets show) as plain IPv4."""
    return ip.removeprefix("::ffff:")


def _read_lines(proc) -> list[str]:
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True).start()
    return lines


@pytest.mark.slow  # a master, two workers, a driver and two executors start: the second lane
def test_two_workers_run_the_batches_a_killed_one_is_reported_and_sigterm_stops_everything(
        spark_cluster_factory, tmp_path):
    """One cluster of two workers, started once (a minute of the suite each): the replica's
    batches run as tasks on both executors with exact summaries, every port on loopback; then a
    worker SIGKILLed takes its executor with it while the other answers queries, as on a real
    cluster; then what a supervisor does, SIGTERM to `groupscope spark` alone, stops the driver,
    the other worker and the master. Ctrl-C of a stack with workers: the broker-fault test."""
    port = free_port()
    t0 = time.monotonic()
    spark = spark_cluster_factory.command("--workers", "2", "--port", str(port),
                                          data_dir=tmp_path / "data")
    lines = _read_lines(spark)
    wait_until(lambda: any("Spark Connect listening" in line for line in lines)
               or spark.poll() is not None, 180, what="groupscope spark --workers 2 to listen")
    assert spark.poll() is None, "".join(lines)
    print(f"master + 2 workers + Connect ready in {time.monotonic() - t0:.1f} s")
    remote = f"sc://127.0.0.1:{port}"

    # what the Status page does: the driver's UI found through Spark Connect, then its REST API
    executors = ExecutorsProbe(remote)
    before = {e.id: e for e in executors()}
    assert sorted(before) == ["0", "1", "driver"], before
    assert all(e.active for e in before.values())
    assert [before[i].cores for i in ("driver", "0", "1")] == [0, 1, 1]

    summariser = SparkSummariser(remote)
    summaries = {sid: Summary(sid, 0) for sid in STREAMS}
    try:
        for n in range(BATCHES):
            typed = n % 2 == 0  # both feeds: the raw one parses and validates in Spark
            batch = MicroBatch()
            offset = 0
            for seq in range(n * PER_STREAM, (n + 1) * PER_STREAM):
                for sid in STREAMS:
                    batch.add(0, offset, sid.encode(), message(sid, seq))
                    offset += 1
            table = batch.to_typed_arrow()[0] if typed else batch.to_arrow()
            result = summariser.summarise(table, {s: v.last_seq for s, v in summaries.items()},
                                          typed=typed)
            assert not result.bad
            for (_, sid), part in result.partials.items():
                summaries[sid].merge_batch(part)
    finally:
        summariser.reset()

    rows = BATCHES * PER_STREAM
    speeds = [40.0 + seq % 50 for seq in range(rows)]
    for sid, summary in summaries.items():
        assert (summary.count, summary.last_seq, summary.duplicates, summary.gaps) == \
            (rows, rows - 1, 0, 0), sid
        assert summary.complete
        assert summary.fields["speed_kmh"].sum == pytest.approx(sum(speeds))
        assert (summary.fields["speed_kmh"].min, summary.fields["speed_kmh"].max) == (40.0, 89.0)
        assert (summary.first_ts, summary.last_ts) == (1_700_000_000_000,
                                                       1_700_000_000_000 + (rows - 1) * 100)
        # the newest RING_SIZE windows of 10 s, 100 rows each at one row per 100 ms
        assert [w.count for w in summary.windows] == [WINDOW_MS // 100] * RING_SIZE

    after = {e.id: e for e in executors()}
    ran = {i: after[i].completed_tasks - before[i].completed_tasks for i in ("0", "1")}
    assert sum(ran.values()) >= BATCHES, ran  # every batch ran as tasks on the executors
    assert after["driver"].completed_tasks == 0  # and none in the driver
    assert all(e.failed_tasks == 0 for e in after.values())

    # every port of the cluster -- RPC, block managers, web UIs, gRPC -- is on loopback
    running = spark_cluster_factory.alive()
    assert len(running) >= 7, running  # groupscope, master, 2 workers, driver, 2 executors
    listening = {(c.laddr.ip, c.laddr.port) for p in running
                 for c in p.net_connections(kind="tcp") if c.status == psutil.CONN_LISTEN}
    assert ("127.0.0.1", port) in {(_v4(ip), p) for ip, p in listening}
    assert all(ipaddress.ip_address(_v4(ip)).is_loopback for ip, _ in listening), listening

    def jvms(kind: str) -> list:
        return [p for p in spark_cluster_factory.alive() if kind in " ".join(p.cmdline())]

    worker = jvms("deploy.worker.Worker")[0]
    worker.kill()
    wait_until(lambda: any("exited with code -9; Spark carries on" in line for line in lines),
               30, what="the worker's exit reported")
    wait_until(lambda: len(jvms("CoarseGrainedExecutorBackend")) == 1, 60,
               what="the killed worker's executor to exit")
    session = connect(f"sc://127.0.0.1:{port}")
    try:
        assert session.range(100_000).selectExpr("sum(id)").collect()[0][0] == 4_999_950_000
    finally:
        session.stop()
    states = {e.id: e for e in ExecutorsProbe(f"sc://127.0.0.1:{port}")()}
    assert sorted(e.state for i, e in states.items() if i != "driver") == ["active", "dead"]
    assert any("worker lost" in (e.remove_reason or "") for e in states.values()), states

    t0 = time.monotonic()
    spark.send_signal(signal.SIGTERM)
    assert spark.wait(STOP_WITHIN_S + 5) == 0, "".join(lines)
    assert time.monotonic() - t0 <= STOP_WITHIN_S
    wait_until(lambda: not spark_cluster_factory.alive(), 15,
               what="every process of the Spark cluster to exit")


def test_the_master_killed_during_start_up_is_one_line_and_stops_the_rest(
        spark_cluster_factory, tmp_path):
    server = spark_cluster_factory.server(tmp_path / "spark", workers=1)
    cluster = server.cluster
    assert cluster is not None
    killed: list[int] = []

    def kill_the_master_once_up() -> None:
        wait_until(lambda: cluster.status().get("status") == "ALIVE", 120)
        master = cluster.processes()[0]
        os.kill(master.pid, signal.SIGKILL)
        killed.append(master.pid)

    killer = threading.Thread(target=kill_the_master_once_up, daemon=True)
    killer.start()
    t0 = time.monotonic()
    with pytest.raises(EngineStartError) as failed:
        server.start(timeout=120)
    killer.join(5)
    assert killed
    message_ = str(failed.value)
    assert "\n" not in message_
    assert message_.startswith("the Spark master exited with code -9 (log "), message_
    assert time.monotonic() - t0 < 60
    wait_until(lambda: not spark_cluster_factory.alive(), 15,
               what="the worker and anything else started to exit")


def test_a_worker_that_cannot_reach_its_master_is_one_line_naming_why(
        spark_cluster_factory, tmp_path):
    server = spark_cluster_factory.server(tmp_path / "spark", workers=1)
    cluster = server.cluster
    assert cluster is not None
    cluster.start_worker(1, f"spark://127.0.0.1:{free_port()}")  # no master there
    with pytest.raises(EngineStartError) as failed:
        wait_until(lambda: False, 60, abort=cluster.check)
    message_ = str(failed.value)
    assert "\n" not in message_
    assert message_.startswith("Spark worker 1 cannot reach the master (Connection refused); "
                               "its log: "), message_
    cluster.stop(5.0)
    wait_until(lambda: not spark_cluster_factory.alive(), 15, what="the worker to exit")


def test_a_taken_port_is_one_line_and_starts_nothing(spark_cluster_factory, tmp_path):
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        taken = held.getsockname()[1]
        server = spark_cluster_factory.server(tmp_path / "a", workers=2, port=taken)
        with pytest.raises(PortBusyError, match="the Spark Connect server cannot listen"):
            server.start()
        server = spark_cluster_factory.server(tmp_path / "b", workers=2)
        assert server.cluster is not None
        server.cluster.master_port = taken
        with pytest.raises(PortBusyError, match="the Spark master cannot listen"):
            server.start()
        # the command says so in one line, exit 2, as for any port of ours that is taken
        spark = spark_cluster_factory.command("--workers", "2", "--port", str(taken),
                                              data_dir=tmp_path / "data")
        out = spark.communicate(timeout=60)[0]
    assert spark.returncode == 2, out
    assert out.strip().splitlines() == [
        f"groupscope spark: port {taken} on 127.0.0.1 is already in use, so the Spark Connect "
        f"server cannot listen there; stop whatever holds it or choose another port"]
    assert not spark_cluster_factory.alive()
