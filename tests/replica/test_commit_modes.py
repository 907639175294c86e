"""Commit modes as a lesson, on the real broker and Spark.

A replica is killed while a batch it has read is not yet summarised: Spark is cut off from it
(a proxy in between), so the batch stays in flight for as long as the test needs, which makes
the loss deterministic instead of a race against a 100 ms query. Another replica then takes
the partitions over from the committed offsets, and the per-stream summaries say what the
first one's commit mode cost:

- `after-summary` had committed nothing of that batch: it is read again, nothing is lost;
- `before-processing` had committed the batch as it read it, `auto` within its 5 s timer:
  exactly that batch is lost, and the summaries count it as gaps (seqs never seen).
"""

from __future__ import annotations

from urllib.parse import urlparse

import pytest

from backend.contracts import AFTER_SUMMARY, AUTO_COMMIT, BEFORE_PROCESSING
from tests.replica.harness import ContractProducer, CuttableProxy, read_summaries

STREAMS = 6
ROUND = 20  # records per stream in each of the three rounds


def _produce(producer: ContractProducer, rounds: int) -> dict[str, int]:
    for _ in range(rounds):
        producer.produce_one_round()
    return producer.stop()  # flushed: every record is in the topic


# each mostly waits for its batch in flight, the kill and the group's recovery (a third of
# a core while it lasts): the idle lane's kind of test
@pytest.mark.idle
@pytest.mark.timeout(300)
@pytest.mark.parametrize("mode", [AFTER_SUMMARY, BEFORE_PROCESSING, AUTO_COMMIT])
def test_a_kill_with_a_batch_in_flight_costs_what_the_commit_mode_says(
        kafka, layout, events, fleet, spark_remote, reader, mode):
    group, topic = layout
    target = urlparse(spark_remote.replace("sc://", "http://"))
    proxy = CuttableProxy(str(target.hostname), int(target.port or 0))
    producer = ContractProducer(kafka, topic, streams=STREAMS)

    def committed() -> int:  # records the group has committed, all partitions together
        answer = reader.committed([group])[group]
        return 0 if isinstance(answer, str) else sum(answer.values())

    def summarised_up_to(produced: dict[str, int]) -> dict[str, dict] | None:
        summaries = read_summaries(kafka, group)
        done = set(summaries) == set(produced) and all(
            s["last_seq"] + 1 == produced[name] for name, s in summaries.items())
        return summaries if done else None

    try:
        fleet.spark_remote = f"sc://127.0.0.1:{proxy.port}"
        fleet.start("careless", "--commit", mode)
        first = sum(_produce(producer, ROUND).values())
        fleet.wait(lambda: committed() == first, 90, "the first round committed")
        fleet.wait(lambda: summarised_up_to(producer.next_seq), 30, "the first round summarised")

        proxy.cut()  # what it reads next cannot be summarised
        _produce(producer, ROUND)
        fleet.wait(lambda: any(not b["spark_ok"] and b["pending"] > 0
                               for b in events.of("heartbeat", "careless")), 60,
                   "a batch of the second round read and held by a failing Spark")
        if mode != AFTER_SUMMARY:  # committed as read, or by the 5 s timer
            fleet.wait(lambda: committed() > first, 30,
                       "some of the second round committed before it was summarised")
        fleet.kill("careless")
        lost = committed() - first  # read once nothing of the group runs: final

        fleet.spark_remote = spark_remote
        fleet.start("careful")  # after-summary, Spark reachable
        third = _produce(producer, ROUND)
        summaries = fleet.wait(lambda: summarised_up_to(third), 90,
                               "the third round summarised by the takeover")
    finally:
        proxy.close()

    gaps = {name: s["gaps"] for name, s in summaries.items()}
    duplicates = sum(s["duplicates"] for s in summaries.values())
    if mode == AFTER_SUMMARY:  # read again: nothing lost, and nothing merged twice either
        assert lost == 0 and gaps == dict.fromkeys(gaps, 0), summaries
        assert duplicates == 0, summaries
    else:  # every record committed but not summarised is a seq the summaries never saw
        assert lost > 0 and sum(gaps.values()) == lost, (lost, summaries)
        assert duplicates == 0, summaries


def test_exactly_once_is_the_transactional_commit_mode_and_the_default_is_after_summary():
    from backend.cli_common import UserError
    from backend.contracts import COMMIT_MODES, TRANSACTIONAL
    from backend.replica.cli import commit_mode
    from backend.replica.runner import ReplicaConfig

    assert commit_mode(None, False) == AFTER_SUMMARY == next(iter(COMMIT_MODES))
    assert commit_mode(None, True) == commit_mode(TRANSACTIONAL, True) == TRANSACTIONAL
    assert commit_mode(AUTO_COMMIT, False) == AUTO_COMMIT
    with pytest.raises(UserError, match=r"^--exactly-once means --commit transactional, not "
                                        r"before-processing"):
        commit_mode(BEFORE_PROCESSING, True)
    assert ReplicaConfig("r", "g", commit=TRANSACTIONAL).exactly_once
    assert not ReplicaConfig("r", "g", commit=BEFORE_PROCESSING).exactly_once
