"""Every reader of the changelog takes each stream's furthest-along summary, whatever order
the changelog has them in.

At-least-once has no fence against a former owner, so a summary it wrote while a broker was
away can land after the new owner's newer one (seen once after a broker restart: the former
owner restored its own stale summary and read on from the new owner's offset, a gap of 307
seqs). These write the changelog as that race leaves it, on the real broker, and read it back
the three ways groupscope does: a replica's restore, the chaos verifier, the observer's tail.
"""

from __future__ import annotations

import orjson
import pytest
from confluent_kafka import Producer

from backend.chaos.verify import read_summaries
from backend.contracts import summaries_topic
from backend.contracts.summary import Summary, fold_raw, further_along, raw_count
from backend.kafka.topics import ensure_topics
from backend.netutil import wait_until
from backend.observer.events import EventTail
from backend.replica.state import StateStore


@pytest.mark.parametrize(("kept", "count", "taken"), [
    (None, 3, True),  # the first summary of a stream
    (10, 11, True),  # the owner's next batch
    (10, 10, True),  # the same records again (a retried write): the later one
    (10, 4, False),  # a former owner's write landing late
])
def test_further_along_takes_the_summary_that_counted_more(kept, count, taken):
    assert further_along(kept, count) is taken


@pytest.mark.parametrize(("raw", "count"), [
    ({"count": 7}, 7), ({"count": "7"}, 0), ({"count": True}, 0), ({}, 0), ([7], 0), (None, 0),
])
def test_a_malformed_summary_counts_nothing(raw, count):
    assert raw_count(raw) == count


def test_fold_raw_keeps_the_furthest_summary_forgets_at_a_tombstone_and_skips_junk():
    kept: dict[str, dict] = {}
    for raw in ({"count": 10, "by": "a"}, {"count": 4, "by": "b"}, [1], "junk"):
        fold_raw(kept, "car-01", raw)
    assert kept == {"car-01": {"count": 10, "by": "a"}}
    fold_raw(kept, "car-01", None)
    fold_raw(kept, "car-01", {"count": 2, "by": "a"})
    assert kept == {"car-01": {"count": 2, "by": "a"}}


def _summary(stream: str, count: int, replica: str, partition: int = 0) -> Summary:
    return Summary(stream, partition, count=count, last_seq=count - 1, replica=replica)


def test_a_late_stale_write_does_not_replace_the_newer_summary(kafka, unique):
    group, topic = f"g-{unique}", f"telemetry-{unique}"
    ensure_topics(kafka, group=group, topic=topic, partitions=2)
    changelog = summaries_topic(group)
    producer = Producer(kafka.client_config(**{"enable.idempotence": True}))

    def write(stream: str, summary: Summary | None, partition: int = 0) -> None:
        value = None if summary is None else orjson.dumps(summary.to_dict())
        producer.produce(changelog, key=stream.encode(), value=value, partition=partition)
        assert producer.flush(10) == 0

    write("car-01", _summary("car-01", 2_000, "rs-b"))  # rs-b's last good batch
    write("car-01", _summary("car-01", 4_536, "rs-a"))  # rs-a took over and went on
    write("car-01", _summary("car-01", 2_229, "rs-b"))  # rs-b's queued write, landing late
    write("car-02", _summary("car-02", 50, "rs-b"))
    write("car-02", None)  # a tombstone ends car-02's history ...
    write("car-02", _summary("car-02", 7, "rs-a"))  # ... and this one starts again
    write("car-03", _summary("car-03", 9, "rs-a", partition=1), partition=1)
    expected = {"car-01": (4_536, "rs-a"), "car-02": (7, "rs-a"), "car-03": (9, "rs-a")}

    store = StateStore(kafka, changelog, "rs-c")
    try:
        assert store.restore([0, 1], timeout=30) == 3
        assert {sid: (s.count, s.replica) for sid, s in store.summaries.items()} == expected
    finally:
        store.close()

    verified = read_summaries(kafka, group)
    assert {sid: (s["count"], s["replica"]) for sid, s in verified.items()} == expected

    tail = EventTail(kafka, group)
    try:
        def observed() -> dict | None:
            tail.poll()
            seen = {sid: (s["count"], s["replica"]) for sid, s in tail.summaries.items()}
            return seen if seen == expected else None

        wait_until(observed, 30, what=f"the observer's summaries to be {expected}")
    finally:
        tail.close()
