"""How long one observer snapshot takes for a big group (target: < 1 s for 200 / 20).

Starts its own embedded broker on a free port, creates a topic, writes a few records to
every partition, starts real consumer-group members (confluent-kafka consumers, in one
child process so they do not share the observer's interpreter), waits until every
partition is owned and committed, then times `Observer.poll_once()` repeatedly.

    .venv/bin/python bench/observer_snapshot.py [--cases 200x20,1000x100] [--reps 30]
                                                [--protocol classic|consumer] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def host_members(bootstrap: str, group: str, topic: str, n: int, protocol: str) -> int:
    """Child process: n real group members, each its own Consumer polled by its own thread."""
    from confluent_kafka import Consumer

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())

    def member(i: int) -> None:
        conf = {"bootstrap.servers": bootstrap, "group.id": group, "client.id": f"bench-{i:03d}",
                "group.protocol": protocol, "auto.offset.reset": "earliest",
                "enable.auto.commit": True, "auto.commit.interval.ms": 1000}
        if protocol == "classic":
            conf.update({"session.timeout.ms": 30000, "heartbeat.interval.ms": 3000,
                         "partition.assignment.strategy": "range"})
        c = Consumer(conf)
        c.subscribe([topic])
        while not stop.is_set():
            c.poll(0.5)
        c.close()

    threads = [threading.Thread(target=member, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return 0


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(q * (len(ordered) - 1))))
    return ordered[k]


def run_case(settings, partitions: int, members: int, reps: int, protocol: str) -> dict:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    from backend.netutil import wait_until
    from backend.observer.observer import Observer
    from backend.proc import spawn

    topic = f"bench-{partitions}p-{int(time.time())}"
    group = f"bench-{partitions}x{members}-{protocol}"
    admin = AdminClient(settings.client_config())
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(60)
    producer = Producer(settings.client_config())
    for p in range(partitions):
        for i in range(5):
            producer.produce(topic, key=f"car-{p}-{i}", value=b"{}", partition=p)
    producer.flush(60)

    # dies with the bench, however the bench ends
    child = spawn([sys.executable, __file__, "--_members", settings.bootstrap, group,
                   topic, str(members), protocol], cwd=REPO,
                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    observer = Observer(settings, group, topic=topic, tail_events=False)
    try:
        def ready():
            snap = observer.poll_once()
            owned = sum(1 for p in snap.partitions if p.owner and p.committed is not None)
            return (len(snap.members) == members and owned == partitions
                    and snap.state == "Stable")
        t0 = time.monotonic()
        wait_until(ready, timeout=300, interval=1.0, what=f"{members} members owning "
                   f"{partitions} partitions")
        settle_s = time.monotonic() - t0
        cold = Observer(settings, group, topic=topic, tail_events=False)
        t = time.perf_counter()
        cold.poll_once()  # first poll: metadata, key sampling, connections
        cold_ms = (time.perf_counter() - t) * 1000
        cold.stop()
        times = []
        for _ in range(reps):
            t = time.perf_counter()
            snap = observer.poll_once()
            times.append((time.perf_counter() - t) * 1000)
            assert snap.error is None, snap.error
        return {"partitions": partitions, "members": members, "protocol": protocol,
                "reps": reps, "median_ms": round(statistics.median(times), 1),
                "p95_ms": round(percentile(times, 0.95), 1), "max_ms": round(max(times), 1),
                "first_poll_ms": round(cold_ms, 1), "settle_s": round(settle_s, 1),
                "streams": len(snap.streams)}
    finally:
        observer.stop()
        child.send_signal(signal.SIGTERM)
        try:
            child.wait(60)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--_members":
        b, g, t, n, proto = sys.argv[2:7]
        return host_members(b, g, t, int(n), proto)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default="200x20,1000x100",
                    help="PARTITIONSxMEMBERS, comma separated (default 200x20,1000x100)")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--protocol", choices=("classic", "consumer"), default="classic")
    ap.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = ap.parse_args()
    cases = [tuple(int(x) for x in c.split("x")) for c in args.cases.split(",")]

    from backend.broker.embedded import EmbeddedBroker
    from backend.netutil import free_port

    with tempfile.TemporaryDirectory() as tmp:
        broker = EmbeddedBroker(Path(tmp), port=free_port(), heap="1g")
        broker.start()
        try:
            results = [run_case(broker.settings, p, m, args.reps, args.protocol)
                       for p, m in cases]
        finally:
            broker.stop()
    print(f"{'partitions':>10} {'members':>7} {'protocol':>8} {'median ms':>10} {'p95 ms':>8} "
          f"{'max ms':>8} {'1st poll ms':>11} {'settle s':>8}")
    for r in results:
        print(f"{r['partitions']:>10} {r['members']:>7} {r['protocol']:>8} {r['median_ms']:>10} "
              f"{r['p95_ms']:>8} {r['max_ms']:>8} {r['first_poll_ms']:>11} {r['settle_s']:>8}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
