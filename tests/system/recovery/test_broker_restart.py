"""Broker restart: the broker goes away mid-run and comes back on the same data dir and port.

Everything is real: a private EmbeddedBroker (the test kills it, so not the session one),
the FleetSimulator, replica subprocesses, and the dashboard's SharedObserver - in a child
process (observer_process.py), so a librdkafka abort fails this test with its exit code
instead of killing the test run. Nobody restarts the replicas or the observer; they must
find the broker again by themselves, and after draining every stream's summary must be
complete.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import orjson
import pytest

from backend.chaos.verify import judge
from backend.fleet.simulator import FleetSimulator
from backend.kafka.topics import ensure_topics
from backend.netutil import wait_until
from backend.proc import spawn
from tests.replica.harness import REPO, read_summaries
from tests.system.recovery.conftest import drained, summaries_now

PARTITIONS = 6
REPLICAS = ("rs-a", "rs-b")


class ObserverProcess:
    """tests/system/recovery/observer_process.py as a child; its snapshots collected by a thread."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        self.proc = spawn(
            [sys.executable, "-m", "tests.system.recovery.observer_process", bootstrap, group,
             topic],
            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.snapshots: list[dict] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.snapshots.append(orjson.loads(line))

    def latest(self) -> dict | None:
        if self.proc.poll() is not None:
            raise AssertionError(f"the observer's process died with exit code "
                                 f"{self.proc.returncode} (-6: librdkafka abort)")
        return self.snapshots[-1] if self.snapshots else None

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


def _owned_by_replicas(observer: ObserverProcess, after_ms: int = 0) -> bool:
    """A fresh snapshot, without error, where the replicas own every partition."""
    snap = observer.latest()
    if snap is None or snap["error"] or snap["taken_ms"] <= after_ms:
        return False
    owners = snap["owners"]
    return (len(owners) == PARTITIONS and set(owners.values()) <= set(REPLICAS)
            and set(snap["members"]) == set(REPLICAS))


@pytest.mark.slow
@pytest.mark.parametrize("how", ["kill", "graceful"])
def test_replicas_and_observer_ride_out_a_broker_restart(
        tmp_path: Path, spark_remote: str, unique: str, how: str,
        replica_fleet_factory, broker_factory) -> None:
    group, topic = f"rb-{unique}", f"rb-in-{unique}"
    node = broker_factory(tmp_path / "broker")
    node.start()
    sim: FleetSimulator | None = None
    shared: ObserverProcess | None = None
    try:
        settings = node.settings
        ensure_topics(settings, group=group, topic=topic, partitions=PARTITIONS)
        sim = FleetSimulator(settings, topic, streams=8, rate=120)
        sim.start()
        fleet = replica_fleet_factory(settings, spark_remote, group, topic)
        for name in REPLICAS:
            fleet.start(name)
        shared = ObserverProcess(settings.bootstrap, group, topic)
        fleet.wait(lambda: _owned_by_replicas(shared), 120, "both replicas owning the topic")
        fleet.wait(lambda: len(summaries_now(settings, group)) >= 8, 120,
                   "a summary for every stream before the outage")

        # ---- the outage -----------------------------------------------------------------
        assert node.process is not None
        if how == "kill":
            node.process.kill()
        node.stop()
        down_at = time.time()
        wait_until(lambda: (s := shared.latest()) is not None and s["error"] is not None
                   and s["taken_ms"] > down_at * 1000, 30, what="the observer to report the outage")
        wait_until(lambda: sim.stats().queued > 0, 30, what="the fleet queueing while down")
        fleet.check_alive()  # the replicas wait; none of them gives up and exits

        node.start()
        up_ms = int(time.time() * 1000)
        # observer and poller: fresh snapshots, no error, the group with its owners again
        fleet.wait(lambda: _owned_by_replicas(shared, after_ms=up_ms), 120,
                   "a fresh snapshot showing both replicas owning every partition")
        # replicas: committing again (by themselves; the test never restarts them)
        produced_mid = sum(sim.stats().next_seq.values())
        fleet.wait(lambda: sum(int(s["count"]) - int(s.get("duplicates", 0)) for s in
                               summaries_now(settings, group).values())
                   > produced_mid, 120, "summaries growing past what was produced at restart")

        final = sim.stop()
        assert final.failed == 0, final.last_error
        fleet.wait(lambda: drained(settings, group, topic, PARTITIONS), 120,
                   "the replicas draining the topic")
        summaries = read_summaries(settings, group)
        for stream, n in final.next_seq.items():
            s = summaries[stream]
            assert s["gaps"] == 0, (stream, s)
            assert s["last_seq"] == n - 1, (stream, n, s)
            assert s["count"] - s["duplicates"] == s["last_seq"] + 1, (stream, s)
        verdict = judge(dict(final.next_seq), summaries)
        assert verdict.lost == 0 and verdict.unexpected == 0
        assert {n: fleet.procs[n].poll() for n in REPLICAS} == dict.fromkeys(REPLICAS)
    finally:
        if shared is not None:
            shared.stop()
        if sim is not None:
            sim.stop()
        node.stop()
