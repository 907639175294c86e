"""The overview's fold alone: `OverviewModel.update` over a cluster's readings, no Kafka.

`bench/overview.py` times a whole cycle, where the reader's thread (the JVM's answers parsed
in Python) and the fold share one interpreter. This one feeds the model the same kind of
cluster as that bench (GROUPS Empty groups, each committed on every partition of one of TOPICS
topics holding PARTITIONS in all, four in five lagging, record times known) from plain values,
cycle after cycle with nothing moving, as most of a large cluster does between cycles. The
first WINDOW cycles fill each partition's offset window; after them a window is settled and
the fold takes its shortcuts: a settled partition unmoved is not fed, and a group none of whose
inputs moved takes its last partitions, aged (`moved` given, as the watcher does). Both ways
are run, one after the other on fresh models, and reported side by side: seconds in `update`
per cycle, the median of the filling and of the settled cycles.

    .venv/bin/python bench/overview_fold.py [--groups 65000] [--partitions 3000]
                                            [--topics 300] [--cycles 14] [--json PATH]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from backend.kafka.groups import GroupDescription
from backend.observer.evaluate import Rules
from backend.observer.overview import relax_collector
from backend.observer.overview_collect import GroupReading, Listed
from backend.observer.overview_model import OverviewModel
from bench.common import machine

RECORDS_PER_PARTITION = 20  # as bench/overview.py writes
INTERVAL_MS = 10_000  # the watcher's default interval


def cluster(groups: int, partitions: int, topics: int):
    """(names, committed per group, ends, starts, record times per group) as the watcher
    would hand them to the model, built once: a quiet cluster's readings repeat."""
    per_topic = max(1, partitions // topics)
    names = [f"fold-{i:03d}" for i in range(topics)]
    ends = {(t, p): RECORDS_PER_PARTITION for t in names for p in range(per_topic)}
    starts = dict.fromkeys(ends, 0)
    written_ms = int(time.time() * 1000) - 3_600_000
    commits, times = {}, {}
    for i in range(groups):
        topic = names[i % topics]
        at = RECORDS_PER_PARTITION if i % 5 == 0 else i % RECORDS_PER_PARTITION
        group = f"fold-group-{i:05d}"
        commits[group] = {(topic, p): at for p in range(per_topic)}
        # a caught-up group has nothing unread: the watcher hands over no times for it
        times[group] = ({(topic, p): written_ms + at for p in range(per_topic)}
                        if at < RECORDS_PER_PARTITION else None)
    return commits, ends, starts, times


NOTHING_MOVED: frozenset = frozenset()


def run(groups: int, partitions: int, topics: int, cycles: int, shortcut: bool = True) -> dict:
    relax_collector()  # as the watcher does
    commits, ends, starts, times = cluster(groups, partitions, topics)
    model = OverviewModel("bench")
    model.listed([Listed(g, "Empty", "classic") for g in commits])
    now = int(time.time() * 1000)
    per_cycle = []
    for _ in range(cycles):
        now += INTERVAL_MS
        readings = [GroupReading(g, now, GroupDescription(g, "Empty", "classic", None, ()), c)
                    for g, c in commits.items()]
        t = time.perf_counter()
        for r in readings:
            model.update(r, ends, starts, own=False, oldest_unread_ms=times[r.group],
                         moved=NOTHING_MOVED if shortcut else None)
        per_cycle.append(round(time.perf_counter() - t, 3))
        model.drain()
        del readings
        gc.collect()  # between cycles, not inside the one timed
    rows = model.rows()
    lagging = [r for r in rows if r.lag_messages]
    window = Rules().window
    filling, settled = per_cycle[1:window], per_cycle[window + 1:]
    return {"per_cycle_s": per_cycle,
            "filling_median_s": statistics.median(filling) if filling else None,
            "settled_median_s": statistics.median(settled) if settled else None,
            "partitions_folded": sum(len(c) for c in commits.values()),
            "rows": len(rows), "lagging": len(lagging),
            "lag_seconds_known": sum(r.max_lag_seconds is not None for r in lagging),
            "stopped": sum(r.health == "STOP" for r in rows)}


WAYS = {"unmoved groups taken whole": True, "every partition folded": False}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--groups", type=int, default=65000)
    ap.add_argument("--partitions", type=int, default=3000)
    ap.add_argument("--topics", type=int, default=300)
    ap.add_argument("--cycles", type=int, default=14)
    ap.add_argument("--json", metavar="PATH", help="also write the result as JSON")
    args = ap.parse_args()
    load_before = os.getloadavg()[0]
    ways = {name: run(args.groups, args.partitions, args.topics, args.cycles, shortcut)
            for name, shortcut in WAYS.items()}
    result = {"ways": ways, "groups": args.groups, "load_before": round(load_before, 2),
              "load_after": round(os.getloadavg()[0], 2), "machine": machine()}
    first = next(iter(ways.values()))
    window = Rules().window
    print(f"{args.groups} groups, {first['partitions_folded']} partitions a cycle "
          f"(load {load_before:.2f} before, {result['load_after']} after)")
    print(f"{'':<28} {'cycles 2-' + str(window) + ' (filling)':>22} "
          f"{'cycles ' + str(window + 2) + '+ (settled)':>22}")
    base = ways["every partition folded"]
    for name, r in ways.items():
        ratios = [r[k] / base[k] if r[k] and base[k] else None
                  for k in ("filling_median_s", "settled_median_s")]
        cells = [("-" if r[k] is None else f"{r[k]:.2f} s")
                 + (f" ({x:.2f}x)" if x is not None else "")
                 for k, x in zip(("filling_median_s", "settled_median_s"), ratios, strict=True)]
        print(f"{name:<28} {cells[0]:>22} {cells[1]:>22}")
        print(f"{'':<28} per cycle: " + " ".join(f"{s:.2f}" for s in r["per_cycle_s"]))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
