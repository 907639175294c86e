"""The Kafka reader's JVM (backend/kafka/javaadmin): how soon it answers, first and after a SIGKILL.

Starts its own embedded broker on a free port (or uses --bootstrap). Per repeat: a fresh
reader's first answer (JVM start, gateway, Admin's first connection, a ListGroups), then the
same reader's JVM SIGKILLed and the time until it answers again (the call that meets the dead
JVM says "reconnecting"; the next starts a fresh one) — the "restarted within 2 s" of the
reading layer. Also a warm call's round trip.

Each JVM starts as the reader starts it: on the class-data archive `make jars` built for this
Java and class path (backend/kafka/javaadmin/classdata.py) if there is one, or with --no-archive
without. The result says which archive it was and how many of the JVMs really mapped it.

    .venv/bin/python bench/reader.py [--repeats 10] [--no-archive] [--json PATH]
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


def measure(settings, repeats: int, use_archive: bool = True) -> dict:
    from backend.classdata import maps
    from backend.kafka.javaadmin.gateway import CACHED, AdminGateway, ReaderDown
    from backend.kafka.javaadmin.reader import KafkaReader

    first, restart, warm = [], [], []
    archives: set[str] = set()
    checked = mapped = 0  # JVMs that answered; those that mapped the archive they were given

    def started(gateway: AdminGateway) -> None:
        nonlocal checked, mapped
        checked += 1
        if gateway.archive is not None:
            archives.add(str(gateway.archive))
            mapped += gateway.pid is not None and maps(gateway.pid, gateway.archive)

    for _ in range(repeats):
        gateway = AdminGateway(settings, class_archive=CACHED if use_archive else None)
        reader = KafkaReader(settings, gateway=gateway)
        try:
            t = time.perf_counter()
            reader.list_groups()
            first.append(time.perf_counter() - t)
            started(gateway)
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
            started(gateway)
        finally:
            reader.close()
    return {"class_archive": ", ".join(sorted(archives)) or None,
            "jvms": checked, "jvms_on_archive": mapped,
            "first_answer_s": spread(first), "after_sigkill_s": spread(restart),
            "warm_call_ms": {k: round(v * 1000, 2) if k != "n" else v
                             for k, v in spread(warm).items()},
            "warm_call_median_ms": round(statistics.median(warm) * 1000, 2)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--bootstrap", default=None, help="use this cluster instead of a new broker")
    ap.add_argument("--no-archive", action="store_true",
                    help="start every JVM without the class-data archive, to compare")
    ap.add_argument("--json", metavar="PATH", help="also write the result as JSON")
    args = ap.parse_args()
    load_before = os.getloadavg()[0]
    with Stack(bootstrap=args.bootstrap, need_spark=False) as stack, LoadSampler() as load:
        result = measure(stack.settings, args.repeats, use_archive=not args.no_archive)
    result.update({"repeats": args.repeats, "load_before": round(load_before, 2),
                   "load": load.summary(), "machine": machine()})
    print(f"{'what':<28} {'median':>8} {'min':>8} {'max':>8}")
    for key in ("first_answer_s", "after_sigkill_s"):
        s = result[key]
        print(f"{key:<28} {s['median']:>8.3f} {s['min']:>8.3f} {s['max']:>8.3f}")
    w = result["warm_call_ms"]
    print(f"{'warm ListGroups (ms)':<28} {w['median']:>8.2f} {w['min']:>8.2f} {w['max']:>8.2f}")
    archive = result["class_archive"]
    print(f"class-data archive: {archive or 'none'}, mapped by {result['jvms_on_archive']} of "
          f"{result['jvms']} JVMs" + (" (--no-archive)" if args.no_archive else
                                      "" if archive else " (make jars builds it)"))
    print(f"load before {result['load_before']}, during {result['load']}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
