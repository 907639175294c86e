"""How fast can the fleet simulator produce here, and how exactly does it hold a set rate?

For each target rate (and 'max' = unlimited) a fresh topic gets a FleetSimulator and runs for
a warm-up second plus `--seconds`. Pacing is judged from the records themselves: each carries
the `ts` at which the token bucket released it, so counting records per whole second of the
window gives the achieved rate and its per-second spread without broker or polling lag. For
'max', achieved = growth of the broker's log-end offsets over the window (delivered msg/s).
CPU is this process's CPU time (Python loop plus librdkafka threads) over the window, as a
share of one core.

    .venv/bin/python bench/fleet_rate.py [--bootstrap H:P] [--seconds 5] [--json out.json]

Without --bootstrap an embedded broker is started on a free port and stopped at the end.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import Consumer, TopicPartition

from backend.fleet.recovery import recover_next_seq
from backend.fleet.simulator import FleetSimulator, stream_ids
from backend.kafka.settings import KafkaSettings
from backend.kafka.topics import ensure_input_topic


@dataclass
class Run:
    target: str
    achieved_msg_s: float
    error_pct: float | None
    per_second_min: int
    per_second_max: int
    cpu_pct_of_one_core: float
    messages: int
    seconds: float


@dataclass
class Recovery:
    case: str
    topic_records: int
    records_read: int
    seconds: float


def measure_recovery(settings: KafkaSettings, topic: str, total: int, streams: int
                     ) -> list[Recovery]:
    """What a restart costs: known streams stop early; a never-seen key reads everything."""
    known = stream_ids(streams)
    out = []
    for case, keys in (("restart, known streams", known),
                       ("plus one never-produced stream", [*known, "car-999"])):
        res = recover_next_seq(settings, topic, keys)
        out.append(Recovery(case, total, res.records_read, round(res.seconds, 2)))
    return out


class Offsets:
    """Sum of a topic's log-end offsets, from one long-lived consumer handle."""

    def __init__(self, settings: KafkaSettings, topic: str) -> None:
        self.topic = topic
        self.consumer = Consumer(settings.client_config(**{"group.id": "bench-fleet-offsets"}))
        md = self.consumer.list_topics(topic, timeout=10)
        self.partitions = sorted(md.topics[topic].partitions)

    def total(self) -> int:
        return sum(self.consumer.get_watermark_offsets(TopicPartition(self.topic, p),
                                                       timeout=10, cached=False)[1]
                   for p in self.partitions)

    def close(self) -> None:
        self.consumer.close()


def produced_timestamps(settings: KafkaSettings, topic: str, partitions: list[int]) -> list[int]:
    """The `ts` of every record: when the simulator's pacing released it (not broker lag)."""
    consumer = Consumer(settings.client_config(**{"group.id": "bench-fleet-reader",
                                                  "enable.auto.commit": False}))
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in partitions}
        consumer.assign([TopicPartition(topic, p, 0) for p, e in ends.items() if e])
        open_parts = {p for p, e in ends.items() if e}
        out: list[int] = []
        while open_parts:
            for msg in consumer.consume(10000, timeout=1.0):
                if msg.error() is None:
                    out.append(orjson.loads(msg.value())["ts"])
                    if msg.offset() >= ends[msg.partition()] - 1:
                        open_parts.discard(msg.partition())
        return out
    finally:
        consumer.close()


def measure(settings: KafkaSettings, rate: float, seconds: float, streams: int,
            partitions: int) -> Run:
    """Throughput from broker offsets; pacing from the records' own timestamps."""
    topic = f"bench-fleet-{uuid.uuid4().hex[:8]}"
    ensure_input_topic(settings, topic, partitions=partitions)
    offsets = Offsets(settings, topic)
    sim = FleetSimulator(settings, topic, streams=streams, rate=rate)
    try:
        sim.start()
        time.sleep(1.0)  # warm-up: connections, first batches
        t0_ms = int(time.time() * 1000)
        t0, c0, n0 = time.monotonic(), time.process_time(), offsets.total()
        time.sleep(seconds)
        t1, c1, n1 = time.monotonic(), time.process_time(), offsets.total()
    finally:
        sim.stop()
    stamps = produced_timestamps(settings, topic, offsets.partitions)
    offsets.close()
    measure.last_topic = (topic, len(stamps))  # type: ignore[attr-defined]
    whole = max(1, int(seconds))
    counts = [sum(t0_ms + i * 1000 <= t < t0_ms + (i + 1) * 1000 for t in stamps)
              for i in range(whole)]
    paced = sum(counts) / whole
    throughput = (n1 - n0) / (t1 - t0)
    achieved = throughput if math.isinf(rate) else paced
    return Run(
        target="max" if math.isinf(rate) else f"{rate:g}",
        achieved_msg_s=round(achieved, 1),
        error_pct=None if math.isinf(rate) else round((paced / rate - 1) * 100, 2),
        per_second_min=min(counts), per_second_max=max(counts),
        cpu_pct_of_one_core=round((c1 - c0) / (t1 - t0) * 100, 1),
        messages=n1 - n0, seconds=round(t1 - t0, 2))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", help="existing broker (default: embedded, free port)")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rates", default="200,1000,10000,max")
    parser.add_argument("--streams", type=int, default=12)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args()
    rates = [math.inf if r == "max" else float(r) for r in args.rates.split(",")]

    broker = None
    if args.bootstrap:
        settings = KafkaSettings(bootstrap=args.bootstrap, external=True)
    else:
        from backend.broker.embedded import EmbeddedBroker
        from backend.netutil import free_port

        broker = EmbeddedBroker(Path(tempfile.mkdtemp(prefix="bench-broker-")), port=free_port())
        broker.start()
        settings = broker.settings
    try:
        load_before = os.getloadavg()[0]
        runs = [measure(settings, r, args.seconds, args.streams, args.partitions) for r in rates]
        load_after = os.getloadavg()[0]
        topic, total = measure.last_topic  # type: ignore[attr-defined]
        recoveries = measure_recovery(settings, topic, total, args.streams)
    finally:
        if broker is not None:
            broker.stop()

    print(f"fleet simulator: {args.streams} streams, {args.partitions} partitions, "
          f"{args.seconds:g} s per run, {os.cpu_count()} CPUs, load average "
          f"{load_before:.1f} -> {load_after:.1f}")
    print(f"{'target msg/s':>12} {'achieved':>10} {'error %':>8} {'min/s':>7} {'max/s':>7} "
          f"{'CPU %':>6}")
    for r in runs:
        err = "-" if r.error_pct is None else f"{r.error_pct:+.2f}"
        print(f"{r.target:>12} {r.achieved_msg_s:>10.1f} {err:>8} {r.per_second_min:>7} "
              f"{r.per_second_max:>7} {r.cpu_pct_of_one_core:>6.1f}")
    print()
    print(f"{'seq recovery on start':<32} {'topic records':>13} {'read':>8} {'seconds':>8}")
    for rc in recoveries:
        print(f"{rc.case:<32} {rc.topic_records:>13} {rc.records_read:>8} {rc.seconds:>8.2f}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_bytes(orjson.dumps({"streams": args.streams,
                                            "partitions": args.partitions,
                                            "seconds": args.seconds,
                                            "load_average": [load_before, load_after],
                                            "runs": [asdict(r) for r in runs],
                                            "recovery": [asdict(r) for r in recoveries]},
                                           option=orjson.OPT_INDENT_2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
