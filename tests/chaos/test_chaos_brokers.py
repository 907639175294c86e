"""Chaos with broker faults on a real three-node cluster: Kafka nodes SIGKILLed and started
again while replicas are killed, stopped and scaled under load; exactly-once still counts
every message once (three copies, two in sync: a node down never stops a write)."""

from __future__ import annotations

import itertools

import pytest

from backend.broker.nodes import EmbeddedCluster
from backend.chaos.report import render
from backend.chaos.run import ChaosConfig, ChaosRun
from backend.chaos.schedule import BROKER_KILL, BROKER_START, broker_plan
from backend.contracts.control import ReplicaOptions


def test_broker_faults_alternate_one_node_down_at_a_time() -> None:
    actions = broker_plan(120, seed=7)
    kinds = [a.kind for a in actions]
    assert kinds[0] == BROKER_KILL and len(kinds) >= 6
    assert all(a != b for a, b in itertools.pairwise(kinds))  # never two kills in a row
    assert all(b.at_s > a.at_s for a, b in itertools.pairwise(actions))
    assert broker_plan(120, seed=7) == actions and broker_plan(120, seed=8) != actions
    assert {BROKER_KILL, BROKER_START} == set(kinds)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_exactly_once_loses_and_doubles_nothing_while_kafka_nodes_die(
        cluster3: EmbeddedCluster, spark_remote, artifacts_dir, unique) -> None:
    config = ChaosConfig(duration_s=35.0, rate=300.0, streams=24, partitions=6,
                         start_replicas=3, min_replicas=1, max_replicas=4, every_s=(4.0, 8.0),
                         seed=2, drain_timeout_s=150.0, name=f"chaos-b-{unique}",
                         broker_kills=True,
                         options=ReplicaOptions(protocol="classic",
                                                assignor="cooperative-sticky",
                                                exactly_once=True))
    lines: list[str] = []
    report = ChaosRun(cluster3.settings, spark_remote, config,
                      artifacts_dir / f"chaos-b-{unique}", progress=lines.append,
                      brokers=cluster3).execute()
    print("\n".join(lines), render(report), sep="\n")
    # seed 2: nodes killed at 10 s and 28 s, each started again 6 s later
    assert report.done[BROKER_KILL] == 2 and report.done[BROKER_START] == 2
    assert all(n.alive for n in cluster3.infos())  # the last one killed was started again
    v = report.verdict
    assert report.error is None and v is not None and v.produced >= 0.8 * 35 * 300
    assert (v.lost, v.duplicates, v.unexpected) == (0, 0, 0)
    assert v.processed == v.produced and report.ok
