"""Chaos against the real broker, Spark and replica processes: disrupt, drain, verify.

The live runs go through `groupscope chaos` (tests/chaos/conftest.py) with the options the
guides show (docs/chaos.md, docs/queues.md), so what a reader copies is what was run."""

from __future__ import annotations

import subprocess
import sys

import pytest

from backend.chaos.report import render, to_dict
from backend.chaos.run import ChaosConfig, ChaosReport
from backend.chaos.verify import judge
from backend.contracts.control import ReplicaOptions
from backend.proc import run as run_process
from tests.replica.harness import REPO


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_at_least_once_loses_nothing_under_kills_stops_and_scaling(kafka, chaos) -> None:
    r = chaos(kafka.bootstrap, "--duration", "40", "--seed", "3")
    assert r["error"] is None and r["drain_s"] is not None
    assert r["actions"]["kill"] >= 1 and sum(r["actions"].values()) >= 4
    assert r["rebalances"] >= 2
    assert r["produced"] >= 0.8 * 40 * 300
    assert (r["lost"], r["unexpected"]) == (0, 0)
    assert r["processed"] == r["produced"] + r["duplicates"]  # every message once, replays
    assert r["longest_processing_gap_s"] > 0  # a SIGKILL holds its partitions until expiry
    assert r["ok"]


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_exactly_once_on_the_consumer_protocol_has_no_duplicates_under_kills(
        kafka, chaos) -> None:
    r = chaos(kafka.bootstrap, "--duration", "30", "--seed", "5", "--exactly-once",
              "--protocol", "consumer")
    assert r["config"]["protocol"] == "consumer" and r["config"]["exactly_once"]
    assert r["actions"]["kill"] >= 1 and r["produced"] is not None
    assert (r["lost"], r["duplicates"], r["unexpected"]) == (0, 0, 0)
    assert r["processed"] == r["produced"] and r["ok"]


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_careless_commit_mode_is_run_and_its_losses_reported_as_its_cost(kafka, chaos) -> None:
    """The workshop guide's `chaos --commit before-processing`, small: what the mode loses
    is its cost, not a failure, and nothing appears that was never produced."""
    r = chaos(kafka.bootstrap, "--commit", "before-processing", "--duration", "15",
              "--rate", "150", "--streams", "12", "--partitions", "3", "--replicas", "2",
              "--max-replicas", "3", "--seed", "3")
    assert r["config"]["commit"] == "before-processing"
    assert r["error"] is None and r["drain_s"] is not None and r["actions"]["kill"] >= 1
    assert r["unexpected"] == 0 and r["produced"] >= 0.8 * 15 * 150
    assert r["ok"]


def test_a_report_with_a_lost_message_fails(tmp_path) -> None:
    verdict = judge({"car-01": 10}, {"car-01": {"count": 9, "last_seq": 8}})
    report = ChaosReport(config=ChaosConfig(), group="g", topic="t", done={"kill": 1},
                         skipped=0, rebalances=1, longest_stall_s=1.0,
                         longest_rebalance_gap_s=1.0, max_lag=5, drain_s=2.0,
                         verdict=verdict, producer_failures=0)
    assert not report.ok and "FAIL" in render(report) and to_dict(report)["lost"] == 1
    eos = ChaosReport(**{**report.__dict__, "verdict": judge(
        {"a": 2}, {"a": {"count": 3, "last_seq": 1, "duplicates": 1}}),
        "config": ChaosConfig(options=ReplicaOptions(exactly_once=True))})
    assert not eos.ok  # a duplicate is a failure in exactly-once mode


