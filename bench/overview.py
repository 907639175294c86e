"""The cluster overview at scale: how soon the first screen, how soon every row, what a cycle costs.

Starts its own embedded broker on a free port (or uses --bootstrap), creates TOPICS topics
holding PARTITIONS partitions in all, writes a few records into each, and commits offsets for
GROUPS consumer groups without any member joining (AlterConsumerGroupOffsets, the Empty
groups that dominate production clusters); four in five lag. Then a cold `OverviewWatcher`
(a fresh admin client) runs CYCLES refresh cycles, the page's first VISIBLE rows prioritised:

- first screen: the first publication listing every group by name, and the first in which the
  visible rows are filled in (what the Groups page shows first);
- every row: the end of the first cycle (every row described, lag in messages known);
- per cycle: seconds, how long the fold waited for the reading threads (near zero: the fold
  is the cycle's pole), Admin API requests, and how many rows know their lag in seconds;
- with `--traced`, the Python objects the watcher keeps after the cycles (tracemalloc, from
  the watcher's creation): what it holds per group once its windows and trends filled up
  (`--cycles 41` fills the windows' 10 points, the trend's 60 take 60). tracemalloc slows
  the run: its seconds are not comparable to an untraced run's.

    .venv/bin/python bench/overview.py [--groups 5000] [--partitions 2000] [--topics 100]
                                       [--cycles 3] [--visible 50] [--traced] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import LoadSampler, Stack, machine

RECORDS_PER_PARTITION = 20


def prepare(settings, groups: int, partitions: int, topics: int,
            prefix: str) -> dict[str, float]:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    from tests.observer.seed import seed_groups

    per_topic = max(1, partitions // topics)
    names = [f"{prefix}-{i:03d}" for i in range(topics)]
    admin = AdminClient(settings.client_config())
    t = time.perf_counter()
    for fut in admin.create_topics([NewTopic(n, per_topic, 1) for n in names]).values():
        fut.result(120)
    producer = Producer(settings.client_config(**{"linger.ms": 50}))
    for n in names:
        for p in range(per_topic):
            for i in range(RECORDS_PER_PARTITION):
                producer.produce(n, value=b"%d" % i, partition=p)
        producer.poll(0)
    assert producer.flush(120) == 0
    created_s = time.perf_counter() - t
    # group i reads one topic; every fifth is caught up, the others lag by 1..RECORDS
    commits = {}
    for i in range(groups):
        topic = names[i % topics]
        at = RECORDS_PER_PARTITION if i % 5 == 0 else i % RECORDS_PER_PARTITION
        commits[f"{prefix}-group-{i:05d}"] = {(topic, p): at for p in range(per_topic)}
    t = time.perf_counter()
    seed_groups(settings, commits, in_flight=64, timeout=120)
    return {"topics_s": round(created_s, 1), "seed_s": round(time.perf_counter() - t, 1),
            "partitions": per_topic * topics}


def run(settings, groups: int, cycles: int, visible: int, prefix: str,
        traced: bool = False) -> dict:
    import gc
    import tracemalloc

    from backend.netutil import wait_until
    from backend.observer.overview import OverviewWatcher
    from backend.observer.overview_collect import ClusterCollector

    probe = ClusterCollector(settings)
    try:
        wait_until(lambda: sum(g.group.startswith(prefix) for g in probe.list_groups())
                   >= groups, timeout=120, interval=1.0,
                   what="every group listed")
    finally:
        probe.close()

    if traced:
        tracemalloc.start()
    watcher = OverviewWatcher(settings, interval=0.0)
    shown = [f"{prefix}-group-{i:05d}" for i in range(visible)]
    watcher.prioritise(shown)
    marks: dict[str, float] = {}
    original = watcher._publish
    t0 = time.perf_counter()

    def spy(error=None):
        ov = original(error)
        now = time.perf_counter() - t0
        if ov.listed >= groups and "names_s" not in marks:
            marks["names_s"] = now
        if "visible_s" not in marks and all(
                (r := ov.row(g)) is not None and not r.pending for g in shown):
            marks["visible_s"] = now
        return ov

    watcher._publish = spy  # type: ignore[method-assign]
    # how long the fold waits for the reading threads each cycle: near zero, the fold is the
    # cycle's pole; seconds, the reading is
    waits: list[float] = []
    read_ahead = watcher._read_ahead

    def timed_ahead(batches, i, known):
        future = read_ahead(batches, i, known)
        result = future.result

        def waited(*args):
            t = time.perf_counter()
            try:
                return result(*args)
            finally:
                waits.append(time.perf_counter() - t)

        future.result = waited
        return future

    watcher._read_ahead = timed_ahead  # type: ignore[method-assign]
    per_cycle = []
    try:
        for n in range(cycles):
            cpu = _cpu_s()
            waits.clear()
            t = time.perf_counter()
            ov = watcher.refresh_once()
            seconds = time.perf_counter() - t
            used = {k: round(v - cpu.get(k, 0.0), 2) for k, v in _cpu_s().items()}
            if n == 0:
                marks["all_rows_s"] = time.perf_counter() - t0
            rows = [r for r in ov.rows if r.group.startswith(f"{prefix}-group-")]
            lagging = [r for r in rows if r.lag_messages]
            per_cycle.append({
                "cycle": n + 1, "seconds": round(seconds, 2),
                "fold_waited_s": round(sum(waits), 2),
                "requests": ov.cycle.requests if ov.cycle else None,
                "rows": len(rows), "described": sum(not r.pending for r in rows),
                "errors": sum(r.error is not None for r in rows),
                "lagging": len(lagging),
                "lag_seconds_known": sum(r.max_lag_seconds is not None for r in lagging),
                "cpu_s": used})
        rss = _rss_mb()  # the watcher's process and its reader JVM, warm
        if traced:
            gc.collect()
            rss["traced_python_objects"] = round(tracemalloc.get_traced_memory()[0] / 2**20, 1)
            tracemalloc.stop()
    finally:
        watcher.stop()
    return {**{k: round(v, 2) for k, v in marks.items()}, "cycles": per_cycle, "rss_mb": rss}


def _cpu_s() -> dict[str, float]:
    """CPU seconds so far of this process (the watcher), its reader's JVM and the bench's
    broker (when it started one): a cycle's wall on two shared cores says little of whose
    work it was, their CPU does."""
    import psutil

    from backend.kafka.javaadmin.gateway import MAIN_CLASS

    me = psutil.Process()
    out = {"python": sum(me.cpu_times()[:2]), "reader_jvm": 0.0, "broker": 0.0}
    for c in me.children(recursive=True):
        try:
            line = " ".join(c.cmdline())
            spent = sum(c.cpu_times()[:2])
        except psutil.Error:
            continue
        if MAIN_CLASS in line:
            out["reader_jvm"] += spent
        elif "kafka.Kafka" in line or "KafkaRaftServer" in line:
            out["broker"] += spent
    return out


def _rss_mb() -> dict[str, float]:
    """This process (the watcher) and its reader's JVM; not the bench's own broker, also a
    child of this process (figures before 2026-11-29 counted it as the reader's)."""
    import psutil

    from backend.kafka.javaadmin.gateway import MAIN_CLASS

    me = psutil.Process()
    readers = [c for c in me.children(recursive=True) if MAIN_CLASS in " ".join(c.cmdline())]
    python = me.memory_info().rss / 2**20
    java = sum(c.memory_info().rss for c in readers) / 2**20
    return {"python": round(python), "reader_jvm": round(java), "total": round(python + java)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--groups", type=int, default=5000)
    ap.add_argument("--partitions", type=int, default=2000)
    ap.add_argument("--topics", type=int, default=100)
    ap.add_argument("--cycles", type=int, default=3)
    ap.add_argument("--visible", type=int, default=50)
    ap.add_argument("--prefix", default="ovb", help="topic and group name prefix (default ovb)")
    ap.add_argument("--bootstrap", default=None, help="use this cluster instead of a new broker")
    ap.add_argument("--traced", action="store_true",
                    help="also the Python objects the watcher keeps (tracemalloc; slower)")
    ap.add_argument("--json", metavar="PATH", help="also write the result as JSON")
    args = ap.parse_args()

    load_before = os.getloadavg()[0]
    with Stack(bootstrap=args.bootstrap, need_spark=False) as stack, LoadSampler() as load:
        setup = prepare(stack.settings, args.groups, args.partitions, args.topics,
                        args.prefix)
        result = run(stack.settings, args.groups, args.cycles, args.visible, args.prefix,
                     args.traced)
    result.update({"groups": args.groups, "topics": args.topics, "setup": setup,
                   "load_before": round(load_before, 2), "load": load.summary(),
                   "machine": machine()})
    print(f"{args.groups} groups over {setup['partitions']} partitions in {args.topics} topics "
          f"(load {load_before:.2f} before, {result['load']['median']} median during)")
    print(f"  names listed          {result.get('names_s', '-')} s")
    print(f"  visible rows filled   {result.get('visible_s', '-')} s ({args.visible} rows)")
    print(f"  every row filled      {result['all_rows_s']} s")
    rss = result["rss_mb"]
    print(f"  resident memory       {rss['total']} MiB (Python {rss['python']}, the reader's "
          f"JVM {rss['reader_jvm']})")
    if args.traced:
        kept = rss["traced_python_objects"]
        print(f"  Python objects kept   {kept} MiB ({kept * 2**20 / args.groups:.0f} bytes a "
              f"group, tracemalloc: this run's seconds are not comparable)")
    print(f"{'cycle':>5} {'seconds':>8} {'waited':>7} {'requests':>9} {'described':>10} "
          f"{'errors':>7} {'lagging':>8} {'lag s known':>11}   CPU s: {'python':>6} "
          f"{'reader':>6} {'broker':>6}")
    for c in result["cycles"]:
        cpu = c["cpu_s"]
        print(f"{c['cycle']:>5} {c['seconds']:>8} {c['fold_waited_s']:>7} {c['requests']!s:>9} "
              f"{c['described']:>10} "
              f"{c['errors']:>7} {c['lagging']:>8} {c['lag_seconds_known']:>11}   "
              f"       {cpu['python']:>6} {cpu['reader_jvm']:>6} {cpu['broker']:>6}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
