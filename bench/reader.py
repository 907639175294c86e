"""The Kafka reader's JVM (backend/kafkaread): how soon it answers, first and after a SIGKILL.

Starts its own embedded broker on a free port (or uses --bootstrap). Per repeat: a fresh
reader's first answer (JVM start, gateway, Admin's first connection, a ListGroups), then the
same reader's JVM SIGKILLed and the time until it answers again (the call that meets the dead
JVM says "reconnecting"; the next starts a fresh one) — the "restarted within 2 s" of the
reading layer. Also a warm call's round trip.

    .venv/bin/python bench/reader.py [--repeats 10] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import LoadSampler, Stack, machine, spread


def measure(settings, repeats: int) -> dict:
    from backend.kafkaread.gateway import ReaderDown
    from backend.kafkaread.reader import KafkaReader

    first, restart, warm = [], [], []
    for _ in range(repeats):
        reader = KafkaReader(settings)
        try:
            t = time.perf_counter()
            reader.list_groups()
            first.append(time.perf_counter() - t)
            for _ in range(20):
                t = time.perf_counter()
                reader.list_groups()
                warm.append(time.perf_counter() - t)
            pid = reader.gateway.pid
            assert pid is not None
            os.kill(pid, signal.SIGKILL)
            t = time.perf_counter()
            while True:
                try:
                    reader.list_groups()
                    break
                except ReaderDown:
                    continue
            restart.append(time.perf_counter() - t)
        finally:
            reader.close()
    return {"first_answer_s": spread(first), "after_sigkill_s": spread(restart),
            "warm_call_ms": {k: round(v * 1000, 2) if k != "n" else v
                             for k, v in spread(warm).items()},
            "warm_call_median_ms": round(statistics.median(warm) * 1000, 2)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--bootstrap", default=None, help="use this cluster instead of a new broker")
    ap.add_argument("--json", metavar="PATH", help="also write the result as JSON")
    args = ap.parse_args()
    load_before = os.getloadavg()[0]
    with Stack(bootstrap=args.bootstrap, need_spark=False) as stack, LoadSampler() as load:
        result = measure(stack.settings, args.repeats)
    result.update({"repeats": args.repeats, "load_before": round(load_before, 2),
                   "load": load.summary(), "machine": machine()})
    print(f"{'what':<28} {'median':>8} {'min':>8} {'max':>8}")
    for key in ("first_answer_s", "after_sigkill_s"):
        s = result[key]
        print(f"{key:<28} {s['median']:>8.3f} {s['min']:>8.3f} {s['max']:>8.3f}")
    w = result["warm_call_ms"]
    print(f"{'warm ListGroups (ms)':<28} {w['median']:>8.2f} {w['min']:>8.2f} {w['max']:>8.2f}")
    print(f"load before {result['load_before']}, during {result['load']}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
