"""Broker controls end to end: a real `groupscope broker --brokers 3` process, a real backend
beside it, and the control API / `groupscope ctl` killing, stopping and starting its nodes.

The cluster process owns the node JVMs; the backend asks it through the cluster's mailbox, so
a node started again is still the cluster process's child and stops with it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from backend.contracts.control import BrokerNode
from backend.kafka.clusterfile import read_cluster
from backend.kafka.settings import KafkaSettings
from backend.netutil import free_port, wait_until
from backend.proc import abort_if_exited, spawn, terminate
from backend.supervisor.client import ControlError
from tests.supervisor.conftest import REPO, Backend, pid_alive, start_backend, stop_backend


class ClusterProcess:
    def __init__(self, proc: subprocess.Popen, data: Path) -> None:
        self.proc = proc
        self.data = data  # the stack's data directory; the cluster's is data/broker
        self.node_pids: set[int] = set()

    @property
    def broker_dir(self) -> Path:
        return self.data / "broker"

    def bootstrap(self) -> str:
        info = read_cluster(self.broker_dir)
        assert info is not None
        self.node_pids |= {n["pid"] for n in info["nodes"] if n["pid"]}
        return info["bootstrap"]


@pytest.fixture
def cluster_process(tmp_path: Path) -> Iterator[ClusterProcess]:
    """`groupscope broker --brokers 3` as the stack runs it; SIGTERMed at the end, and no
    node JVM may outlive it."""
    data = tmp_path / "data"
    data.mkdir()
    log = tmp_path / "broker.log"
    with open(log, "ab") as out:
        proc = spawn([sys.executable, "-m", "backend.cli", "broker", "--brokers", "3",
                      "--port", str(free_port()), "--data-dir", str(data / "broker")],
                     cwd=REPO, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                     env=dict(os.environ, GROUPSCOPE_DATA=str(data)))
    cluster = ClusterProcess(proc, data)
    try:
        wait_until(lambda: read_cluster(cluster.broker_dir) is not None
                   and KafkaSettings(bootstrap=cluster.bootstrap()).check_reachable(2.0) >= 3,
                   120, interval=0.5, what="three Kafka nodes registered",
                   abort=abort_if_exited(proc, "groupscope broker",
                                         lambda: f":\n{log.read_text()[-2000:]}",
                                         AssertionError))
        yield cluster
    finally:
        cluster.node_pids |= {n["pid"] for n in (read_cluster(cluster.broker_dir) or {})
                              .get("nodes", []) if n["pid"]}
        assert terminate(proc, 40) == 0
        assert not [p for p in cluster.node_pids if pid_alive(p)], "a node outlived it"


@pytest.fixture
def backend_beside(cluster_process: ClusterProcess) -> Iterator[Backend]:
    name = uuid.uuid4().hex[:8]
    b = start_backend(KafkaSettings(bootstrap=cluster_process.bootstrap()),
                      cluster_process.data, f"bc-{name}", f"bc-{name}", "--replicas", "0",
                      "--no-fleet")
    try:
        yield b
    finally:
        stop_backend(b)


@pytest.mark.timeout(300)
def test_the_control_api_kills_stops_and_starts_the_stacks_kafka_nodes(
        cluster_process: ClusterProcess, backend_beside: Backend) -> None:
    client = backend_beside.client
    assert client is not None
    listed = client.brokers()
    assert [(n.id, n.alive, n.controller) for n in listed.brokers] == [
        (1, True, True), (2, True, True), (3, True, True)]
    from dashboard.pollers import supervisor_brokers  # what the broker buttons act on

    assert [n.id for n in supervisor_brokers(str(backend_beside.data_dir))] == [1, 2, 3]
    assert listed.quorum_leader in (1, 2, 3)
    pid2 = next(n.pid for n in listed.brokers if n.id == 2)

    def ctl(*args: str) -> str:  # as docs/clusters.md types it
        done = subprocess.run(
            [sys.executable, "-m", "backend.cli", "ctl", "--data-dir",
             str(cluster_process.data), *args], capture_output=True, text=True, timeout=60,
            cwd=REPO)
        assert done.returncode == 0, f"ctl {' '.join(args)}: {done.stderr}"
        return done.stdout

    killed = BrokerNode.model_validate_json(ctl("broker", "kill", "2", "--json"))
    assert (killed.id, killed.alive, killed.pid) == (2, False, None)
    assert not pid_alive(pid2)
    assert [n.alive for n in client.brokers().brokers] == [True, False, True]
    with pytest.raises(ControlError) as twice:
        client.broker_start(1)
    assert twice.value.status == 409 and "already running" in str(twice.value)

    started = BrokerNode.model_validate_json(ctl("broker", "start", "2", "--json"))
    assert started.alive and started.pid and started.pid != pid2
    cluster_process.node_pids.add(started.pid)
    # the new JVM is the cluster process's child, so it stops with the cluster
    assert psutil.Process(started.pid).ppid() == cluster_process.proc.pid

    stopped = client.broker_stop(3)
    assert not stopped.alive
    assert client.broker_start(3).alive

    with pytest.raises(ControlError) as unknown:
        client.broker_kill(9)
    assert unknown.value.status == 404 and "no Kafka node 9" in str(unknown.value)
    no_token = client.__class__(client.url, token="", timeout=10)
    with pytest.raises(ControlError) as anonymous:
        no_token.broker_kill(1)
    assert anonymous.value.status == 401
    assert all(n.alive for n in client.brokers().brokers)

    rows = ctl("brokers").strip().splitlines()
    assert rows[0].split()[:4] == ["ID", "STATE", "PORT", "QUORUM"]
    assert [r.split()[:2] for r in rows[1:]] == [["1", "up"], ["2", "up"], ["3", "up"]]
    assert sum("(leader)" in r for r in rows[1:]) == 1


def test_a_stack_without_its_own_kafka_refuses_broker_controls(backend_factory) -> None:
    b = backend_factory(f"nb-{uuid.uuid4().hex[:8]}", f"nb-{uuid.uuid4().hex[:8]}",
                        "--replicas", "0", "--no-fleet")
    assert b.client is not None
    for call in (b.client.brokers, lambda: b.client.broker_kill(1)):
        with pytest.raises(ControlError) as refused:
            call()
        assert refused.value.status == 409
        assert "runs no Kafka of its own" in str(refused.value)
        assert "\n" not in str(refused.value)
    # the dashboard's probe reads that refusal, like a data dir no supervisor runs from,
    # as "no broker to control", not as an error to show
    from dashboard.pollers import supervisor_brokers

    assert supervisor_brokers(str(b.data_dir)) == ()
    assert supervisor_brokers(str(b.data_dir / "nobody-here")) == ()