def test_a_careless_commit_modes_losses_are_reported_as_its_cost_not_a_failure() -> None:
    lost = judge({"car-01": 10}, {"car-01": {"count": 9, "last_seq": 9, "gaps": 1}})
    base = dict(group="g", topic="t", done={"kill": 1}, skipped=0, rebalances=1,
                longest_stall_s=1.0, longest_rebalance_gap_s=1.0, max_lag=5, drain_s=2.0,
                verdict=lost, producer_failures=0)
    for mode, guarantee in (("before-processing", "at-most-once"), ("auto", "auto-commit")):
        r = ChaosReport(config=ChaosConfig(options=ReplicaOptions(commit=mode)), **base)
        text = render(r)
        assert r.ok and r.careless and "PASS" in text, text
        assert f"commit {mode}: {guarantee}" in text
        assert f"1 (what commit {mode} costs: offsets committed before the records" in text
        assert to_dict(r)["config"]["commit"] == mode and to_dict(r)["lost"] == 1
    careful = ChaosReport(config=ChaosConfig(options=ReplicaOptions()), **base)
    assert not careful.ok and "commit after-summary: at-least-once" in render(careful)
    # a careless mode still fails on a seq nobody produced, or a drain that never ended
    odd = judge({"car-01": 2}, {"car-01": {"count": 4, "last_seq": 3}})
    careless = ChaosConfig(options=ReplicaOptions(commit="auto"))
    assert not ChaosReport(config=careless, **{**base, "verdict": odd}).ok
    assert not ChaosReport(config=careless, **{**base, "drain_s": None}).ok


def test_cli_refuses_bad_bounds_and_a_missing_engine_in_one_line(kafka) -> None:
    def run(*args: str) -> subprocess.CompletedProcess:
        return run_process([sys.executable, "-m", "backend.cli", "chaos", *args,
                            "--bootstrap", kafka.bootstrap], cwd=REPO, capture_output=True,
                           text=True, timeout=60)
    bad = run("--replicas", "6", "--max-replicas", "5")
    assert bad.returncode == 2 and "--max-replicas" in bad.stderr and "Traceback" not in bad.stderr
    nothing = run("--spark-remote", "sc://127.0.0.1:9")
    assert nothing.returncode == 2 and "nothing is listening" in nothing.stderr
    assert "Traceback" not in nothing.stderr


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_share_replicas_lose_nothing_under_kills_stops_and_scaling(kafka, chaos) -> None:
    r = chaos(kafka.bootstrap, "--share", "--duration", "30", "--seed", "4")
    assert r["error"] is None and r["drain_s"] is not None and r["config"]["share"]
    assert r["actions"]["kill"] >= 1
    assert r["produced"] >= 0.8 * 30 * 300
    assert (r["lost"], r["unexpected"]) == (0, 0)
    assert r["redelivered"] > 0  # a SIGKILLed member held records: they came back
    assert r["unexplained_duplicates"] == 0  # a record summarised twice was a redelivery
    assert r["processed"] == r["produced"] + r["duplicates"]
    assert r["ok"]


def test_a_share_report_fails_on_a_duplicate_no_redelivery_explains() -> None:
    from backend.chaos.verify import judge_share
    from backend.contracts.queue_summary import QueueDelta, SeqRanges, fold_deltas

    twice = fold_deltas([QueueDelta("car-01", 0, "ada", 3, SeqRanges.of([(0, 2)])),
                         QueueDelta("car-01", 0, "bruno", 1, SeqRanges.of([(2, 2)]))])
    report = ChaosReport(config=ChaosConfig(share=True), group="g", topic="t",
                         done={"kill": 1}, skipped=0, rebalances=0, longest_stall_s=0.0,
                         longest_rebalance_gap_s=0.0, max_lag=0, drain_s=1.0,
                         verdict=judge_share({"car-01": 3}, twice), producer_failures=0)
    assert report.verdict.duplicates == 1 and report.verdict.lost == 0
    assert not report.ok and "not explained by a redelivery" in render(report)
    redelivered = fold_deltas([QueueDelta("car-01", 0, "ada", 3, SeqRanges.of([(0, 2)])),
                               QueueDelta("car-01", 0, "bruno", 1, SeqRanges.of([(2, 2)]),
                                          deliveries={2: 1})])
    ok = ChaosReport(**{**report.__dict__,
                        "verdict": judge_share({"car-01": 3}, redelivered)})
    assert ok.ok and to_dict(ok)["redelivered"] == 1
