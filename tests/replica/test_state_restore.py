"""A restore keeps each stream's furthest-along summary, whatever order the changelog has them in.

At-least-once has no fence against a former owner, so a summary it wrote while a broker was
away can land after the new owner's newer one (seen once after a broker restart: the former
owner restored its own stale summary and read on from the new owner's offset, a gap of 307
seqs). These write the changelog as that race leaves it, on the real broker, and restore.
"""

from __future__ import annotations

import orjson
import pytest
from confluent_kafka import Producer

from backend.cluster.topics import ensure_topics
from backend.contracts import summaries_topic
from backend.contracts.summary import Summary
from backend.replica.state import StateStore, further_along


def _summary(stream: str, count: int, replica: str, partition: int = 0) -> Summary:
    return Summary(stream, partition, count=count, last_seq=count - 1, replica=replica)


@pytest.mark.parametrize(("kept", "candidate", "taken"), [
    (None, 3, True),  # the first summary of a stream
    (10, 11, True),  # the owner's next batch
    (10, 10, True),  # the same records again (a retried write): the later one
    (10, 4, False),  # a former owner's write landing late
])
def test_further_along_takes_the_summary_that_counted_more(kept, candidate, taken):
    kept_summary = None if kept is None else _summary("car-01", kept, "rs-a")
    assert further_along(kept_summary, _summary("car-01", candidate, "rs-b")) is taken


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

    store = StateStore(kafka, changelog, "rs-c")
    try:
        assert store.restore([0, 1], timeout=30) == 3
        counted = {sid: (s.count, s.replica) for sid, s in store.summaries.items()}
        assert counted == {"car-01": (4_536, "rs-a"), "car-02": (7, "rs-a"),
                           "car-03": (9, "rs-a")}
    finally:
        store.close()
