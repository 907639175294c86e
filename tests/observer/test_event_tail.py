"""The event tail keeps stream events even when heartbeats outnumber them (real broker)."""

from __future__ import annotations

import orjson
from confluent_kafka import Producer

from backend.contracts import Event, EventType, events_topic
from backend.kafka.topics import ensure_topics
from backend.netutil import wait_until
from backend.observer.events import EventTail


def test_heartbeats_do_not_push_stream_events_out(kafka, unique):
    group = f"tail-{unique}"
    ensure_topics(kafka, group=group, topic=f"in-{unique}", partitions=2)
    producer = Producer(kafka.client_config())

    def send(replica: str, type_: str, n: int) -> None:
        for i in range(n):
            event = Event(ts=1_000 + i, group=group, replica=replica, type=type_,
                          fields={"stream": f"car-{i:02d}", "seq": i})
            producer.produce(events_topic(group), key=replica, value=orjson.dumps(event.to_dict()))

    send("ada", EventType.HEARTBEAT, 150)
    send("ada", EventType.STREAM_RECEIVED, 5)
    send("bruno", EventType.HEARTBEAT, 150)
    send("ada", EventType.HEARTBEAT, 150)
    producer.produce(events_topic(group), key="x", value=b"not json")  # skipped, not fatal
    assert producer.flush(15) == 0

    tail = EventTail(kafka, group, lookback_s=10**9, keep=20)
    try:
        def everything_read() -> bool:
            tail.poll()
            beats = tail.heartbeats
            return "bruno" in beats and beats.get("ada") and beats["ada"].fields["seq"] == 149

        wait_until(everything_read, 60, interval=0.2, what="the whole events topic read")
        recent = tail.recent(100)
    finally:
        tail.close()
    received = [e for e in recent if e.type == EventType.STREAM_RECEIVED]
    assert [e.fields["stream"] for e in received] == [f"car-{i:02d}" for i in range(5)]
    beats = [e for e in recent if e.type == EventType.HEARTBEAT]
    assert sorted(e.replica for e in beats) == ["ada", "bruno"]  # latest per replica only


def test_a_summary_shows_between_two_polls_of_the_group(kafka, unique):
    """The observer's thread reads its tails between polls: with a 30 s poll interval, a
    summary written after the first poll is visible long before the second."""
    from backend.contracts import summaries_topic
    from backend.observer.observer import Observer

    group, topic = f"tail-obs-{unique}", f"in-obs-{unique}"
    ensure_topics(kafka, group=group, topic=topic, partitions=2)
    polls: list[bool] = []  # True: a full poll; False: the tails alone
    observer = Observer(kafka, group, topic=topic, interval=30.0,
                        on_poll=lambda snap, _took: polls.append(snap is not None))
    observer.start()
    producer = Producer(kafka.client_config())
    try:
        wait_until(lambda: observer.latest() is not None and False in polls, 30, interval=0.1,
                   what="the first poll, then a read of the tails")
        assert observer.summaries() == {}
        producer.produce(summaries_topic(group), key="car-07",
                         value=orjson.dumps({"stream": "car-07", "last_seq": 41}))
        assert producer.flush(15) == 0
        wait_until(lambda: observer.summaries().get("car-07", {}).get("last_seq") == 41, 10,
                   interval=0.05, what="the summary in the observer between two polls")
        assert polls.count(True) == 1  # no second poll of the group was needed
    finally:
        observer.stop()
