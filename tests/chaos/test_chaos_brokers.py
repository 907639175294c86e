"""Chaos with broker faults on a real three-node cluster: Kafka nodes SIGKILLed and started
again while replicas are killed, stopped and scaled under load; exactly-once still counts
every message once (three copies, two in sync: a node down never stops a write). Run as
`groupscope chaos --broker-kills` asks a `groupscope broker` for its nodes: through the data
directory's mailbox, which the session's cluster answers here."""

from __future__ import annotations

import itertools

import pytest

from backend.broker.nodes import EmbeddedCluster
from backend.chaos.schedule import BROKER_KILL, BROKER_START, broker_plan
from tests.chaos.conftest import nodes_served


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
        cluster3: EmbeddedCluster, chaos) -> None:
    with nodes_served(cluster3, chaos.data):
        r = chaos(cluster3.bootstrap, "--duration", "35", "--every", "4", "8", "--seed", "2",
                  "--broker-kills", "--exactly-once", "--assignor", "cooperative-sticky")
    # seed 2: nodes killed at 10 s and 28 s, each started again 6 s later
    assert r["actions"][BROKER_KILL] == 2 and r["actions"][BROKER_START] == 2
    assert all(n.alive for n in cluster3.infos())  # the last one killed was started again
    assert r["error"] is None and r["produced"] >= 0.8 * 35 * 300
    assert (r["lost"], r["duplicates"], r["unexpected"]) == (0, 0, 0)
    assert r["processed"] == r["produced"] and r["ok"]
