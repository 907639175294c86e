"""The embedded Kafka node under different JVM flags and settings, side by side: start, load,
rest.

The embedded node runs beside Spark, the replicas and the dashboard on a 2-core laptop, and
the test suite starts dozens of them. Each repeat starts one node per variant, interleaved so
drift hits all alike, and measures:

  ready        start() called → the node answers a metadata request (its storage format,
               a JVM of its own, included)
  start CPU    user+system seconds of the format tool and the node until ready
  load         100 000 records of 200 bytes produced (acks=all, 6 partitions) and read back
               by one consumer: wall seconds
  load CPU     the node's CPU seconds during that
  rest CPU %   the node's CPU over 30 s with nothing to do, in % of one core
  RSS          the node's resident memory after the rest

Prints a table with each variant's ratio to the first; --json PATH writes it; --only picks
variants by a part of their names (comma-separated).
Usage: python bench/broker_start.py [--repeats 3] [--records 100000] [--only TEXT] [--json PATH]
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import LoadSampler, cpu_s, report_variants, rss_mb
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import NewTopic

from backend.broker.embedded import G1_C1, G1_TIERED, EmbeddedBroker
from backend.kafka.clients import quiet_admin
from backend.kafka.settings import KafkaSettings
from backend.netutil import free_port

# name -> (JVM flags, node settings over the embedded node's own)
KAFKA_IDLE_NOOP = {"metadata.max.idle.interval.ms": "500"}  # Kafka's default
VARIANTS: dict[str, tuple[tuple[str, ...], dict[str, str]]] = {
    "G1, tiered JIT": (G1_TIERED, {}),
    "G1, C1 only (the default)": (G1_C1, {}),
    "serial, C1 only": (("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"), {}),
    "C1, no-op every 0.5 s (Kafka's)": (G1_C1, KAFKA_IDLE_NOOP),
}
STEPS = ("ready_s", "start_cpu_s", "load_s", "load_cpu_s", "rest_cpu_pct", "rss_mb")
REST_S = 30.0


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def load(bootstrap: str, records: int) -> None:
    topic = f"bench-{uuid.uuid4().hex[:8]}"
    admin = quiet_admin(KafkaSettings(bootstrap=bootstrap))
    admin.create_topics([NewTopic(topic, 6, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    value = b"x" * 200
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value, key=str(i % 64).encode())
                break
            except BufferError:
                producer.poll(0.05)
    producer.flush(60)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-reader",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    seen, deadline = 0, time.monotonic() + 120
    while seen < records and time.monotonic() < deadline:
        seen += len(consumer.consume(1000, 1.0))
    consumer.close()
    if seen < records:
        raise RuntimeError(f"read back {seen} of {records} records")


def one_node(flags: tuple[str, ...], props: dict[str, str], work: Path,
             records: int) -> dict[str, float]:
    node = EmbeddedBroker(work, port=free_port(), controller_port=free_port(), jvm_flags=flags,
                          extra_properties=props)
    before = _children_cpu()
    started = time.monotonic()
    node.start(timeout=120)
    try:
        ready = time.monotonic() - started
        assert node.process is not None
        pid = node.process.pid
        start_cpu = _children_cpu() - before + cpu_s(pid)
        t, c = time.monotonic(), cpu_s(pid)
        load(node.settings.bootstrap, records)
        load_s, load_cpu = time.monotonic() - t, cpu_s(pid) - c
        c = cpu_s(pid)
        time.sleep(REST_S)
        rest = (cpu_s(pid) - c) / REST_S * 100
        return {"ready_s": ready, "start_cpu_s": start_cpu, "load_s": load_s,
                "load_cpu_s": load_cpu, "rest_cpu_pct": rest, "rss_mb": rss_mb(pid)}
    finally:
        node.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--only", default="", help="variants whose names contain one of these")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    wanted = [w.strip() for w in args.only.split(",") if w.strip()]
    variants = {name: v for name, v in VARIANTS.items()
                if not wanted or any(w in name for w in wanted)}
    if not variants:
        ap.error(f"--only {args.only!r} names none of: {', '.join(VARIANTS)}")

    load_before = os.getloadavg()[0]
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in variants}
    with LoadSampler() as sampled, tempfile.TemporaryDirectory(prefix="gs-broker-jvm-") as tmp:
        for rep in range(args.repeats):
            for i, (name, (flags, props)) in enumerate(variants.items()):
                run = one_node(flags, props, Path(tmp) / f"{rep}-{i}", args.records)
                runs[name].append(run)
                print(f"repeat {rep + 1} {name:>16}: ready {run['ready_s']:.1f} s, start CPU "
                      f"{run['start_cpu_s']:.1f} s, load {run['load_s']:.1f} s, rest "
                      f"{run['rest_cpu_pct']:.1f} %", file=sys.stderr, flush=True)

    report_variants(f"Embedded Kafka node by JVM flags, {args.repeats} repeats", runs, STEPS,
                    load_before, sampled, args.json, records=args.records)
    return 0


if __name__ == "__main__":
    sys.exit(main())
