"""A real group member for the observer's integration tests: subscribe, poll, auto-commit.

Run as a subprocess so a test can SIGKILL it like a crashed replica:
    python member.py BOOTSTRAP GROUP TOPIC CLIENT_ID PROTOCOL [ASSIGNOR] [PROPS_JSON]
"""

from __future__ import annotations

import json
import signal
import sys
import threading

from confluent_kafka import Consumer


def main() -> int:
    bootstrap, group, topic, client_id, protocol = sys.argv[1:6]
    assignor = sys.argv[6] if len(sys.argv) > 6 and sys.argv[6] != "-" else None
    extra = json.loads(sys.argv[7]) if len(sys.argv) > 7 else {}
    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "client.id": client_id,
        "group.protocol": protocol,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": True,
        "auto.commit.interval.ms": 200,
        **extra,
    }
    if protocol == "classic":  # a test's PROPS_JSON may ask for another session
        conf.setdefault("session.timeout.ms", 6000)
        conf.setdefault("heartbeat.interval.ms", 500)
        conf["partition.assignment.strategy"] = assignor or "range"
    elif assignor:
        conf["group.remote.assignor"] = assignor
    # SIGINT or SIGTERM ends the loop between two polls, never inside one: an exception
    # raised in the middle of librdkafka's rebalance handling has left close() waiting
    # minutes for a rebalance that no longer finishes
    stopping = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stopping.set())
    consumer = Consumer(conf)
    consumer.subscribe([topic], on_assign=lambda _c, parts: print(
        "assigned", sorted(p.partition for p in parts), flush=True))
    print("subscribed", flush=True)
    try:
        while not stopping.is_set():
            consumer.poll(0.2)
    finally:
        consumer.close()


if __name__ == "__main__":
    sys.exit(main())
