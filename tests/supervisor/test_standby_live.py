"""The warm standby with a real supervisor, real PySpark replicas and the real broker.

The supervisor keeps one `groupscope replica --standby` waiting: imported, its Spark session
open and the batch query run once. A start through the control API hands it its name and
options instead of forking a cold replica; this checks that it really is the same process,
that it joins the group under the given name, summarises with the session it warmed, and
that a new standby follows and is gone with the supervisor.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from backend.contracts.control import STANDBY_NAME, STANDBY_READY
from backend.netutil import wait_until
from tests.supervisor.conftest import Backend, pid_alive, pids_with_arg, start_backend, stop_backend

WITHIN_S = 120.0


@pytest.fixture
def one_replica(kafka, spark_remote, tmp_path: Path) -> Iterator[Backend]:
    suffix = uuid.uuid4().hex[:8]
    b = start_backend(kafka, tmp_path / "data", f"standby-{suffix}", f"telemetry-{suffix}",
                      "--spark-remote", spark_remote, "--replicas", "1", "--partitions", "2",
                      "--streams", "6", "--rate", "50", "--stop-grace", "20")
    try:
        yield b
    finally:
        stop_backend(b)


def _standbys(b: Backend) -> list[int]:
    return pids_with_arg("--group", b.group, "--standby")


def test_a_started_replica_is_the_warm_standby_and_processes(one_replica: Backend) -> None:
    b = one_replica
    logs = b.data_dir / "replicas"
    standby_log = logs / f"{STANDBY_NAME}.log"
    wait_until(lambda: standby_log.exists() and STANDBY_READY in standby_log.read_text(),
               WITHIN_S, what=f"the standby's '{STANDBY_READY}' in {standby_log}",
               abort=lambda: b.proc.poll() is None or pytest.fail(b.log_tail()))
    [waiting] = _standbys(b)

    info = b.client.start()
    assert info.pid == waiting, "the start took the standby, not a new process"
    log = logs / f"{info.name}.log"
    wait_until(lambda: "first batch:" in log.read_text(errors="replace"), WITHIN_S,
               what=f"{info.name}'s first batch (log {log})")
    text = log.read_text(errors="replace")
    assert f"becomes replica {info.name}" in text
    # the replica did not warm Spark up again: the standby had (0.00 s in the ready line)
    ready = re.search(r"ready in [\d.]+ s \(Kafka clients [\d.]+ s, Spark warm-up ([\d.]+) s\)",
                      text)
    assert ready and float(ready.group(1)) == 0.0, text[-2000:]
    wait_until(lambda: sorted(b.members()) == sorted(r.name for r in b.status().replicas
                                                     if r.state == "running"), WITHIN_S,
               what="both replicas members of the group under their names")
    assert info.name in b.members()

    wait_until(lambda: any(p != waiting for p in _standbys(b)), WITHIN_S,
               what="a new standby after the start")
    followers = [p for p in _standbys(b) if p != waiting]
    stop_backend(b)
    wait_until(lambda: not any(pid_alive(p) for p in followers), 30,
               what="the standby gone with the supervisor")
